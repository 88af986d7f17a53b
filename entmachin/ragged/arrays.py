"""Numpy-side helpers over ``ragged_buffer.RaggedBuffer{F32,I64,Bool}``.

A ragged buffer holds ``n_sequences`` sequences of ``[len_i, n_features]`` rows in one
contiguous ``[n_items, n_features]`` array. ``ragged_buffer`` 0.4.8 has sharp edges that these
helpers turn into clear exceptions:

* ``len(buf)`` counts items x features, not sequences: use :func:`n_sequences`.
* negative indices raise a confusing ``TypeError``; out-of-range indices and bare slices
  (``buf[0:2]``) panic inside Rust: use :func:`take`.
* ``padpack`` is only correct for one feature: use :func:`pad`.
* the classes cannot be pickled: importing this module registers ``copyreg`` reducers so that
  ``pickle``, ``dill``, ``copy.deepcopy`` and ``multiprocessing`` work.

This module never imports torch (environment worker processes import it).

Shape:
    flat: ``[n_items, n_features]``; lengths: ``[n_sequences]`` int64, summing to ``n_items``.

Example:
    >>> buf = ragged_from_arrays(np.zeros((3, 2), np.float32), [2, 0, 1])
    >>> n_sequences(buf), n_items(buf), n_features(buf)
    (3, 3, 2)
    >>> take(buf, [2, 0]).size1()
    array([1, 2])
"""

import copyreg
import sys
from typing import Any, Sequence, Tuple, Union

import numpy as np
from ragged_buffer import RaggedBufferBool, RaggedBufferF32, RaggedBufferI64

RaggedBuffer = Union[RaggedBufferF32, RaggedBufferI64, RaggedBufferBool]
RAGGED_BUFFER_TYPES = (RaggedBufferF32, RaggedBufferI64, RaggedBufferBool)

_CLASS_BY_DTYPE = {
    np.dtype(np.float32): RaggedBufferF32,
    np.dtype(np.int64): RaggedBufferI64,
    np.dtype(np.bool_): RaggedBufferBool,
}
_DTYPE_BY_CLASS = {cls: dtype for dtype, cls in _CLASS_BY_DTYPE.items()}
_SUPPORTED = "float32, int64, bool"

IndexLike = Union[int, slice, Sequence[int], np.ndarray]


def is_ragged_buffer(x: Any) -> bool:
    """Returns whether ``x`` is one of the three ``RaggedBuffer*`` classes."""
    return isinstance(x, RAGGED_BUFFER_TYPES)


def is_ragged(x: Any) -> bool:
    """Returns whether ``x`` is a ragged value: a ``RaggedBuffer*`` or a ``RaggedTensor``.

    Never imports torch: if ``entmachin.ragged.tensor`` was not imported yet, no
    ``RaggedTensor`` can exist.
    """
    if isinstance(x, RAGGED_BUFFER_TYPES):
        return True
    tensor_module = sys.modules.get("entmachin.ragged.tensor")
    return tensor_module is not None and isinstance(x, tensor_module.RaggedTensor)


def _check_buffer(buf: Any, where: str) -> None:
    if not isinstance(buf, RAGGED_BUFFER_TYPES):
        raise TypeError(
            f"{where}: expected a RaggedBufferF32, RaggedBufferI64 or RaggedBufferBool, "
            f"got {type(buf).__name__}"
        )


def ragged_dtype(buf: RaggedBuffer) -> np.dtype:
    """Returns the numpy dtype of a ragged buffer's values (float32, int64 or bool)."""
    _check_buffer(buf, "ragged_dtype")
    return _DTYPE_BY_CLASS[type(buf)]


def _buffer_class(dtype: Any, where: str) -> type:
    try:
        key = np.dtype(dtype)
    except TypeError:
        key = None
    if key not in _CLASS_BY_DTYPE:
        raise TypeError(
            f"{where}: dtype {dtype} has no ragged buffer; supported dtypes are {_SUPPORTED}"
        )
    return _CLASS_BY_DTYPE[key]


def as_lengths(lengths: Any, where: str) -> np.ndarray:
    """Validates sequence lengths and returns them as a contiguous int64 array.

    Args:
        lengths: 1-D non-negative integers (an empty list of any dtype is accepted).
        where: prefix for error messages.

    Shape:
        returns ``[n_sequences]`` int64.
    """
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise ValueError(f"{where}: lengths must be 1-D [n_sequences], got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)  # [0]
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{where}: lengths must hold integers, got dtype {arr.dtype}")
    if arr.min() < 0:
        raise ValueError(
            f"{where}: lengths must be non-negative, got {int(arr.min())} "
            f"at position {int(arr.argmin())}"
        )
    return np.ascontiguousarray(arr, dtype=np.int64)  # [n_sequences]


def ragged_from_arrays(flat: Any, lengths: Any, dtype: Any = None) -> RaggedBuffer:
    """Builds a ragged buffer from a flat item array and per-sequence lengths.

    Args:
        flat: ``[n_items, n_features]`` values of all sequences, one after the other.
        lengths: ``[n_sequences]`` non-negative integers summing to ``n_items``.
        dtype: cast ``flat`` to this dtype first (e.g. float64 data into a float32 buffer).

    Returns:
        A ``RaggedBufferF32``, ``RaggedBufferI64`` or ``RaggedBufferBool``, chosen from the dtype.

    Raises:
        TypeError: the dtype is not float32, int64 or bool, or lengths are not integers.
        ValueError: wrong dimensions, negative lengths, or lengths not summing to ``n_items``.
    """
    arr = np.asarray(flat) if dtype is None else np.asarray(flat).astype(dtype, copy=False)
    cls = _buffer_class(arr.dtype, "ragged_from_arrays")
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
    # Rust reads the raw buffer, so hand it a C-contiguous copy when needed.
    return cls.from_flattened(np.ascontiguousarray(arr), lens)


def ragged_to_arrays(buf: RaggedBuffer) -> Tuple[np.ndarray, np.ndarray]:
    """Copies a ragged buffer out into ``(flat, lengths)``.

    Shape:
        flat: ``[n_items, n_features]``; lengths: ``[n_sequences]`` int64.
    """
    _check_buffer(buf, "ragged_to_arrays")
    flat = buf.as_array()  # [n_items, n_features]
    lengths = np.asarray(buf.size1(), dtype=np.int64)  # [n_sequences]
    return flat, lengths


def empty_ragged(dtype: Any, n_features: int, n_sequences: int = 0) -> RaggedBuffer:
    """Returns a buffer of ``n_sequences`` empty sequences of ``n_features`` features."""
    cls = _buffer_class(dtype, "empty_ragged")
    for name, value in (("n_features", n_features), ("n_sequences", n_sequences)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"empty_ragged: {name} must be an int >= 0, got {value!r}")
    flat = np.zeros((0, int(n_features)), dtype=_DTYPE_BY_CLASS[cls])  # [0, n_features]
    return cls.from_flattened(flat, np.zeros(int(n_sequences), dtype=np.int64))


def ragged_full(lengths: Any, n_features: int, value: Any, dtype: Any) -> RaggedBuffer:
    """Returns a buffer with the given sequence lengths, every entry set to ``value``.

    Example:
        ``ragged_full(buf.size1(), 1, True, bool)`` is an all-true mask shaped like ``buf``.
    """
    cls = _buffer_class(dtype, "ragged_full")
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or (
        n_features < 0
    ):
        raise ValueError(f"ragged_full: n_features must be an int >= 0, got {n_features!r}")
    lens = as_lengths(lengths, "ragged_full")
    flat = np.full(
        (int(lens.sum()), int(n_features)), value, dtype=_DTYPE_BY_CLASS[cls]
    )  # [n_items, n_features]
    return cls.from_flattened(flat, lens)


def n_sequences(buf: RaggedBuffer) -> int:
    """Returns the number of sequences (``len(buf)`` counts items x features instead)."""
    _check_buffer(buf, "n_sequences")
    return int(buf.size0())


def n_items(buf: RaggedBuffer) -> int:
    """Returns the total number of items (rows) over all sequences."""
    _check_buffer(buf, "n_items")
    return int(buf.items())


def n_features(buf: RaggedBuffer) -> int:
    """Returns the number of features per item."""
    _check_buffer(buf, "n_features")
    return int(buf.size2())


def sequence_indices(index: IndexLike, n: int, where: str) -> Union[int, np.ndarray]:
    """Resolves a sequence index against ``n`` sequences, rejecting negative entries.

    Shared by :func:`take` and ``RaggedTensor.__getitem__`` so both raise the same errors.

    Args:
        index: an int, a slice (Python semantics), a 1-D integer array/list, or a 1-D boolean
            mask of length ``n``.
        n: number of sequences.
        where: prefix for error messages.

    Returns:
        An ``int`` for an integer index, else an int64 array ``[n_selected]``.
    """
    if isinstance(index, np.ndarray) and index.ndim == 0 and index.dtype != np.bool_:
        index = index.item()  # a 0-d array acts like the scalar it holds
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(f"{where}: a bool is not a sequence index; use an int, slice or array")
    if isinstance(index, (int, np.integer)):
        i = int(index)
        if i < 0:
            raise ValueError(f"{where}: negative indices are not supported, got {i}")
        if i >= n:
            raise IndexError(f"{where}: index {i} is out of range for {n} sequences")
        return i
    if isinstance(index, slice):
        return np.arange(*index.indices(n), dtype=np.int64)  # [n_selected]
    if isinstance(index, (str, bytes, tuple)) or not hasattr(index, "__len__"):
        raise TypeError(
            f"{where}: expected an int, slice or 1-D integer array of sequence indices, "
            f"got {type(index).__name__}"
        )
    arr = np.asarray(index)
    if arr.ndim != 1:
        raise ValueError(f"{where}: index arrays must be 1-D, got shape {arr.shape}")
    if arr.dtype == np.bool_:
        if arr.shape[0] != n:
            raise IndexError(
                f"{where}: boolean mask has length {arr.shape[0]}, expected {n} sequences"
            )
        return np.flatnonzero(arr).astype(np.int64)  # [n_selected]
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)  # [0]
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{where}: index arrays must hold integers, got dtype {arr.dtype}")
    low, high = int(arr.min()), int(arr.max())
    if low < 0:
        raise ValueError(f"{where}: negative indices are not supported, got {low}")
    if high >= n:
        raise IndexError(f"{where}: index {high} is out of range for {n} sequences")
    return np.ascontiguousarray(arr, dtype=np.int64)  # [n_selected]


def take(buf: RaggedBuffer, index: IndexLike) -> RaggedBuffer:
    """Selects sequences of a ragged buffer, in the order given.

    Args:
        buf: the buffer to select from.
        index: an int (a one-sequence result), a slice (Python semantics), a 1-D integer
            array/list, or a 1-D boolean mask over sequences.

    Returns:
        A new buffer of the same class holding the selected sequences.

    Raises:
        ValueError: a negative index ("negative indices are not supported").
        IndexError: an index ``>= n_sequences(buf)``.
        TypeError: an index of another kind.
    """
    _check_buffer(buf, "take")
    resolved = sequence_indices(index, int(buf.size0()), "take")
    if isinstance(resolved, int):
        resolved = np.array([resolved], dtype=np.int64)  # [1]
    return buf[resolved]


def concat(bufs: Sequence[RaggedBuffer]) -> RaggedBuffer:
    """Concatenates the sequences of several buffers, in order.

    Raises:
        ValueError: the list is empty, or a buffer's class or feature count differs from the first.
    """
    bufs = list(bufs)
    if not bufs:
        raise ValueError("concat: expected at least one ragged buffer, got an empty list")
    _check_buffer(bufs[0], "concat: bufs[0]")
    cls, width = type(bufs[0]), int(bufs[0].size2())
    for i, buf in enumerate(bufs[1:], start=1):
        if type(buf) is not cls:
            raise ValueError(
                f"concat: bufs[{i}] is a {type(buf).__name__}, but bufs[0] is a {cls.__name__}"
            )
        if int(buf.size2()) != width:
            raise ValueError(
                f"concat: bufs[{i}] has {int(buf.size2())} features, but bufs[0] has {width}"
            )
    return cls.cat(bufs, 0)


def pad(buf: RaggedBuffer, pad_value: Any = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Pads every sequence to the longest one.

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
    """Returns whether two buffers have the same class, lengths, features and values.

    Float NaNs compare equal to each other.
    """
    if not (is_ragged_buffer(a) and is_ragged_buffer(b)) or type(a) is not type(b):
        return False
    flat_a, lengths_a = ragged_to_arrays(a)
    flat_b, lengths_b = ragged_to_arrays(b)
    if flat_a.shape != flat_b.shape or not np.array_equal(lengths_a, lengths_b):
        return False
    return bool(np.array_equal(flat_a, flat_b, equal_nan=flat_a.dtype.kind == "f"))


def _reduce_ragged(buf: RaggedBuffer) -> Tuple[Any, Tuple[np.ndarray, np.ndarray]]:
    return _rebuild_ragged, (buf.as_array(), buf.size1())


def _rebuild_ragged(flat: np.ndarray, lengths: np.ndarray) -> RaggedBuffer:
    # The pickle was made from a valid buffer: skip ragged_from_arrays' checks, which cost
    # more than the copy on ParallelEnvList's hot path.
    return _CLASS_BY_DTYPE[flat.dtype].from_flattened(flat, lengths)


for _cls in RAGGED_BUFFER_TYPES:
    copyreg.pickle(_cls, _reduce_ragged)
