"""Skirmish: two squads of units fight on a small grid, moving and attacking at the same time.

Game: seats ``"0"`` and ``"1"`` each command ``n`` units, ``n`` drawn per game uniformly from
``[min_units, max_units]``. Every unit starts with ``hp`` hit points. Seat ``"0"``'s units start
on distinct random cells of the two bottom rows of a ``size x size`` grid, seat ``"1"``'s on the
mirror images of those cells through the grid's centre. Units may share cells.

Every step both seats act at once, and each unit does one thing: a unit with an enemy within
``attack_range`` (Chebyshev distance, on the positions at the start of the step) attacks one such
enemy, dealing 1 damage; every other unit moves one cell or stays. Attacks are resolved from
the start-of-step state, all damage lands together, then the moves are made, then units at 0
hit points are removed (a unit killed this step still deals its own attack).

The game ends when a side has no units (it loses; both at once: a draw) or after
``time_limit`` steps, when the side with more hit points left wins (equal: a draw). Both are
game ends (``truncated=False``).

Observed, from each seat's own side: the grid is turned half a turn for seat ``"1"``
(``x -> size - 1 - x``, ``y -> size - 1 - y``), so every seat starts at the bottom (low ``y``)
and the two seats see mirrored starts identically. ``Unit`` (the seat's own units) and
``Enemy`` (the other seat's), both with features ``x``, ``y``, ``hp``; global feature
``time_left`` (steps left / ``time_limit``). Ids are ``("Unit", k)`` / ``("Enemy", k)`` with
``k`` the unit's index in its squad at the start, kept while it lives.

Actions:
    ``move``: categorical, taken by the seat's units without an enemy in range, choices
    ``stay``, ``up`` (y + 1), ``down`` (y - 1), ``left`` (x - 1), ``right`` (x + 1) in the
    seat's own view; moves off the grid are masked.
    ``attack``: select-entity, taken by the seat's units with an enemy in range; the actees are
    the enemies, masked per attacker to those within its range.
    Once the game is over no unit acts.

Reward: each step ``0.5 * (damage dealt - damage taken) / (n * hp)`` (damage beyond a unit's
last hit point does not count; over a game this adds up to at most 0.5 either way), plus +1 for
a win, -1 for a loss and 0 for a draw on the final step, which states each seat's ``result``.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName, EntityID
from entmachin.env.environment import Entity, Observation, ObsSpace
from entmachin.env.examples._checks import (
    check_choice,
    check_int,
    expect_action_type,
    expect_choice_per_actor,
    seat_action,
)
from entmachin.env.multi_agent import MultiAgentEnvironment, Seat, SeatActions, check_by_seat

SEATS = ["0", "1"]
MOVE, ATTACK = "move", "attack"
MOVES = ["stay", "up", "down", "left", "right"]
MOVE_DELTAS = np.array([(0, 0), (0, 1), (0, -1), (-1, 0), (1, 0)], dtype=np.int64)  # [5, 2] (dx, dy) per move
DAMAGE_REWARD = 0.5  # the shaped reward of dealing a squad's whole starting hit points
START_ROWS = 2


class Skirmish(MultiAgentEnvironment):
    """Two mirrored squads fight with simultaneous moves and attacks.

    Args:
        size: width and height of the grid.
        min_units: fewest units per squad.
        max_units: most units per squad (a game's count is uniform over the range).
        hp: starting hit points of a unit.
        attack_range: Chebyshev distance within which a unit attacks.
        time_limit: steps after which the side with more hit points wins.

    Raises:
        TypeError: an argument is not an int.
        ValueError: an argument is out of range, or ``max_units`` units don't fit in the
            ``2 x size`` starting rows.

    Shape:
        ``Unit`` ``[n_units, 3]``, ``Enemy`` ``[n_enemies, 3]``, global ``[1]``; ``move`` mask
        ``[n_movers, 5]``, ``attack`` mask ``[n_attackers, n_enemies]``.
    """

    def __init__(
        self,
        size: int = 8,
        min_units: int = 2,
        max_units: int = 6,
        hp: int = 3,
        attack_range: int = 2,
        time_limit: int = 50,
    ) -> None:
        self.size = check_int("Skirmish", "size", size, 2 * START_ROWS)
        self.min_units = check_int("Skirmish", "min_units", min_units, 1, START_ROWS * self.size)
        self.max_units = check_int("Skirmish", "max_units", max_units, self.min_units, START_ROWS * self.size)
        self.hp_start = check_int("Skirmish", "hp", hp, 1)
        self.attack_range = check_int("Skirmish", "attack_range", attack_range, 1)
        self.time_limit = check_int("Skirmish", "time_limit", time_limit, 1)
        cell = np.arange(self.size)
        x, y = cell[:, None], cell[None, :]
        stay = np.ones((self.size, self.size), dtype=np.bool_)
        # [size, size, 5]: the moves allowed from cell (x, y), in the order of MOVES.
        self._move_table = np.stack(np.broadcast_arrays(stay, y < self.size - 1, y > 0, x > 0, x < self.size - 1), axis=2)
        self.rng = np.random.default_rng()
        self.reset()

    def seats(self) -> List[Seat]:
        return list(SEATS)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            global_features=["time_left"],
            entities={"Unit": Entity(["x", "y", "hp"]), "Enemy": Entity(["x", "y", "hp"])},
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {MOVE: CategoricalActionSpace(list(MOVES)), ATTACK: SelectEntityActionSpace()}

    def reset(self) -> Dict[Seat, Observation]:
        self.n = int(self.rng.integers(self.min_units, self.max_units + 1))
        cells = self.rng.choice(START_ROWS * self.size, size=self.n, replace=False)
        start = np.stack([cells % self.size, cells // self.size], axis=1)  # [n, 2] (x, y)
        self.pos = np.stack([start, self.size - 1 - start])  # [2, n, 2]: true positions of each squad
        self.hp = np.full((2, self.n), self.hp_start, dtype=np.int64)  # [2, n]
        self.t = 0
        self.over = False
        return self._observe(np.zeros(2), [None, None])

    def act(self, actions: Mapping[Seat, SeatActions]) -> Dict[Seat, Observation]:
        # Both seats' actions are checked before the state changes.
        if self.over:
            raise ValueError("Skirmish.act: the game is over; call reset()")
        check_by_seat("Skirmish.act", actions, SEATS, "actions")
        orders = [self._parse(s, actions[seat]) for s, seat in enumerate(SEATS)]
        # [2, n]: hits on each squad's units, 1 damage each
        damage = np.stack([np.bincount(orders[1 - s][2], minlength=self.n) for s in range(2)])
        taken = np.minimum(damage, self.hp).sum(axis=1)  # [2]: damage taken by each squad
        self.hp = np.maximum(self.hp - damage, 0)
        for s, (units, choices, _) in enumerate(orders):
            self.pos[s, units] += MOVE_DELTAS[choices] * (1 - 2 * s)  # seat 1's view is turned half a turn
        self.t += 1
        shaped = DAMAGE_REWARD * (taken[::-1] - taken) / (self.n * self.hp_start)  # [2]
        alive = (self.hp > 0).any(axis=1)
        score = self.hp.sum(axis=1) if alive.all() else alive.astype(np.int64)  # [2]
        results: List[Optional[str]] = [None, None]
        if not alive.all() or self.t >= self.time_limit:
            self.over = True
            results = ["draw"] * 2 if score[0] == score[1] else (["win", "loss"] if score[0] > score[1] else ["loss", "win"])
        return self._observe(shaped, results)

    def _parse(self, s: int, actions: SeatActions) -> Tuple[List[int], List[int], List[int]]:
        """Seat ``s``'s orders: its moving units and their choices, and the enemies its attackers hit."""
        seat = SEATS[s]
        movers, attackers, enemies = self._expected[s]
        units, choices, targets = [], [], []
        key = seat_action(seat, MOVE)
        move = actions.get(MOVE)
        if movers or move is not None:
            move = expect_action_type("Skirmish", key, move, CategoricalAction)
            expect_choice_per_actor("Skirmish", key, move)
            _expect_actors(key, move.actors, movers, "its units without an enemy in range")
            for actor, index in zip(move.actors, move.indices):
                k, allowed = movers[actor]
                if not allowed[check_choice("Skirmish", key, index, len(MOVES))]:
                    raise ValueError(f"Skirmish.act: actions['{key}'] moves unit {actor!r} {MOVES[index]}, off the grid")
                units.append(k)
                choices.append(int(index))
        key = seat_action(seat, ATTACK)
        attack = actions.get(ATTACK)
        if attackers or attack is not None:
            attack = expect_action_type("Skirmish", key, attack, SelectEntityAction)
            expect_choice_per_actor("Skirmish", key, attack)
            _expect_actors(key, attack.actors, attackers, "its units with an enemy in range")
            for actor, target in zip(attack.actors, attack.actees):
                reach = attackers[actor]
                if not (target in enemies and reach[enemies[target][1]]):
                    raise ValueError(f"Skirmish.act: actions['{key}'] has unit {actor!r} attack {target!r}, which is "
                                     f"not an enemy within its range")
                targets.append(enemies[target][0])
        return units, choices, targets

    def _observe(self, shaped: np.ndarray, results: List[Optional[str]]) -> Dict[Seat, Observation]:
        views = np.stack([self.pos, self.size - 1 - self.pos])  # [seat viewing, squad, n, 2]
        feats = np.empty((2, 2, self.n, 3), dtype=np.float32)  # [seat viewing, squad, n, (x, y, hp)]
        feats[..., :2] = views
        feats[..., 2] = self.hp
        alive = [np.flatnonzero(self.hp[s] > 0) for s in range(2)]
        near = self.pos[0][alive[0]][:, None] - self.pos[1][alive[1]][None]  # [n0, n1, 2]
        in_range = np.abs(near).max(axis=2) <= self.attack_range
        in_range &= not self.over  # [n0, n1]; once the game is over no one acts
        terminal = {"win": 1.0, "draw": 0.0, "loss": -1.0}
        time_left = np.array([(self.time_limit - self.t) / self.time_limit], dtype=np.float32)  # [1]
        self._expected: List[Tuple[Dict[EntityID, Tuple[int, np.ndarray]], Dict[EntityID, np.ndarray],
                                   Dict[EntityID, Tuple[int, int]]]] = []
        out = {}
        for s, seat in enumerate(SEATS):
            own, enemy = alive[s].tolist(), alive[1 - s].tolist()
            reach = in_range if s == 0 else in_range.T  # [n_own, n_enemy]
            attacking = reach.any(axis=1).tolist()
            moving = [k for k, a in zip(own, attacking) if not a and not self.over]
            mover_ids = [("Unit", k) for k in moving]
            attacker_ids = [("Unit", k) for k, a in zip(own, attacking) if a]
            enemy_ids = [("Enemy", k) for k in enemy]
            at = views[s, s, moving]  # [n_movers, 2] the movers' cells in this seat's view
            move_mask = self._move_table[at[:, 0], at[:, 1]]  # [n_movers, 5]
            attack_mask = reach[attacking]  # [n_attackers, n_enemies]
            self._expected.append((
                dict(zip(mover_ids, zip(moving, move_mask))),
                dict(zip(attacker_ids, attack_mask)),
                dict(zip(enemy_ids, zip(enemy, range(len(enemy))))),
            ))
            reward = float(shaped[s]) + (terminal[results[s]] if results[s] else 0.0)
            out[seat] = Observation(
                features={"Unit": feats[s, s, own], "Enemy": feats[s, 1 - s, enemy]},  # [n_units, 3], [n_enemies, 3]
                ids={"Unit": [("Unit", k) for k in own], "Enemy": enemy_ids},
                global_features=time_left,
                actions={
                    MOVE: CategoricalActionMask(actor_ids=mover_ids, mask=move_mask),
                    ATTACK: SelectEntityActionMask(actor_ids=attacker_ids, actee_ids=enemy_ids, mask=attack_mask),
                },
                reward=reward,
                done=self.over,
                result=results[s],
            )
        return out


def _expect_actors(key: str, actors: object, expected: Mapping[EntityID, object], what: str) -> None:
    given = list(actors)  # type: ignore[call-overload]
    if len(given) != len(expected) or set(given) != set(expected):
        raise ValueError(f"Skirmish.act: actions['{key}'] has actors {given}; expected each of {what}, "
                         f"{list(expected)}, once")


def _distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sortable keys of the distances between ``[..., 2]`` positions: Chebyshev, ties broken by Manhattan."""
    d = np.abs(a - b)
    return d.max(axis=-1) * 1000 + d.sum(axis=-1)


def _orders(observation: Observation, action_space: Mapping[ActionName, ActionSpace],
            attack_key: Callable[[np.ndarray, np.ndarray], np.ndarray],
            goal: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> Dict[ActionName, Action]:
    """A scripted squad's actions: each attacker hits the allowed enemy of least ``attack_key(position,
    enemies [k, 3])``; each other unit takes the allowed move that brings it nearest to ``goal(position,
    units [n, 3], enemies [m, 3])``. Reads only ``observation``."""
    units, enemies = (np.asarray(observation.features[t], dtype=np.float32).reshape(-1, 3) for t in ("Unit", "Enemy"))
    unit_row = {eid: i for i, eid in enumerate(observation.ids["Unit"])}
    enemy_row = {eid: i for i, eid in enumerate(observation.ids["Enemy"])}
    amask = observation.actions[ATTACK]
    targets = []
    for i, actor in enumerate(amask.actor_ids):
        allowed = [eid for eid, ok in zip(amask.actee_ids, np.asarray(amask.mask)[i]) if ok]
        keys = attack_key(units[unit_row[actor], :2], enemies[[enemy_row[eid] for eid in allowed]])
        targets.append(allowed[int(np.argmin(keys))])
    mmask = observation.actions[MOVE]
    choices = []
    for i, actor in enumerate(mmask.actor_ids):
        here = units[unit_row[actor], :2]
        keys = _distance(here + MOVE_DELTAS, goal(here, units, enemies)).astype(np.float64)  # [5]
        keys[~np.asarray(mmask.mask, dtype=np.bool_)[i]] = np.inf
        choices.append(int(np.argmin(keys)))
    return {
        MOVE: CategoricalAction(list(mmask.actor_ids), np.array(choices, dtype=np.int64), list(action_space[MOVE].index_to_label)),
        ATTACK: SelectEntityAction(list(amask.actor_ids), targets),
    }


def skirmish_opponent(
    observation: Observation, action_space: Mapping[ActionName, ActionSpace], rng: np.random.Generator
) -> Dict[ActionName, Action]:
    """Each attacker hits the nearest enemy in its range (ties: fewest hit points); each other
    unit takes the allowed move that brings it nearest to its nearest enemy.

    Distances are Chebyshev, ties broken by Manhattan distance. Reads only ``observation``.

    Args:
        observation: the seat's observation.
        action_space: the game's action space, whose ``move`` labels the orders carry.
        rng: unused; the opponent is deterministic.
    """
    return _orders(observation, action_space,
                   lambda here, targets: _distance(here, targets[:, :2]) * 100 + targets[:, 2],
                   lambda here, units, enemies: enemies[int(np.argmin(_distance(here, enemies[:, :2]))), :2])


def focus_opponent(
    observation: Observation, action_space: Mapping[ActionName, ActionSpace], rng: np.random.Generator
) -> Dict[ActionName, Action]:
    """Focus fire: each attacker hits the enemy in its range with the fewest hit points (ties: the
    nearest); each other unit moves toward the weakest enemy of all (ties: the one nearest the squad's
    centre). A second scripted opponent, for measuring a policy against one it never trained with
    (``--opponent entmachin.env.examples.skirmish:focus_opponent``). Reads only ``observation``."""
    def weakest(here: np.ndarray, units: np.ndarray, enemies: np.ndarray) -> np.ndarray:
        keys = enemies[:, 2] * 1e6 + _distance(units[:, :2].mean(axis=0), enemies[:, :2])
        return enemies[int(np.argmin(keys)), :2]

    return _orders(observation, action_space,
                   lambda here, targets: targets[:, 2] * 1e6 + _distance(here, targets[:, :2]), weakest)


Skirmish.scripted_opponent = staticmethod(skirmish_opponent)
