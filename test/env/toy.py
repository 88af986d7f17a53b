"""Small deterministic-by-seed environments: ``Toy`` exercises every discrete feature of the env
API, ``Driving`` continuous actions (narrowed per actor, global, beside a categorical one)."""
from typing import Dict, List, Mapping, Optional

import numpy as np

from entmachin.env import (
    Action,
    ActionSpace,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    Environment,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
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


class Driving(Environment):
    """0-3 cars steer and accelerate ("drive": continuous, 2 values per car), the team boosts
    ("boost": global continuous, 1 value) and every car may honk ("horn": categorical).

    ``narrow`` says when the observation narrows the bounds: ``"always"``, ``"never"`` or
    ``"sometimes"`` (a coin per step and action). ``act`` records what it receives in
    ``received`` and reports ``metrics["ok"]``: 1.0 when every continuous action it got was a
    float32 action of the right shape for the last observation's actors, within their bounds.
    Episodes last ``length`` steps.
    """

    DRIVE = ContinuousActionSpace(low=[-1.0, 0.0], high=[1.0, 2.0], names=["steer", "gas"])
    BOOST = GlobalContinuousActionSpace(low=0.0, high=1.0)

    def __init__(self, narrow: str = "always", length: int = 3, max_cars: int = 4) -> None:
        if narrow not in ("always", "never", "sometimes"):
            raise ValueError(f"Driving: narrow must be 'always', 'never' or 'sometimes', got {narrow!r}")
        self.rng = np.random.default_rng()
        self.narrow, self.length, self.max_cars = narrow, length, max_cars
        self.received: List[Mapping[str, Action]] = []
        self.t = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["t"], entities={"Car": Entity(["x", "y"]), "Cone": Entity(["d"])})

    def action_space(self) -> Dict[str, ActionSpace]:
        return {
            "drive": ContinuousActionSpace(low=self.DRIVE.low, high=self.DRIVE.high, names=self.DRIVE.names),
            "boost": GlobalContinuousActionSpace(low=self.BOOST.low, high=self.BOOST.high),
            "horn": CategoricalActionSpace(["quiet", "loud"]),
        }

    def reset(self) -> Observation:
        self.t = 0
        return self._observe(ok=1.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.received.append(actions)
        self.t += 1
        return self._observe(ok=float(self._fits(actions)))

    def _fits(self, actions: Mapping[str, Action]) -> bool:
        drive, boost = actions.get("drive"), actions.get("boost")
        if not isinstance(drive, ContinuousAction) or not isinstance(boost, GlobalContinuousAction):
            return False
        values = drive.values  # [n_cars, 2]
        return (values.dtype == np.float32 and values.shape == (len(self.cars), 2)
                and list(drive.actors) == self.cars and drive.names == ["steer", "gas"]
                and bool(((values >= self.drive_low) & (values <= self.drive_high)).all())
                and boost.values.dtype == np.float32 and boost.values.shape == (1,)
                and bool(self.boost_low <= boost.values[0] <= self.boost_high))

    def _narrows(self) -> bool:
        return self.narrow == "always" or (self.narrow == "sometimes" and bool(self.rng.random() < 0.5))

    def _observe(self, ok: float) -> Observation:
        n_cars = int(self.rng.integers(0, self.max_cars))
        self.cars = [100 + k for k in range(n_cars)]
        space = self.DRIVE
        drive_low: Optional[np.ndarray] = None
        drive_high: Optional[np.ndarray] = None
        if self._narrows():
            span = space.high - space.low  # [2]
            a, b = self.rng.random((2, n_cars, 2))  # [n_cars, 2] each
            drive_low = space.low + span * np.minimum(a, b)  # [n_cars, 2], float64
            drive_high = space.low + span * np.maximum(a, b)
        # What the values must fit: the mask's bounds as batch_obs carries them (float32), or the space's.
        self.drive_low = space.low if drive_low is None else drive_low.astype(np.float32)
        self.drive_high = space.high if drive_high is None else drive_high.astype(np.float32)
        boost = GlobalContinuousActionMask()
        self.boost_low, self.boost_high = np.float32(0.0), np.float32(1.0)
        if self._narrows():
            self.boost_low, self.boost_high = np.float32(0.25), np.float32(0.5)
            boost = GlobalContinuousActionMask(low=[0.25], high=np.array([[0.5]], np.float32))
        return Observation(
            global_features=np.array([self.t], dtype=np.float32),
            features={
                "Car": self.rng.random((n_cars, 2)).astype(np.float32),  # [n_cars, 2]
                "Cone": np.ones((2, 1), np.float32),  # [2, 1]
            },
            ids={"Car": self.cars},
            actions={
                "drive": ContinuousActionMask(actor_ids=self.cars, low=drive_low, high=drive_high),
                "boost": boost,
                "horn": CategoricalActionMask(actor_types=["Car"]),
            },
            done=self.t >= self.length,
            reward=float(self.t),
            metrics={"ok": ok},
        )
