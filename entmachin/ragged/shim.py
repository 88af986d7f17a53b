"""Lets ``import ragged_buffer`` resolve to entmachin's ragged arrays where the package is absent.

entity-gym, rogue-net and code written for them import ``ragged_buffer``, which has no wheels
for Python 3.12 and newer. After :func:`install`, that import gives a module whose
``RaggedBufferF32``, ``RaggedBufferI64`` and ``RaggedBufferBool`` are entmachin's
``RaggedArrayF32``, ``RaggedArrayI64`` and ``RaggedArrayBool`` (same method names and meanings;
see :mod:`entmachin.ragged.array` for the few differences), beside ``RaggedBuffer`` (whose
``from_array`` / ``from_flattened`` pick the class from the dtype) and ``cat``. ragged-buffer's
``translate_rotate`` is not provided. Where the real package is installed, nothing changes.

Example:
    >>> from entmachin.ragged import shim
    >>> shim.install()
    >>> from ragged_buffer import RaggedBufferF32
"""

import importlib.util
import sys
import types
from typing import Any

import numpy as np

from entmachin.ragged.array import RaggedArray, RaggedArrayBool, RaggedArrayF32, RaggedArrayI64, array_class, cat

__all__ = ["install"]


class RaggedBuffer:
    """ragged-buffer's dtype-dispatching constructors, over entmachin's classes."""

    def __init__(self, features: int) -> None:
        raise TypeError("RaggedBuffer is abstract: use RaggedBufferF32, RaggedBufferI64 or RaggedBufferBool")

    def __class_getitem__(cls, item: Any) -> type:
        """``RaggedBuffer[np.float32]``: ragged-buffer's class is generic, and entity-gym's annotations say so."""
        return cls

    @classmethod
    def from_array(cls, x: Any) -> RaggedArray:
        return array_class(np.asarray(x).dtype, "RaggedBuffer.from_array").from_array(x)

    @classmethod
    def from_flattened(cls, flattened: Any, lengths: Any) -> RaggedArray:
        return array_class(np.asarray(flattened).dtype, "RaggedBuffer.from_flattened").from_flattened(flattened, lengths)


def install() -> bool:
    """Registers the stand-in ``ragged_buffer`` module unless the real package can be imported.

    Returns:
        True if the stand-in is (now) what ``import ragged_buffer`` gives.
    """
    present = sys.modules.get("ragged_buffer")
    if present is not None:
        return bool(getattr(present, "__entmachin_shim__", False))
    if importlib.util.find_spec("ragged_buffer") is not None:
        return False
    module = types.ModuleType("ragged_buffer", __doc__)
    module.__entmachin_shim__ = True
    module.RaggedBuffer = RaggedBuffer
    module.RaggedBufferF32 = RaggedArrayF32
    module.RaggedBufferI64 = RaggedArrayI64
    module.RaggedBufferBool = RaggedArrayBool
    module.cat = cat
    sys.modules["ragged_buffer"] = module
    return True
