"""ragged-buffer interop: its ``RaggedBuffer{F32,I64,Bool}`` values in, and out on request.

ragged-buffer (the Rust package entity-gym's ``VecObs`` is written in) is optional: it has
wheels only up to Python 3.11 and needs numpy 1. Where it is installed, its values are
accepted wherever entmachin accepts a ragged value and become entmachin's own
:class:`~entmachin.ragged.array.RaggedArray` at the door (:func:`as_ragged_array`, without loss:
the same dtype, lengths and values); :func:`to_ragged_buffer` goes the other way for code that
wants one. This is the only module of entmachin that imports ``ragged_buffer``, and only once a
foreign value or a conversion asks for it: a process that never meets one never loads it.

Recognising and converting ragged-buffer's values (:func:`is_foreign_ragged`,
:func:`as_ragged_array`) lives in :mod:`entmachin.ragged.array`, whose arrays accept them in
their methods too, and is re-exported here. The first time such a value is recognised,
``pickle`` (and ``dill``, ``copy.deepcopy``, ``multiprocessing``) learns to pickle
ragged-buffer's values, which ragged-buffer cannot do itself; they unpickle as entmachin's arrays.
"""

from typing import Any

import numpy as np

from entmachin.ragged.array import FOREIGN_NAMES, as_ragged_array, foreign_types, is_foreign_ragged

__all__ = ["as_ragged_array", "foreign_dtype", "is_foreign_ragged", "ragged_buffer_available", "to_ragged_buffer"]


def foreign_dtype(x: Any, where: str = "ragged_dtype") -> np.dtype:
    """The numpy dtype of a ragged-buffer value, without copying it out.

    Raises:
        TypeError: ``x`` is not one of ragged-buffer's values.
    """
    for cls, ours in zip(foreign_types(), FOREIGN_NAMES):  # ragged-buffer's class, entmachin's
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
    cls = getattr(ragged_buffer, FOREIGN_NAMES[type(array)])
    return cls.from_flattened(np.array(array.as_array()), np.array(array.size1()))
