"""Helpers over entmachin's ragged arrays (:mod:`entmachin.ragged.array`).

Functions that read better than methods where a value may also be one of ragged-buffer's
``RaggedBuffer*`` (converted at the door, see :mod:`entmachin.ragged.interop`), and that name
what is wrong in their errors: construction from flat arrays, sizes, selection, concatenation,
padding and equality. This module never imports torch (environment worker processes import it).

Shape:
    flat: ``[n_items, n_features]``; lengths: ``[n_sequences]`` int64, summing to ``n_items``.

Example:
    >>> buf = ragged_from_arrays(np.zeros((3, 2), np.float32), [2, 0, 1])
    >>> n_sequences(buf), n_items(buf), n_features(buf)
    (3, 3, 2)
    >>> take(buf, [2, 0]).size1()
    array([1, 2])
"""

import sys
from typing import Any, Sequence, Tuple

import numpy as np

from entmachin.ragged.array import (  # noqa: F401 - _rebuild_ragged: pickles name it here
    IndexLike,
    RaggedArray,
    RaggedArrayBool,
    RaggedArrayF32,
    RaggedArrayI64,
    _rebuild_ragged,
    array_class,
    as_lengths,
    as_ragged_array,
    cat,
    is_foreign_ragged,
    sequence_indices,
)
from entmachin.ragged.interop import foreign_dtype

RAGGED_ARRAY_TYPES = (RaggedArrayF32, RaggedArrayI64, RaggedArrayBool)

__all__ = [
    "RAGGED_ARRAY_TYPES", "RaggedArray", "as_lengths", "concat", "empty_ragged", "is_ragged",
    "is_ragged_array", "n_features", "n_items", "n_sequences", "pad", "ragged_dtype",
    "ragged_equal", "ragged_from_arrays", "ragged_full", "ragged_to_arrays", "sequence_indices",
    "take", "take_nested",
]


def is_ragged_array(x: Any) -> bool:
    """Whether ``x`` is a numpy-side ragged value: entmachin's ragged array or ragged-buffer's."""
    return isinstance(x, RaggedArray) or is_foreign_ragged(x)


def is_ragged(x: Any) -> bool:
    """Whether ``x`` is a ragged value: a ragged array (either kind) or a ``RaggedTensor``.

    Never imports torch: if ``entmachin.ragged.tensor`` was not imported yet, no
    ``RaggedTensor`` can exist.
    """
    if is_ragged_array(x):
        return True
    tensor_module = sys.modules.get("entmachin.ragged.tensor")
    return tensor_module is not None and isinstance(x, tensor_module.RaggedTensor)


def ragged_dtype(buf: Any) -> np.dtype:
    """Returns the numpy dtype of the values of ``buf``, a ragged array (float32, int64 or bool)."""
    return buf.dtype if isinstance(buf, RaggedArray) else foreign_dtype(buf, "ragged_dtype")


def ragged_from_arrays(flat: Any, lengths: Any, dtype: Any = None) -> RaggedArray:
    """Builds a ragged array from a flat item array and per-sequence lengths (a copy).

    Args:
        flat: ``[n_items, n_features]`` values of all sequences, one after the other.
        lengths: ``[n_sequences]`` non-negative integers summing to ``n_items``.
        dtype: cast ``flat`` to this dtype first (e.g. float64 data into a float32 array).

    Returns:
        A ``RaggedArrayF32``, ``RaggedArrayI64`` or ``RaggedArrayBool``, chosen from the dtype.

    Raises:
        TypeError: the dtype is not float32, int64 or bool, or lengths are not integers.
        ValueError: wrong dimensions, negative lengths, or lengths not summing to ``n_items``.
    """
    arr = np.asarray(flat) if dtype is None else np.asarray(flat).astype(dtype, copy=False)
    cls = array_class(arr.dtype, "ragged_from_arrays")
    if arr.ndim != 2:
        raise ValueError(
            f"ragged_from_arrays: flat must be 2-D [n_items, n_features], got shape {arr.shape}"
        )
    lens = as_lengths(lengths, "ragged_from_arrays")
    total = int(lens.sum())
    if total != arr.shape[0]:
        raise ValueError(
            f"ragged_from_arrays: lengths sum to {total} items, "
            f"but flat has {arr.shape[0]} items (shape {arr.shape})"
        )
    return cls._wrap(np.array(arr, order="C"), lens.copy() if lens is lengths else lens)


def ragged_to_arrays(buf: Any) -> Tuple[np.ndarray, np.ndarray]:
    """Returns ``(flat, lengths)`` of ``buf``, a ragged array: read-only views, no copy.

    Shape:
        flat: ``[n_items, n_features]``; lengths: ``[n_sequences]`` int64.
    """
    buf = as_ragged_array(buf, "ragged_to_arrays")
    return buf.as_array(), buf.size1()


def empty_ragged(dtype: Any, n_features: int, n_sequences: int = 0) -> RaggedArray:
    """Returns an array of ``dtype`` (float32, int64 or bool) holding ``n_sequences`` empty sequences of
    ``n_features`` features.

    Raises:
        TypeError: another dtype.
        ValueError: ``n_features`` or ``n_sequences`` is not an int >= 0.
    """
    cls = array_class(dtype, "empty_ragged")
    for name, value in (("n_features", n_features), ("n_sequences", n_sequences)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"empty_ragged: {name} must be an int >= 0, got {value!r}")
    flat = np.zeros((0, int(n_features)), dtype=cls.dtype)  # [0, n_features]
    return cls._wrap(flat, np.zeros(int(n_sequences), dtype=np.int64))


def ragged_full(lengths: Any, n_features: int, value: Any, dtype: Any) -> RaggedArray:
    """Returns an array with the given sequence lengths, every entry set to ``value``.

    Args:
        lengths: ``[n_sequences]`` non-negative integers.
        n_features: the features per item, an int >= 0.
        value: every entry's value.
        dtype: float32, int64 or bool: the class of the result.

    Raises:
        TypeError: another dtype, or lengths that are not integers.
        ValueError: ``n_features`` is not an int >= 0, or ``lengths`` are not 1-D or hold a negative length.

    Example:
        ``ragged_full(buf.size1(), 1, True, bool)`` is an all-true mask shaped like ``buf``.
    """
    cls = array_class(dtype, "ragged_full")
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or (
        n_features < 0
    ):
        raise ValueError(f"ragged_full: n_features must be an int >= 0, got {n_features!r}")
    lens = as_lengths(lengths, "ragged_full")
    flat = np.full((int(lens.sum()), int(n_features)), value, dtype=cls.dtype)  # [n_items, n_features]
    return cls._wrap(flat, lens.copy() if lens is lengths else lens)


def n_sequences(buf: Any) -> int:
    """Returns the number of sequences of ``buf`` (``len(buf)`` counts items x features instead)."""
    return as_ragged_array(buf, "n_sequences").size0()


def n_items(buf: Any) -> int:
    """Returns the total number of items (rows) over all sequences of ``buf``."""
    return as_ragged_array(buf, "n_items").items()


def n_features(buf: Any) -> int:
    """Returns the number of features per item of ``buf``."""
    return as_ragged_array(buf, "n_features").size2()


def take(buf: Any, index: IndexLike) -> RaggedArray:
    """Selects sequences of a ragged array, in the order given.

    Args:
        buf: the array to select from.
        index: an int (a one-sequence result), a slice (Python semantics), a 1-D integer
            array/list, or a 1-D boolean mask over sequences.

    Returns:
        An array of the same class holding the selected sequences.

    Raises:
        ValueError: a negative index ("negative indices are not supported").
        IndexError: an index ``>= n_sequences(buf)``.
        TypeError: an index of another kind.
    """
    return as_ragged_array(buf, "take").take(index, "take")


def take_nested(values: Any, outer: Any, index: IndexLike) -> RaggedArray:
    """Selects sequences of ``values``, which holds one sequence per item of ``outer``: those of
    the items in ``outer``'s sequences ``index``, in that order. For example each actor's
    probabilities (``values``) for the actors (``outer``: one sequence of actors per row) of the
    rows ``index``.
    """
    per_row = as_ragged_array(outer, "take_nested").size1()
    ordinals = ragged_from_arrays(np.arange(int(per_row.sum()), dtype=np.int64)[:, None], per_row)
    return take(values, ordinals.take(index, "take_nested").as_array()[:, 0])


def concat(bufs: Sequence[Any]) -> RaggedArray:
    """Concatenates the sequences of the ragged arrays ``bufs``, in order.

    Raises:
        ValueError: the list is empty, or an array's class or feature count differs from the first.
    """
    return cat(bufs, 0, "concat")


def pad(buf: Any, pad_value: Any = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Pads every sequence to the longest one.

    Args:
        buf: the ragged array.
        pad_value: the value of every padded entry.

    Returns:
        ``(padded, mask)`` where ``mask[i, j]`` is True for real items.

    Shape:
        padded: ``[n_sequences, max_len, n_features]``; mask: bool ``[n_sequences, max_len]``.
    """
    flat, lengths = ragged_to_arrays(buf)
    max_len = int(lengths.max()) if lengths.size else 0
    mask = np.arange(max_len)[None, :] < lengths[:, None]  # [n_sequences, max_len]
    padded = np.full(
        (lengths.shape[0], max_len, flat.shape[1]), pad_value, dtype=flat.dtype
    )  # [n_sequences, max_len, n_features]
    # A boolean mask selects in row-major order, which is exactly the order of ``flat``.
    padded[mask] = flat
    return padded, mask


def ragged_equal(a: Any, b: Any) -> bool:
    """Returns whether ragged arrays ``a`` and ``b`` have the same class, lengths, features and values
    (False where either is not a ragged array).

    Float NaNs compare equal to each other (``==`` on the arrays treats them as different).
    """
    if not (is_ragged_array(a) and is_ragged_array(b)):
        return False
    a, b = as_ragged_array(a), as_ragged_array(b)
    if type(a) is not type(b):
        return False
    flat_a, lengths_a = a.as_array(), a.size1()
    flat_b, lengths_b = b.as_array(), b.size1()
    if flat_a.shape != flat_b.shape or not np.array_equal(lengths_a, lengths_b):
        return False
    return bool(np.array_equal(flat_a, flat_b, equal_nan=flat_a.dtype.kind == "f"))
