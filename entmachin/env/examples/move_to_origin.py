"""MoveToOrigin: steer a spaceship towards the origin with two thrusters.

Game: a spaceship starts at rest at a uniformly random point of the unit circle. Each step
the horizontal and the vertical thruster each change the velocity by one of five amounts, then
the ship moves by its velocity. The game lasts ``N_STEPS`` (32) steps: that end is part of the
game, which observes the step count, so it is terminal (``truncated=False``), as in entity-gym.
Bootstrapping there instead credits the last step with the critic's value of a state with no
future, which grows with the distance left, and PPO learns to stop short.

Observed: one ``Spaceship`` entity with ``x_pos``, ``y_pos``, ``x_velocity``, ``y_velocity``
and ``step`` (steps taken so far).

Actions (categorical, taken by the spaceship):
    ``horizontal_thruster``: ``100% right`` (+0.01), ``10% right`` (+0.001), ``hold``,
    ``10% left`` (-0.001), ``100% left`` (-0.01) added to the x velocity.
    ``vertical_thruster``: the same with ``up`` / ``down`` for the y velocity.

Reward: the decrease of the distance to the origin during the step (negative when the ship
moves away), so an episode's return is the start distance (1) minus the final distance.
"""
from __future__ import annotations

from typing import Dict, Mapping

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import check_label, expect_action_type

N_STEPS = 32
SPACESHIP_ID = 0
# Velocity change of each choice, by action name and label.
THRUST: Dict[str, Dict[str, float]] = {
    "horizontal_thruster": {
        "100% right": 0.01, "10% right": 0.001, "hold": 0.0, "10% left": -0.001, "100% left": -0.01,
    },
    "vertical_thruster": {
        "100% up": 0.01, "10% up": 0.001, "hold": 0.0, "10% down": -0.001, "100% down": -0.01,
    },
}


class MoveToOrigin(Environment):
    """One spaceship, two thrusters, rewarded for approaching the origin.

    Shape:
        features: ``Spaceship`` ``[1, 5]`` with id ``SPACESHIP_ID``.
    """

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.x_pos = self.y_pos = 0.0
        self.x_velocity = self.y_velocity = 0.0
        self.step = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Spaceship": Entity(["x_pos", "y_pos", "x_velocity", "y_velocity", "step"])}
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {name: CategoricalActionSpace(list(labels)) for name, labels in THRUST.items()}

    def reset(self) -> Observation:
        angle = self.rng.uniform(0.0, 2.0 * np.pi)
        self.x_pos, self.y_pos = float(np.cos(angle)), float(np.sin(angle))
        self.x_velocity = self.y_velocity = 0.0
        self.step = 0
        return self._observe(reward=0.0)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        for name, action in actions.items():
            if name not in THRUST:
                raise ValueError(f"MoveToOrigin.act: unknown action '{name}'; expected one of {list(THRUST)}")
            action = expect_action_type("MoveToOrigin", name, action, CategoricalAction)
            for label in action.labels:
                check_label("MoveToOrigin", name, label, list(THRUST[name]))
                if name == "horizontal_thruster":
                    self.x_velocity += THRUST[name][label]
                else:
                    self.y_velocity += THRUST[name][label]
        distance_before = np.hypot(self.x_pos, self.y_pos)
        self.x_pos += self.x_velocity
        self.y_pos += self.y_velocity
        self.step += 1
        done = self.step >= N_STEPS
        return self._observe(reward=float(distance_before - np.hypot(self.x_pos, self.y_pos)), done=done)

    def _observe(self, reward: float, done: bool = False) -> Observation:
        state = [self.x_pos, self.y_pos, self.x_velocity, self.y_velocity, self.step]
        return Observation(
            features={"Spaceship": np.array([state], dtype=np.float32)},  # [1, 5]
            ids={"Spaceship": [SPACESHIP_ID]},
            actions={name: CategoricalActionMask(actor_ids=[SPACESHIP_ID]) for name in THRUST},
            reward=reward,
            done=done,
            truncated=False,
        )


def move_to_origin_expert(observation: Observation, action_space: Mapping[ActionName, ActionSpace],
                          rng: np.random.Generator) -> Dict[ActionName, Action]:
    """A scripted expert (``entmachin record MoveToOrigin --policy scripted``): on each axis, the thrust
    that brings the velocity closest to the speed from which full braking stops at the origin.

    Args:
        observation: the step's observation; only its ``Spaceship`` features are read.
        action_space: the environment's action space (unused: the thrusters' labels are the game's own).
        rng: unused; the expert is deterministic.
    """
    x, y, vx, vy, _ = (float(v) for v in np.asarray(observation.features["Spaceship"])[0])
    out: Dict[ActionName, Action] = {}
    for name, position, velocity in (("horizontal_thruster", x, vx), ("vertical_thruster", y, vy)):
        target = -np.sign(position) * np.sqrt(2.0 * 0.01 * abs(position)) * 0.9  # brakes before the origin
        labels = list(THRUST[name])
        best = min(range(len(labels)), key=lambda k: abs(velocity + THRUST[name][labels[k]] - target))
        out[name] = CategoricalAction(actors=[SPACESHIP_ID], indices=np.array([best], dtype=np.int64),
                                      index_to_label=labels)
    return out


MoveToOrigin.scripted_policy = staticmethod(move_to_origin_expert)
