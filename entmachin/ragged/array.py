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
import sys
from typing import Any, ClassVar, Dict, Sequence, Tuple

import numpy as np

from entmachin.ragged.arithmetic import RaggedArithmetic
from entmachin.ragged.layout import IndexLike, as_lengths, gather_items, padpack, sequence_indices
from entmachin.ragged.storage import RaggedStorage

__all__ = [
    "IndexLike",
    "RaggedArray",
    "RaggedArrayBool",
    "RaggedArrayF32",
    "RaggedArrayI64",
    "array_class",
    "as_lengths",
    "as_ragged_array",
    "cat",
    "gather_items",
    "is_foreign_ragged",
    "padpack",
    "sequence_indices",
]


class RaggedArray(RaggedStorage, RaggedArithmetic):
    """Sequences of ``[len_i, n_features]`` items in one flat array; see the module docstring.

    Construct with :meth:`from_flattened` (copies, checks), :meth:`from_array`, or
    ``RaggedArrayF32(features)`` for an empty array of ``features`` (an int >= 0, else ``ValueError``)
    features per item to ``push`` into. Use the concrete classes ``RaggedArrayF32``, ``RaggedArrayI64``
    and ``RaggedArrayBool`` (``RaggedArray`` itself raises ``TypeError``).
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
        """Copies ``flattened``, ``[n_items, n_features]`` items, and their ``[n_sequences]`` ``lengths``.

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
        """``x``, ``[n_sequences, length, n_features]`` items of the class's dtype: sequences of equal length
        (copied). Another dtype or number of dimensions raises ``ValueError``."""
        arr = np.asarray(x)
        if arr.dtype != cls.dtype or arr.ndim != 3:
            raise ValueError(
                f"{cls.__name__}.from_array: expected a 3-D {cls.dtype} array "
                f"[n_sequences, length, n_features], got {arr.dtype} of shape {arr.shape}"
            )
        n, length, width = arr.shape
        data = np.array(arr.reshape(n * length, width), order="C")  # [n * length, n_features]
        return cls._wrap(data, np.full(n, length, dtype=np.int64))

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

    # ------------------------------------------------------------------ indices of items

    def indices(self, dim: int) -> "RaggedArrayI64":
        """Per item, its sequence (``dim`` 0) or its position in its sequence (``dim`` 1; any other
        ``dim`` raises ``ValueError``).

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

    # ------------------------------------------------------------------ equality

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
        TypeError: ``x`` is neither (the message begins with ``where``).
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
    """Concatenates ragged arrays of one class along one dimension.

    Args:
        arrays: the ragged arrays (ragged-buffer values are converted).
        dim: 0 joins their sequences; 1 each sequence's items (equal numbers of sequences); 2 each
            item's features (equal lengths).
        where: what error messages begin with.

    Raises:
        ValueError: an empty list, another class, or sizes that do not fit ``dim``.
        TypeError: a value that is not a ragged array.
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
