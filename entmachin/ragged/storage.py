"""``RaggedStorage``: the two buffers behind a ragged array and what reads or writes them by position.

A mixin of :class:`entmachin.ragged.array.RaggedArray`: its sizes and read-only views, growth in
place (``push``, ``push_empty``, ``extend``, ``clear``) and the selection of sequences (``take``,
indexing, ``padpack``). ``data`` ``[capacity, n_features]`` and ``lengths`` ``[capacity]`` may
hold room for more than their ``n_items`` items and ``n_seqs`` sequences; the views are made
once and dropped whenever the array changes. This module never imports torch (environment
worker processes import it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Optional, Tuple

import numpy as np

from entmachin.ragged.layout import IndexLike, gather_items, padpack, read_only, sequence_indices

if TYPE_CHECKING:
    from entmachin.ragged.array import RaggedArray

__all__ = ["RaggedStorage"]


class RaggedStorage:
    """Sizes, views, growth and selection of sequences for :class:`~entmachin.ragged.array.RaggedArray`,
    which holds the slots below and provides ``_wrap`` and ``_same_kind``."""

    __slots__ = ()
    dtype: ClassVar[np.dtype]
    _data: np.ndarray  # [capacity, n_features]
    _lengths: np.ndarray  # [capacity]
    _n_items: int
    _n_seqs: int
    _offsets: Optional[np.ndarray]
    _items_view: Optional[np.ndarray]
    _lengths_view: Optional[np.ndarray]

    # ------------------------------------------------------------------ sizes and views

    def size0(self) -> int:
        """The number of sequences."""
        return self._n_seqs

    def size1(self, i: Optional[int] = None) -> Any:
        """Every sequence's length (a read-only int64 view ``[n_sequences]``), or sequence ``i``'s."""
        if i is None:
            if self._lengths_view is None:
                self._lengths_view = read_only(self._lengths[: self._n_seqs])
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
            self._items_view = read_only(self._data[: self._n_items])
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

    def padpack(self) -> Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Packs sequences into rows as long as the longest one: :func:`padpack` of the lengths."""
        return padpack(self._lengths[: self._n_seqs])
