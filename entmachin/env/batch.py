"""``batch_obs``: many ``Observation``s -> one ``VecObs`` built from flat arrays."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from entmachin.env.action import (
    ActionSpace,
    CONTINUOUS_SPACES,
    GLOBAL_MASKS,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    SelectEntityActionSpace,
)
from entmachin.env.common import GLOBAL_ENTITY, ActionName, EntityName
from entmachin.env.environment import Observation, ObsSpace
from entmachin.env.multi_agent import RESULTS
from entmachin.env.vec_env import (
    Metric,
    VecActionMask,
    VecCategoricalActionMask,
    VecContinuousActionMask,
    VecObs,
    VecSelectEntityActionMask,
    has_global_entity,
)
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayF32, RaggedArrayI64

_EMPTY_I64 = np.zeros(0, dtype=np.int64)


def _ragged(parts: List[np.ndarray], lengths: List[int], width: int, dtype: type, cls: type, where: str):
    flat = np.concatenate(parts) if parts else np.zeros((0, width), dtype=dtype)  # [n_items, width]
    if flat.ndim != 2 or flat.shape[1] != width:
        raise ValueError(f"{where}: expected items of width {width}, got an array of shape {flat.shape}")
    # concatenate made a C-contiguous copy of its own: the ragged array takes it as it is.
    return cls._wrap(flat if flat.dtype == dtype else flat.astype(dtype), np.array(lengths, dtype=np.int64))


def _as_2d(values, width: int, dtype: type, where: str) -> np.ndarray:
    arr = values if isinstance(values, np.ndarray) and values.dtype == dtype else np.asarray(values, dtype=dtype)
    if arr.ndim != 2:
        arr = arr.reshape(-1, width) if arr.size or width else np.zeros((len(values), width), dtype)
    if arr.shape[1] != width:
        raise ValueError(f"{where} has shape {arr.shape}; expected (n, {width})")
    return arr


def batch_obs(
    obs: List[Observation], obs_space: ObsSpace, action_space: Mapping[ActionName, ActionSpace], *, first_row: int = 0
) -> VecObs:
    """Batch observations into a ``VecObs`` (one row each), in ``obs_space``'s layout.

    Entity types missing from an observation become zero-length sequences; masks are filled
    with True where an observation gives none.

    Args:
        obs: the observations, one per row (an empty list gives a ``VecObs`` of no rows).
        obs_space: the layout: entity types and features in order (an environment's, or the observation
            filter in use).
        action_space: the environment's actions by name; every action gets a mask, with no actors in rows
            whose observation lacks it.
        first_row: the number error messages give the first observation ("row 3: features['Unit'] has
            shape ...").

    Raises:
        ValueError: features, global features or a mask of the wrong shape, or a mask naming entity ids or
            types the observation lacks, naming the row.
        TypeError: an action space of an unknown kind.
    """
    n = len(obs)
    features: Dict[EntityName, RaggedArrayF32] = {}
    counts = np.zeros(n, dtype=np.int64)  # entities per row, for global actor indices
    for etype, entity in obs_space.entities.items():
        width = len(entity.features)
        parts, lengths = [], [0] * n
        for i, o in enumerate(obs):
            feats = o.features.get(etype)
            if feats is None:
                continue
            arr = _as_2d(feats, width, np.float32, f"row {first_row + i}: features['{etype}']")
            parts.append(arr)
            lengths[i] = arr.shape[0]
        features[etype] = _ragged(parts, lengths, width, np.float32, RaggedArrayF32, f"features['{etype}']")
        counts += features[etype].size1()
    if has_global_entity(obs_space, action_space):
        width = len(obs_space.global_features)
        rows = [np.asarray(o.global_features, dtype=np.float32).reshape(1, -1) if width else np.zeros((1, 0), np.float32)
                for o in obs]  # [1, n_global_features] each
        for i, row in enumerate(rows):
            if row.shape[1] != width:
                raise ValueError(
                    f"row {first_row + i}: global_features has {row.shape[1]} values; "
                    f"ObsSpace.global_features declares {width}"
                )
        features[GLOBAL_ENTITY] = _ragged(rows, [1] * n, width, np.float32, RaggedArrayF32, "global_features")

    visible: Dict[EntityName, RaggedArrayBool] = {}
    for etype in {etype for o in obs for etype in o.visible}:
        lengths = features[etype].size1() if etype in features else np.zeros(n, np.int64)
        parts = [
            np.asarray(o.visible[etype], dtype=np.bool_).reshape(-1, 1) if etype in o.visible
            else np.ones((lengths[i], 1), dtype=np.bool_)
            for i, o in enumerate(obs)
        ]
        visible[etype] = _ragged(parts, list(lengths), 1, np.bool_, RaggedArrayBool, f"visible['{etype}']")

    action_masks: Dict[ActionName, VecActionMask] = {
        name: _batch_mask(obs, obs_space, name, space, counts, first_row) for name, space in action_space.items()
    }

    metrics: Dict[str, Metric] = {}
    for o in obs:
        for name, value in o.metrics.items():
            metrics.setdefault(name, Metric()).push(value)
    return VecObs(
        features=features,
        visible=visible,
        action_masks=action_masks,
        reward=np.array([o.reward for o in obs], dtype=np.float32),
        done=np.array([o.done for o in obs], dtype=np.bool_),
        metrics=metrics,
        truncated=np.array([o.truncated for o in obs], dtype=np.bool_),
        result=np.array([RESULTS[o.result] if o.done and o.result is not None else np.nan for o in obs], np.float32),
        ids=[o.ids for o in obs],
    )


def _batch_mask(
    obs: List[Observation], obs_space: ObsSpace, name: str, space: ActionSpace, counts: np.ndarray, first_row: int
) -> VecActionMask:
    actors: List[np.ndarray] = []
    masks: List[Optional[np.ndarray]] = []
    if isinstance(space, (CategoricalActionSpace, GlobalCategoricalActionSpace)):
        width = len(space.index_to_label)
        for i, o in enumerate(obs):
            amask = o.actions.get(name)
            if amask is None:
                actors.append(_EMPTY_I64)
                masks.append(None)
                continue
            idx = _actor_index(o, amask, name, obs_space, counts[i])
            actors.append(idx)
            m = amask.mask
            if m is not None:
                m = _per_actor(m, len(idx), width, np.bool_, f"row {first_row + i}: actions['{name}'].mask", "n_choices")
            masks.append(m)
        return VecCategoricalActionMask(
            _ragged([a.reshape(-1, 1) for a in actors], [len(a) for a in actors], 1, np.int64, RaggedArrayI64, name),
            _merge_masks(masks, [len(a) for a in actors], width, name),
        )
    if isinstance(space, SelectEntityActionSpace):
        actees: List[np.ndarray] = []
        for i, o in enumerate(obs):
            amask = o.actions.get(name)
            a = _EMPTY_I64 if amask is None else o._actor_indices(name, obs_space)
            e = _EMPTY_I64 if amask is None or len(a) == 0 else o._actee_indices(name, obs_space)
            actors.append(a)
            actees.append(e)
            m = None if amask is None or len(a) == 0 else amask.mask
            if m is not None:
                m = np.asarray(m, dtype=np.bool_)
                if m.shape != (len(a), len(e)):
                    raise ValueError(
                        f"row {first_row + i}: actions['{name}'].mask has shape {m.shape}; expected "
                        f"(n_actors, n_actees) = ({len(a)}, {len(e)})"
                    )
                m = m.reshape(-1, 1)
            masks.append(m)
        return VecSelectEntityActionMask(
            _ragged([a.reshape(-1, 1) for a in actors], [len(a) for a in actors], 1, np.int64, RaggedArrayI64, name),
            _ragged([e.reshape(-1, 1) for e in actees], [len(e) for e in actees], 1, np.int64, RaggedArrayI64, name),
            _merge_masks(masks, [len(a) * len(e) for a, e in zip(actors, actees)], 1, name),
        )
    if isinstance(space, CONTINUOUS_SPACES):
        return _batch_bounds(obs, obs_space, name, space, counts, first_row)
    raise TypeError(f"action '{name}': unsupported action space {type(space).__name__}")


def _actor_index(o: Observation, amask: Any, name: str, obs_space: ObsSpace, n_entities: int) -> np.ndarray:
    """Entity indices of the actors of one observation's action: the ``__global__`` entity (after
    every real one) for a global mask."""
    if isinstance(amask, GLOBAL_MASKS):
        return np.array([n_entities], dtype=np.int64)
    return o._actor_indices(name, obs_space)


def _per_actor(value: Any, n_actors: int, width: int, dtype: type, field: str, columns: str) -> np.ndarray:
    """A mask's per-actor rows as ``(n_actors, width)``; the wrong number of rows is refused."""
    arr = _as_2d(value, width, dtype, field)
    if arr.shape[0] != n_actors:
        raise ValueError(f"{field} has shape {arr.shape}; expected (n_actors, {columns}) = ({n_actors}, {width})")
    return arr


def _batch_bounds(
    obs: List[Observation], obs_space: ObsSpace, name: str, space: ActionSpace, counts: np.ndarray, first_row: int
) -> VecContinuousActionMask:
    """A continuous action's actors and every actor's bounds (the space's where an observation
    does not narrow them: batches of several workers then join without knowing the space);
    whether a mask widens the space is ``ValidatingEnv``'s check and the model's."""
    width = len(space)
    actors: List[np.ndarray] = []
    bounds: Dict[str, List[Optional[np.ndarray]]] = {"low": [], "high": []}
    for i, o in enumerate(obs):
        amask = o.actions.get(name)
        idx = _EMPTY_I64 if amask is None else _actor_index(o, amask, name, obs_space, counts[i])
        actors.append(idx)
        for side in ("low", "high"):
            b = None if amask is None else getattr(amask, side, None)
            if b is not None:
                b = _per_actor(b, len(idx), width, np.float32, f"row {first_row + i}: actions['{name}'].{side}",
                               "n_values")
            bounds[side].append(b)
    lengths = [len(a) for a in actors]
    merged = {}
    for side, default in (("low", space.low), ("high", space.high)):
        parts = [b if b is not None else np.broadcast_to(default, (k, width)) for b, k in zip(bounds[side], lengths)]
        merged[side] = _ragged(parts, lengths, width, np.float32, RaggedArrayF32, f"actions['{name}'].{side}")
    return VecContinuousActionMask(
        _ragged([a.reshape(-1, 1) for a in actors], lengths, 1, np.int64, RaggedArrayI64, name),
        merged["low"], merged["high"],
    )


def _merge_masks(
    masks: List[Optional[np.ndarray]], lengths: List[int], width: int, name: str
) -> Optional[RaggedArrayBool]:
    if all(m is None for m in masks):
        return None
    parts = [m if m is not None else np.ones((k, width), dtype=np.bool_) for m, k in zip(masks, lengths)]
    return _ragged(parts, lengths, width, np.bool_, RaggedArrayBool, f"actions['{name}'].mask")


def empty_vec_obs(obs_space: ObsSpace, action_space: Mapping[ActionName, ActionSpace]) -> VecObs:
    """A ``VecObs`` with zero rows, ready for ``extend``."""
    return batch_obs([], obs_space, action_space)
