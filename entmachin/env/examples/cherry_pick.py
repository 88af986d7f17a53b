"""CherryPick: pick the best half of a basket of cherries, one at a time.

Game: ``num_cherries`` cherries get a random quality (standard normal, then all shifted by the
same amount so that the qualities of the best ``num_cherries // 2`` cherries sum to 1). The
player picks one cherry per step, which leaves the basket; after ``num_cherries // 2`` picks
the game is over (a rule of the game, so ``truncated=False``).

Observed: ``Cherry`` entities with ``quality``, and one featureless ``Player``.

Actions: ``Pick Cherry``, select-entity, taken by the player, selecting any remaining cherry.

Reward: the quality of the cherry just picked (on the observation that follows the pick), so
the best possible return is exactly 1.0.
"""
from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName, EntityID
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace

PICK = "Pick Cherry"
PLAYER_ID = "Player"


class CherryPick(Environment):
    """Pick ``num_cherries // 2`` cherries; the reward is the quality of each pick.

    Args:
        num_cherries: cherries in the basket at the start of an episode (at least 2).

    Raises:
        TypeError: ``num_cherries`` is not an int.
        ValueError: ``num_cherries`` is below 2 (no pick would be possible).

    Shape:
        features: ``Cherry`` ``[n_left, 1]`` with ids ``("Cherry", i)`` (positions in this
        step's list), ``Player`` ``[1, 0]`` with id ``PLAYER_ID``.
    """

    def __init__(self, num_cherries: int = 32) -> None:
        if isinstance(num_cherries, bool) or not isinstance(num_cherries, (int, np.integer)):
            raise TypeError(f"CherryPick: `num_cherries` must be an int, got {type(num_cherries).__name__}")
        if num_cherries < 2:
            raise ValueError(f"CherryPick: `num_cherries` must be >= 2, got {num_cherries}")
        self.num_cherries = int(num_cherries)
        self.rng = np.random.default_rng()
        self.cherries: List[float] = []
        self.step = 0
        self.total_reward = 0.0

    @property
    def n_picks(self) -> int:
        """Number of picks in an episode."""
        return self.num_cherries // 2

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Cherry": Entity(["quality"]), "Player": Entity([])})

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {PICK: SelectEntityActionSpace()}

    def reset(self) -> Observation:
        quality = self.rng.normal(size=self.num_cherries)  # [num_cherries]
        best_sum = np.sort(quality)[::-1][: self.n_picks].sum()
        # One common shift keeps the order and makes the best picks sum to exactly 1.
        self.cherries = list(quality + (1.0 - best_sum) / self.n_picks)
        self.step = 0
        self.total_reward = 0.0
        return self._observe(reward=0.0)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        if set(actions) != {PICK}:
            raise ValueError(f"CherryPick: expected exactly the action '{PICK}', got {list(actions)}")
        pick = actions[PICK]
        if not isinstance(pick, SelectEntityAction):
            raise TypeError(f"CherryPick: action '{PICK}' must be a SelectEntityAction, got {type(pick).__name__}")
        if list(pick.actors) != [PLAYER_ID] or len(pick.actees) != 1:
            raise ValueError(
                f"CherryPick: action '{PICK}' expects actors ['{PLAYER_ID}'] and one actee, got "
                f"actors {list(pick.actors)} and actees {list(pick.actees)}"
            )
        index = self._cherry_index(pick.actees[0])
        reward = float(self.cherries.pop(index))
        self.total_reward += reward
        self.step += 1
        return self._observe(reward=reward)

    def _cherry_index(self, eid: EntityID) -> int:
        if (
            isinstance(eid, tuple)
            and len(eid) == 2
            and eid[0] == "Cherry"
            and isinstance(eid[1], (int, np.integer))
            and 0 <= eid[1] < len(self.cherries)
        ):
            return int(eid[1])
        raise ValueError(
            f"CherryPick: action '{PICK}' selected {eid!r}, which is not a cherry id of the last observation"
        )

    def _observe(self, reward: float) -> Observation:
        cherry_ids = [("Cherry", i) for i in range(len(self.cherries))]
        return Observation(
            features={
                "Cherry": np.array(self.cherries, dtype=np.float32).reshape(-1, 1),  # [n_cherries, 1]
                "Player": np.zeros((1, 0), dtype=np.float32),  # [1, 0]
            },
            ids={"Cherry": cherry_ids, "Player": [PLAYER_ID]},
            actions={PICK: SelectEntityActionMask(actor_ids=[PLAYER_ID], actee_ids=cherry_ids)},
            reward=reward,
            done=self.step >= self.n_picks,
        )
