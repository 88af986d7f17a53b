"""Xor: output the exclusive-or of two input bits, possibly negated.

Game: one step long. Two bits and a ``negate`` flag are drawn uniformly from {0, 1}; the agent
answers once and the episode ends (``truncated=False``).

Observed: two ``Input`` entities, each with feature ``is_set`` (one bit each), and the global
feature ``negate``. The two inputs are indistinguishable apart from their values, so the answer
needs both entities at once.

Actions (global categorical): ``output`` with choices ``0`` and ``1``.

Reward: 1 when the output equals ``bit1 XOR bit2 XOR negate``, else 0.
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
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import expect_action_type


class Xor(Environment):
    """One global decision: the (possibly negated) XOR of two ``Input`` entities.

    Shape:
        ``Input`` ``[2, 1]``; global features ``[1]``.
    """

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.bits = np.zeros(2, dtype=np.int64)  # [2]
        self.negate = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["negate"], entities={"Input": Entity(["is_set"])})

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {"output": GlobalCategoricalActionSpace(["0", "1"])}

    def reset(self) -> Observation:
        self.bits = self.rng.integers(2, size=2)  # [2]
        self.negate = int(self.rng.integers(2))
        return self._observe(reward=0.0, done=False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        action = expect_action_type("Xor", "output", actions.get("output"), GlobalCategoricalAction)
        answer = int(self.bits[0] ^ self.bits[1]) ^ self.negate
        reward = 1.0 if int(action.index) == answer else 0.0
        return self._observe(reward=reward, done=True)

    def _observe(self, reward: float, done: bool) -> Observation:
        return Observation(
            features={"Input": self.bits[:, None].astype(np.float32)},  # [2, 1]
            global_features=np.array([self.negate], dtype=np.float32),  # [1]
            actions={"output": GlobalCategoricalActionMask()},
            reward=reward,
            done=done,
        )
