"""Choosing rows to sample and turning the gathered columns into ``sample_batch``'s tuple."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import torch

from entmachin.buffer.schema import Schema
from entmachin.buffer.storage import RingStorage
from entmachin.ragged import RaggedTensor, arrdict

__all__ = ["check_batch_size", "choose_rows", "collate"]

SampleMethod = Union[str, Callable[[Any, int], Any]]
_METHODS = ("random_unique", "random", "all")


def check_batch_size(batch_size: Any, where: str) -> int:
    """Returns ``batch_size`` as an int, raising unless it is an integer ``>= 0``."""
    if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)):
        raise TypeError(f"{where}: batch_size must be an int, got {type(batch_size).__name__} {batch_size!r}")
    if batch_size < 0:
        raise ValueError(f"{where}: batch_size must be >= 0, got {batch_size}")
    return int(batch_size)


def choose_rows(
    buffer: Any, storage: RingStorage, batch_size: int, method: SampleMethod, rng: np.random.Generator
) -> np.ndarray:
    """Returns the slots to sample, ``[n]`` int64 (possibly empty).

    ``"random_unique"`` draws ``min(batch_size, size)`` distinct rows, ``"random"`` draws
    ``batch_size`` rows with replacement, ``"all"`` takes every row oldest first (ignoring
    ``batch_size``), and a callable ``method(buffer, batch_size)`` returns row indices by age
    (0 = oldest, ``buffer.size() - 1`` = newest).
    """
    size = storage.size
    if isinstance(method, str):
        if method == "all":
            return storage.slots_of_rows(np.arange(size, dtype=np.int64))  # [size]
        if method == "random_unique":
            n = min(batch_size, size)
            return rng.choice(size, n, replace=False).astype(np.int64, copy=False)  # [n]
        if method == "random":
            return rng.integers(0, size, batch_size, dtype=np.int64) if size else np.zeros(0, np.int64)
        raise ValueError(
            f"sample_batch: sample_method must be one of {list(_METHODS)} or a callable, got {method!r}"
        )
    if not callable(method):
        raise TypeError(f"sample_batch: sample_method must be a str or a callable, got {type(method).__name__}")
    rows = np.asarray(method(buffer, batch_size))
    if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
        raise ValueError(
            f"sample_batch: sample_method {getattr(method, '__name__', method)!r} must return a 1-D sequence "
            f"of int row indices, got {rows.dtype} of shape {rows.shape}"
        )
    rows = rows.astype(np.int64, copy=False)  # [n]
    if rows.size and (rows.min() < 0 or rows.max() >= size):
        raise ValueError(
            f"sample_batch: sample_method returned row {int(rows.min() if rows.min() < 0 else rows.max())}; "
            f"rows must be in [0, {size})"
        )
    return storage.slots_of_rows(rows)


def _check_attrs(schema: Schema, names: Sequence[str], what: str) -> None:
    for name in names:
        if name != "*" and schema.kind_of(name) is None:
            raise ValueError(
                f"sample_batch: {what} names unknown attribute {name!r}; the buffer's attributes are "
                f"{list(schema.keys)} (and '*' for the remaining custom ones)"
            )


def _split(value: Any, scalar: bool) -> List[Any]:
    """Splits a concatenated leaf into per-sample values."""
    if isinstance(value, RaggedTensor):
        return [value[[i]] for i in range(len(value))]
    if scalar:
        return value[:, 0].tolist()
    return list(value.split(1))


def _fill(template: Dict[str, Any], leaves: List[Any]) -> arrdict:
    """The template tree as arrdicts, each leaf index replaced by that leaf's value."""
    out = arrdict.__new__(arrdict)  # an empty arrdict; its __init__ would only fill it
    for key, value in template.items():
        # values are arrdicts or leaves already: skip arrdict's conversion of plain dicts
        dict.__setitem__(out, key, _fill(value, leaves) if type(value) is dict else leaves[value])
    return out


def _custom(values: List[Any], concat: bool, attr: str, device: torch.device) -> Any:
    if not concat:
        return values
    try:
        return torch.tensor(values, device=device).view(len(values), -1)  # [n, -1]
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(
            f"sample_batch: custom attribute {attr!r} is in additional_concat_attrs but its values "
            f"cannot form a tensor ({error}); only numbers or equal-length lists of numbers can"
        ) from None


def collate(
    storage: RingStorage,
    slots: np.ndarray,
    concatenate: bool,
    device: torch.device,
    sample_attrs: Optional[Sequence[str]],
    additional_concat_attrs: Optional[Sequence[str]],
) -> tuple:
    """Gathers ``slots`` and arranges them as ``sample_batch`` returns them.

    Major attributes become ``arrdict``s of tensors ``[n, ...]`` / ``RaggedTensor``s, sub
    attributes tensors ``[n, ...]`` (scalars ``[n, 1]``), custom attributes lists (or
    ``[n, -1]`` tensors when named in ``additional_concat_attrs``); with ``concatenate=False``
    every leaf is a list of per-sample values instead.
    """
    schema = storage.schema
    if sample_attrs is None:
        attrs, wanted = schema.keys, schema.key_set
    else:
        attrs = list(sample_attrs)
        _check_attrs(schema, attrs, "sample_attrs")
        wanted = set(attrs)
    concat_attrs = set(additional_concat_attrs) if additional_concat_attrs else ()
    if concat_attrs:
        _check_attrs(schema, list(concat_attrs), "additional_concat_attrs")
    move = device != storage.device
    leaves: List[Any] = [None] * len(schema.leaves)
    for index, (spec, column) in enumerate(zip(schema.leaves, storage.columns)):
        if spec.attr in wanted:
            value = column.gather(slots)
            if move:
                value = value.to(device)
            leaves[index] = value if concatenate else _split(value, spec.kind == "scalar")
    sub_index, custom_index = schema.sub_leaf, schema.custom_index

    def custom(attr: str) -> Any:
        values = storage.gather_custom(custom_index[attr], slots)
        return _custom(values, concatenate and attr in concat_attrs, attr, device)

    result: List[Any] = []
    for attr in attrs:
        if attr == "*":
            result.append({a: custom(a) for a in schema.custom_attr if a not in wanted})
        elif attr in schema.templates:
            result.append(_fill(schema.templates[attr], leaves))
        elif attr in sub_index:
            result.append(leaves[sub_index[attr]])
        else:
            result.append(custom(attr))
    return tuple(result)
