"""The index arithmetic of the ragged layout, on plain numpy arrays: sequence lengths, sequence
indices, the item rows of selected sequences and ragged-buffer's ``padpack``.

A layout is ``n_sequences`` sequences of items stored back to back, described by their
``[n_sequences]`` lengths (and ``[n_sequences + 1]`` offsets, ``offsets[0] == 0``). These
functions check and compute on those arrays only; :mod:`entmachin.ragged.array` builds its
ragged arrays on them, and :mod:`entmachin.ragged.arrays` and ``RaggedTensor`` share their
errors. This module never imports torch (environment worker processes import it).
"""

from __future__ import annotations

import heapq
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["IndexLike", "as_lengths", "gather_items", "padpack", "read_only", "sequence_indices"]

IndexLike = Union[int, slice, Sequence[int], np.ndarray]
_NO_ITEMS = np.zeros(0, dtype=np.int64)
_NO_ITEMS.flags.writeable = False


def read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view of ``arr`` (``arr`` itself stays writable)."""
    view = arr.view()
    view.flags.writeable = False
    return view


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


def sequence_indices(index: IndexLike, n: int, where: str) -> Union[int, np.ndarray]:
    """Resolves a sequence index against ``n`` sequences, rejecting negative entries.

    Shared by ragged arrays, :func:`entmachin.ragged.arrays.take` and ``RaggedTensor`` so all
    raise the same errors.

    Args:
        index: an int, a slice (Python semantics), a 1-D integer array/list, or a 1-D boolean
            mask of length ``n``.
        n: number of sequences.
        where: prefix for error messages.

    Returns:
        An ``int`` for an integer index, else an int64 array ``[n_selected]``.

    Raises:
        ValueError: a negative index, or an index array that is not 1-D.
        IndexError: an index ``>= n``, or a boolean mask of another length.
        TypeError: an index of another kind.
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


def gather_items(offsets: np.ndarray, lengths: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The item rows of sequences ``index``, in that order, without a per-sequence loop.

    Shape:
        offsets: ``[n + 1]``; lengths: ``[n]``; index: ``[k]``; returns ``[sum(lengths[index])]``.
    """
    picked = lengths[index]  # [k]
    total = int(picked.sum())
    if total == 0:
        return _NO_ITEMS
    ends = np.cumsum(picked)  # [k]
    # Item j of the result is item j of a run that starts at offsets[index[s]] for its sequence s:
    # add, to 0..total-1, each run's start minus where the run lands in the result.
    shift = offsets[index] - (ends - picked)  # [k]
    return np.arange(total, dtype=np.int64) + np.repeat(shift, picked)  # [total]


def padpack(lengths: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """ragged-buffer's ``padpack`` (which rogue-net attends over), for sequences of ``lengths``.

    Each sequence, in order, goes into the packed row with the most free slots (the first such
    row on ties) if it fits there, else into a new row; rows are as long as the longest
    sequence. The same results as ragged-buffer 0.4.8's, quirks included (an empty first
    sequence opens a row of padding), for any number of features.

    Returns:
        ``None`` when every sequence has the same length (nothing to pack), else
        ``(index, batch, inverse)``: ``index`` ``[n_rows, max_len]`` int64, the item of each
        slot (0 in padding); ``batch`` ``[n_rows, max_len]`` float32, the sequence of each slot
        (NaN in padding); ``inverse`` ``[n_items]`` int64, each item's slot in the flattened
        ``[n_rows * max_len]`` layout.
    """
    if lengths.size == 0 or (lengths == lengths[0]).all():
        return None
    max_len = int(lengths.max())
    rooms: List[Tuple[int, int]] = []  # a heap of (-free slots, row): the emptiest row first
    starts = np.empty(lengths.shape[0], dtype=np.int64)  # [n] slot of each sequence's first item
    for seq, length in enumerate(lengths.tolist()):
        if rooms and -rooms[0][0] >= length:
            minus_room, row = heapq.heappop(rooms)
            room = -minus_room
        else:
            room, row = max_len, len(rooms)
        starts[seq] = row * max_len + max_len - room
        heapq.heappush(rooms, (length - room, row))
    n_rows, n_items = len(rooms), int(lengths.sum())
    firsts = np.cumsum(lengths) - lengths  # [n] each sequence's first item
    inverse = np.arange(n_items, dtype=np.int64) + np.repeat(starts - firsts, lengths)  # [n_items]
    index = np.zeros(n_rows * max_len, dtype=np.int64)  # [n_rows * max_len]
    index[inverse] = np.arange(n_items)
    batch = np.full(n_rows * max_len, np.nan, dtype=np.float32)  # [n_rows * max_len]
    batch[inverse] = np.repeat(np.arange(lengths.shape[0], dtype=np.float32), lengths)
    return index.reshape(n_rows, max_len), batch.reshape(n_rows, max_len), inverse
