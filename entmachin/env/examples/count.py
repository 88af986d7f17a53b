"""Count: say how many beans there are.

Game: a one-step episode with between 0 and ``masked_choices - 1`` featureless ``Bean``
entities. The ``Player`` answers once and the game ends (``truncated=False``).

Observed: one featureless ``Player`` and the ``Bean`` entities (the count is only visible as
the number of entities).

Actions: ``count``, categorical, taken by the player, choices ``"0"`` … ``"9"``. The mask
always allows the right answer plus a random subset of ``0 .. masked_choices - 1``; with
``masked_choices=10`` (the default) it can allow everything, and answers at or above
``masked_choices`` are never allowed.

Reward: 1.0 for the right count, 0.0 otherwise.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import check_int, expect_action_type, expect_actions, expect_one_choice

COUNT = "count"
N_CHOICES = 10
PLAYER_ID = "Player"


class Count(Environment):
    """Count the beans in one step; some wrong answers are masked off at random.

    Args:
        masked_choices: the answers drawn from; the count lies in ``[0, masked_choices)`` and
            the mask only ever allows choices below it. Between 1 and 10.

    Raises:
        TypeError: ``masked_choices`` is not an int.
        ValueError: ``masked_choices`` is outside ``[1, 10]``.

    Shape:
        features: ``Player`` ``[1, 0]``, ``Bean`` ``[count, 0]``; ``count`` mask ``[1, 10]`` on
        the first observation, ``None`` (all allowed) on the final one.
    """

    def __init__(self, masked_choices: int = N_CHOICES) -> None:
        self.masked_choices = check_int("Count", "masked_choices", masked_choices, 1, N_CHOICES)
        self.rng = np.random.default_rng()
        self.count = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity([]), "Bean": Entity([])})

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {COUNT: CategoricalActionSpace([str(i) for i in range(N_CHOICES)])}

    def reset(self) -> Observation:
        self.count = int(self.rng.integers(0, self.masked_choices))
        n_allowed = int(self.rng.integers(0, self.masked_choices + 1))
        mask = np.zeros((1, N_CHOICES), dtype=np.bool_)  # [1 actor, n_choices]
        mask[0, self.rng.choice(self.masked_choices, size=n_allowed, replace=False)] = True
        mask[0, self.count] = True
        return self._observe(mask, reward=0.0, done=False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        expect_actions("Count", actions, [COUNT])
        answer = expect_action_type("Count", COUNT, actions[COUNT], CategoricalAction)
        expect_one_choice("Count", COUNT, answer, PLAYER_ID)
        reward = 1.0 if int(answer.indices[0]) == self.count else 0.0
        return self._observe(None, reward=reward, done=True)

    def _observe(self, mask: Optional[npt.NDArray[np.bool_]], reward: float, done: bool) -> Observation:
        return Observation(
            features={
                "Player": np.zeros((1, 0), dtype=np.float32),  # [1, 0]
                "Bean": np.zeros((self.count, 0), dtype=np.float32),  # [count, 0]
            },
            ids={"Player": [PLAYER_ID], "Bean": [f"Bean{i}" for i in range(1, self.count + 1)]},
            actions={COUNT: CategoricalActionMask(actor_ids=[PLAYER_ID], mask=mask)},
            reward=reward,
            done=done,
        )
