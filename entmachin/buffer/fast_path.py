"""The cheap path of ``append`` for the most common transitions.

A one-row dict transition whose leaves are CPU tensors or arrays (and scalars) exactly as the
schema fixed them needs no general validation: ``FastPath.extract`` checks each leaf's type,
dtype and shape with a handful of identity and tuple comparisons and returns host views ready
to copy. Anything else (several rows, ragged leaves, another device, a gradient, a mismatch)
returns None, and the buffer takes the general path, which also produces the error messages.
"""

from typing import Any, List, Optional

import numpy as np
import torch

from entmachin.buffer.schema import Schema

__all__ = ["FastPath"]

_Tensor, _ndarray = torch.Tensor, np.ndarray
_SCALAR_TYPES = {torch.bool: bool, torch.int64: int, torch.float32: float}
_IMMUTABLE = (type(None), bool, int, float, str, bytes)


class FastPath:
    """Per-schema plan of the cheap checks (built once, when the schema is fixed)."""

    def __init__(self, schema: Schema) -> None:
        self.n_attrs = schema.n_attrs
        plan = []
        for spec in schema.leaves:
            if spec.kind == "ragged" or spec.np_dtype is None or len(spec.path) > 1:
                raise ValueError("no fast path")
            key = spec.path[0] if spec.path else None
            if spec.kind == "scalar":
                plan.append((spec.attr, key, True, _SCALAR_TYPES[spec.dtype], None, None))
            else:
                plan.append((spec.attr, key, False, spec.dtype, spec.np_dtype, (1, *spec.shape)))
        self.plan = tuple(plan)
        self.node_sizes = tuple((attr, len(keys)) for attr, path, keys in schema.nodes if not path)
        self.custom_attr = schema.custom_attr

    @classmethod
    def build(cls, schema: Schema) -> Optional["FastPath"]:
        """The plan for ``schema``, or None if its transitions never take the fast path."""
        try:
            return cls(schema)
        except ValueError:
            return None

    def extract(self, data: Any) -> Optional[List[Any]]:
        """Host views of every leaf of a one-row dict transition, or None to take the general path."""
        if type(data) is not dict or len(data) != self.n_attrs:
            return None
        try:
            for attr, size in self.node_sizes:
                node = data[attr]
                if type(node) is not dict or len(node) != size:
                    return None
            values = []
            for attr, key, scalar, dtype, np_dtype, shape in self.plan:
                value = data[attr] if key is None else data[attr][key]
                kind = type(value)
                if scalar:
                    if kind is not dtype:
                        return None
                elif kind is _Tensor:
                    if value.dtype is not dtype or value.shape != shape:
                        return None
                    value = value.numpy()  # raises (-> general path) on GPU tensors or with grad
                elif kind is _ndarray:
                    if value.dtype != np_dtype or value.shape != shape:
                        return None
                else:
                    return None
                values.append(value)
            for attr in self.custom_attr:
                value = data[attr]
                if type(value) not in _IMMUTABLE:
                    return None
                values.append(value)
        except (KeyError, TypeError, RuntimeError):
            return None
        return values
