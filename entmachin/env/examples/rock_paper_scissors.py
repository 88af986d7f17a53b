"""RockPaperScissors: one throw against a biased opponent whose choice only the critic sees.

Game: one step long. The opponent throws rock, paper or scissors with probabilities 0.5, 0.3
and 0.2; the player throws once and the episode ends (``truncated=False``). Always throwing
paper is optimal (expected reward 1.0).

Observed: a featureless ``Player`` entity (id 0) and an ``Opponent`` entity whose features
``rock``, ``paper``, ``scissors`` are the one-hot throw. The ``Opponent`` entity is marked
``visible=False`` unless ``cheat`` is set: the policy never sees it, while a value function
(which sees every entity) can predict the reward exactly. This is the environment's purpose:
extra information for the critic only. With ``cheat=False`` no feature the policy can see
(entity counts, visible features, masks) depends on the opponent's throw.

Actions (categorical, taken by the player): ``throw`` with choices ``rock``, ``paper``,
``scissors``.

Reward: 2.0 for a win (rock beats scissors, paper beats rock, scissors beat paper), 0.0 for a
draw or a loss.
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
from entmachin.env.examples._checks import check_bool, check_choice, expect_action_type

THROWS = ["rock", "paper", "scissors"]
# Cumulative probabilities of the opponent's rock, paper (scissors takes the rest).
OPPONENT_CDF = (0.5, 0.8)
# BEATS[i] is the throw that throw i defeats: rock > scissors, paper > rock, scissors > paper.
BEATS = (2, 0, 1)
WIN_REWARD = 2.0
PLAYER_ID = 0


class RockPaperScissors(Environment):
    """One throw of rock-paper-scissors against a fixed, biased opponent.

    Args:
        cheat: show the opponent's throw to the policy as well (``Opponent`` visible).

    Shape:
        ``Player`` ``[1, 0]``; ``Opponent`` ``[1, 3]`` with ``visible`` ``[1]``.

    Raises:
        TypeError: ``cheat`` is not a bool.
    """

    def __init__(self, cheat: bool = False) -> None:
        self.cheat = check_bool("RockPaperScissors", "cheat", cheat)
        self.rng = np.random.default_rng()
        self.opponent = 0
        self.reset()

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Player": Entity([]),
                "Opponent": Entity(list(THROWS)),
            }
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {"throw": CategoricalActionSpace(list(THROWS))}

    def reset(self) -> Observation:
        self.opponent = int(np.searchsorted(OPPONENT_CDF, self.rng.random(), side="right"))
        return self._observe(reward=0.0, done=False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        action = expect_action_type("RockPaperScissors", "throw", actions.get("throw"), CategoricalAction)
        throw = check_choice("RockPaperScissors", "throw", action.indices[0], len(THROWS))
        reward = WIN_REWARD if BEATS[throw] == self.opponent else 0.0
        return self._observe(reward=reward, done=True)

    def _observe(self, reward: float, done: bool) -> Observation:
        opponent = np.zeros((1, len(THROWS)), dtype=np.float32)  # [1, 3]
        opponent[0, self.opponent] = 1.0
        return Observation(
            features={
                "Player": np.zeros((1, 0), dtype=np.float32),  # [1, 0]
                "Opponent": opponent,
            },
            ids={"Player": [PLAYER_ID]},
            visible={"Opponent": np.array([self.cheat])},  # [1]
            actions={"throw": CategoricalActionMask(actor_ids=[PLAYER_ID])},
            reward=reward,
            done=done,
        )
