"""Row operations on the nested dicts that frames store: count, concatenate and select rows.

A *tree* is a (possibly nested) mapping whose leaves hold rows: dense tensors or numpy arrays
with a leading row dimension, or ragged values (``RaggedBuffer*``, ``RaggedTensor``) with one
sequence per row, as in a canonical entity state or a Machin ``{"state": tensor}`` dict.
Concatenation keeps each leaf's kind (numpy stays numpy, ragged buffers stay ragged buffers),
so stacking an episode never copies data to another device or type behind the caller's back.
The inputs are never modified: every operation returns new leaves.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Dict, List, Tuple

import numpy as np
import torch

from entmachin.ragged.arrays import concat, is_ragged_buffer, take
from entmachin.ragged.tensor import RaggedTensor

__all__ = ["leaf_kind", "tree_rows", "stack_trees", "take_rows"]


def leaf_kind(value: Any) -> str:
    """``"tensor"``, ``"array"``, ``"ragged_buffer"``, ``"ragged_tensor"`` or ``"other"``."""
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, np.ndarray):
        return "array"
    if isinstance(value, RaggedTensor):
        return "ragged_tensor"
    if is_ragged_buffer(value):
        return "ragged_buffer"
    return "other"


def _rows_of(value: Any, where: str) -> int:
    kind = leaf_kind(value)
    if kind in ("tensor", "array"):
        if value.ndim == 0:
            raise ValueError(f"{where} is a 0-d {kind}; expected a leading row dimension, e.g. shape [1, ...]")
        return int(value.shape[0])
    if kind == "ragged_tensor":
        return len(value)
    if kind == "ragged_buffer":
        return int(value.size0())
    raise TypeError(
        f"{where} is a {type(value).__name__}; expected a tensor, a numpy array or a ragged value "
        "(RaggedBuffer, RaggedTensor) with one row per environment step"
    )


def _leaves(tree: Mapping[str, Any], prefix: str) -> List[Tuple[str, Any]]:
    out: List[Tuple[str, Any]] = []
    for key, value in tree.items():
        path = f"{prefix}[{key!r}]"
        if isinstance(value, Mapping):
            out.extend(_leaves(value, path))
        else:
            out.append((path, value))
    return out


def _fast_rows(tree: Mapping[str, Any]) -> int:
    """Rows of a well-formed tree; -1 if anything is off (the slow path then explains)."""
    n_rows = -2
    for value in tree.values():
        if isinstance(value, torch.Tensor) or isinstance(value, np.ndarray):
            rows = value.shape[0] if value.ndim else -1
        elif isinstance(value, Mapping):
            rows = _fast_rows(value)
        elif isinstance(value, RaggedTensor):
            rows = len(value)
        elif is_ragged_buffer(value):
            rows = int(value.size0())
        else:
            return -1
        if rows < 0 or (n_rows != -2 and rows != n_rows):
            return -1
        n_rows = rows
    return n_rows if n_rows >= 0 else -1


def tree_rows(tree: Mapping[str, Any], where: str) -> int:
    """Returns the common number of rows of every leaf of ``tree``.

    Raises:
        ValueError: leaves disagree on the number of rows, a leaf has no row dimension, or the
            tree has no leaves.
        TypeError: a leaf is not a tensor, an array or a ragged value, or ``tree`` is not a mapping.
    """
    if not isinstance(tree, Mapping):
        raise TypeError(f"{where} is a {type(tree).__name__}; expected a dict of named values")
    fast = _fast_rows(tree)
    if fast >= 0:
        return fast
    leaves = _leaves(tree, where)
    if not leaves:
        raise ValueError(f"{where} is empty; expected at least one tensor, array or ragged value")
    n_rows, first = None, None
    for path, value in leaves:
        rows = _rows_of(value, path)
        if n_rows is None:
            n_rows, first = rows, path
        elif rows != n_rows:
            raise ValueError(f"{path} holds {rows} rows, but {first} holds {n_rows}; every value needs the same rows")
    return n_rows


def _cat_leaves(values: List[Any], kind: str) -> Any:
    if kind == "tensor":
        return torch.cat(values, dim=0)  # [sum of rows, ...]
    if kind == "array":
        return np.concatenate(values, axis=0)  # [sum of rows, ...]
    if kind == "ragged_tensor":
        return RaggedTensor.cat(values)
    return concat(values)


def stack_trees(trees: Sequence[Mapping[str, Any]], where: Callable[[int], str]) -> Dict[str, Any]:
    """Concatenates the rows of trees of the same structure, in order.

    Args:
        trees: mappings with the same keys at every level and the same type of leaf at every
            path.
        where: names tree ``i`` for error messages, e.g. ``lambda i: f"episode[{i}]['state']"``
            (called only when something is wrong).

    Returns:
        A new tree of plain dicts whose leaf ``p`` holds the rows of every tree's leaf ``p``.

    Raises:
        ValueError: the trees differ in keys, or a leaf path holds values of different types
            or widths.
        TypeError: a tree is not a mapping, or a leaf is not a tensor, array or ragged value.
    """
    first = trees[0]
    first_keys = first.keys() if isinstance(first, Mapping) else None
    for i, tree in enumerate(trees):
        if type(tree) is not dict and not isinstance(tree, Mapping):
            raise TypeError(f"{where(i)} is a {type(tree).__name__}; expected a dict of named values")
        if tree.keys() != first_keys:
            raise ValueError(
                f"{where(i)} has keys {sorted(map(str, tree))}, but {where(0)} has {sorted(map(str, first))}; "
                "every transition needs the same keys"
            )
    out: Dict[str, Any] = {}
    for key in first:
        values = [tree[key] for tree in trees]

        def path(i: int, key: str = key) -> str:
            return f"{where(i)}[{key!r}]"

        if isinstance(values[0], Mapping):
            out[key] = stack_trees(values, path)
            continue
        first_type = type(values[0])
        if not all(type(v) is first_type for v in values):
            i = next(i for i, v in enumerate(values) if type(v) is not first_type)
            raise ValueError(
                f"{path(i)} is a {type(values[i]).__name__}, but {path(0)} is a {first_type.__name__}; "
                "a value must keep its type across transitions"
            )
        kind = leaf_kind(values[0])
        if kind == "other":
            _rows_of(values[0], path(0))  # raises the TypeError that names what is accepted
        try:
            out[key] = _cat_leaves(values, kind)
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"{path(0)} and the following transitions' values cannot be concatenated: {e}") from None
    return out


def take_rows(tree: Mapping[str, Any], index: np.ndarray) -> Dict[str, Any]:
    """Returns a new tree holding rows ``index`` (an int64 array) of every leaf, in that order."""
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out[key] = take_rows(value, index)
            continue
        kind = leaf_kind(value)
        if kind == "tensor":
            out[key] = value[torch.as_tensor(index, device=value.device)]  # [len(index), ...]
        elif kind == "array":
            out[key] = value[index]  # [len(index), ...]
        elif kind == "ragged_tensor":
            out[key] = value[index]
        else:
            out[key] = take(value, index)
    return out
