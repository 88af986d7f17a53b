"""Refusing non-finite observations and rewards as they leave a ``VecEnv``.

One NaN entity feature that reaches a model's running input normalisation turns its mean into
NaN for the rest of the run; an infinite reward does the same to value targets. ``EnvList``,
``ParallelEnvList`` (in its workers) and ``GymnasiumVecEnv`` therefore check every batch they
return, final observations included, with one vectorised test per entity type on the flat
arrays, and raise ``NonFiniteObservationError`` naming the environment, the entity type and the
feature, so that a run stops at the cause instead of limping on.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.env.vec_env import VecObs
from entmachin.ragged.array import RaggedArrayF32

_HOW_TO_SKIP = "pass check_finite=False (in a run config: env.check_finite: false) to turn this check off"


class NonFiniteObservationError(ValueError):
    """An environment returned NaN or infinity in an observation's features or in its reward. ``message``
    (the error's text) names the environment, the value, the entity type and feature (or the reward) and how to
    turn the check off.

    Attributes:
        env_index: the environment (in the ``VecEnv``'s numbering).
        entity_type: the entity type (``"__global__"`` for global features), or ``None`` for
            the reward.
        feature: the feature's name, or ``None`` for the reward.
    """

    def __init__(self, message: str, env_index: int, entity_type: Optional[str], feature: Optional[str]) -> None:
        super().__init__(message)
        self.env_index = env_index
        self.entity_type = entity_type
        self.feature = feature

    def __reduce__(self) -> Tuple[Any, ...]:  # keeps the attributes through pickle
        return type(self), (self.args[0], self.env_index, self.entity_type, self.feature)


def feature_names(obs_space: ObsSpace, entity_type: str) -> Sequence[str]:
    """The feature names of ``entity_type`` (``"__global__"``: the global features)."""
    if entity_type == GLOBAL_ENTITY:
        return obs_space.global_features
    entity = obs_space.entities.get(entity_type)
    return entity.features if entity is not None else ()


def refuse_non_finite(
    vec: VecObs, obs_space: ObsSpace, rows: Sequence[int], who: str, final: bool = False, first_index: int = 0
) -> None:
    """Raises ``NonFiniteObservationError`` if a feature or reward of ``vec`` is NaN or infinite.

    Args:
        vec: the batch, laid out as ``obs_space`` (the observation filter in use).
        obs_space: names the features in messages.
        rows: ``[len(vec)]``, the environment of each row, counted from ``first_index`` (read
            only to name the environment in an error).
        who: the ``VecEnv`` in messages, e.g. ``"EnvList"``.
        final: the rows are final observations of ended episodes (said in the message).
        first_index: added to ``rows`` (a ``ParallelEnvList`` worker's first environment).
    """
    where = "final observation" if final else "observation"
    for etype, feats in vec.features.items():
        flat = feats.as_array()  # [n_items, n_features]
        if not np.isfinite(flat).all():
            _raise_feature(feats, flat, obs_space, etype, rows, first_index, who, where)
    reward = vec.reward  # [n_rows]
    if not np.isfinite(reward).all():
        row = int(np.flatnonzero(~np.isfinite(reward))[0])
        env = first_index + int(rows[row])
        raise NonFiniteObservationError(
            f"{who}: environment {env} returned reward {reward[row]} with its {where}; rewards must be "
            f"finite (a NaN or infinite reward poisons every value target); fix the environment, or "
            f"{_HOW_TO_SKIP}",
            env, None, None,
        )


def _raise_feature(feats: RaggedArrayF32, flat: np.ndarray, obs_space: ObsSpace, etype: str,
                   rows: Sequence[int], first_index: int, who: str, where: str) -> None:
    item, column = (int(k) for k in np.argwhere(~np.isfinite(flat))[0])
    ends = np.cumsum(feats.size1())  # [n_rows]
    row = int(np.searchsorted(ends, item, side="right"))
    position = item - int(ends[row] - feats.size1()[row])
    names = feature_names(obs_space, etype)
    feature = names[column] if column < len(names) else f"#{column}"
    what = "global_features" if etype == GLOBAL_ENTITY else f"features['{etype}'] entity {position}"
    env = first_index + int(rows[row])
    raise NonFiniteObservationError(
        f"{who}: environment {env} returned {flat[item, column]} in {what}, feature '{feature}' "
        f"(column {column}) of its {where}; observations must be finite (one NaN poisons a model's "
        f"running input statistics); fix the environment, or {_HOW_TO_SKIP}",
        env, etype, feature,
    )
