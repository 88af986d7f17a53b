"""The checks an exported policy runs on a batch of observations before it acts (``entmachin.deploy``):
entity types, feature counts, actions, mask widths and continuous bounds against the spaces it was
trained on. numpy and the environment layer only, as ``entmachin.deploy``."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from entmachin.env.action import CONTINUOUS_SPACES, ActionSpace, SelectEntityActionSpace
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.env.vec_env import VecCategoricalActionMask, VecContinuousActionMask, VecObs, VecSelectEntityActionMask

__all__ = ["check_batch"]


def check_batch(vec: Any, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], where: str) -> None:
    """The batch's entity types, feature counts, actions, mask widths and continuous bounds against the spaces.

    Raises:
        TypeError / ValueError: naming what does not fit (``where`` starts every message).
    """
    if not isinstance(vec, VecObs):
        raise TypeError(f"{where}: expected a VecObs, got {type(vec).__name__}")
    known = set(obs_space.entities) | {GLOBAL_ENTITY}
    for t, ragged in vec.features.items():
        if t not in known:
            raise ValueError(f"{where}: unknown entity type {t!r}; the policy knows "
                             f"{list(obs_space.entities)}")
        width = (len(obs_space.global_features) if t == GLOBAL_ENTITY
                 else len(obs_space.entities[t].features))
        if ragged.size2() != width:
            raise ValueError(f"{where}: entity type {t!r} has {ragged.size2()} features; the policy was "
                             f"trained on {width}")
    if obs_space.global_features and GLOBAL_ENTITY not in vec.features:
        raise ValueError(f"{where}: no global features; the policy takes {obs_space.global_features}")
    for name, mask in vec.action_masks.items():
        space = action_space.get(name)
        if space is None:
            raise ValueError(f"{where}: unknown action {name!r}; the policy has {list(action_space)}")
        expected = VecSelectEntityActionMask if isinstance(space, SelectEntityActionSpace) else \
            VecContinuousActionMask if isinstance(space, CONTINUOUS_SPACES) else VecCategoricalActionMask
        if not isinstance(mask, expected):
            raise ValueError(f"{where}: action {name!r} has a {type(mask).__name__}; the policy's action is "
                             f"a {type(space).__name__}, whose mask is a {expected.__name__}")
        if isinstance(mask, VecCategoricalActionMask) and mask.mask is not None \
                and mask.mask.size2() != len(space.index_to_label):
            raise ValueError(f"{where}: the mask of action {name!r} has {mask.mask.size2()} choices per actor; "
                             f"the policy's action has {len(space.index_to_label)}")
        if isinstance(mask, VecContinuousActionMask):
            for side in ("low", "high"):
                bounds = getattr(mask, side)
                if bounds is not None and bounds.size2() != len(space):
                    raise ValueError(f"{where}: the {side} bounds of action {name!r} have {bounds.size2()} values "
                                     f"per actor; the policy's action has {len(space)} ({space.names})")
    missing = [name for name in action_space if name not in vec.action_masks]
    if missing:
        raise ValueError(f"{where}: no mask for action {missing[0]!r}")
    _check_bounds(vec, action_space, where)


def _check_bounds(vec: VecObs, action_space: Mapping[str, ActionSpace], where: str) -> None:
    """Each continuous mask's bounds: ordered and within the space's (a mask narrows, never widens).

    Raises:
        ValueError: naming the action, the value and the bounds.
    """
    for name, space in action_space.items():
        mask = vec.action_masks.get(name)
        if not isinstance(space, CONTINUOUS_SPACES) or not isinstance(mask, VecContinuousActionMask) \
                or mask.low is None:
            continue
        low, high = mask.bounds(space)  # [n_actors, n_values] each
        bad = ~((space.low <= low) & (low <= high) & (high <= space.high))  # NaN too
        if bad.any():
            k, j = (int(i[0]) for i in np.nonzero(bad))
            raise ValueError(f"{where}: action {name!r}, actor {k}, value {space.names[j]!r}: bounds "
                             f"[{low[k, j]}, {high[k, j]}] are not ordered within the space's "
                             f"[{space.low[j]}, {space.high[j]}]")
