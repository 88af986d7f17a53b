"""Checks shared by the example environments: the actions they receive, their arguments.

Action checks raise with a message that starts ``<env_name>.act: actions['<name>']``;
constructor checks start ``<env_name>: `<parameter>```. Each says what was expected and what
arrived. Games of several players pass ``seat_action(seat, name)`` as the action name, so that
their messages read ``<env_name>.act: actions['<seat>']['<name>']``.

Example:
    >>> move = expect_action_type("Minefield", "move", actions.get("move"), CategoricalAction)
    >>> choice = check_choice("Minefield", "move", move.indices[0], len(MOVES))
    >>> drive = expect_action_type("Vehicles", "drive", actions.get("drive"), ContinuousAction)
    >>> rows = actor_positions("Vehicles", "drive", drive.actors, vehicle_ids)
    >>> values = check_values("Vehicles", "drive", drive, low[rows], high[rows])[np.argsort(rows)]
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union

import numpy as np

from entmachin.env.action import CategoricalAction, ContinuousAction, SelectEntityAction
from entmachin.env.common import EntityID

A = TypeVar("A")


def expect_actions(env_name: str, actions: Mapping[str, object], names: Sequence[str]) -> None:
    """Raise unless ``actions`` holds exactly the action names ``names``.

    Raises:
        ValueError: a name is missing or an unknown one is present.
    """
    if set(actions) != set(names):
        quoted = ", ".join(f"'{n}'" for n in names)
        raise ValueError(
            f"{env_name}.act: expected exactly the action{'s' if len(names) > 1 else ''} {quoted}, "
            f"got {list(actions)}"
        )


def seat_action(seat: str, name: str) -> str:
    """The action name to pass to these checks for seat ``seat``'s action ``name`` (games of
    several players): messages then quote ``actions['<seat>']['<name>']``."""
    return f"{seat}']['{name}"


def expect_action_type(env_name: str, name: str, action: object, cls: Type[A]) -> A:
    """Return ``action`` if it is a ``cls``; a missing action arrives as ``None`` and fails.

    Raises:
        TypeError: ``action`` is not a ``cls``.
    """
    if not isinstance(action, cls):
        raise TypeError(
            f"{env_name}.act: actions['{name}'] must be a {cls.__name__}, got {type(action).__name__}"
        )
    return action


def _choices(action: Union[CategoricalAction, SelectEntityAction]) -> Tuple[Sequence[object], str]:
    if isinstance(action, SelectEntityAction):
        return action.actees, "actees"
    return action.indices, "choices"


def expect_one_choice(
    env_name: str, name: str, action: Union[CategoricalAction, SelectEntityAction], actor: EntityID
) -> None:
    """Raise unless ``actor`` is the only actor and made exactly one choice (index or actee).

    Raises:
        ValueError: other actors, or not exactly one choice.
    """
    choices, _ = _choices(action)
    if list(action.actors) != [actor] or len(choices) != 1:
        raise ValueError(
            f"{env_name}.act: actions['{name}'] expects one choice by actor {actor!r}, got actors "
            f"{list(action.actors)} and {len(choices)} choices"
        )


def expect_choice_per_actor(
    env_name: str, name: str, action: Union[CategoricalAction, SelectEntityAction]
) -> None:
    """Raise unless every actor of ``action`` made exactly one choice (index or actee).

    Raises:
        ValueError: the numbers of actors and choices differ.
    """
    choices, what = _choices(action)
    if len(action.actors) != len(choices):
        raise ValueError(
            f"{env_name}.act: actions['{name}'] has {len(action.actors)} actors but {len(choices)} {what}"
        )


def check_choice(env_name: str, name: str, choice: Union[int, np.integer], n_choices: int) -> int:
    """Return the choice index ``choice`` as an int if it lies in ``[0, n_choices)``.

    Raises:
        ValueError: ``choice`` is out of range.
    """
    if not 0 <= choice < n_choices:
        raise ValueError(f"{env_name}.act: actions['{name}'] choice {choice} is outside [0, {n_choices})")
    return int(choice)


def check_label(env_name: str, name: str, label: str, labels: Sequence[str]) -> str:
    """Return ``label`` if it is one of ``labels``.

    Raises:
        ValueError: ``label`` is not one of ``labels``.
    """
    if label not in labels:
        raise ValueError(f"{env_name}.act: actions['{name}'] chose '{label}'; expected one of {list(labels)}")
    return label


def actor_positions(
    env_name: str, name: str, actors: Sequence[EntityID], expected: Sequence[EntityID]
) -> np.ndarray:
    """Each actor's position in ``expected``: int64 ``[n_actors]``, once ``actors`` lists every
    id of ``expected`` exactly once (in any order).

    Raises:
        ValueError: an actor missing, repeated or not one of ``expected``.
    """
    position = {eid: k for k, eid in enumerate(expected)}
    rows = [position.get(eid, -1) for eid in actors]
    if len(rows) != len(expected) or -1 in rows or len(set(rows)) != len(rows):
        raise ValueError(
            f"{env_name}.act: actions['{name}'] has actors {list(actors)[:8]}; expected each of "
            f"{list(expected)[:8]} once"
        )
    return np.array(rows, dtype=np.int64)


def check_values(
    env_name: str, name: str, action: ContinuousAction, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """Return a continuous action's values as float64 once each lies within its actor's bounds.

    Args:
        low: float ``[n_values]`` (every actor's) or ``[n_actors, n_values]``, the lower bounds.
        high: the upper bounds, likewise.

    Shape:
        Returns ``[n_actors, n_values]``, in the order of ``action.actors``.

    Raises:
        ValueError: values of another shape than ``[n_actors, n_values]``, or a value not
            finite or outside its bounds (naming the actor and the value).
    """
    values = np.asarray(action.values, dtype=np.float64)
    n_values = np.shape(low)[-1]
    if values.shape != (len(action.actors), n_values):
        raise ValueError(
            f"{env_name}.act: actions['{name}'] has values of shape {values.shape}; expected "
            f"({len(action.actors)}, {n_values}), one row per actor"
        )
    bad = ~np.isfinite(values) | (values < low) | (values > high)
    if bad.any():
        low, high = np.broadcast_to(low, values.shape), np.broadcast_to(high, values.shape)
        i, j = (int(k[0]) for k in np.nonzero(bad))
        raise ValueError(
            f"{env_name}.act: actions['{name}'] actor {action.actors[i]!r} value '{action.names[j]}' is "
            f"{values[i, j]}; expected a finite value in [{low[i, j]}, {high[i, j]}]"
        )
    return values


def resolve_id(env_name: str, name: str, eid: EntityID, sizes: Mapping[str, int]) -> Tuple[str, int]:
    """Resolve an id ``(entity_type, i)`` of the last observation to ``(entity_type, i)``.

    Args:
        env_name: environment named in the message.
        name: action named in the message.
        eid: the id an action refers to.
        sizes: allowed entity type -> number of its entities in the last observation.

    Raises:
        ValueError: ``eid`` is not ``(t, i)`` with ``t`` in ``sizes`` and ``0 <= i < sizes[t]``.
    """
    if (
        isinstance(eid, tuple)
        and len(eid) == 2
        and isinstance(eid[0], str)
        and eid[0] in sizes
        and isinstance(eid[1], (int, np.integer))
        and 0 <= eid[1] < sizes[eid[0]]
    ):
        return eid[0], int(eid[1])
    raise ValueError(
        f"{env_name}.act: actions['{name}'] refers to entity {eid!r}, which is not a current "
        f"{' or '.join(sizes)} id of the last observation"
    )


def check_int(env_name: str, name: str, value: object, minimum: int, maximum: Optional[int] = None) -> int:
    """Return constructor argument ``value`` as an int after checking its type and range.

    Raises:
        TypeError: ``value`` is not an int (a bool is not accepted).
        ValueError: ``value`` is below ``minimum`` or above ``maximum``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{env_name}: `{name}` must be an int, got {type(value).__name__}")
    if maximum is None and value < minimum:
        raise ValueError(f"{env_name}: `{name}` must be >= {minimum}, got {value}")
    if maximum is not None and not minimum <= value <= maximum:
        raise ValueError(f"{env_name}: `{name}` must be between {minimum} and {maximum}, got {value}")
    return int(value)


def check_bool(env_name: str, name: str, value: object) -> bool:
    """Return constructor argument ``value`` as a bool after checking its type.

    Raises:
        TypeError: ``value`` is not a bool (numpy's included).
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{env_name}: `{name}` must be a bool, got {type(value).__name__}")
    return bool(value)


def check_one_of(env_name: str, name: str, value: object, allowed: Sequence[str]) -> str:
    """Return constructor argument ``value`` after checking it is one of the strings ``allowed``.

    Raises:
        ValueError: ``value`` is not one of them.
    """
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{env_name}: `{name}` must be one of {list(allowed)}, got {value!r}")
    return value
