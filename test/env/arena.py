"""``Arena``: a small seeded game of several players exercising the multi-agent API.

Two or three seats (``seats`` argument, or drawn per instance from the seed when ``None``).
Each seat has 0-3 ``Unit``s of its own and sees the others' as ``Foe``s (partial view: each
``Foe`` is visible with probability 0.8). ``move`` (categorical, random masks) and ``hit``
(select-entity over foes) are taken by a seat's units; with ``turns=True`` only one seat (in
turn) has actors. A seat whose units are gone (drawn at random) is knocked out and has no actors.
Games last ``length`` steps; with ``state_results`` the first seat wins, else the higher return
wins. Every action received is recorded in ``received``.
"""
from typing import Dict, List, Optional

import numpy as np

from entmachin.env import (
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    MultiAgentEnvironment,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)


class Arena(MultiAgentEnvironment):
    def __init__(self, seats: Optional[int] = 2, length: int = 3, turns: bool = False, state_results: bool = False):
        self.rng = np.random.default_rng()
        self.n_seats, self.length, self.turns, self.state_results = seats, length, turns, state_results
        self._seats: Optional[List[str]] = None if seats is None else [f"p{k}" for k in range(seats)]
        self.t = 0
        self.received: List[Dict] = []

    def seed(self, seed):
        super().seed(seed)
        if self.n_seats is None:
            self._seats = [f"p{k}" for k in range(2 + int(np.random.default_rng(seed).integers(0, 2)))]

    def seats(self):
        if self._seats is None:
            self._seats = ["p0", "p1"]
        return self._seats

    def obs_space(self):
        return ObsSpace(global_features=["t"], entities={"Unit": Entity(["x", "hp"]), "Foe": Entity(["x"])})

    def action_space(self):
        return {"move": CategoricalActionSpace(["left", "stay", "right"]), "hit": SelectEntityActionSpace()}

    def reset(self):
        self.t = 0
        self.units = {s: int(self.rng.integers(1, 4)) for s in self.seats()}
        return self._observe()

    def act(self, actions):
        self.received.append(actions)
        self.t += 1
        for s in self.seats():
            if self.rng.random() < 0.2:
                self.units[s] = 0
        return self._observe()

    def _observe(self):
        seats = self.seats()
        done = self.t >= self.length or sum(n > 0 for n in self.units.values()) <= 1
        mover = seats[self.t % len(seats)]
        out = {}
        for k, s in enumerate(seats):
            n, foes = self.units[s], sum(self.units[o] for o in seats if o != s)
            acts = n > 0 and foes > 0 and not done and (not self.turns or s == mover)
            ids = [(s, i) for i in range(n)]
            actions = {}
            if acts:
                mask = np.ones((n, 3), dtype=bool)
                mask[:, 0] = self.rng.random(n) < 0.5
                actions = {"move": CategoricalActionMask(actor_ids=ids, mask=mask),
                           "hit": SelectEntityActionMask(actor_ids=ids, actee_types=["Foe"])}
            out[s] = Observation(
                entities={"Unit": (self.rng.random((n, 2)).astype(np.float32), ids),
                          "Foe": (np.full((foes, 1), k, np.float32), [("foe", i) for i in range(foes)])},
                visible={"Foe": self.rng.random(foes) < 0.8},
                global_features=[self.t],
                actions=actions,
                done=done,
                reward=float(self.rng.integers(-1, 2)),
                metrics={"units": float(n)},
                result=(("win" if k == 0 else "loss") if self.state_results and done else None),
            )
        return out
