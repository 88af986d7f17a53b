"""FloorIsLava: step off your tile onto the one piece of high ground.

Game: the player stands on a random integer cell in ``[-1000, 1000]^2``. Between 1 and 8 of
its eight neighbouring cells hold tiles: exactly one is high ground, the rest are lava (the
others are empty). The player makes one move to a neighbouring cell and the game ends
(``truncated=False``).

Observed: ``Lava`` (x, y) for each lava tile, ``HighGround`` (x, y), ``Player`` (x, y), in
absolute coordinates, so the policy has to compare positions.

Actions: ``move``, categorical, taken by the player, choices ``n`` (y + 1), ``ne``, ``e``
(x + 1), ``se``, ``s``, ``sw``, ``w``, ``nw``.

Reward: 1.0 if the move lands on the high ground, 0.0 otherwise.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Tuple

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
from entmachin.env.examples._checks import check_choice, expect_action_type, expect_actions, expect_one_choice

MOVE = "move"
# (dx, dy) of each choice of ``move``, in label order.
DIRECTIONS: Dict[str, Tuple[int, int]] = {
    "n": (0, 1), "ne": (1, 1), "e": (1, 0), "se": (1, -1),
    "s": (0, -1), "sw": (-1, -1), "w": (-1, 0), "nw": (-1, 1),
}
WIDTH = 1000
PLAYER_ID = 0
_NEIGHBOURS = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if (dx, dy) != (0, 0)]

Cell = Tuple[int, int]


class FloorIsLava(Environment):
    """Move onto the high ground among up to seven lava tiles, in one step.

    Shape:
        features: ``Lava`` ``[n_lava, 2]`` (0 to 7 tiles), ``HighGround`` ``[1, 2]``,
        ``Player`` ``[1, 2]`` with id ``PLAYER_ID``.
    """

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.player: Cell = (0, 0)
        self.lava: List[Cell] = []
        self.high_ground: Cell = (0, 1)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Lava": Entity(["x", "y"]),
                "HighGround": Entity(["x", "y"]),
                "Player": Entity(["x", "y"]),
            }
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {MOVE: CategoricalActionSpace(list(DIRECTIONS))}

    def reset(self) -> Observation:
        x, y = (int(v) for v in self.rng.integers(-WIDTH, WIDTH + 1, size=2))
        self.player = (x, y)
        n_tiles = int(self.rng.integers(1, len(_NEIGHBOURS) + 1))
        picks = self.rng.choice(len(_NEIGHBOURS), size=n_tiles, replace=False)
        tiles = [(x + _NEIGHBOURS[k][0], y + _NEIGHBOURS[k][1]) for k in picks]
        self.high_ground = tiles.pop(int(self.rng.integers(0, n_tiles)))
        self.lava = tiles
        return self._observe(reward=0.0, done=False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        expect_actions("FloorIsLava", actions, [MOVE])
        move = expect_action_type("FloorIsLava", MOVE, actions[MOVE], CategoricalAction)
        expect_one_choice("FloorIsLava", MOVE, move, PLAYER_ID)
        choice = check_choice("FloorIsLava", MOVE, move.indices[0], len(DIRECTIONS))
        dx, dy = list(DIRECTIONS.values())[choice]
        self.player = (self.player[0] + dx, self.player[1] + dy)
        return self._observe(reward=1.0 if self.player == self.high_ground else 0.0, done=True)

    def _observe(self, reward: float, done: bool) -> Observation:
        return Observation(
            features={
                "Lava": np.array(self.lava, dtype=np.float32).reshape(len(self.lava), 2),  # [n_lava, 2]
                "HighGround": np.array([self.high_ground], dtype=np.float32),  # [1, 2]
                "Player": np.array([self.player], dtype=np.float32),  # [1, 2]
            },
            ids={"Player": [PLAYER_ID]},
            actions={MOVE: CategoricalActionMask(actor_types=["Player"])},
            reward=reward,
            done=done,
        )
