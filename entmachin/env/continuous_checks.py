"""The continuous part of ``ValidatingEnv``'s checks: spaces, masks' bounds and the values handed to
``act()``, each error naming the action, the actor (position and entity) and the value."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    CONTINUOUS_SPACES,
    Action,
    ActionSpace,
    GlobalCategoricalAction,
    GlobalContinuousAction,
    GlobalContinuousActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Observation, ObsSpace


def n_chosen(action: Any) -> int:
    return 1 if isinstance(action, (GlobalCategoricalAction, GlobalContinuousAction)) else len(action.actors)


def check_no_actors(action: Any, name: ActionName, field: str) -> None:
    """An action whose mask lists no actors: it must be absent or empty."""
    if action is not None and n_chosen(action):
        raise ValueError(f"{field} acts, but the observation has no actors for '{name}' (a seat not to move, "
                         "knocked out, or without such units): give no action or an empty one")


def actor_order(given: List[Any], expected: List[Any], field: str) -> npt.NDArray[np.int64]:
    """For each expected actor, its position in ``given``."""
    if given == expected:
        return np.arange(len(expected), dtype=np.int64)
    try:
        position = {eid: k for k, eid in enumerate(given)}
    except TypeError:
        position = {}
    if None in expected or len(position) != len(given) or set(position) != set(expected):
        raise ValueError(f"{field} is taken by actors {given[:8]}; the observation's actors are {expected[:8]}")
    return np.array([position[eid] for eid in expected], dtype=np.int64)


def check_action_space(action_space: Mapping[ActionName, ActionSpace], where: str) -> None:
    """Check the bounds of every continuous action space again (they were checked when built,
    but are plain attributes that may have been changed since).

    Raises:
        ValueError: bounds not one per value, not finite (in float32) or with ``low > high``,
            naming the action, the value and its dimension.
    """
    for name, space in action_space.items():
        if isinstance(space, CONTINUOUS_SPACES):
            try:
                space.validate()
            except ValueError as e:
                raise ValueError(f"{where}['{name}']: {e} (were the bounds changed after the space was built?)") \
                    from None


def _value(names: Sequence[str], j: int) -> str:
    return f"value '{names[j]}' (dimension {j})"


def _first(bad: np.ndarray) -> Tuple[int, int]:
    """The (row, column) of the first True of a 2-d array."""
    rows, columns = np.nonzero(bad)
    return int(rows[0]), int(columns[0])


def _describe_actor(obs: Observation, obs_space: ObsSpace, position: int, index: int) -> str:
    """``actor 1 (id 7, entity type 'Car')``: an actor by its position and entity."""
    etype = next((t for t, (lo, hi) in obs._type_ranges(obs_space).items() if lo <= index < hi), "?")
    index_to_id = obs.index_to_id(obs_space)
    eid = index_to_id[index] if index < len(index_to_id) else None
    if eid is None:
        return f"actor {position} (entity index {index}, entity type '{etype}', no id)"
    return f"actor {position} (id {eid!r}, entity type '{etype}')"


def _float_array(value: Any, field: str) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(value)
    except ValueError as e:  # ragged nested lists
        raise ValueError(f"{field} could not be read as a float array: {e}") from None
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{field} has dtype {arr.dtype}; expected float bounds (e.g. float32)")
    return arr.astype(np.float64)


def check_mask_bounds(obs: Observation, obs_space: ObsSpace, amask: Any, space: Any,
                       actors: Optional[npt.NDArray[np.int64]], field: str) -> None:
    """A continuous mask's optional ``low`` / ``high``: shape, finite, within the space's bounds
    and ``low <= high`` for every actor and value (``actors`` ``None``: a global mask)."""
    names, n_values = list(space.names), len(space)
    n_actors = 1 if actors is None else len(actors)
    given: Dict[str, np.ndarray] = {}
    for side in ("low", "high"):
        value = getattr(amask, side)
        if value is None:
            continue
        arr = _float_array(value, f"{field}.{side}")
        if actors is None:
            if arr.shape not in ((n_values,), (1, n_values)):
                raise ValueError(f"{field}.{side} has shape {arr.shape}; expected (n_values,) = ({n_values},) "
                                 f"or (1, {n_values}), one bound per value {names}")
        elif arr.size == 0 and n_actors == 0:
            arr = arr.reshape(0, n_values)
        elif arr.shape != (n_actors, n_values):
            raise ValueError(f"{field}.{side} has shape {arr.shape}; expected (n_actors, n_values) = "
                             f"({n_actors}, {n_values}), a bound per actor and value {names}")
        given[side] = arr.reshape(n_actors, n_values)  # [n_actors, n_values]
    if not given or n_actors == 0:
        return

    def at(side: str, k: int, j: int) -> str:
        if actors is None:
            return f"{field}.{side}[{j}] (the global actor, {_value(names, j)})"
        return f"{field}.{side}[{k}, {j}] ({_describe_actor(obs, obs_space, k, int(actors[k]))}, {_value(names, j)})"

    for side, arr in given.items():
        finite = np.isfinite(arr)
        if not finite.all():
            k, j = _first(~finite)
            raise ValueError(f"{at(side, k, j)} is {arr[k, j]!s}; bounds must be finite")
    with np.errstate(over="ignore"):  # what batch_obs carries: float32
        low, high = (given[side].astype(np.float32) if side in given
                     else np.broadcast_to(default, (n_actors, n_values))  # [n_actors, n_values]
                     for side, default in (("low", space.low), ("high", space.high)))
    for side, bad, word, limit in (("low", low < space.low, "below", space.low),
                                   ("high", high > space.high, "above", space.high)):
        if side in given and bad.any():
            k, j = _first(bad)
            raise ValueError(f"{at(side, k, j)} is {given[side][k, j]!s}, {word} the space's {side} "
                             f"{limit[j]!s}; a mask narrows the space's bounds, never widens them")
    crossed = low > high  # [n_actors, n_values]
    if crossed.any():
        k, j = _first(crossed)
        who = "the global actor" if actors is None else _describe_actor(obs, obs_space, k, int(actors[k]))
        raise ValueError(f"{field}: {who}, {_value(names, j)} has low {low[k, j]!s} > high {high[k, j]!s}; expected "
                         "low <= high (a bound not given is the space's)")


def continuous_values(action: Any, space: Any, field: str) -> npt.NDArray[np.float32]:
    """A continuous action's values as given, checked against the space alone: the space's value
    names, a float32 array of ``(n_actors, n_values)`` (global: ``(n_values,)``), finite and
    within the space's bounds. Returns float32 ``[n_actors, n_values]`` (global: ``[1, n_values]``)."""
    names, n_values = list(space.names), len(space)
    glob = isinstance(space, GlobalContinuousActionSpace)
    if list(action.names) != names:
        raise ValueError(f"{field}.names is {list(action.names)}; expected the space's value names {names}")
    if glob:
        actors: List[Any] = []
        shape, expected = (n_values,), f"(n_values,) = ({n_values},)"
    else:
        try:
            actors = list(action.actors)
        except TypeError:
            raise TypeError(f"{field}.actors must be a sequence of entity ids, got {type(action.actors).__name__}") \
                from None
        shape, expected = (len(actors), n_values), f"(n_actors, n_values) = ({len(actors)}, {n_values})"
    values = action.values
    if not isinstance(values, np.ndarray):
        raise TypeError(f"{field}.values is a {type(values).__name__}; expected a float32 numpy array {expected} "
                        "(np.asarray(values, np.float32))")
    if values.dtype != np.float32:
        raise TypeError(f"{field}.values has dtype {values.dtype}; expected float32 (use .astype(np.float32))")
    if values.shape != shape:
        raise ValueError(f"{field}.values has shape {values.shape}; expected {expected}: "
                         f"{'one per value' if glob else 'a row per actor, a column per value'} {names}")
    rows = values.reshape(-1, n_values)  # [n_actors, n_values]

    def who(k: int) -> str:
        return "the global actor" if glob else f"actor {k} (id {actors[k]!r})"

    _check_within(rows, space.low, space.high, names, who, field, "the action space's")
    return rows


def _check_within(values: npt.NDArray[np.float32], low: np.ndarray, high: np.ndarray, names: Sequence[str],
                  who: Callable[[int], str], field: str, source: str) -> None:
    """``values`` ``[n_actors, n_values]`` finite and within ``[low, high]`` (broadcast to them);
    ``who(k)`` names actor ``k``."""
    finite = np.isfinite(values)
    low, high = np.broadcast_to(low, values.shape), np.broadcast_to(high, values.shape)
    if not finite.all():
        k, j = _first(~finite)
        raise ValueError(f"{field}: {who(k)}, {_value(names, j)} is {values[k, j]!s}; expected a finite value in "
                         f"[{low[k, j]!s}, {high[k, j]!s}]")
    outside = (values < low) | (values > high)
    if outside.any():
        k, j = _first(outside)
        raise ValueError(f"{field}: {who(k)}, {_value(names, j)} is {values[k, j]!s}, outside its bounds "
                         f"[{low[k, j]!s}, {high[k, j]!s}] ({source})")


def continuous_choices(obs: Observation, obs_space: ObsSpace, space: Any, amask: Any,
                        actors: npt.NDArray[np.int64], action: Any, field: str) -> npt.NDArray[np.float32]:
    """A continuous action's values checked against its observation: given for exactly the mask's
    actors, within each actor's bounds. Returns float32 ``[n_actors, n_values]`` in the mask's
    actor order (global: ``[1, n_values]``)."""
    values = continuous_values(action, space, field)  # [n_given, n_values]
    n_actors, n_values = len(actors), len(space)
    if isinstance(space, GlobalContinuousActionSpace):
        order = np.zeros(1, np.int64)

        def who(k: int) -> str:
            return "the global actor"
    else:
        order = actor_order(list(action.actors), obs.entity_ids(obs_space, amask.actor_ids, actors), field)

        def who(k: int) -> str:
            return _describe_actor(obs, obs_space, int(order[k]), int(actors[k]))
    ordered = values[order]  # [n_actors, n_values], the mask's actor order
    narrowed = getattr(amask, "low", None) is not None or getattr(amask, "high", None) is not None
    low, high = (np.broadcast_to(default, (n_actors, n_values)) if getattr(amask, side, None) is None
                 else np.asarray(getattr(amask, side), np.float32).reshape(n_actors, n_values)
                 for side, default in (("low", space.low), ("high", space.high)))
    _check_within(ordered, low, high, space.names, who, field,
                  "the observation's mask" if narrowed else "the action space's")
    return ordered


def check_continuous_taken(obs: Observation, obs_space: ObsSpace, action_space: Mapping[ActionName, ActionSpace],
                            actions: Mapping[ActionName, Action], where: str) -> None:
    """The continuous actions of ``actions`` against the masks of ``obs`` (the last observation)."""
    for name, action in actions.items():
        space = action_space[name]
        if not isinstance(space, CONTINUOUS_SPACES):
            continue
        field = f"{where}: actions['{name}']"
        amask = obs.actions.get(name)
        actors = np.zeros(0, np.int64) if amask is None else obs._actor_indices(name, obs_space)  # [n_actors]
        if len(actors) == 0:
            check_no_actors(action, name, field)
            continue
        continuous_choices(obs, obs_space, space, amask, actors, action, field)

