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
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import (
    check_int,
    expect_action_type,
    expect_actions,
    expect_one_choice,
    resolve_id,
)

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
        self.num_cherries = check_int("CherryPick", "num_cherries", num_cherries, 2)
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
        expect_actions("CherryPick", actions, [PICK])
        pick = expect_action_type("CherryPick", PICK, actions[PICK], SelectEntityAction)
        expect_one_choice("CherryPick", PICK, pick, PLAYER_ID)
        _, index = resolve_id("CherryPick", PICK, pick.actees[0], {"Cherry": len(self.cherries)})
        reward = float(self.cherries.pop(index))
        self.total_reward += reward
        self.step += 1
        return self._observe(reward=reward)

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
