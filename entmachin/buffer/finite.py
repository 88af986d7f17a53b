"""Refusing NaN and ±inf at append: one vectorised pass over each floating leaf's flat values.

A NaN reward or an infinite entity feature stored in a replay buffer surfaces much later as a
NaN loss, far from its cause; ``append`` refuses it instead, naming the attribute and the row.
The check sums each floating leaf's values (one pass, no temporary array): a finite sum proves
every value finite, since a NaN or an infinity makes any sum NaN or infinite. Only a sum that
is not finite (a bad value, or finite values whose sum overflows) takes a second pass that
finds the first bad element. Integer and bool leaves cannot hold either and are skipped.
"""

import math
from typing import Any, Optional, Sequence

import numpy as np
import torch

from entmachin.buffer.schema import Schema

__all__ = ["check_finite", "first_nonfinite"]


def first_nonfinite(values: Any) -> Optional[int]:
    """Returns the flat index of the first NaN or ±inf of an array or tensor, or None."""
    if isinstance(values, np.ndarray):
        if not values.size or np.isfinite(values.sum()):
            return None
        bad = ~np.isfinite(values).reshape(-1)  # [n_values]
    else:
        if not values.numel() or bool(torch.isfinite(values.sum())):
            return None
        bad = ~torch.isfinite(values).reshape(-1)  # [n_values]
    if not bool(bad.any()):  # the sum overflowed; every value is finite
        return None
    return int(bad.nonzero()[0][0])


def _report(where: str, name: str, value: Any, row: int, detail: str = "") -> None:
    raise ValueError(
        f"{where}: {name} holds {value} at row {row}{detail}; the buffer refuses NaN and ±inf so that "
        "they never reach a loss, and stored nothing of this call (pass allow_nonfinite=True to the "
        "buffer to store them anyway)"
    )


def check_finite(schema: Schema, values: Sequence[Any], where: str) -> None:
    """Raises ``ValueError`` at the first NaN or ±inf among a checked transition's floating leaves.

    Args:
        schema: the schema ``values`` were checked against.
        values: ``Schema.extract``'s per-leaf values (arrays, tensors, scalars, ``(flat, lengths)``).
        where: prefix for the message.

    Raises:
        ValueError: naming the leaf, the bad value and its row in the transition (for a ragged
            leaf also the item of that row).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # the sums of finite values may overflow
        _check(schema, values, where)


def _check(schema: Schema, values: Sequence[Any], where: str) -> None:
    for spec, value in zip(schema.leaves, values):
        if value is None or not (spec.dtype.is_floating_point or spec.dtype.is_complex):
            continue
        if spec.kind == "ragged":
            flat, lengths = value
            index = first_nonfinite(flat)
            if index is not None:
                item = index // max(1, math.prod(spec.shape))
                ends = np.cumsum(lengths)  # [n_rows]
                row = int(np.searchsorted(ends, item, side="right"))
                _report(where, spec.name, _element(flat, index), row, f" (item {item - (ends[row] - lengths[row])} of that row)")
        elif isinstance(value, (np.ndarray, torch.Tensor)):
            index = first_nonfinite(value)
            if index is not None:
                _report(where, spec.name, _element(value, index), index // max(1, math.prod(value.shape[1:])))
        elif not math.isfinite(value):  # a Python or numpy number: one row
            _report(where, spec.name, value, 0)


def _element(values: Any, index: int) -> Any:
    """The value at flat ``index``, as a Python number (``nan``, ``inf``, ``-inf``)."""
    return values.reshape(-1)[index].item()

