"""ragged-buffer interop: its ``RaggedBuffer{F32,I64,Bool}`` values in, and out on request.

ragged-buffer (the Rust package entity-gym's ``VecObs`` is written in) is optional: it has
wheels only up to Python 3.11 and needs numpy 1. Where it is installed, its values are
accepted wherever entmachin accepts a ragged value and become entmachin's own
:class:`~entmachin.ragged.array.RaggedArray` at the door (:func:`as_ragged_array`, without loss:
the same dtype, lengths and values); :func:`to_ragged_buffer` goes the other way for code that
wants one. This is the only module of entmachin that imports ``ragged_buffer``, and only once a
foreign value or a conversion asks for it: a process that never meets one never loads it.

Importing this module also teaches ``pickle`` (and ``dill``, ``copy.deepcopy``,
``multiprocessing``) to pickle ragged-buffer's values, which ragged-buffer cannot do itself,
as soon as that package is loaded; they unpickle as entmachin's arrays.
"""

import copyreg
import sys
from typing import Any

import numpy as np

from entmachin.ragged.array import RaggedArray, RaggedArrayBool, RaggedArrayF32, RaggedArrayI64, array_class

__all__ = ["as_ragged_array", "foreign_dtype", "is_foreign_ragged", "ragged_buffer_available", "to_ragged_buffer"]

_FOREIGN_NAMES = ("RaggedBufferF32", "RaggedBufferI64", "RaggedBufferBool")
_ORDER = (RaggedArrayF32, RaggedArrayI64, RaggedArrayBool)  # entmachin's class of each name
_registered = False


def _foreign_types() -> tuple:
    """ragged-buffer's three classes if that package is loaded (and real), else ``()``."""
    module = sys.modules.get("ragged_buffer")
    if module is None or getattr(module, "__entmachin_shim__", False):
        return ()
    types = tuple(getattr(module, name) for name in _FOREIGN_NAMES)
    _register_pickling(types)
    return types


def _register_pickling(types: tuple) -> None:
    global _registered
    if not _registered:
        from entmachin.ragged.arrays import _rebuild_ragged

        for cls in types:
            copyreg.pickle(cls, lambda buf: (_rebuild_ragged, (buf.as_array(), buf.size1())))
        _registered = True


def is_foreign_ragged(x: Any) -> bool:
    """Whether ``x`` is a ragged-buffer ``RaggedBuffer*`` (never imports ragged-buffer)."""
    types = _foreign_types()
    return bool(types) and isinstance(x, types)


def foreign_dtype(x: Any, where: str = "ragged_dtype") -> np.dtype:
    """The numpy dtype of a ragged-buffer value, without copying it out.

    Raises:
        TypeError: ``x`` is not one of ragged-buffer's values.
    """
    for cls, ours in zip(_foreign_types(), _ORDER):
        if isinstance(x, cls):
            return ours.dtype
    raise TypeError(f"{where}: expected a ragged array, got {type(x).__name__}")


def ragged_buffer_available() -> bool:
    """Whether the real ragged-buffer package can be imported here."""
    try:
        import ragged_buffer
    except ImportError:
        return False
    return not getattr(ragged_buffer, "__entmachin_shim__", False)


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


def to_ragged_buffer(x: Any) -> Any:
    """A ragged-buffer ``RaggedBuffer*`` holding the same sequences as ``x`` (a copy).

    Raises:
        ImportError: ragged-buffer is not installed (``pip install 'entmachin[ragged-buffer]'``,
            Python < 3.12 only).
    """
    if not ragged_buffer_available():
        raise ImportError(
            "to_ragged_buffer: the ragged-buffer package is not installed; install it with "
            "pip install 'entmachin[ragged-buffer]' (wheels exist for Python 3.11 and older)"
        )
    import ragged_buffer

    array = as_ragged_array(x, "to_ragged_buffer")
    cls = getattr(ragged_buffer, _FOREIGN_NAMES[_ORDER.index(type(array))])
    return cls.from_flattened(np.array(array.as_array()), np.array(array.size1()))
