"""PickMatchingBalls: pick up as many balls of one colour as possible.

Game: ``max_balls`` balls (with ``randomize``, a uniform number from 3 to ``max_balls``) each
get one of six colours at random. Each step the player picks one ball it has not picked yet.
The episode ends (``truncated=False``) when the picked balls hold two different colours or
every ball has been picked.

Observed: ``Ball`` entities (ids ``0 .. n_balls - 1``) with features ``color0`` .. ``color5``
and ``selected``; with ``one_hot`` the six colour features are the one-hot colour, otherwise
each of them holds the colour index (0-5). A featureless ``Player`` entity (id ``n_balls``).

Actions (select-entity, taken by the player): ``Pick Ball`` selects one of the balls not
picked yet.

Reward: 0 until the end, then (number picked - 1) / (size of the largest colour group), or 1
when every ball was picked. Picking the whole largest group and then any other ball scores 1.
"""
from __future__ import annotations

from typing import Dict, Mapping

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
from entmachin.env.examples._checks import expect_action_type

N_COLORS = 6
MIN_RANDOM_BALLS = 3


class PickMatchingBalls(Environment):
    """Pick balls one at a time until a second colour turns up.

    Args:
        max_balls: number of balls (the upper bound with ``randomize``).
        one_hot: give the colour one-hot instead of repeating its index in all six features.
        randomize: draw the number of balls uniformly from 3 to ``max_balls`` per episode.

    Shape:
        ``Ball`` ``[n_balls, 7]``; ``Player`` ``[1, 0]``.

    Raises:
        ValueError: ``max_balls`` below 1 (below 3 with ``randomize``).
    """

    def __init__(self, max_balls: int = 32, *, one_hot: bool = False, randomize: bool = False) -> None:
        smallest = MIN_RANDOM_BALLS if randomize else 1
        if max_balls < smallest:
            raise ValueError(
                f"PickMatchingBalls: max_balls must be at least {smallest}"
                f"{' with randomize=True' if randomize else ''}, got {max_balls}"
            )
        self.max_balls = int(max_balls)
        self.one_hot = one_hot
        self.randomize = randomize
        self.rng = np.random.default_rng()
        self.colors = np.zeros(0, dtype=np.int64)  # [n_balls]
        self.selected = np.zeros(0, dtype=bool)  # [n_balls]

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Ball": Entity([f"color{c}" for c in range(N_COLORS)] + ["selected"]),
                "Player": Entity([]),
            }
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {"Pick Ball": SelectEntityActionSpace()}

    def reset(self) -> Observation:
        if self.randomize:
            n_balls = int(self.rng.integers(MIN_RANDOM_BALLS, self.max_balls + 1))
        else:
            n_balls = self.max_balls
        self.colors = self.rng.integers(N_COLORS, size=n_balls)  # [n_balls]
        self.selected = np.zeros(n_balls, dtype=bool)  # [n_balls]
        return self._observe()

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        action = expect_action_type(
            "PickMatchingBalls", "Pick Ball", actions.get("Pick Ball"), SelectEntityAction
        )
        for ball in action.actees:
            unpicked = np.flatnonzero(~self.selected).tolist()
            if not isinstance(ball, (int, np.integer)) or ball not in unpicked:
                raise ValueError(
                    f"PickMatchingBalls.act: cannot pick ball {ball!r}; the balls not picked yet "
                    f"are {unpicked}"
                )
            self.selected[ball] = True
        return self._observe()

    def _observe(self) -> Observation:
        n_balls = len(self.colors)
        picked_colors = self.colors[self.selected]  # [n_picked]
        all_picked = bool(self.selected.all())
        done = all_picked or len(np.unique(picked_colors)) > 1
        if not done:
            reward = 0.0
        elif all_picked:
            reward = 1.0
        else:
            largest_group = int(np.bincount(self.colors, minlength=N_COLORS).max())
            reward = (len(picked_colors) - 1) / largest_group

        if self.one_hot:
            color_features = self.colors[:, None] == np.arange(N_COLORS)  # [n_balls, 6]
        else:
            color_features = np.repeat(self.colors[:, None], N_COLORS, axis=1)  # [n_balls, 6]
        balls = np.concatenate(
            [color_features, self.selected[:, None]], axis=1
        ).astype(np.float32)  # [n_balls, 7]
        player_id = n_balls
        return Observation(
            features={
                "Ball": balls,
                "Player": np.zeros((1, 0), dtype=np.float32),  # [1, 0]
            },
            ids={"Ball": list(range(n_balls)), "Player": [player_id]},
            actions={
                "Pick Ball": SelectEntityActionMask(
                    # Once every ball is picked there is nothing left to select: no actor.
                    actor_ids=[] if all_picked else [player_id],
                    actee_ids=np.flatnonzero(~self.selected).tolist(),
                )
            },
            reward=reward,
            done=done,
        )
