"""Synthetic environments for model tests: every kind of entity, action, mask and visibility, and
``Fleet``, whose actors steer (continuous values) and pick (a choice) at once."""
from typing import List

import numpy as np

from entmachin.env import (
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    Environment,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    batch_obs,
    to_state,
)

OBS_SPACE = ObsSpace(
    global_features=["t"],
    entities={"Unit": Entity(["x", "y", "hp"]), "Tree": Entity(["x", "y"]), "Flag": Entity([])},
)
ACTION_SPACE = {
    "move": CategoricalActionSpace(["n", "e", "s", "w"]),
    "attack": SelectEntityActionSpace(),
    "mode": GlobalCategoricalActionSpace(["calm", "angry", "asleep"]),
}


def zoo_observation(rng: np.random.Generator, max_units: int = 4, max_trees: int = 4, visibility: bool = True,
                    empty: bool = False) -> Observation:
    """One random observation; ``empty`` gives a row with no entities at all."""
    n_u = 0 if empty else int(rng.integers(0, max_units + 1))
    n_t = 0 if empty else int(rng.integers(0, max_trees + 1))
    n_f = 0 if empty else int(rng.integers(0, 2))
    units = rng.normal(size=(n_u, 3)).astype(np.float32) * 3
    trees = rng.integers(-3, 4, size=(n_t, 2)).astype(np.float32)
    move_mask = rng.random((n_u, 4)) < 0.6
    move_mask[np.arange(n_u), rng.integers(0, 4, n_u)] = True
    actions = {
        "move": CategoricalActionMask(actor_types=["Unit"], mask=move_mask),
        "mode": GlobalCategoricalActionMask(mask=np.array([True, rng.random() < 0.5, True])),
    }
    if n_t and n_u:
        attack = rng.random((n_u, n_t + n_f)) < 0.5
        attack[np.arange(n_u), rng.integers(0, n_t + n_f, n_u)] = True
        actions["attack"] = SelectEntityActionMask(actor_types=["Unit"], actee_types=["Tree", "Flag"], mask=attack)
    else:
        actions["attack"] = SelectEntityActionMask(actor_types=[], actee_types=["Tree"])
    visible = {}
    if visibility:
        visible = {"Tree": rng.random(n_t) < 0.7}
    return Observation(
        features={"Unit": units, "Tree": trees, "Flag": np.zeros((n_f, 0), np.float32)},
        global_features=np.array([rng.integers(0, 10)], dtype=np.float32),
        actions=actions,
        visible=visible,
        done=False,
        reward=0.0,
    )


def zoo_observations(seed: int, n: int, **kwargs) -> List[Observation]:
    rng = np.random.default_rng(seed)
    return [zoo_observation(rng, **kwargs) for _ in range(n)]


def zoo_state(observations: List[Observation], action_space=None) -> dict:
    """The canonical state of a list of zoo observations (one row each).

    ``action_space`` may be a subset of ``ACTION_SPACE`` (its observations' other masks are dropped).
    """
    action_space = ACTION_SPACE if action_space is None else action_space
    return to_state(batch_obs(observations, OBS_SPACE, action_space), action_space)


NO_GLOBAL_ACTIONS = {k: v for k, v in ACTION_SPACE.items() if k != "mode"}


class Fleet(Environment):
    """Boats (1-3) that each steer and pick a flag; a global wind setting; rewards keep steer near 0.5."""

    def obs_space(self):
        return ObsSpace(global_features=["t"], entities={"Boat": Entity(["x", "y"])})

    def action_space(self):
        return {"steer": ContinuousActionSpace(low=[-1.0, 0.0], high=[1.0, 2.0], names=["turn", "speed"]),
                "wind": GlobalContinuousActionSpace(0.0, 1.0),
                "flag": CategoricalActionSpace(["red", "blue"])}

    def reset(self):
        self.n, self.t = int(self.rng.integers(1, 4)), 0
        self.x = self.rng.normal(size=(self.n, 2)).astype(np.float32)
        return self._obs(0.0)

    def _obs(self, reward):
        ids = [f"boat{i}" for i in range(self.n)]
        narrow = np.tile(np.array([[-0.5, 0.0]], np.float32), (self.n, 1))
        return Observation(
            features={"Boat": self.x}, ids={"Boat": ids}, global_features=[self.t],
            actions={"steer": ContinuousActionMask(actor_ids=ids, low=narrow, high=narrow + [1.5, 2.0]),
                     "wind": GlobalContinuousActionMask(), "flag": CategoricalActionMask(actor_ids=ids)},
            done=self.t >= 4, reward=reward)

    def act(self, actions):
        self.t += 1
        return self._obs(float(-np.abs(actions["steer"]["turn"] - 0.5).mean()))
