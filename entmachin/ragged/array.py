"""``RaggedArray``: entmachin's numpy ragged arrays (float32, int64 and bool).

A ragged array holds ``n_sequences`` sequences of ``[len_i, n_features]`` items back to back in
one ``[n_items, n_features]`` array, beside their ``[n_sequences]`` lengths. The three classes
``RaggedArrayF32``, ``RaggedArrayI64`` and ``RaggedArrayBool`` keep the method names and
meanings of ragged-buffer 0.4.8's ``RaggedBuffer{F32,I64,Bool}`` (the types entity-gym's
``VecObs`` is written in), so code written for entity-gym runs unchanged: ``from_flattened``,
``from_array``, ``push``, ``push_empty``, ``extend``, ``clear``, ``as_array``, ``size0``,
``size1``, ``size2``, ``items``, ``indices``, ``flat_indices``, ``padpack``, ``clone``,
``materialize``, indexing by sequence, ``+``/``*`` with broadcasting, ``==`` and
``cat(arrays, dim)``. Where they differ, on purpose:

* ``as_array()`` and ``size1()`` return read-only views instead of copies (no copy per call;
  writing into one raises instead of changing the array behind its back). ``np.array(x)``
  copies when a writable array is wanted.
* indexing accepts slices and boolean masks and raises ``IndexError``/``ValueError`` naming
  the index and the length where ragged-buffer panicked inside Rust; negative indices are
  refused as everywhere in entmachin (no wrap-around). ``a[i]`` with an int is still a
  one-sequence ragged array, as in ragged-buffer.
* ``padpack`` is correct for any number of features; ``a -= b`` rebinds ``a`` to a new array
  (nothing else that shares its memory changes); arrays pickle.
* ``len(a)`` is still ``n_items * n_features`` (ragged-buffer's meaning); ``size0()`` counts
  sequences.

Everything is vectorised numpy: no per-sequence Python loop except ``padpack``'s packing.
Wherever an array is accepted, a value of an installed ragged-buffer is too, converted at the
door (:func:`as_ragged_array`); this module recognises such values without importing
ragged-buffer. It never imports torch (environment worker processes import it).

Shape:
    data: ``[n_items, n_features]``; lengths: ``[n_sequences]`` int64 summing to ``n_items``;
    offsets: ``[n_sequences + 1]`` int64 with ``offsets[0] == 0``.

Example:
    >>> a = RaggedArrayF32.from_flattened(np.arange(10, dtype=np.float32).reshape(5, 2), [2, 0, 3])
    >>> a.size0(), a.size1(), a.size2(), a.items()
    (3, array([2, 0, 3]), 2, 5)
    >>> a[np.array([2, 0])].size1()
    array([3, 2])
    >>> a.indices(0).as_array().ravel()        # the sequence of each item
    array([0, 0, 2, 2, 2])
"""

from __future__ import annotations

import copyreg
import heapq
import operator
import sys
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    "RaggedArray",
    "RaggedArrayBool",
    "RaggedArrayF32",
    "RaggedArrayI64",
    "array_class",
    "as_ragged_array",
    "cat",
    "is_foreign_ragged",
    "padpack",
]

IndexLike = Union[int, slice, Sequence[int], np.ndarray]
_NO_ITEMS = np.zeros(0, dtype=np.int64)
_NO_ITEMS.flags.writeable = False


def _read_only(arr: np.ndarray) -> np.ndarray:
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


class RaggedArray:
    """Sequences of ``[len_i, n_features]`` items in one flat array; see the module docstring.

    Construct with :meth:`from_flattened` (copies, checks), :meth:`from_array`, or
    ``RaggedArrayF32(n_features)`` for an empty array to ``push`` into. Use the concrete
    classes ``RaggedArrayF32``, ``RaggedArrayI64`` and ``RaggedArrayBool``.
    """

    # The views below are made once and dropped whenever the array changes.
    __slots__ = ("_data", "_lengths", "_n_items", "_n_seqs", "_offsets", "_items_view", "_lengths_view")
    dtype: ClassVar[np.dtype]
    _SUFFIX: ClassVar[str]

    def __init__(self, features: int) -> None:
        if type(self) is RaggedArray:
            raise TypeError("RaggedArray is abstract: use RaggedArrayF32, RaggedArrayI64 or RaggedArrayBool")
        if isinstance(features, bool) or not isinstance(features, (int, np.integer)) or features < 0:
            raise ValueError(f"{type(self).__name__}: features must be an int >= 0, got {features!r}")
        self._data = np.zeros((0, int(features)), dtype=self.dtype)  # [capacity, n_features]
        self._lengths = np.zeros(0, dtype=np.int64)  # [capacity]
        self._n_items = 0
        self._n_seqs = 0
        self._offsets = self._items_view = self._lengths_view = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def _wrap(cls, data: np.ndarray, lengths: np.ndarray) -> "RaggedArray":
        """The trusted constructor: takes ownership of ``data`` / ``lengths`` without checks.

        For entmachin's own code that made both arrays itself (a fresh ``data`` of this
        class's dtype, 2-D; int64 ``lengths`` summing to its rows) and keeps no reference.
        """
        out = cls.__new__(cls)
        out._data = data
        out._lengths = lengths
        out._n_items = data.shape[0]
        out._n_seqs = lengths.shape[0]
        out._offsets = out._items_view = out._lengths_view = None
        return out

    @classmethod
    def from_flattened(cls, flattened: Any, lengths: Any) -> "RaggedArray":
        """Copies ``[n_items, n_features]`` items and their ``[n_sequences]`` lengths.

        Raises:
            TypeError: ``flattened`` has another dtype than the class's (cast it first), or
                lengths are not integers.
            ValueError: ``flattened`` is not 2-D, a length is negative, or the lengths do not
                sum to ``n_items``.
        """
        where = f"{cls.__name__}.from_flattened"
        flat = np.asarray(flattened)
        if flat.dtype != cls.dtype:
            raise TypeError(f"{where}: expected {cls.dtype} items, got {flat.dtype}; cast them first")
        if flat.ndim != 2:
            raise ValueError(f"{where}: items must be 2-D [n_items, n_features], got shape {flat.shape}")
        lens = as_lengths(lengths, where)
        total = int(lens.sum())
        if total != flat.shape[0]:
            raise ValueError(
                f"{where}: lengths sum to {total} items, but the items array has {flat.shape[0]} "
                f"(shape {flat.shape})"
            )
        return cls._wrap(np.array(flat, order="C"), lens.copy() if lens is lengths else lens)

    @classmethod
    def from_array(cls, x: Any) -> "RaggedArray":
        """``[n_sequences, length, n_features]`` items: sequences of equal length."""
        arr = np.asarray(x)
        if arr.dtype != cls.dtype or arr.ndim != 3:
            raise ValueError(
                f"{cls.__name__}.from_array: expected a 3-D {cls.dtype} array "
                f"[n_sequences, length, n_features], got {arr.dtype} of shape {arr.shape}"
            )
        n, length, width = arr.shape
        data = np.array(arr.reshape(n * length, width), order="C")  # [n * length, n_features]
        return cls._wrap(data, np.full(n, length, dtype=np.int64))

    # ------------------------------------------------------------------ sizes and views

    def size0(self) -> int:
        """The number of sequences."""
        return self._n_seqs

    def size1(self, i: Optional[int] = None) -> Any:
        """Every sequence's length (a read-only int64 view ``[n_sequences]``), or sequence ``i``'s."""
        if i is None:
            if self._lengths_view is None:
                self._lengths_view = _read_only(self._lengths[: self._n_seqs])
            return self._lengths_view
        return int(self._lengths[sequence_indices(i, self._n_seqs, f"{type(self).__name__}.size1")])

    def size2(self) -> int:
        """The number of features of every item."""
        return self._data.shape[1]

    def items(self) -> int:
        """The number of items over all sequences."""
        return self._n_items

    def __len__(self) -> int:
        """``n_items * n_features``, ragged-buffer's meaning; ``size0()`` counts sequences."""
        return self._n_items * self._data.shape[1]

    def as_array(self) -> np.ndarray:
        """The items, a read-only view ``[n_items, n_features]`` (``np.array(...)`` copies)."""
        if self._items_view is None:
            self._items_view = _read_only(self._data[: self._n_items])
        return self._items_view

    @property
    def data(self) -> np.ndarray:
        """The items, a read-only view ``[n_items, n_features]``; the same as ``as_array()``."""
        return self.as_array()

    @property
    def lengths(self) -> np.ndarray:
        """Every sequence's length, a read-only int64 view ``[n_sequences]``."""
        return self.size1()

    @property
    def offsets(self) -> np.ndarray:
        """Where each sequence starts, and the end: read-only int64 ``[n_sequences + 1]``."""
        if self._offsets is None:
            offsets = np.zeros(self._n_seqs + 1, dtype=np.int64)  # [n + 1]
            np.cumsum(self._lengths[: self._n_seqs], out=offsets[1:])
            offsets.flags.writeable = False
            self._offsets = offsets
        return self._offsets

    def clone(self) -> "RaggedArray":
        """A copy that shares no memory with this array."""
        return type(self)._wrap(self._data[: self._n_items].copy(), self._lengths[: self._n_seqs].copy())

    def materialize(self) -> "RaggedArray":
        """A copy (ragged-buffer's views needed one; entmachin's arrays are always whole)."""
        return self.clone()

    # ------------------------------------------------------------------ growing

    def _reserve(self, n_items: int, n_seqs: int) -> None:
        """Makes room for ``n_items`` more items and ``n_seqs`` more sequences (amortised O(1))."""
        need = self._n_items + n_items
        # A read-only buffer (items received from another process, say) is copied on first growth.
        if need > self._data.shape[0] or not self._data.flags.writeable:
            grown = np.empty((max(need, 2 * self._data.shape[0], 16), self._data.shape[1]), self.dtype)
            grown[: self._n_items] = self._data[: self._n_items]
            self._data = grown  # views handed out keep the old memory, which nothing writes again
        need = self._n_seqs + n_seqs
        if need > self._lengths.shape[0] or not self._lengths.flags.writeable:
            grown = np.empty(max(need, 2 * self._lengths.shape[0], 16), np.int64)
            grown[: self._n_seqs] = self._lengths[: self._n_seqs]
            self._lengths = grown
        self._offsets = self._items_view = self._lengths_view = None

    def push(self, x: Any) -> None:
        """Appends one sequence of ``[length, n_features]`` items (copied)."""
        where = f"{type(self).__name__}.push"
        arr = np.asarray(x)
        if arr.ndim != 2:
            raise ValueError(f"{where}: expected a 2-D [length, n_features] array, got shape {arr.shape}")
        if arr.shape[1] != self._data.shape[1]:
            raise ValueError(f"{where}: the array has {arr.shape[1]} features, this one has {self._data.shape[1]}")
        if arr.dtype != self.dtype:
            raise TypeError(f"{where}: expected {self.dtype} items, got {arr.dtype}; cast them first")
        self._reserve(arr.shape[0], 1)
        self._data[self._n_items : self._n_items + arr.shape[0]] = arr
        self._lengths[self._n_seqs] = arr.shape[0]
        self._n_items += arr.shape[0]
        self._n_seqs += 1

    def push_empty(self) -> None:
        """Appends one sequence without items."""
        self._reserve(0, 1)
        self._lengths[self._n_seqs] = 0
        self._n_seqs += 1

    def extend(self, other: Any) -> None:
        """Appends every sequence of ``other`` (the same class and number of features)."""
        other = self._same_kind(other, f"{type(self).__name__}.extend")
        n_items, n_seqs = other._n_items, other._n_seqs
        self._reserve(n_items, n_seqs)
        self._data[self._n_items : self._n_items + n_items] = other._data[:n_items]
        self._lengths[self._n_seqs : self._n_seqs + n_seqs] = other._lengths[:n_seqs]
        self._n_items += n_items
        self._n_seqs += n_seqs

    def clear(self) -> None:
        """Removes every sequence (views handed out before keep their values)."""
        self._data = np.zeros((0, self._data.shape[1]), dtype=self.dtype)  # [0, n_features]
        self._lengths = np.zeros(0, dtype=np.int64)
        self._n_items = self._n_seqs = 0
        self._offsets = self._items_view = self._lengths_view = None

    def _same_kind(self, other: Any, where: str) -> "RaggedArray":
        if not isinstance(other, RaggedArray):
            other = as_ragged_array(other, where)
        if type(other) is not type(self):
            raise TypeError(f"{where}: expected a {type(self).__name__}, got a {type(other).__name__}")
        if other._data.shape[1] != self._data.shape[1]:
            raise ValueError(
                f"{where}: the other array has {other._data.shape[1]} features, "
                f"this one has {self._data.shape[1]}"
            )
        return other

    # ------------------------------------------------------------------ selection

    def take(self, index: IndexLike, where: Optional[str] = None) -> "RaggedArray":
        """The sequences ``index`` selects, in its order (an int selects one sequence).

        A slice with step 1 returns a view-backed array (no copy); anything else gathers with
        one vectorised index.

        Args:
            index: an int, a slice, a 1-D integer array or list, or a boolean mask over sequences.
            where: names the caller in error messages (default: ``RaggedArrayF32[...]`` etc.).

        Raises:
            ValueError: a negative index ("negative indices are not supported").
            IndexError: an index ``>= size0()``, naming it and the number of sequences.
            TypeError: an index of another kind.
        """
        n = self._n_seqs
        if isinstance(index, slice) and index.step in (None, 1):
            start, stop, _ = index.indices(n)
            stop = max(start, stop)
            offsets = self.offsets
            data = self._data[offsets[start] : offsets[stop]]  # [n_selected_items, n_features]
            return type(self)._wrap(data, self._lengths[start:stop])
        resolved = sequence_indices(index, n, where or f"{type(self).__name__}[...]")
        if isinstance(resolved, int):
            offsets = self.offsets
            data = self._data[offsets[resolved] : offsets[resolved + 1]]  # [len_i, n_features]
            return type(self)._wrap(data, self._lengths[resolved : resolved + 1])
        rows = gather_items(self.offsets, self._lengths, resolved)  # [n_selected_items]
        return type(self)._wrap(self._data[rows], self._lengths[resolved])

    def __getitem__(self, index: Any) -> "RaggedArray":
        """``a[seqs]`` as :meth:`take`; ``a[seqs, :, features]`` also selects features."""
        if isinstance(index, tuple):
            if len(index) == 1:
                return self.take(index[0])
            if len(index) == 3 and isinstance(index[1], slice) and index[1] == slice(None):
                picked = self.take(index[0])
                feats = index[2]
                if isinstance(feats, (int, np.integer)):
                    feats = [feats]
                data = np.ascontiguousarray(picked._data[: picked._n_items][:, feats])  # [n_items, k]
                return type(self)._wrap(data, picked._lengths[: picked._n_seqs])
            raise TypeError(
                f"{type(self).__name__}[...]: expected a[sequences] or a[sequences, :, features], "
                f"got a tuple of {len(index)} indices"
            )
        return self.take(index)

    def indices(self, dim: int) -> "RaggedArrayI64":
        """Per item, its sequence (``dim=0``) or its position in its sequence (``dim=1``).

        Shape:
            returns int64 ``[n_items, 1]`` per sequence, shaped like this array.
        """
        lengths = self._lengths[: self._n_seqs]
        if dim == 0:
            flat = np.repeat(np.arange(self._n_seqs, dtype=np.int64), lengths)  # [n_items]
        elif dim == 1:
            flat = np.arange(self._n_items, dtype=np.int64) - np.repeat(self.offsets[:-1], lengths)  # [n_items]
        else:
            raise ValueError(f"{type(self).__name__}.indices: dim must be 0 or 1, got {dim!r}")
        return RaggedArrayI64._wrap(flat.reshape(-1, 1), lengths.copy())

    def flat_indices(self) -> "RaggedArrayI64":
        """Per item, its row in ``as_array()``; shaped like this array with one feature."""
        flat = np.arange(self._n_items, dtype=np.int64).reshape(-1, 1)  # [n_items, 1]
        return RaggedArrayI64._wrap(flat, self._lengths[: self._n_seqs].copy())

    def padpack(self) -> Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Packs sequences into rows as long as the longest one: :func:`padpack` of the lengths."""
        return padpack(self._lengths[: self._n_seqs])

    # ------------------------------------------------------------------ arithmetic, equality

    def _binary(self, other: Any, op: Callable[[Any, Any], Any], symbol: str) -> "RaggedArray":
        where = f"{type(self).__name__} {symbol}"
        if self.dtype == np.bool_:
            raise TypeError(f"{where}: bool ragged arrays have no arithmetic")
        data = self._data[: self._n_items]
        if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, (bool, np.bool_)):
            if self.dtype == np.int64 and not isinstance(other, (int, np.integer)):
                raise TypeError(f"{where}: an int64 ragged array takes int operands, got {other!r}")
            return type(self)._wrap(op(data, other).astype(self.dtype, copy=False), self._lengths[: self._n_seqs].copy())
        other = self._same_kind(other, where)
        mine, theirs = self.size1(), other.size1()
        if np.array_equal(mine, theirs):
            values = other._data[: other._n_items]  # [n_items, n_features]
        elif other._n_seqs == self._n_seqs and (theirs == 1).all():
            values = np.repeat(other._data[: other._n_items], mine, axis=0)  # one item per sequence, broadcast
        elif self._n_seqs == other._n_seqs and (mine == 1).all():
            return other._binary(self, lambda a, b: op(b, a), symbol)
        else:
            raise ValueError(
                f"{where}: lengths differ ({mine.tolist()[:8]} vs {theirs.tolist()[:8]}); expected equal "
                "lengths, or one item per sequence on one side"
            )
        return type(self)._wrap(op(data, values), mine.copy())

    def __add__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.add, "+")

    def __radd__(self, other: Any) -> "RaggedArray":
        return self._binary(other, lambda a, b: b + a, "+")

    def __mul__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.mul, "*")

    def __rmul__(self, other: Any) -> "RaggedArray":
        return self._binary(other, lambda a, b: b * a, "*")

    def __sub__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.sub, "-")

    def __isub__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.sub, "-")  # a new array: views of the old one keep their values

    def __eq__(self, other: Any) -> bool:
        """Same class, lengths, features and values (NaN differs from NaN, as in ragged-buffer)."""
        if not isinstance(other, RaggedArray):
            if not is_foreign_ragged(other):
                return NotImplemented
            other = as_ragged_array(other, "==")
        return (
            type(other) is type(self)
            and other._data.shape[1] == self._data.shape[1]
            and np.array_equal(self.size1(), other.size1())
            and np.array_equal(self._data[: self._n_items], other._data[: other._n_items])
        )

    def __ne__(self, other: Any) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # mutable

    # ------------------------------------------------------------------ pickling, printing

    def __reduce__(self) -> Tuple[Any, Tuple[np.ndarray, np.ndarray]]:
        return _rebuild_ragged, (self._data[: self._n_items], self._lengths[: self._n_seqs])

    def __repr__(self) -> str:
        lengths = self.size1().tolist()
        shown = [self._data[s:e].tolist() for s, e in zip(self.offsets[:-1][:6], self.offsets[1:][:6])]
        more = ", ..." if len(lengths) > 6 else ""
        body = ", ".join(repr(seq) for seq in shown)
        return f"{type(self).__name__}([{body}{more}], '{self._n_seqs} * var * {self.size2()} * {self._SUFFIX}')"


class RaggedArrayF32(RaggedArray):
    """A float32 ragged array (ragged-buffer's ``RaggedBufferF32``)."""

    __slots__ = ()
    dtype = np.dtype(np.float32)
    _SUFFIX = "f32"


class RaggedArrayI64(RaggedArray):
    """An int64 ragged array (ragged-buffer's ``RaggedBufferI64``)."""

    __slots__ = ()
    dtype = np.dtype(np.int64)
    _SUFFIX = "i64"


class RaggedArrayBool(RaggedArray):
    """A bool ragged array (ragged-buffer's ``RaggedBufferBool``)."""

    __slots__ = ()
    dtype = np.dtype(np.bool_)
    _SUFFIX = "bool"


_CLASS_BY_DTYPE: Dict[np.dtype, type] = {cls.dtype: cls for cls in (RaggedArrayF32, RaggedArrayI64, RaggedArrayBool)}
SUPPORTED_DTYPES = "float32, int64, bool"


def array_class(dtype: Any, where: str = "ragged array") -> type:
    """The ragged array class of a dtype (float32, int64 or bool).

    Raises:
        TypeError: any other dtype.
    """
    try:
        key = np.dtype(dtype)
    except TypeError:
        key = None
    if key not in _CLASS_BY_DTYPE:
        shown = dtype if key is None else key
        raise TypeError(f"{where}: dtype {shown} has no ragged array; supported dtypes are {SUPPORTED_DTYPES}")
    return _CLASS_BY_DTYPE[key]


def _rebuild_ragged(flat: np.ndarray, lengths: np.ndarray) -> RaggedArray:
    """Unpickles a ragged array; run directories written with ragged-buffer inside name it too.

    The pickle was made from a valid array: no checks, which would cost more than the copy on
    ``ParallelEnvList``'s hot path.
    """
    return array_class(flat.dtype, "unpickling a ragged array")._wrap(
        np.ascontiguousarray(flat), np.asarray(lengths, dtype=np.int64)
    )


# A pickle names the function by module and name, and files written so far name
# entmachin.ragged.arrays._rebuild_ragged: that module re-exports it, and new pickles name it there too.
_rebuild_ragged.__module__ = "entmachin.ragged.arrays"


# ------------------------------------------------------------------ ragged-buffer's values
#
# Where the optional ragged-buffer package is loaded, its values are accepted wherever a ragged
# array is and converted (copied) at the door. They are recognised here without importing that
# package: entmachin.ragged.interop is the one module that imports it (to convert the other way).

# ragged-buffer's class of each of entmachin's, by name
FOREIGN_NAMES: Dict[type, str] = {
    RaggedArrayF32: "RaggedBufferF32",
    RaggedArrayI64: "RaggedBufferI64",
    RaggedArrayBool: "RaggedBufferBool",
}
_pickling_registered = False


def foreign_types() -> tuple:
    """ragged-buffer's three classes (in the order of :data:`FOREIGN_NAMES`) if that package is
    loaded (and real), else ``()``.

    The first time they are seen, ``pickle`` (and ``dill``, ``copy.deepcopy``,
    ``multiprocessing``) learns to pickle their values, which ragged-buffer cannot do itself;
    they unpickle as entmachin's arrays.
    """
    global _pickling_registered
    module = sys.modules.get("ragged_buffer")
    if module is None or getattr(module, "__entmachin_shim__", False):
        return ()
    types = tuple(getattr(module, name) for name in FOREIGN_NAMES.values())
    if not _pickling_registered:
        for cls in types:
            copyreg.pickle(cls, lambda buf: (_rebuild_ragged, (buf.as_array(), buf.size1())))
        _pickling_registered = True
    return types


def is_foreign_ragged(x: Any) -> bool:
    """Whether ``x`` is a ragged-buffer ``RaggedBuffer*`` (never imports ragged-buffer)."""
    types = foreign_types()
    return bool(types) and isinstance(x, types)


def as_ragged_array(x: Any, where: str = "ragged value") -> RaggedArray:
    """``x`` as entmachin's ragged array: itself, or a ragged-buffer value converted (copied).

    Raises:
        TypeError: ``x`` is neither.
    """
    if isinstance(x, RaggedArray):
        return x
    if is_foreign_ragged(x):
        flat = x.as_array()  # [n_items, n_features], already a copy
        return array_class(flat.dtype, where)._wrap(flat, np.asarray(x.size1(), dtype=np.int64))
    raise TypeError(
        f"{where}: expected a ragged array (RaggedArrayF32, RaggedArrayI64, RaggedArrayBool), "
        f"got {type(x).__name__}"
    )


def cat(arrays: Sequence[Any], dim: int = 0, where: str = "cat") -> RaggedArray:
    """Concatenates ragged arrays of one class: their sequences (``dim=0``), each sequence's
    items (``dim=1``: equal numbers of sequences) or each item's features (``dim=2``: equal
    lengths).

    Raises:
        ValueError: an empty list, another class, or sizes that do not fit ``dim``.
    """
    parts = list(arrays)
    if not parts:
        raise ValueError(f"{where}: expected at least one ragged array, got an empty list")
    if not all(isinstance(p, RaggedArray) for p in parts):
        parts = [as_ragged_array(p, f"{where}: arrays[{i}]") for i, p in enumerate(parts)]
    cls, width = type(parts[0]), parts[0]._data.shape[1]
    if not all(type(p) is cls and (dim == 2 or p._data.shape[1] == width) for p in parts):
        for i, other in enumerate(parts):
            if type(other) is not cls:
                raise ValueError(f"{where}: arrays[{i}] is a {type(other).__name__}, but arrays[0] is a {cls.__name__}")
            if other.size2() != width:
                raise ValueError(f"{where}: arrays[{i}] has {other.size2()} features, but arrays[0] has {width}")
    # Whole buffers where nothing was pushed past them (the common case): no slicing.
    datas = [p._data if p._data.shape[0] == p._n_items else p._data[: p._n_items] for p in parts]
    lengths = [p._lengths if p._lengths.shape[0] == p._n_seqs else p._lengths[: p._n_seqs] for p in parts]
    if dim == 0:
        return cls._wrap(np.concatenate(datas), np.concatenate(lengths))
    n = lengths[0].shape[0]
    for i, other in enumerate(lengths[1:], start=1):
        if other.shape[0] != n:
            raise ValueError(f"{where}(dim={dim}): arrays[{i}] has {other.shape[0]} sequences, but arrays[0] has {n}")
        if dim == 2 and not np.array_equal(other, lengths[0]):
            raise ValueError(f"{where}(dim=2): arrays[{i}]'s lengths differ from arrays[0]'s")
    if dim == 2:
        return cls._wrap(np.concatenate(datas, axis=1), lengths[0].copy())
    if dim != 1:
        raise ValueError(f"{where}: dim must be 0, 1 or 2, got {dim!r}")
    stacked = np.stack(lengths)  # [n_parts, n]
    total = stacked.sum(axis=0)  # [n]
    out_offsets = np.concatenate([[0], np.cumsum(total)])[:-1]  # [n]
    before = np.cumsum(stacked, axis=0) - stacked  # [n_parts, n]: items of earlier parts per sequence
    out = np.empty((int(total.sum()), width), dtype=cls.dtype)  # [n_items, n_features]
    for part, data, lens, earlier in zip(parts, datas, lengths, before):
        dest = np.arange(data.shape[0], dtype=np.int64) + np.repeat(out_offsets + earlier - part.offsets[:-1], lens)
        out[dest] = data
    return cls._wrap(out, total.astype(np.int64))
