"""Minefield: drive a vehicle to a target without touching a mine.

Game: on a square of side ``width`` centred on the origin, a vehicle, a target and up to
``max_mines`` mines are placed uniformly at random (a mine is dropped when it would lie within
15 of the vehicle, the target or another mine; the target is redrawn while it lies within reach
of the vehicle). The vehicle starts with a random heading. Each step it turns by pi/8 or drives
3 units forward. The episode ends (``truncated=False``) when the vehicle comes within 5 of the
target or of a mine, and is cut off after ``max_steps`` steps (``truncated=True``).

Observed: one ``Vehicle`` entity (id ``"Vehicle"``) with ``x_pos``, ``y_pos``, ``direction``
(radians in [0, 2 pi)) and ``step``; ``Mine`` entities and one ``Target`` entity with ``x_pos``,
``y_pos``. With ``translate`` the mine and target positions are relative to the vehicle (the
vehicle's own position stays absolute).

Actions (categorical, taken by the vehicle): ``move`` with choices ``turn left`` (heading
- pi/8), ``move forward``, ``turn right`` (heading + pi/8).

Reward: 1 on reaching the target, 0 otherwise.
"""
from __future__ import annotations

import math
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
from entmachin.env.examples._checks import check_choice, expect_action_type

MOVES = ["turn left", "move forward", "turn right"]
TURN_ANGLE = np.pi / 8
SPEED = 3.0
REACH = 5.0  # distance at which the target is reached, or a mine goes off
MINE_CLEARANCE = 15.0  # least distance between a new mine and anything placed before it
VEHICLE_ID = "Vehicle"


class Minefield(Environment):
    """A vehicle steering to a target through randomly placed mines.

    Args:
        max_mines: number of mine placements tried per episode (the upper bound of mines).
        max_steps: steps after which an episode is cut off.
        translate: observe mines and the target relative to the vehicle.
        width: side of the square field, centred on the origin.

    Shape:
        ``Vehicle`` ``[1, 4]``; ``Mine`` ``[n_mines, 2]`` (``n_mines <= max_mines``); ``Target``
        ``[1, 2]``.

    Raises:
        ValueError: ``max_mines`` negative, ``max_steps`` below 1, or ``width`` below
            ``2 * REACH`` (10) or not finite.
    """

    def __init__(
        self,
        *,
        max_mines: int = 10,
        max_steps: int = 200,
        translate: bool = False,
        width: float = 200.0,
    ) -> None:
        if max_mines < 0:
            raise ValueError(f"Minefield: max_mines must be at least 0, got {max_mines}")
        if max_steps < 1:
            raise ValueError(f"Minefield: max_steps must be at least 1, got {max_steps}")
        if not (math.isfinite(width) and width >= 2 * REACH):
            raise ValueError(f"Minefield: width must be finite and at least {2 * REACH}, got {width}")
        self.max_mines = int(max_mines)
        self.max_steps = int(max_steps)
        self.translate = translate
        self.width = float(width)
        self.rng = np.random.default_rng()
        self.vehicle = np.zeros(2)  # [2] x, y
        self.direction = 0.0
        self.target = np.zeros(2)  # [2]
        self.mines = np.zeros((0, 2))  # [n_mines, 2]
        self.step = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Vehicle": Entity(["x_pos", "y_pos", "direction", "step"]),
                "Mine": Entity(["x_pos", "y_pos"]),
                "Target": Entity(["x_pos", "y_pos"]),
            }
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {"move": CategoricalActionSpace(list(MOVES))}

    def reset(self) -> Observation:
        half = self.width / 2
        self.vehicle = self.rng.uniform(-half, half, size=2)  # [2]
        # A target within reach would end the episode before the first action.
        self.target = self.rng.uniform(-half, half, size=2)  # [2]
        while _distance(self.target, self.vehicle) < REACH:
            self.target = self.rng.uniform(-half, half, size=2)  # [2]
        placed = [self.vehicle, self.target]
        mines = []
        for _ in range(self.max_mines):
            candidate = self.rng.uniform(-half, half, size=2)  # [2]
            if all(_distance(candidate, p) >= MINE_CLEARANCE for p in placed + mines):
                mines.append(candidate)
        self.mines = np.array(mines).reshape(-1, 2)  # [n_mines, 2]
        self.direction = float(self.rng.uniform(0.0, 2 * np.pi))
        self.step = 0
        return self._observe()

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        action = expect_action_type("Minefield", "move", actions.get("move"), CategoricalAction)
        choice = check_choice("Minefield", "move", action.indices[0], len(MOVES))
        if choice == 0:
            self.direction -= TURN_ANGLE
        elif choice == 1:
            self.vehicle = self.vehicle + SPEED * np.array(
                [np.cos(self.direction), np.sin(self.direction)]
            )  # [2]
        else:
            self.direction += TURN_ANGLE
        self.direction %= 2 * np.pi
        self.step += 1
        return self._observe()

    def _observe(self) -> Observation:
        reached = _distance(self.vehicle, self.target) < REACH
        exploded = bool(np.any(np.hypot(*(self.mines - self.vehicle).T) < REACH))
        timed_out = self.step >= self.max_steps
        origin = self.vehicle if self.translate else np.zeros(2)  # [2]
        vehicle = [[*self.vehicle, self.direction, self.step]]
        return Observation(
            features={
                "Vehicle": np.array(vehicle, dtype=np.float32),  # [1, 4]
                "Mine": (self.mines - origin).astype(np.float32),  # [n_mines, 2]
                "Target": (self.target - origin)[None].astype(np.float32),  # [1, 2]
            },
            ids={"Vehicle": [VEHICLE_ID]},
            actions={"move": CategoricalActionMask(actor_types=["Vehicle"])},
            reward=1.0 if reached else 0.0,
            done=reached or exploded or timed_out,
            truncated=timed_out and not (reached or exploded),
        )


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.hypot(*(a - b)))
