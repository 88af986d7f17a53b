"""Turrets: turrets turn their barrels (a continuous action) and fire or hold (a discrete one)
to shoot down drifting drones with little ammunition.

Game: 1 to ``max_turrets`` turrets (drawn per episode) stand at random points of the square
``[-0.5, 0.5]^2``, at least ``SPAWN_GAP`` apart, barrels pointing at random, each with ``AMMO``
rounds; ``n_turrets`` to ``2 n_turrets`` drones start at random points of ``[-0.9, 0.9]^2`` at
least ``DRONE_CLEARANCE`` from every turret and drift in straight lines (at most
``DRONE_SPEED`` per step), bouncing off the edges of ``[-1, 1]^2``. Each step every turret
first turns its barrel by ``turn * MAX_TURN``; then, in the order of the turrets, each one that
fires spends a round on a shot along its barrel, which destroys the first drone within
``HIT_RADIUS`` of the line of fire ahead of it, or misses; then the drones move. A turret that
fired recoils: on the next step it can turn only ``RECOIL`` as far. The episode ends when
every drone is down, when no round is left, or after ``N_STEPS`` (40) steps; the step count
is observed, so all three ends are terminal (``truncated=False``).

Observed: ``Turret`` entities (ids ``"T0"``, ``"T1"``, ...) with ``x``, ``y``, ``cos_aim``,
``sin_aim``, ``ammo`` (rounds left / ``AMMO``), ``recoil`` (0 or 1), the live drone closest to
the turret's line of fire: ``sight_error`` (the signed angle from the barrel to it, over pi;
positive means to the left) and ``sight_distance`` (both 0 once no drone is left), and
``time`` (steps taken / ``N_STEPS``). ``Drone`` entities (ids ``"D0"``, ...; a destroyed drone
leaves the observation) with ``x``, ``y`` and velocity ``vx``, ``vy`` (over ``DRONE_SPEED``).

Actions, taken by every turret: ``aim`` (continuous) with ``turn`` in [-1, 1] (a share of
``MAX_TURN``, positive turns left); the mask narrows it to ``[-RECOIL, RECOIL]`` for a turret
that recoils. ``trigger`` (categorical) with choices ``hold`` and ``fire``; ``fire`` is masked
out for a turret without rounds.

Reward: ``1 / n_drones`` for each drone shot down and ``-MISS_PENALTY / n_drones`` for each
shot that misses, plus a shaping of the aim: the decrease over the step of
``AIM_COEF * mean(|sight_error|)`` over the turrets (a potential, so the shaping of a whole
episode adds up to at most ``AIM_COEF``, and it rewards turning towards a drone at once).
A return is at most ``1 + AIM_COEF``.

Measured over 200 episodes (seeds 0 and 1): ``Turrets.scripted_policy`` (each turret takes the
drone nearest its line of fire that no earlier turret took, turns onto it and fires once the
shot would hit) returns 1.07; uniformly random turns and triggers 0.04; the scripted turns with
a shot on every step 0.36, the scripted triggers with random turns 0.27. PPO with a one-layer
RogueNet (``d_model`` 32, Beta head, 32 environments x 32 steps per rollout) reaches 0.79
after 50,000 steps and 1.03 after 150,000 (deterministic evaluation, seed 0).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import (
    actor_positions,
    check_choice,
    check_int,
    check_values,
    expect_action_type,
    expect_actions,
    expect_choice_per_actor,
)

N_STEPS = 40
AMMO = 3  # rounds per turret
MAX_TURN = np.pi / 6  # barrel turn per step at full turn
RECOIL = 0.25  # the share of the turn range left the step after a shot
HIT_RADIUS = 0.08  # greatest distance between a drone and the line of fire for a hit
MISS_PENALTY = 0.05
AIM_COEF = 0.25
DRONE_SPEED = 0.02  # greatest drift per step
SPAWN_GAP = 0.3  # least distance between two turrets
DRONE_CLEARANCE = 0.4  # least distance between a drone and a turret at the start
AIM, TRIGGER = "aim", "trigger"
TRIGGERS = ["hold", "fire"]
ACTION_CLASS = {AIM: ContinuousAction, TRIGGER: CategoricalAction}
HOLD, FIRE = range(2)
TURRET_FEATURES = ["x", "y", "cos_aim", "sin_aim", "ammo", "recoil", "sight_error", "sight_distance", "time"]
DRONE_FEATURES = ["x", "y", "vx", "vy"]


class Turrets(Environment):
    """Turrets aiming continuously and firing discretely at drifting drones.

    Args:
        max_turrets: the most turrets of an episode (each episode draws 1 to ``max_turrets``).

    Shape:
        features: ``Turret`` ``[n_turrets, 9]`` (``TURRET_FEATURES``), ``Drone`` ``[n_alive, 4]``
        (``DRONE_FEATURES``); ``aim`` values ``[n_turrets, 1]``; ``trigger`` ``[n_turrets]``.

    Raises:
        TypeError / ValueError: ``max_turrets`` not an int between 1 and 6.
    """

    def __init__(self, *, max_turrets: int = 4) -> None:
        self.max_turrets = check_int("Turrets", "max_turrets", max_turrets, 1, 6)
        self.rng = np.random.default_rng()
        self.turret = np.zeros((0, 2))  # [n_turrets, 2]
        self.aim = np.zeros(0)  # [n_turrets] radians
        self.ammo = np.zeros(0, dtype=np.int64)  # [n_turrets]
        self.recoil = np.zeros(0, dtype=bool)  # [n_turrets]
        self.drone = np.zeros((0, 2))  # [n_drones, 2]
        self.velocity = np.zeros((0, 2))  # [n_drones, 2]
        self.alive = np.zeros(0, dtype=bool)  # [n_drones]
        self.step = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Turret": Entity(list(TURRET_FEATURES)), "Drone": Entity(list(DRONE_FEATURES))})

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {
            AIM: ContinuousActionSpace(low=-1.0, high=1.0, names=["turn"]),
            TRIGGER: CategoricalActionSpace(list(TRIGGERS)),
        }

    def reset(self) -> Observation:
        n_turrets = int(self.rng.integers(1, self.max_turrets + 1))
        n_drones = int(self.rng.integers(n_turrets, 2 * n_turrets + 1))
        turrets: List[np.ndarray] = []
        while len(turrets) < n_turrets:
            candidate = self.rng.uniform(-0.5, 0.5, size=2)  # [2]
            if all(np.hypot(*(candidate - t)) >= SPAWN_GAP for t in turrets):
                turrets.append(candidate)
        self.turret = np.array(turrets)  # [n_turrets, 2]
        drones: List[np.ndarray] = []
        while len(drones) < n_drones:
            candidate = self.rng.uniform(-0.9, 0.9, size=2)  # [2]
            if _length(self.turret - candidate).min() >= DRONE_CLEARANCE:
                drones.append(candidate)
        self.drone = np.array(drones)  # [n_drones, 2]
        heading = self.rng.uniform(-np.pi, np.pi, size=n_drones)  # [n_drones]
        speed = self.rng.uniform(0.0, DRONE_SPEED, size=n_drones)  # [n_drones]
        self.velocity = speed[:, None] * np.stack([np.cos(heading), np.sin(heading)], axis=1)  # [n_drones, 2]
        self.alive = np.ones(n_drones, dtype=bool)
        self.aim = self.rng.uniform(-np.pi, np.pi, size=n_turrets)  # [n_turrets]
        self.ammo = np.full(n_turrets, AMMO, dtype=np.int64)
        self.recoil = np.zeros(n_turrets, dtype=bool)
        self.step = 0
        return self._observe(reward=0.0, sight=self._sight())

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        given = {name: expect_action_type("Turrets", name, action, ACTION_CLASS[name])
                 for name, action in actions.items() if name in ACTION_CLASS}
        expect_actions("Turrets", actions, list(ACTION_CLASS))
        aim, trigger = given[AIM], given[TRIGGER]
        ids = _turret_ids(len(self.turret))
        rows = actor_positions("Turrets", AIM, aim.actors, ids)
        low, high = self._turn_bounds()
        turn = np.empty(len(ids))  # [n_turrets] in turret order
        turn[rows] = check_values("Turrets", AIM, aim, low[rows], high[rows])[:, 0]
        expect_choice_per_actor("Turrets", TRIGGER, trigger)
        fire = np.zeros(len(ids), dtype=bool)  # [n_turrets] in turret order
        for k, index in zip(actor_positions("Turrets", TRIGGER, trigger.actors, ids), trigger.indices):
            fire[k] = check_choice("Turrets", TRIGGER, index, len(TRIGGERS)) == FIRE
        if (fire & (self.ammo == 0)).any():
            k = int(np.flatnonzero(fire & (self.ammo == 0))[0])
            raise ValueError(f"Turrets.act: actions['{TRIGGER}'] turret {ids[k]!r} fires without ammo; its mask "
                             "allows only 'hold'")
        before = self._sight()[0]  # [n_turrets]
        self.aim = _wrap(self.aim + turn * MAX_TURN)  # [n_turrets]
        n_drones = len(self.drone)
        hits = misses = 0
        for k in np.flatnonzero(fire):
            target = _first_in_line(self.turret[k], self.aim[k], self.drone, self.alive)
            if target is None:
                misses += 1
            else:
                self.alive[target] = False
                hits += 1
        self.ammo = self.ammo - fire
        self.recoil = fire
        self._drift()
        self.step += 1
        sight = self._sight()
        aiming = self._aim_potential(before) - self._aim_potential(sight[0])
        reward = (hits - MISS_PENALTY * misses) / n_drones + aiming
        return self._observe(reward=float(reward), sight=sight, shots=int(fire.sum()), hits=hits)

    @staticmethod
    def _aim_potential(error: np.ndarray) -> float:
        """``AIM_COEF`` times the turrets' mean ``|sight_error|`` (errors ``[n_turrets]`` in radians)."""
        return float(AIM_COEF * np.abs(error).mean() / np.pi)

    def _sight(self) -> Tuple[np.ndarray, np.ndarray]:
        """Each turret's sight on the live drones: ``(error, distance)``, ``[n_turrets]`` each."""
        return _sights(self.turret, self.aim, self.drone[self.alive])

    def _drift(self) -> None:
        """The drones move by their velocity and bounce off the edges of ``[-1, 1]^2``."""
        moved = self.drone + self.velocity  # [n_drones, 2]
        out = np.abs(moved) > 1.0  # [n_drones, 2]
        self.drone = np.where(out, np.sign(moved) * 2.0 - moved, moved)  # [n_drones, 2]
        self.velocity = np.where(out, -self.velocity, self.velocity)  # [n_drones, 2]

    def _turn_bounds(self) -> Tuple[np.ndarray, np.ndarray]:
        """Each turret's ``(low, high)`` of ``turn``: float32 ``[n_turrets, 1]``, narrowed by recoil."""
        reach = np.where(self.recoil, RECOIL, 1.0).astype(np.float32)[:, None]  # [n_turrets, 1]
        return -reach, reach

    def _observe(self, reward: float, sight: Tuple[np.ndarray, np.ndarray], shots: int = 0,
                 hits: int = 0) -> Observation:
        """The observation of the current state, whose ``sight`` (``_sight()``) is given."""
        n = len(self.turret)
        drones = self.drone[self.alive]  # [n_alive, 2]
        error, distance = sight  # [n_turrets] each
        turrets = np.stack([
            self.turret[:, 0], self.turret[:, 1], np.cos(self.aim), np.sin(self.aim), self.ammo / AMMO,
            self.recoil.astype(float), error / np.pi, distance, np.full(n, self.step / N_STEPS),
        ], axis=1).astype(np.float32)  # [n_turrets, 9]
        velocity = self.velocity[self.alive] / DRONE_SPEED  # [n_alive, 2]
        ids = _turret_ids(n)
        low, high = self._turn_bounds()
        allowed = np.stack([np.ones(n, dtype=bool), self.ammo > 0], axis=1)  # [n_turrets, 2]
        done = not self.alive.any() or not self.ammo.any() or self.step >= N_STEPS
        return Observation(
            features={
                "Turret": turrets,
                "Drone": np.concatenate([drones, velocity], axis=1).astype(np.float32),  # [n_alive, 4]
            },
            ids={"Turret": ids, "Drone": [f"D{j}" for j in np.flatnonzero(self.alive)]},
            actions={
                AIM: ContinuousActionMask(actor_ids=ids, low=low, high=high),
                TRIGGER: CategoricalActionMask(actor_ids=ids, mask=allowed),
            },
            reward=reward,
            done=done,
            truncated=False,
            metrics={"shots": float(shots), "hits": float(hits)},
        )


def _turret_ids(n: int) -> List[str]:
    return [f"T{i}" for i in range(n)]


def _length(offset: np.ndarray) -> np.ndarray:
    """The lengths of 2-d vectors ``[..., 2]``: ``[...]``."""
    return np.hypot(offset[..., 0], offset[..., 1])


def _wrap(angle: np.ndarray) -> np.ndarray:
    """Angles brought into ``[-pi, pi)``."""
    return (angle + np.pi) % (2 * np.pi) - np.pi


def _bearings(turret: np.ndarray, aim: np.ndarray, drones: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Each drone seen from each turret: the signed angle from the barrel and the distance,
    ``[n_turrets, n_drones]`` each."""
    offset = drones[None, :, :] - turret[:, None, :]  # [n_turrets, n_drones, 2]
    angle = np.arctan2(offset[..., 1], offset[..., 0])  # [n_turrets, n_drones]
    return _wrap(angle - aim[:, None]), _length(offset)


def _sights(turret: np.ndarray, aim: np.ndarray, drones: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The drone closest to each turret's line of fire: angle from the barrel and distance,
    ``[n_turrets]`` each (0 and 0 without drones)."""
    if len(drones) == 0:
        return np.zeros(len(turret)), np.zeros(len(turret))
    error, distance = _bearings(turret, aim, drones)  # [n_turrets, n_drones] each
    closest = np.argmin(np.abs(error), axis=1)  # [n_turrets]
    rows = np.arange(len(turret))
    return error[rows, closest], distance[rows, closest]


def _first_in_line(origin: np.ndarray, aim: float, drones: np.ndarray, alive: np.ndarray) -> Optional[int]:
    """The index of the first live drone within ``HIT_RADIUS`` of the line of fire ahead, or None."""
    direction = np.array([np.cos(aim), np.sin(aim)])  # [2]
    offset = drones - origin  # [n_drones, 2]
    along = offset @ direction  # [n_drones]
    across = np.abs(offset[:, 1] * direction[0] - offset[:, 0] * direction[1])  # [n_drones]
    in_line = alive & (along > 0) & (across <= HIT_RADIUS)  # [n_drones]
    if not in_line.any():
        return None
    return int(np.flatnonzero(in_line)[np.argmin(along[in_line])])


def turrets_scripted(observation: Observation, action_space: Mapping[ActionName, ActionSpace],
                     rng: np.random.Generator) -> Dict[ActionName, Action]:
    """A scripted crew (``Turrets.scripted_policy``, which ``--policy scripted`` names): each
    turret in turn takes the live drone closest to its line of fire that no earlier turret took
    (any drone once all are taken), turns as far onto it as it may, and fires when the shot
    after the turn would pass within ``HIT_RADIUS / 2`` of the drone.

    Args:
        observation: the step's observation: turrets, drones and the masks' actors and bounds.
        action_space: the environment's action space (unused).
        rng: unused; the crew is deterministic.
    """
    turrets = np.asarray(observation.features["Turret"], dtype=np.float64)  # [n_turrets, 9]
    drones = np.asarray(observation.features.get("Drone", np.zeros((0, 4))), dtype=np.float64).reshape(-1, 4)
    aim_mask, trigger_mask = observation.actions[AIM], observation.actions[TRIGGER]
    aim = np.arctan2(turrets[:, 3], turrets[:, 2])  # [n_turrets]
    low = np.asarray(aim_mask.low, dtype=np.float64)[:, 0]  # [n_turrets]
    high = np.asarray(aim_mask.high, dtype=np.float64)[:, 0]  # [n_turrets]
    turn = np.zeros(len(turrets))  # [n_turrets]
    fire = np.zeros(len(turrets), dtype=np.int64)  # [n_turrets]
    if len(drones):
        error, distance = _bearings(turrets[:, :2], aim, drones[:, :2])  # [n_turrets, n_drones] each
        taken = np.zeros(len(drones), dtype=bool)  # [n_drones]
        for k in range(len(turrets)):
            free = ~taken if not taken.all() else np.ones(len(drones), dtype=bool)
            j = int(np.flatnonzero(free)[np.argmin(np.abs(error[k, free]))])
            taken[j] = True
            turn[k] = np.clip(error[k, j] / MAX_TURN, low[k], high[k])
            left_over = error[k, j] - turn[k] * MAX_TURN
            on_target = abs(np.sin(left_over)) * distance[k, j] < HIT_RADIUS / 2 and abs(left_over) < np.pi / 2
            fire[k] = FIRE if on_target and bool(np.asarray(trigger_mask.mask)[k, FIRE]) else HOLD
    ids = list(aim_mask.actor_ids)
    return {
        AIM: ContinuousAction(actors=ids, values=turn.astype(np.float32)[:, None], names=["turn"]),
        TRIGGER: CategoricalAction(actors=list(trigger_mask.actor_ids), indices=fire, index_to_label=list(TRIGGERS)),
    }


Turrets.scripted_policy = staticmethod(turrets_scripted)
