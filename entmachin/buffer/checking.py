"""Checking a transition before anything of it is stored: ``append``'s and ``store_episode``'s door.

``check_transition`` runs every check a transition must pass (Machin's ``required_attrs``, the
schema, ``buffer_size``, finite values) and returns a ``Checked`` record that the buffer then
writes. It never changes the buffer: a first or grown schema travels in the record and
becomes the buffer's only when the rows are written.
"""

from collections.abc import Mapping
from typing import Any, List, NamedTuple, Optional, Sequence, Union

from entmachin.buffer.finite import check_finite
from entmachin.buffer.growth import grow_schema
from entmachin.buffer.schema import NewKeysError, Schema
from entmachin.buffer.transition import TransitionBase, as_transition

__all__ = ["Checked", "TransitionLike", "check_required", "check_transition"]

TransitionLike = Union[TransitionBase, Mapping[str, Any]]


class Checked(NamedTuple):
    """A transition checked against ``schema`` and not yet stored (``Schema.extract``'s output)."""

    schema: Schema
    n_rows: int
    values: List[Any]
    customs: List[Any]


def check_required(transition: Any, required_attrs: Sequence[str], where: str) -> None:
    """Raises unless ``transition`` has every attribute named in ``required_attrs`` (Machin's check).

    Raises:
        ValueError: naming the missing attributes.
        TypeError: ``required_attrs`` is a str, or ``transition`` is not a transition or dict.
    """
    if isinstance(required_attrs, (str, bytes)):
        raise TypeError(f"{where}: required_attrs must be a sequence of attribute names, got str {required_attrs!r}")
    if not isinstance(transition, (Mapping, TransitionBase)):
        raise TypeError(f"{where}: expected a Transition or a dict, got {type(transition).__name__}")
    missing = [attr for attr in required_attrs if attr not in transition]
    if missing:
        raise ValueError(
            f"{where}: the transition lacks the required attribute(s) {missing} "
            f"(required_attrs={tuple(required_attrs)}); it has {list(transition.keys())}"
        )


def check_transition(
    transition: TransitionLike,
    schema: Optional[Schema],
    where: str,
    buffer_size: int,
    allow_nonfinite: bool,
    required_attrs: Sequence[str] = (),
) -> Checked:
    """Checks one transition for a buffer; stores and changes nothing.

    Args:
        transition: a ``TransitionBase`` or a dict.
        schema: the buffer's schema (None before its first append: the transition fixes one).
        where: prefix for error messages.
        buffer_size: the buffer's capacity in rows.
        allow_nonfinite: accept NaN and ±inf.
        required_attrs: attribute names the transition must have.

    Returns:
        The checked values and the schema they fit (``schema``, a first one, or ``schema``
        grown by new keys of ragged subtrees).

    Raises:
        ValueError, TypeError: the first failing check, naming the attribute and what was
            expected.
    """
    if required_attrs:
        check_required(transition, required_attrs, where)
    if schema is None:
        transition = as_transition(transition, where)
        schema = Schema.of(transition)
    if isinstance(transition, TransitionBase):
        schema.check_kinds(transition, where)
        data = transition._data
    elif isinstance(transition, Mapping):
        data = transition
    else:
        raise TypeError(f"{where}: expected a Transition or a dict, got {type(transition).__name__}")
    try:
        n_rows, values, customs = schema.extract(data, where)
    except NewKeysError:
        schema = grow_schema(schema, data, where)  # raises unless every new key may be added
        n_rows, values, customs = schema.extract(data, where)
    if n_rows > buffer_size:
        raise ValueError(
            f"{where}: the transition holds {n_rows} rows, more than the buffer's buffer_size "
            f"{buffer_size}; use a larger buffer_size"
        )
    if not allow_nonfinite:
        check_finite(schema, values, where)
    return Checked(schema, n_rows, values, customs)
