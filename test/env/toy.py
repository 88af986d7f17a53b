"""A small deterministic-by-seed environment exercising every feature of the env API."""
import numpy as np

from entmachin.env import (
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)


class Toy(Environment):
    """Random numbers of A (actors) and B (targets); episodes last ``length`` steps (truncated)."""

    def __init__(self, length: int = 3, max_a: int = 4):
        self.rng = np.random.default_rng()
        self.length = length
        self.max_a = max_a
        self.t = 0
        self.received = []

    def obs_space(self):
        return ObsSpace(global_features=["t"], entities={"A": Entity(["x", "y"]), "B": Entity(["z"])})

    def action_space(self):
        return {
            "move": CategoricalActionSpace(["left", "right"]),
            "pick": SelectEntityActionSpace(),
            "mode": GlobalCategoricalActionSpace(["a", "b", "c"]),
        }

    def reset(self):
        self.t = 0
        return self._observe()

    def act(self, actions):
        self.received.append(actions)
        self.t += 1
        return self._observe()

    def _observe(self):
        n_a = int(self.rng.integers(0, self.max_a))
        n_b = int(self.rng.integers(1, 3))
        a_mask = np.ones((n_a, 2), dtype=bool)
        a_mask[:, 1] = self.rng.random(n_a) < 0.5
        return Observation(
            entities={
                "A": (self.rng.random((n_a, 2)).astype(np.float32), [("A", i) for i in range(n_a)]),
                "B": (np.full((n_b, 1), self.t, dtype=np.float32), [("B", i) for i in range(n_b)]),
            },
            global_features=np.array([self.t], dtype=np.float32),
            actions={
                "move": CategoricalActionMask(actor_types=["A"], mask=a_mask),
                "pick": SelectEntityActionMask(actor_types=["A"], actee_types=["B"]),
                "mode": GlobalCategoricalActionMask(mask=np.array([True, False, True])),
            },
            done=self.t >= self.length,
            truncated=self.t >= self.length,
            reward=float(self.t),
            metrics={"t": float(self.t)},
        )
