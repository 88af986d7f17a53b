"""Conveyor: each item shows its kind once, when it arrives; it is sorted later, when nothing shows it.

Game: ``2 * n_items`` steps. An ``Item`` arrives at each of the first ``n_items`` steps (ids 1, 2, ...). On
its arrival step its features name its kind (``kind_a`` or ``kind_b``, drawn uniformly, with ``new`` 1);
at every later step all three features are 0. Each step lists the row's items in a fresh random order,
so once an item has arrived neither its features nor its place tell it from the others: only its id does.
Over the last ``n_items`` steps one item a step, drawn uniformly from those still on the belt, is sorted:
it is the one actor of ``sort`` (``keep`` or ``discard``) and leaves the belt. The episode ends (terminal)
when the last item is sorted.

Reward: ``1 / n_items`` for each item of kind a kept and each item of kind b discarded (1 at best).

Memory bound: at a sorting step no kind is shown and the items are alike, so a feed-forward policy's
choice does not depend on the sorted item's kind, and its expected return is exactly 0.5. A state per
row does not tell the items apart either (it adds the same vector to every item; it can only count the
kinds still on the belt). A policy that keeps a state per entity id (``model.memory.per_entity``)
remembers each item's kind from its arrival and scores 1.
"""
from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np

from entmachin.env.action import Action, ActionSpace, CategoricalAction, CategoricalActionMask, CategoricalActionSpace
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import check_choice, check_int, expect_action_type, expect_one_choice


class Conveyor(Environment):
    """Remember each item's kind from its arrival; sort the items later, in a random order.

    Args:
        n_items: items per episode (>= 1); the episode lasts ``2 * n_items`` steps.

    Shape:
        ``Item`` ``[n_on_belt, 3]`` (``kind_a``, ``kind_b``, ``new``).
    """

    def __init__(self, n_items: int = 4) -> None:
        self.n_items = check_int("Conveyor", "n_items", n_items, 1)
        self.rng = np.random.default_rng()
        self.step = 0
        self.kinds = np.zeros(self.n_items, dtype=np.int64)  # 0: kind a (keep), 1: kind b (discard)
        self.belt: List[int] = []  # ids on the belt
        self.sorted_now = 0  # the id sorted at this step (0: none)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Item": Entity(["kind_a", "kind_b", "new"])})

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {"sort": CategoricalActionSpace(["keep", "discard"])}

    def reset(self) -> Observation:
        self.step = 0
        self.kinds = self.rng.integers(2, size=self.n_items)
        self.belt = [1]
        return self._observe(0.0, False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        given = actions.get("sort")
        if given is not None or self.sorted_now:
            given = expect_action_type("Conveyor", "sort", given, CategoricalAction)
        reward = 0.0
        if self.sorted_now:
            expect_one_choice("Conveyor", "sort", given, self.sorted_now)
            choice = check_choice("Conveyor", "sort", given.indices[0], 2)
            reward = 1.0 / self.n_items if choice == self.kinds[self.sorted_now - 1] else 0.0
            self.belt.remove(self.sorted_now)
        elif given is not None and len(given.actors):
            raise ValueError(f"Conveyor.act: actions['sort'] has actors {list(given.actors)}, but no item is sorted "
                             f"at step {self.step}")
        self.step += 1
        if self.step < self.n_items:
            self.belt.append(self.step + 1)
        return self._observe(reward, self.step == 2 * self.n_items)

    def _observe(self, reward: float, done: bool) -> Observation:
        order = [int(i) for i in self.rng.permutation(self.belt)] if self.belt else []
        features = np.zeros((len(order), 3), dtype=np.float32)  # [n_on_belt, 3]
        arrived = self.step + 1 if self.step < self.n_items else 0
        for k, item in enumerate(order):
            if item == arrived:
                features[k, self.kinds[item - 1]] = 1.0
                features[k, 2] = 1.0
        sorting = self.step >= self.n_items and not done
        self.sorted_now = int(self.rng.choice(self.belt)) if sorting else 0
        return Observation(
            features={"Item": features}, ids={"Item": order},
            actions={"sort": CategoricalActionMask(actor_ids=[self.sorted_now] if sorting else [])},
            reward=reward, done=done,
        )
