"""The cheap path of ``append`` for the most common transitions.

A one-row dict transition whose leaves are CPU tensors or arrays (and scalars) exactly as the
schema fixed them needs no general validation: ``FastPath.append`` checks each leaf's type,
dtype and shape with a few identity and tuple comparisons, then copies each into its row of
the pre-allocated columns. Contiguous CPU tensors are copied with one ``memmove`` of the row's
bytes (the checks above guarantee the byte count), which costs a fraction of
``tensor.numpy()`` plus a numpy assignment. Anything else (several rows, ragged leaves, another
device, a mismatch) returns False before anything is written, and the buffer takes the
general path, which also produces the error messages.
"""

import ctypes
from typing import Any, List, Optional

import numpy as np
import torch

from entmachin.buffer.schema import Schema
from entmachin.buffer.storage import RingStorage

__all__ = ["FastPath"]

_Tensor, _ndarray = torch.Tensor, np.ndarray
_memmove = ctypes.memmove
_SCALAR_TYPES = {torch.bool: bool, torch.int64: int, torch.float32: float}
_IMMUTABLE = (type(None), bool, int, float, str, bytes)


class FastPath:
    """Per-schema plan of the cheap checks and copies, bound to one ring storage."""

    def __init__(self, schema: Schema, storage: RingStorage) -> None:
        self.storage = storage
        self.n_attrs = schema.n_attrs
        checks, targets = [], []
        for spec, column in zip(schema.leaves, storage.columns):
            array = getattr(column, "array", None)
            if spec.kind == "ragged" or array is None or len(spec.path) > 1 or spec.dtype.is_complex:
                raise ValueError("no fast path")
            key = spec.path[0] if spec.path else None
            if spec.kind == "scalar":
                checks.append((spec.attr, key, True, _SCALAR_TYPES[spec.dtype], None, None))
                # a flat view: one-element assignment is much cheaper than a broadcast slice
                targets.append((array.reshape(-1), 0, 0))
            else:
                row_bytes = array[0:1].nbytes
                if row_bytes == 0:  # 0 marks scalar targets below
                    raise ValueError("no fast path")
                checks.append((spec.attr, key, False, spec.dtype, spec.np_dtype, (1, *spec.shape)))
                targets.append((array, array.ctypes.data, row_bytes))
        targets.extend((column.objects, 0, 0) for column in storage.customs)
        self.checks, self.targets = tuple(checks), tuple(targets)
        self.node_sizes = tuple((attr, len(keys)) for attr, path, keys in schema.nodes if not path)
        self.custom_attr = schema.custom_attr

    @classmethod
    def build(cls, schema: Schema, storage: RingStorage) -> Optional["FastPath"]:
        """The plan for ``schema``, or None if its transitions never take the fast path."""
        try:
            return cls(schema, storage)
        except ValueError:
            return None

    def append(self, data: Any) -> bool:
        """Stores a one-row dict transition; returns False (writing nothing) to defer to the general path."""
        if type(data) is not dict or len(data) != self.n_attrs:
            return False
        sources = []
        try:
            for attr, size in self.node_sizes:
                node = data[attr]
                if type(node) is not dict or len(node) != size:
                    return False
            for attr, key, scalar, dtype, np_dtype, shape in self.checks:
                value = data[attr] if key is None else data[attr][key]
                kind = type(value)
                if scalar:
                    if kind is not dtype:
                        return False
                elif kind is _Tensor:
                    # real dtypes only, so no conjugate or negative bit can be pending
                    if value.dtype is not dtype or value.shape != shape or not value.is_cpu:
                        return False
                    value = value.data_ptr() if value.is_contiguous() else value.numpy()
                elif kind is not _ndarray or value.dtype != np_dtype or value.shape != shape:
                    return False
                sources.append(value)
            for attr in self.custom_attr:
                value = data[attr]
                if type(value) not in _IMMUTABLE:
                    return False
                sources.append(value)
        except (KeyError, TypeError, RuntimeError):  # e.g. a missing key, or a tensor that needs grad
            return False
        storage = self.storage
        slot = storage.pos
        for (array, address, row_bytes), value in zip(self.targets, sources):
            if row_bytes == 0:
                array[slot] = value  # a scalar into the flat view, or a custom object
            elif type(value) is int:  # the data address of a checked, contiguous CPU tensor
                _memmove(address + slot * row_bytes, value, row_bytes)
            else:
                array[slot : slot + 1] = value
        # move the ring past the row (inlined here rather than a RingStorage method: the hot path)
        storage.pos = slot + 1 if slot + 1 < storage.capacity else 0
        if storage.size < storage.capacity:
            storage.size += 1
        storage.n_written += 1
        return True
