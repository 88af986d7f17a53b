"""``validate_observation``: checks one ``Observation`` against its environment's spaces.

The observation half of :mod:`entmachin.env.validator` (whose docstring lists the layouts that
are accepted where more than one is): the scalars (``done``, ``truncated``, ``reward``,
``metrics``), every entity type's features, the global features, entity ids, ``visible`` and
every action mask, each error naming the field, what was expected and what arrived. The checks
of continuous masks' bounds are :func:`entmachin.env.continuous_checks.check_mask_bounds`'s.
"""
from __future__ import annotations

import itertools
import numbers
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    ActionSpace,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousActionMask,
    ContinuousActionSpace,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName, EntityName
from entmachin.env.continuous_checks import check_mask_bounds
from entmachin.env.environment import Observation, ObsSpace

__all__ = ["validate_observation"]

_MASK_CLASS = {
    CategoricalActionSpace: CategoricalActionMask,
    SelectEntityActionSpace: SelectEntityActionMask,
    GlobalCategoricalActionSpace: GlobalCategoricalActionMask,
    ContinuousActionSpace: ContinuousActionMask,
    GlobalContinuousActionSpace: GlobalContinuousActionMask,
}


def validate_observation(
    obs: Any,
    obs_space: ObsSpace,
    action_space: Mapping[ActionName, ActionSpace],
    where: str = "observation",
) -> None:
    """Check that ``obs`` is an ``Observation`` that fits ``obs_space`` and ``action_space``.

    Args:
        obs: what an environment returned.
        obs_space: the environment's observation space.
        action_space: the environment's action spaces, by name.
        where: prefix of every error message (e.g. ``"MineSweeper.act()"``).

    Raises:
        TypeError: ``obs`` is not an ``Observation``; a value has the wrong type or dtype.
        ValueError: a value has the wrong shape, is not finite, or names an unknown entity
            type, entity id or action.
    """
    if not isinstance(obs, Observation):
        raise TypeError(f"{where}: expected an entmachin.env.Observation, got {type(obs).__name__}")
    _check_scalars(obs, where)
    counts = {etype: _check_features(obs, obs_space, etype, where) for etype in obs.features}  # None: absent
    _check_global_features(obs, obs_space, where)
    _check_ids(obs, obs_space, counts, where)
    _check_visible(obs, obs_space, counts, where)
    for name, amask in obs.actions.items():
        _check_action_mask(obs, obs_space, action_space, name, amask, where)


def _is_bool(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_))


def _check_number(value: Any, what: str, where: str) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {what} must be a real number (e.g. a float), got {type(value).__name__} {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{where}: {what} must be finite, got {value}")


def _check_scalars(obs: Observation, where: str) -> None:
    if not _is_bool(obs.done):
        raise TypeError(f"{where}: done must be a bool, got {type(obs.done).__name__} {obs.done!r}")
    if not _is_bool(obs.truncated):
        raise TypeError(f"{where}: truncated must be a bool, got {type(obs.truncated).__name__} {obs.truncated!r}")
    if obs.truncated and not obs.done:
        raise ValueError(f"{where}: truncated=True with done=False; a truncated episode has ended, set done=True too")
    _check_number(obs.reward, "reward", where)
    for name, value in obs.metrics.items():
        _check_number(value, f"metrics['{name}']", where)


def _check_features(obs: Observation, obs_space: ObsSpace, etype: EntityName, where: str) -> int:
    """Check ``obs.features[etype]`` and return its number of entities."""
    if etype not in obs_space.entities:
        raise ValueError(
            f"{where}: features has entity type '{etype}'; ObsSpace.entities has {list(obs_space.entities)}"
        )
    feats = obs.features[etype]
    if feats is None:  # an absent entity type, as batch_obs reads it
        return 0
    width = len(obs_space.entities[etype].features)
    field = f"features['{etype}']"
    declared = f"ObsSpace.entities['{etype}'] declares {width} features"
    if isinstance(feats, np.ndarray):
        if feats.dtype != np.float32:
            raise TypeError(f"{where}: {field} has dtype {feats.dtype}; expected float32 (use .astype(np.float32))")
        if feats.ndim != 2 or feats.shape[1] != width:
            raise ValueError(f"{where}: {field} has shape {feats.shape}; expected (n_entities, {width}): {declared}")
        arr = feats
    elif isinstance(feats, Sequence) and not isinstance(feats, str):
        arr = _rows_to_array(feats, width, f"{where}: {field}", declared)
    else:
        raise TypeError(
            f"{where}: {field} must be a float32 array (n_entities, {width}) or a list of rows, "
            f"got {type(feats).__name__}"
        )
    finite = np.isfinite(arr).all(axis=1)  # [n_entities]
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"{where}: {field} row {row} is not finite: {arr[row].tolist()}")
    return arr.shape[0]


def _rows_to_array(rows: Sequence[Any], width: int, field: str, declared: str) -> np.ndarray:
    """Convert a list of feature rows, naming the first row of the wrong length."""
    arr: Optional[np.ndarray] = None
    error: Any = "expected one list of numbers per entity"
    try:
        arr = np.asarray(rows, dtype=np.float32)  # [n_entities, width]
    except (TypeError, ValueError) as e:
        error = e
    if arr is not None and arr.ndim == 2 and arr.shape[1] == width:
        return arr
    if arr is not None and arr.size == 0 and len(rows) == 0:
        return arr.reshape(0, width)  # [0, width]
    for i, row in enumerate(rows):
        n = len(row) if isinstance(row, (Sequence, np.ndarray)) and not isinstance(row, str) else None
        if n != width:
            got = f"{n} features" if n is not None else f"a {type(row).__name__}"
            raise ValueError(f"{field} row {i} has {got}; {declared}")
    raise TypeError(f"{field} could not be read as float32 numbers: {error}")


def _check_global_features(obs: Observation, obs_space: ObsSpace, where: str) -> None:
    width = len(obs_space.global_features)
    try:
        glob = np.asarray(obs.global_features, dtype=np.float32)  # [n_global_features]
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: global_features could not be read as float32 numbers: {e}") from e
    if glob.shape != (width,):
        raise ValueError(
            f"{where}: global_features has shape {glob.shape}; ObsSpace.global_features declares "
            f"{width} features {obs_space.global_features}, expected shape ({width},)"
        )
    if not np.isfinite(glob).all():
        raise ValueError(f"{where}: global_features must be finite, got {glob.tolist()}")


def _check_ids(obs: Observation, obs_space: ObsSpace, counts: Mapping[EntityName, int], where: str) -> None:
    for etype, ids in obs.ids.items():
        if etype not in obs_space.entities:
            raise ValueError(
                f"{where}: ids has entity type '{etype}'; ObsSpace.entities has {list(obs_space.entities)}"
            )
        if len(ids) != counts.get(etype, 0):
            raise ValueError(
                f"{where}: ids['{etype}'] has {len(ids)} ids but features['{etype}'] has "
                f"{counts.get(etype, 0)} entities; give one id per entity"
            )
    all_ids = list(itertools.chain.from_iterable(obs.ids.values()))
    try:
        unique = set(all_ids)
    except TypeError as e:
        raise TypeError(f"{where}: entity ids must be hashable: {e}") from e
    if len(unique) != len(all_ids):
        seen: set = set()
        for duplicate in all_ids:
            if duplicate in seen:
                break
            seen.add(duplicate)
        owners = [etype for etype, ids in obs.ids.items() if duplicate in set(ids)]
        raise ValueError(
            f"{where}: entity id {duplicate!r} occurs more than once (in ids of {owners}); ids must be "
            "unique across all entity types"
        )


def _check_visible(obs: Observation, obs_space: ObsSpace, counts: Mapping[EntityName, int], where: str) -> None:
    for etype, vis in obs.visible.items():
        if etype not in obs_space.entities:
            raise ValueError(
                f"{where}: visible has entity type '{etype}'; ObsSpace.entities has {list(obs_space.entities)}"
            )
        arr = _bool_array(vis, f"{where}: visible['{etype}']")
        n = counts.get(etype, 0)
        if arr.shape not in ((n,), (n, 1)):
            raise ValueError(f"{where}: visible['{etype}'] has shape {arr.shape}; expected ({n},), one flag per entity")


def _check_action_mask(
    obs: Observation,
    obs_space: ObsSpace,
    action_space: Mapping[ActionName, ActionSpace],
    name: ActionName,
    amask: Any,
    where: str,
) -> None:
    if name not in action_space:
        raise ValueError(f"{where}: actions has unknown action '{name}'; the action space has {list(action_space)}")
    space = action_space[name]
    expected = _MASK_CLASS[type(space)]
    field = f"actions['{name}']"
    if not isinstance(amask, expected):
        raise TypeError(
            f"{where}: {field} is a {type(amask).__name__}; its {type(space).__name__} needs a {expected.__name__}"
        )
    if isinstance(amask, GlobalCategoricalActionMask):
        _check_global_mask(amask, len(space.index_to_label), f"{where}: {field}.mask")
        return
    if isinstance(amask, GlobalContinuousActionMask):
        check_mask_bounds(obs, obs_space, amask, space, None, f"{where}: {field}")
        return
    _check_entity_refs(obs, obs_space, amask.actor_ids, amask.actor_types, f"{where}: {field}", "actor")
    actors = obs._actor_indices(name, obs_space)  # [n_actors]
    if isinstance(amask, ContinuousActionMask):
        check_mask_bounds(obs, obs_space, amask, space, actors, f"{where}: {field}")
        return
    if isinstance(amask, CategoricalActionMask):
        if amask.mask is not None:
            # An empty mask (e.g. []) of any dtype is fine when nobody acts.
            mask = _bool_array(amask.mask, f"{where}: {field}.mask", allow_empty=len(actors) == 0)
            if len(actors) or mask.size:
                _check_mask_rows(obs, obs_space, mask, actors, len(space.index_to_label), "choices",
                                 f"{where}: {field}.mask")
        return
    _check_entity_refs(obs, obs_space, amask.actee_ids, amask.actee_types, f"{where}: {field}", "actee")
    if len(actors) == 0:
        return
    actees = obs._actee_indices(name, obs_space)  # [n_actees]
    if len(actees) == 0:
        raise ValueError(
            f"{where}: {field} has {len(actors)} actors but no actees, so there is nothing to select; "
            "leave the action out (or give no actors) on steps without actees"
        )
    if amask.mask is not None:
        mask = _bool_array(amask.mask, f"{where}: {field}.mask")
        _check_mask_rows(obs, obs_space, mask, actors, len(actees), "actees", f"{where}: {field}.mask")


def _check_entity_refs(
    obs: Observation,
    obs_space: ObsSpace,
    ids: Optional[Sequence[Any]],
    types: Optional[Sequence[EntityName]],
    field: str,
    role: str,
) -> None:
    """Check the ``{role}_ids`` / ``{role}_types`` of a mask refer to entities of ``obs``."""
    if types is not None:
        for etype in types:
            if etype not in obs_space.entities:
                raise ValueError(
                    f"{field}.{role}_types has '{etype}', which is not an entity type of ObsSpace.entities "
                    f"{list(obs_space.entities)}"
                )
            if obs.features.get(etype) is None:
                raise ValueError(
                    f"{field}.{role}_types has '{etype}' but the observation has no features['{etype}']; "
                    f"give an empty (0, n_features) array when there are no '{etype}' entities"
                )
    if ids is None or len(ids) == 0:
        return
    no_ids = [etype for etype in obs_space.entities if etype not in obs.ids and obs.num_entities(etype) > 0]
    if not obs.ids:
        raise ValueError(
            f"{field}.{role}_ids names entities by id but the observation has no ids; give "
            f"Observation(ids=...) for {no_ids} or use {role}_types"
        )
    id_to_index = obs.id_to_index(obs_space)
    try:
        unknown = [i for i in ids if i not in id_to_index]
    except TypeError as e:
        raise TypeError(f"{field}.{role}_ids must hold hashable entity ids: {e}") from e
    if unknown:
        hint = f"; entity types {no_ids} have no ids" if no_ids else ""
        raise ValueError(f"{field}.{role}_ids has unknown ids {unknown[:5]}; the observation's ids are {obs.ids}{hint}")


def _bool_array(mask: Any, field: str, allow_empty: bool = False) -> np.ndarray:
    try:
        arr = np.asarray(mask)
    except ValueError as e:  # ragged nested lists
        raise ValueError(f"{field} could not be read as a bool array: {e}") from e
    if allow_empty and arr.size == 0:
        return arr
    if arr.dtype != np.bool_:
        raise TypeError(f"{field} has dtype {arr.dtype}; expected bool")
    return arr


def _check_mask_rows(
    obs: Observation,
    obs_space: ObsSpace,
    mask: np.ndarray,
    actors: npt.NDArray[np.int64],
    width: int,
    what: str,
    field: str,
) -> None:
    """Check a ``(n_actors, width)`` mask and that every actor has something allowed."""
    if mask.shape != (len(actors), width):
        raise ValueError(f"{field} has shape {mask.shape}; expected (n_actors, n_{what}) = ({len(actors)}, {width})")
    allowed = mask.any(axis=1)  # [n_actors]
    if not allowed.all():
        row = int(np.flatnonzero(~allowed)[0])
        raise ValueError(
            f"{field} row {row} allows no {what} for {_describe_entity(obs, obs_space, int(actors[row]))}; "
            "every actor needs at least one allowed choice (leave out actors that cannot act)"
        )


def _check_global_mask(amask: GlobalCategoricalActionMask, n_choices: int, field: str) -> None:
    if amask.mask is None:
        return
    mask = _bool_array(amask.mask, field)
    if mask.shape not in ((n_choices,), (1, n_choices)):
        raise ValueError(f"{field} has shape {mask.shape}; expected (n_choices,) = ({n_choices},)")
    if not mask.any():
        raise ValueError(f"{field} allows no choice; a global action needs at least one allowed choice")


def _describe_entity(obs: Observation, obs_space: ObsSpace, index: int) -> str:
    etype = next(t for t, (lo, hi) in obs._type_ranges(obs_space).items() if lo <= index < hi)
    eid = obs.index_to_id(obs_space)[index]
    if eid is None:
        return f"the actor at entity index {index} (entity type '{etype}', no ids)"
    return f"actor {eid!r} (entity type '{etype}')"
