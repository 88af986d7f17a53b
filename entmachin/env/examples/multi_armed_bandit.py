"""MultiArmedBandit: pull the one arm that pays, 32 times.

Game: five arms ``A`` … ``E``; only ``A`` pays. Episodes last ``N_STEPS`` (32) pulls and end
by that time limit (``truncated=True``). Nothing is random.

Observed: no entities; one global feature, ``step`` (pulls so far).

Actions: ``pull``, a global categorical action with choices ``A``, ``B``, ``C``, ``D``, ``E``.

Reward: ``1 / 32`` for pulling ``A`` and 0 otherwise, so the best return is 1.0.
"""
from __future__ import annotations

from typing import Dict, Mapping

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Environment, Observation, ObsSpace
from entmachin.env.examples._checks import check_label, expect_action_type, expect_actions

PULL = "pull"
ARMS = ["A", "B", "C", "D", "E"]
WINNING_ARM = "A"
N_STEPS = 32


class MultiArmedBandit(Environment):
    """Five arms, one global action per step, only arm ``A`` pays ``1 / N_STEPS``.

    Shape:
        global_features: ``[1]`` (the step); no entities.
    """

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.step = 0
        self.total_reward = 0.0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["step"])

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {PULL: GlobalCategoricalActionSpace(list(ARMS))}

    def reset(self) -> Observation:
        self.step = 0
        self.total_reward = 0.0
        return self._observe(reward=0.0)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        expect_actions("MultiArmedBandit", actions, [PULL])
        pull = expect_action_type("MultiArmedBandit", PULL, actions[PULL], GlobalCategoricalAction)
        check_label("MultiArmedBandit", PULL, pull.label, ARMS)
        reward = 1.0 / N_STEPS if pull.label == WINNING_ARM else 0.0
        self.step += 1
        self.total_reward += reward
        return self._observe(reward=reward)

    def _observe(self, reward: float) -> Observation:
        done = self.step >= N_STEPS
        return Observation(
            global_features=np.array([self.step], dtype=np.float32),  # [1]
            actions={PULL: GlobalCategoricalActionMask()},
            reward=reward,
            done=done,
            truncated=done,
        )
