"""Trees of rows: walk, count, concatenate and select the rows of nested dicts.

A *tree* is a (possibly nested) mapping whose leaves hold rows: dense torch tensors or numpy
arrays with a leading row dimension, or ragged values (ragged array, ``RaggedTensor``) with
one sequence per row, as in a canonical entity state or a Machin ``{"state": tensor}`` dict.
Concatenation keeps each leaf's kind (numpy stays numpy, ragged arrays stay ragged arrays),
so stacking an episode never copies data to another device or type behind the caller's back.
The inputs are never modified: every operation returns new leaves.

This module never imports torch (environment worker processes import ``entmachin.ragged``).
It recognises torch's types by looking them up in ``sys.modules`` when it first meets a leaf
of a new type: a ``torch.Tensor`` or a ``RaggedTensor`` can only exist once ``torch`` (or
``entmachin.ragged.tensor``) has been imported, so a module that is not loaded yet means the
value is not of its type. The answer is cached per leaf type (one dict look-up per leaf on the
hot paths), and it is an exact ``isinstance`` check, unlike a guess from attribute names.
Operations on torch leaves call that same loaded module (``torch.cat``, ``torch.as_tensor``)
or the value's own class (``RaggedTensor.cat``, indexing).

Example:
    >>> state = {"entities": {"Robot": ragged_from_arrays(np.zeros((3, 2), np.float32), [2, 1])},
    ...          "reward": np.zeros(2)}
    >>> [(path, type(leaf).__name__) for path, leaf in leaves(state)]
    [(('entities', 'Robot'), 'RaggedArrayF32'), (('reward',), 'ndarray')]
    >>> n_rows(state, "state"), format_path("state", ("entities", "Robot"))
    (2, "state['entities']['Robot']")
    >>> n_rows(take(stack([state, state], lambda i: f"states[{i}]"), np.array([3, 0])), "s")
    2
"""

import sys
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np

from entmachin.ragged.arrays import RAGGED_ARRAY_TYPES, concat, is_ragged_array, n_features, n_sequences
from entmachin.ragged.arrays import take as take_sequences

__all__ = ["leaf_kind", "leaves", "format_path", "n_rows", "stack", "take", "row_range", "describe"]

TREE, TENSOR, ARRAY, RAGGED_TENSOR, RAGGED_ARRAY, OTHER = (
    "tree", "tensor", "array", "ragged_tensor", "ragged_array", "other",
)

_KIND_BY_TYPE: Dict[type, str] = {
    dict: TREE,
    np.ndarray: ARRAY,
    **{cls: RAGGED_ARRAY for cls in RAGGED_ARRAY_TYPES},
}


def _classify(value: Any) -> str:
    torch = sys.modules.get("torch")
    tensor_module = sys.modules.get("entmachin.ragged.tensor")
    if isinstance(value, Mapping):
        kind = TREE
    elif torch is not None and isinstance(value, torch.Tensor):
        kind = TENSOR
    elif isinstance(value, np.ndarray):
        kind = ARRAY
    elif tensor_module is not None and isinstance(value, tensor_module.RaggedTensor):
        kind = RAGGED_TENSOR
    elif is_ragged_array(value):  # entmachin's, or ragged-buffer's (converted where combined)
        kind = RAGGED_ARRAY
    else:
        kind = OTHER
    _KIND_BY_TYPE[type(value)] = kind
    return kind


def leaf_kind(value: Any) -> str:
    """``"tree"`` (a mapping), ``"tensor"``, ``"array"``, ``"ragged_tensor"``, ``"ragged_array"``
    or ``"other"``."""
    return _KIND_BY_TYPE.get(type(value)) or _classify(value)


def leaves(tree: Mapping[str, Any], prefix: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], Any]]:
    """Yields ``(path, leaf)`` for every leaf of a nested mapping, depth first in key order.

    ``path`` is the tuple of keys from the root (``prefix`` first); an empty nested mapping
    yields nothing.
    """
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def format_path(prefix: str, path: Sequence[Any]) -> str:
    """``prefix['key']['sub']``: where a leaf lives, for messages."""
    return prefix + "".join(f"[{key!r}]" for key in path)


def _leaf_rows(value: Any, kind: str, where: str) -> int:
    if kind in (TENSOR, ARRAY):
        if value.ndim == 0:
            raise ValueError(f"{where} is a 0-d {kind}; expected a leading row dimension, e.g. shape [1, ...]")
        return int(value.shape[0])
    if kind == RAGGED_TENSOR:
        return len(value)
    if kind == RAGGED_ARRAY:
        return int(value.size0())
    raise TypeError(
        f"{where} is a {type(value).__name__}; expected a tensor, a numpy array or a ragged value "
        "(RaggedArray, RaggedTensor) with one row per environment step"
    )


def _fast_rows(tree: Mapping[str, Any]) -> int:
    """Rows of a well-formed tree; -1 if anything is off (the slow path then explains)."""
    n = -2
    for value in tree.values():
        kind = _KIND_BY_TYPE.get(type(value)) or _classify(value)
        if kind is ARRAY or kind is TENSOR:
            rows = value.shape[0] if value.ndim else -1
        elif kind is TREE:
            rows = _fast_rows(value)
        elif kind is RAGGED_ARRAY:
            rows = int(value.size0())
        elif kind is RAGGED_TENSOR:
            rows = len(value)
        else:
            return -1
        if rows < 0 or (n != -2 and rows != n):
            return -1
        n = rows
    return n if n >= 0 else -1


def n_rows(value: Any, where: str) -> int:
    """Returns the rows of a leaf, or the common number of rows of every leaf of a tree.

    Args:
        value: a leaf (tensor, array, ragged value) or a tree of them.
        where: names ``value`` in error messages, e.g. ``"store_rollout[0]['state']"``; a
            tree's leaves are named ``where['key']...``.

    Raises:
        ValueError: leaves disagree on the number of rows, a leaf has no row dimension, or the
            tree has no leaves.
        TypeError: a leaf is not a tensor, an array or a ragged value.
    """
    kind = _KIND_BY_TYPE.get(type(value)) or _classify(value)
    if kind is not TREE:
        return _leaf_rows(value, kind, where)
    fast = _fast_rows(value)
    if fast >= 0:
        return fast
    first = None
    for path, leaf in leaves(value):
        name = format_path(where, path)
        rows = _leaf_rows(leaf, leaf_kind(leaf), name)
        if first is None:
            count, first = rows, name
        elif rows != count:
            raise ValueError(f"{name} holds {rows} rows, but {first} holds {count}; every value needs the same rows")
    if first is None:
        raise ValueError(f"{where} is empty; expected at least one tensor, array or ragged value")
    return count


def _cat(values: Sequence[Any], kind: str, rows: Optional[Sequence[Optional[np.ndarray]]]) -> Any:
    """One leaf's values concatenated; ``rows[i]`` (if given and not None) selects rows of value ``i``."""
    if rows is None or all(r is None for r in rows):
        if kind is TENSOR:
            return sys.modules["torch"].cat(values, dim=0)  # [sum of rows, ...]
        if kind is ARRAY:
            return np.concatenate(values, axis=0)  # [sum of rows, ...]
        if kind is RAGGED_TENSOR:
            return type(values[0]).cat(values)
        return concat(values)
    if kind is RAGGED_TENSOR:
        return type(values[0]).cat(values, rows)
    if kind is RAGGED_ARRAY:
        return concat([v if r is None else take_sequences(v, r) for v, r in zip(values, rows)])
    # dense: every selected row copied once, straight into the result
    sizes = [len(v) if r is None else len(r) for v, r in zip(values, rows)]
    if kind is TENSOR:
        torch = sys.modules["torch"]
        first = values[0]
        if any(v.shape[1:] != first.shape[1:] for v in values):  # index_select(out=) would resize, not refuse
            raise ValueError(f"shapes {[tuple(v.shape) for v in values]} differ past the row dimension")
        out = first.new_empty((sum(sizes), *first.shape[1:]))  # [sum of rows, ...]
        for v, r, at, size in zip(values, rows, np.cumsum([0] + sizes).tolist(), sizes):
            if r is None:
                out[at:at + size].copy_(v)
            else:
                torch.index_select(v, 0, torch.as_tensor(r, device=v.device), out=out[at:at + size])
        return out
    return np.concatenate([v if r is None else v[r] for v, r in zip(values, rows)], axis=0)


def row_range(tree: Mapping[str, Any], start: int, stop: int) -> Dict[str, Any]:
    """Rows ``start`` to ``stop - 1`` of every leaf: views of dense and ragged-tensor leaves
    (nothing copied); ragged array leaves, which have no views, are copied."""
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        kind = _KIND_BY_TYPE.get(type(value)) or _classify(value)
        if kind is TREE:
            out[key] = row_range(value, start, stop)
        elif kind is RAGGED_TENSOR:
            out[key] = value.row_range(start, stop)
        elif kind is RAGGED_ARRAY:
            out[key] = take_sequences(value, np.arange(start, stop, dtype=np.int64))
        else:
            out[key] = value[start:stop]  # [stop - start, ...]
    return out


def stack(trees: Sequence[Mapping[str, Any]], where: Callable[[int], str],
          rows: Optional[Sequence[Optional[np.ndarray]]] = None) -> Dict[str, Any]:
    """Concatenates the rows of trees of the same structure, in order.

    Args:
        trees: mappings with the same keys at every level and the same type of leaf at every
            path.
        where: names tree ``i`` for error messages, e.g. ``lambda i: f"episode[{i}]['state']"``
            (called only when something is wrong).
        rows: optional, one entry per tree: None for all its rows, or an int64 array of the rows
            to take from it, in that order. Tensor and ragged-tensor leaves copy each selected
            row once, straight into the result.

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

        kind = _KIND_BY_TYPE.get(type(values[0])) or _classify(values[0])
        if kind is TREE:
            out[key] = stack(values, path, rows)
            continue
        first_type = type(values[0])
        if not all(type(v) is first_type for v in values):
            i = next(i for i, v in enumerate(values) if type(v) is not first_type)
            raise ValueError(
                f"{path(i)} is a {type(values[i]).__name__}, but {path(0)} is a {first_type.__name__}; "
                "a value must keep its type across transitions"
            )
        if kind is OTHER:
            _leaf_rows(values[0], kind, path(0))  # raises the TypeError that names what is accepted
        try:
            out[key] = _cat(values, kind, rows)
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"{path(0)} and the following transitions' values cannot be concatenated: {e}") from None
    return out


def take(tree: Mapping[str, Any], index: np.ndarray) -> Dict[str, Any]:
    """Returns a new tree of plain dicts holding rows ``index`` (an int64 array) of every leaf,
    in that order."""
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        kind = _KIND_BY_TYPE.get(type(value)) or _classify(value)
        if kind is TREE:
            out[key] = take(value, index)
        elif kind is TENSOR:
            out[key] = value[sys.modules["torch"].as_tensor(index, device=value.device)]  # [len(index), ...]
        elif kind is ARRAY or kind is RAGGED_TENSOR:
            out[key] = value[index]  # [len(index), ...]
        else:
            out[key] = take_sequences(value, index)  # raises TypeError for anything but a ragged array
    return out


def describe(value: Any) -> str:
    """A short description of a value for error messages: type, shape and dtype, not values."""
    kind = leaf_kind(value)
    if kind is RAGGED_TENSOR:
        return f"RaggedTensor of {len(value)} sequences of {value.trailing_shape} {value.dtype}"
    if kind is RAGGED_ARRAY:
        return f"{type(value).__name__} of {n_sequences(value)} sequences of {n_features(value)} features"
    if kind is TENSOR or kind is ARRAY:
        return f"{type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"{type(value).__name__} {value!r}"[:120]
