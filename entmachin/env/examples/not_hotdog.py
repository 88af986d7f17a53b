"""NotHotdog: say whether the thing in front of the player is a hotdog.

Game: one step long. Each episode draws a hidden bit ``is_hotdog`` and how a hotdog would be
shown. The episode ends after the first action (``truncated=False``).

Observed: a ``Player`` entity (feature ``step``: 0 before acting, 1 after) and either an
``Object`` entity with feature ``is_hotdog`` (0 or 1), or, for half of the hotdogs, a
featureless ``Hotdog`` entity instead. Telling the two apart needs the entity *type*.

Actions (categorical, taken by the player, id 0): ``classify`` with choices ``hotdog`` and
``not_hotdog``. ``unused_action`` (``0`` / ``1``) is declared but never has an actor.

Reward: 1 when the chosen index equals the ``is_hotdog`` bit, else 0. As in entity-gym, index 0
(labelled ``hotdog``) is the right answer when ``is_hotdog`` is 0 and index 1 when it is 1;
the labels are names only and the task is symmetric.
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
from entmachin.env.examples._checks import expect_action_type

PLAYER_ID = 0


class NotHotdog(Environment):
    """One-step classification of an ``Object`` / ``Hotdog`` entity by the ``Player``.

    Shape:
        ``Player`` ``[1, 1]``; ``Object`` ``[1, 1]`` and ``Hotdog`` ``[0, 0]``, or ``Object``
        ``[0, 1]`` and ``Hotdog`` ``[1, 0]``.
    """

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.step = 0
        self.is_hotdog = 0
        # Whether a hotdog (is_hotdog == 1) is shown as a ``Hotdog`` entity, not an ``Object``.
        self.hotdog_entity = False

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Player": Entity(["step"]),
                "Object": Entity(["is_hotdog"]),
                "Hotdog": Entity([]),
            }
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {
            "classify": CategoricalActionSpace(["hotdog", "not_hotdog"]),
            "unused_action": CategoricalActionSpace(["0", "1"]),
        }

    def reset(self) -> Observation:
        self.step = 0
        self.is_hotdog = int(self.rng.integers(2))
        self.hotdog_entity = bool(self.rng.integers(2))
        return self._observe(reward=0.0, done=False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        action = expect_action_type("NotHotdog", "classify", actions.get("classify"), CategoricalAction)
        self.step += 1
        reward = 1.0 if int(action.indices[0]) == self.is_hotdog else 0.0
        return self._observe(reward=reward, done=True)

    def _observe(self, reward: float, done: bool) -> Observation:
        if self.is_hotdog == 1 and self.hotdog_entity:
            objects = np.zeros((0, 1), dtype=np.float32)  # [0, 1]
            hotdogs = np.zeros((1, 0), dtype=np.float32)  # [1, 0]
        else:
            objects = np.array([[self.is_hotdog]], dtype=np.float32)  # [1, 1]
            hotdogs = np.zeros((0, 0), dtype=np.float32)  # [0, 0]
        return Observation(
            features={
                "Player": np.array([[self.step]], dtype=np.float32),  # [1, 1]
                "Object": objects,
                "Hotdog": hotdogs,
            },
            ids={"Player": [PLAYER_ID]},
            actions={
                "classify": CategoricalActionMask(actor_ids=[PLAYER_ID]),
                "unused_action": CategoricalActionMask(actor_ids=[]),
            },
            reward=reward,
            done=done,
        )
