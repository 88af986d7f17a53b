"""Recall: a cue is shown once at the start; the choice comes later, when the cue is gone.

Game: ``delay + 1`` steps. At the first step the player sees a ``Cue`` entity whose one-hot features
name one of ``n_cues`` colours, drawn uniformly. For the next ``delay`` steps the cue is gone and the
player sees only itself (feature ``time``, the fraction of the episode left, the same in every
episode). At the last of them the player chooses a colour (``choose``); at the other steps it has no
action. The episode then ends (terminal).

Reward: 1 when the choice names the cue's colour, else 0.

Memory bound: at the choosing step the observation is the same whatever the cue was, so a
feed-forward policy's choice is independent of the cue and its expected return is exactly
``1 / n_cues`` (0.25 with the default four colours). A policy that keeps the cue scores 1.
"""
from __future__ import annotations

from typing import Dict, Mapping

import numpy as np

from entmachin.env.action import Action, ActionSpace, CategoricalAction, CategoricalActionMask, CategoricalActionSpace
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import check_choice, check_int, expect_action_type, expect_one_choice

PLAYER_ID, CUE_ID = 0, 1


class Recall(Environment):
    """Remember a cue shown once, choose it ``delay`` steps later.

    Args:
        n_cues: colours a cue may have (>= 2); a feed-forward policy's expected return is ``1 / n_cues``.
        delay: steps between the cue and the choice (>= 1).

    Shape:
        ``Player`` ``[1, 1]``; ``Cue`` ``[1, n_cues]`` at the first step, ``[0, n_cues]`` after it.
    """

    def __init__(self, n_cues: int = 4, delay: int = 4) -> None:
        self.n_cues = check_int("Recall", "n_cues", n_cues, 2)
        self.delay = check_int("Recall", "delay", delay, 1)
        self.rng = np.random.default_rng()
        self.step = 0
        self.cue = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity(["time"]),
                                  "Cue": Entity([f"colour_{i}" for i in range(self.n_cues)])})

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {"choose": CategoricalActionSpace([f"colour_{i}" for i in range(self.n_cues)])}

    def reset(self) -> Observation:
        self.step = 0
        self.cue = int(self.rng.integers(self.n_cues))
        return self._observe(0.0, False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        given, choosing = actions.get("choose"), self.step == self.delay
        if given is not None or choosing:
            given = expect_action_type("Recall", "choose", given, CategoricalAction)
        self.step += 1
        if not choosing:
            if given is not None and len(given.actors):
                raise ValueError(f"Recall.act: actions['choose'] has actors {list(given.actors)}, but the player "
                                 f"chooses only at step {self.delay} (this was step {self.step - 1})")
            return self._observe(0.0, False)
        expect_one_choice("Recall", "choose", given, PLAYER_ID)
        picked = check_choice("Recall", "choose", given.indices[0], self.n_cues)
        return self._observe(1.0 if picked == self.cue else 0.0, True)

    def _observe(self, reward: float, done: bool) -> Observation:
        cue = np.zeros((1 if self.step == 0 else 0, self.n_cues), dtype=np.float32)  # [0 or 1, n_cues]
        if self.step == 0:
            cue[0, self.cue] = 1.0
        time_left = 1.0 - self.step / (self.delay + 1)
        choosing = self.step == self.delay and not done
        return Observation(
            features={"Player": np.array([[time_left]], dtype=np.float32), "Cue": cue},
            ids={"Player": [PLAYER_ID], "Cue": [CUE_ID] if self.step == 0 else []},
            actions={"choose": CategoricalActionMask(actor_ids=[PLAYER_ID] if choosing else [])},
            reward=reward,
            done=done,
        )
