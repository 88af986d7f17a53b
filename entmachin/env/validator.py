"""``ValidatingEnv`` and ``validate_observation``: check environment output against its spaces.

Wrap an environment while writing or debugging it; every observation returned by ``reset`` and
``act`` is checked against ``obs_space()`` / ``action_space()`` and a mistake raises a
``ValueError`` or ``TypeError`` naming the entity type, action or field, what was expected and
what arrived. The checks are numpy-vectorised, cheap enough for long test runs.

Accepted layouts where more than one is allowed:

* ``visible[etype]``: bool ``(n_entities,)`` or ``(n_entities, 1)`` (``batch_obs`` flattens
  both the same way).
* ``GlobalCategoricalActionMask.mask``: bool ``(n_choices,)`` or ``(1, n_choices)``.
* Categorical masks of actions without actors: ``(0, n_choices)`` or any empty array.
* Select-entity masks of actions without actors are ignored (as ``batch_obs`` does).
* ``ContinuousActionMask.low`` / ``.high``: each optional, float ``(n_actors, n_values)`` (any
  empty array when nobody acts); ``GlobalContinuousActionMask``'s: ``(n_values,)`` or
  ``(1, n_values)``. Finite, within the space's bounds (a mask narrows them, never widens them),
  ``low <= high`` for every actor and value (a bound not given is the space's).

Example:
    >>> env = ValidatingEnv(MineSweeper())
    >>> obs = env.reset()  # raises if MineSweeper's observation is malformed
"""
from __future__ import annotations

import itertools
import numbers
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    CONTINUOUS_SPACES,
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName, EntityName
from entmachin.env.continuous_checks import (
    actor_order,
    check_continuous_taken,
    check_mask_bounds,
    check_no_actors,
    continuous_choices,
    continuous_values,
    check_action_space,
)
from entmachin.env.environment import Environment, Observation, ObsSpace
from entmachin.env.multi_agent import MultiAgentEnvironment, Seat, check_by_seat, check_game_step, is_multi_agent

_MASK_CLASS = {
    CategoricalActionSpace: CategoricalActionMask,
    SelectEntityActionSpace: SelectEntityActionMask,
    GlobalCategoricalActionSpace: GlobalCategoricalActionMask,
    ContinuousActionSpace: ContinuousActionMask,
    GlobalContinuousActionSpace: GlobalContinuousActionMask,
}
_ACTION_CLASS = {
    CategoricalActionSpace: CategoricalAction,
    SelectEntityActionSpace: SelectEntityAction,
    GlobalCategoricalActionSpace: GlobalCategoricalAction,
    ContinuousActionSpace: ContinuousAction,
    GlobalContinuousActionSpace: GlobalContinuousAction,
}


class ValidatingEnv(Environment):
    """An environment that forwards to ``env`` and validates every observation it returns.

    Given a ``MultiAgentEnvironment`` it returns a ``ValidatingMultiAgentEnv``, which checks
    every seat.

    ``reset_filter`` / ``act_filter`` filter the validated observation (the base class's
    filtering); ``seed``, ``render`` and ``close`` go to ``env``. The actions passed to ``act``
    are checked lightly: known names, the right action class, categorical choices in range.
    Continuous actions are checked in full against the last observation: float32 values, one
    row per actor of its mask, finite and within each actor's bounds.

    Args:
        env: the environment to check. Its spaces are read once, here.

    Raises:
        ValueError, TypeError: from ``reset`` / ``act`` when an observation (or an action) does
            not fit the spaces; see ``validate_observation``. From the constructor, when a
            continuous action space's bounds are not finite or cross (changed after it was built).
    """

    def __new__(cls, env: Any = None) -> Any:  # no argument when unpickled
        if is_multi_agent(env):
            return ValidatingMultiAgentEnv(env)
        return super().__new__(cls)

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._obs_space = env.obs_space()
        self._action_space = env.action_space()
        self._name = type(env).__name__
        check_action_space(self._action_space, f"{self._name}.action_space()")
        self._last: Optional[Observation] = None  # what the continuous actions of act() must fit

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def reset(self) -> Observation:
        obs = self.env.reset()
        validate_observation(obs, self._obs_space, self._action_space, where=f"{self._name}.reset()")
        self._last = obs
        return obs

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        where = f"{self._name}.act()"
        _check_actions_taken(actions, self._action_space, where)
        if self._last is not None:
            check_continuous_taken(self._last, self._obs_space, self._action_space, actions, where)
        obs = self.env.act(actions)
        validate_observation(obs, self._obs_space, self._action_space, where=where)
        self._last = obs
        return obs

    def seed(self, seed: Optional[int]) -> None:
        self.env.seed(seed)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self.env.render(**kwargs)

    def close(self) -> None:
        self.env.close()


class ValidatingMultiAgentEnv(MultiAgentEnvironment):
    """A game of several players that forwards to ``env`` and checks every seat.

    Each step's observations must name exactly the seats, end the game for every seat at once,
    state valid results and fit the spaces (``validate_observation`` per seat). The actions
    passed to ``act`` must name exactly the seats and fit each seat's last observation
    (``checked_choices``): an error names the seat and action, and ``env`` is not called.
    """

    def __init__(self, env: MultiAgentEnvironment) -> None:
        self.env = env
        self._seats = env.seats()
        self._obs_space = env.obs_space()
        self._action_space = env.action_space()
        self._name = type(env).__name__
        check_action_space(self._action_space, f"{self._name}.action_space()")
        self._last: Optional[Dict[Seat, Observation]] = None

    def seats(self) -> List[Seat]:
        return list(self._seats)

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def reset(self) -> Dict[Seat, Observation]:
        return self._checked(self.env.reset(), f"{self._name}.reset()")

    def act(self, actions: Mapping[Seat, Mapping[ActionName, Action]]) -> Dict[Seat, Observation]:
        where = f"{self._name}.act()"
        if self._last is None:
            raise RuntimeError(f"{where} called before reset()")
        check_by_seat(where, actions, self._seats, "actions")
        for seat in self._seats:
            checked_choices(self._last[seat], self._obs_space, self._action_space, actions[seat],
                            f"{where}: seat '{seat}'")
        return self._checked(self.env.act(actions), where)

    def _checked(self, by_seat: Dict[Seat, Observation], where: str) -> Dict[Seat, Observation]:
        check_game_step(where, by_seat, self._seats)
        for seat in self._seats:
            validate_observation(by_seat[seat], self._obs_space, self._action_space, f"{where}: seat '{seat}'")
        self._last = by_seat
        return by_seat

    def seed(self, seed: Optional[int]) -> None:
        self.env.seed(seed)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self.env.render(**kwargs)

    def close(self) -> None:
        self.env.close()


def checked_choices(
    obs: Observation,
    obs_space: ObsSpace,
    action_space: Mapping[ActionName, ActionSpace],
    actions: Any,
    where: str = "actions",
) -> Dict[ActionName, npt.NDArray[Any]]:
    """Check ``actions`` (action name -> ``Action``) against the masks of ``obs`` and return each
    action's choices as entity-gym rows hold them: int64 ``[n_actors]`` in the mask's actor order
    (select-entity choices are positions in the actee list); for a continuous action, its
    float32 values ``[n_actors, n_values]`` in that order (global: ``[1, n_values]``), what
    ``row_choices`` gives. The inverse of ``to_env_actions``.

    Every action whose mask lists actors must be given, for exactly those actors (in any order
    when the actors have distinct ids), with allowed choices; an action for no actors may be
    left out (its choices are then empty: ``[0]``, or ``[0, n_values]`` for a continuous action).

    Raises:
        TypeError: ``actions`` is not a mapping, an action has the wrong class, or continuous
            values are not a float32 array.
        ValueError: an unknown action, an action with no actors to take it, missing or unknown
            actors, a choice out of range or masked, continuous values of the wrong shape, not
            finite or outside their actor's bounds (each named, with ``where``).
    """
    _check_actions_taken(actions, action_space, where)
    out: Dict[ActionName, npt.NDArray[Any]] = {}
    for name, space in action_space.items():
        amask = obs.actions.get(name)
        actors = _EMPTY if amask is None else obs._actor_indices(name, obs_space)  # [n_actors]
        action = actions.get(name)
        field = f"{where}: actions['{name}']"
        if len(actors) == 0:
            check_no_actors(action, name, field)
            out[name] = np.zeros((0, len(space)), np.float32) if isinstance(space, CONTINUOUS_SPACES) else _EMPTY
            continue
        if action is None:
            raise ValueError(f"{field} is missing; the observation has {len(actors)} actor(s) for it")
        if isinstance(space, CONTINUOUS_SPACES):
            out[name] = continuous_choices(obs, obs_space, space, amask, actors, action, field)
            continue
        if isinstance(space, GlobalCategoricalActionSpace):
            allowed = None if amask.mask is None else np.asarray(amask.mask, np.bool_).reshape(1, -1)
            out[name] = _allowed_choices(np.array([action.index], np.int64), allowed, len(space), field, "choice")
            continue
        order = actor_order(list(action.actors), obs.entity_ids(obs_space, amask.actor_ids, actors), field)
        if isinstance(space, CategoricalActionSpace):
            chosen = np.asarray(action.indices, dtype=np.int64).reshape(-1)
            if len(chosen) != len(order):
                raise ValueError(f"{field} has {len(chosen)} choices for {len(order)} actors")
            allowed = None if amask.mask is None else np.asarray(amask.mask, np.bool_).reshape(len(actors), -1)
            out[name] = _allowed_choices(chosen[order], allowed, len(space), field, "choice")
            continue
        candidates = obs.entity_ids(obs_space, amask.actee_ids, obs._actee_indices(name, obs_space))
        position = {eid: k for k, eid in enumerate(candidates)}
        if len(action.actees) != len(order) or any(a not in position for a in action.actees):
            raise ValueError(f"{field} selects {list(action.actees)[:5]}; expected one of the actees "
                             f"{candidates[:8]} for each of its {len(order)} actors")
        chosen = np.array([position[a] for a in action.actees], dtype=np.int64)[order]
        allowed = None if amask.mask is None else np.asarray(amask.mask, np.bool_).reshape(len(actors), -1)
        out[name] = _allowed_choices(chosen, allowed, len(candidates), field, "actee")
    return out


_EMPTY = np.zeros(0, dtype=np.int64)


def _allowed_choices(chosen: npt.NDArray[np.int64], allowed: Optional[np.ndarray], limit: int, field: str,
                     what: str) -> npt.NDArray[np.int64]:
    bad = (chosen < 0) | (chosen >= limit)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{field}: actor {k} chose {what} {chosen[k]}; expected one in [0, {limit})")
    if allowed is not None:
        masked = ~allowed[np.arange(len(chosen)), chosen]
        if masked.any():
            k = int(np.flatnonzero(masked)[0])
            raise ValueError(f"{field}: actor {k} chose {what} {chosen[k]}, which its mask forbids")
    return chosen


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
            raise ValueError(f"{where}: ids has entity type '{etype}'; ObsSpace.entities has {list(obs_space.entities)}")
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
                _check_mask_rows(obs, obs_space, mask, actors, len(space.index_to_label), "choices", f"{where}: {field}.mask")
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


def _check_actions_taken(actions: Any, action_space: Mapping[ActionName, ActionSpace], where: str) -> None:
    """Light checks of what is passed to ``act``: names, action classes, choices in range,
    continuous values float32, one row per actor given, finite and within the space's bounds."""
    if not isinstance(actions, Mapping):
        raise TypeError(f"{where}: actions must be a mapping from action name to action, got {type(actions).__name__}")
    for name, action in actions.items():
        if name not in action_space:
            raise ValueError(f"{where}: actions has unknown action '{name}'; the action space has {list(action_space)}")
        space = action_space[name]
        expected = _ACTION_CLASS[type(space)]
        if not isinstance(action, expected):
            raise TypeError(f"{where}: actions['{name}'] is a {type(action).__name__}; expected a {expected.__name__}")
        if isinstance(action, SelectEntityAction):
            continue
        if isinstance(space, CONTINUOUS_SPACES):
            continuous_values(action, space, f"{where}: actions['{name}']")
            continue
        chosen = np.asarray(action.index if isinstance(action, GlobalCategoricalAction) else action.indices)
        bad = (chosen < 0) | (chosen >= len(space.index_to_label))
        if bad.any():
            value = chosen.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
            raise ValueError(
                f"{where}: actions['{name}'] chose {value}; expected a choice in [0, {len(space.index_to_label)})"
            )


__all__: List[str] = ["ValidatingEnv", "ValidatingMultiAgentEnv", "check_action_space", "checked_choices",
                      "validate_observation"]
