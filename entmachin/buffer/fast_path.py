"""The cheap path of ``append`` for the most common transitions.

A one-row dict transition whose leaves are CPU tensors or arrays (and scalars) exactly as the
schema fixed them needs no general validation: each leaf's type, dtype and shape are checked
with a few identity and tuple comparisons, then each is copied into its row of the
pre-allocated columns. Contiguous CPU tensors are copied with one ``memmove`` of the row's
bytes (the checks guarantee the byte count), a fraction of the cost of ``tensor.numpy()`` plus
a numpy assignment. Anything else (several rows, ragged leaves, another device, a mismatch)
returns False before anything is written, and the buffer takes the general path, which also
produces the error messages.

The checks and copies are compiled once per schema into one straight-line function (like
``dataclasses`` and ``namedtuple`` do), because at a few microseconds per append the loop over
leaves would otherwise be a fifth of the cost. ``FastPath.source`` shows the generated code.
"""

import ctypes
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch

from entmachin.buffer.schema import Schema
from entmachin.buffer.storage import RingStorage

__all__ = ["FastPath"]

_SCALAR_TYPES = {torch.bool: "bool", torch.int64: "int", torch.float32: "float"}
_IMMUTABLE = (type(None), bool, int, float, str, bytes)


class FastPath:
    """A compiled ``append(data) -> bool`` for one schema, bound to one ring storage.

    Raises:
        ValueError: (from the constructor) the schema's transitions can never take the fast
            path; :meth:`build` returns None instead.
    """

    def __init__(self, schema: Schema, storage: RingStorage) -> None:
        names: Dict[str, Any] = {
            "Tensor": torch.Tensor, "ndarray": np.ndarray, "memmove": ctypes.memmove,
            "IMMUTABLE": _IMMUTABLE, "storage": storage,
        }
        check: List[str] = []
        write: List[str] = []
        roots = {attr: f"n{i}" for i, (attr, path, _) in enumerate(schema.nodes) if not path}
        for i, (attr, path, keys) in enumerate(schema.nodes):
            if path:
                raise ValueError("no fast path: nested major attributes")
            check += [f"n{i} = data[{attr!r}]", f"if type(n{i}) is not dict or len(n{i}) != {len(keys)}: return False"]
        for j, (spec, column) in enumerate(zip(schema.leaves, storage.columns)):
            array = getattr(column, "array", None)
            if spec.kind == "ragged" or array is None or spec.dtype.is_complex:
                raise ValueError("no fast path: ragged, device or complex columns")
            check.append(f"v{j} = {roots[spec.attr]}[{spec.path[0]!r}]" if spec.path else f"v{j} = data[{spec.attr!r}]")
            if spec.kind == "scalar":
                names[f"F{j}"] = array.reshape(-1)  # one-element assignment beats a broadcast slice
                check.append(f"if type(v{j}) is not {_SCALAR_TYPES[spec.dtype]}: return False")
                write.append(f"F{j}[slot] = v{j}")
                continue
            row_bytes = array[0:1].nbytes
            names.update({f"D{j}": spec.dtype, f"N{j}": spec.np_dtype, f"S{j}": (1, *spec.shape), f"R{j}": array})
            check += [
                f"if type(v{j}) is Tensor:",
                # real dtypes only, so no conjugate or negative bit can be pending
                f"    if v{j}.dtype is not D{j} or v{j}.shape != S{j} or not v{j}.is_cpu: return False",
                f"    v{j} = v{j}.data_ptr() if v{j}.is_contiguous() else v{j}.numpy()",
                f"elif type(v{j}) is not ndarray or v{j}.dtype != N{j} or v{j}.shape != S{j}: return False",
            ]
            write += [
                f"if type(v{j}) is int: memmove({array.ctypes.data} + slot * {row_bytes}, v{j}, {row_bytes})",
                f"else: R{j}[slot : slot + 1] = v{j}",
            ]
        for k, (attr, column) in enumerate(zip(schema.custom_attr, storage.customs)):
            names[f"C{k}"] = column.objects
            check += [f"c{k} = data[{attr!r}]", f"if type(c{k}) not in IMMUTABLE: return False"]
            write.append(f"C{k}[slot] = c{k}")
        body = [
            "def append(data):",
            f"    if type(data) is not dict or len(data) != {schema.n_attrs}: return False",
            "    try:",
            *("        " + line for line in check),
            "    except (KeyError, TypeError, RuntimeError):  # e.g. a missing key, a tensor needing grad",
            "        return False",
            "    slot = storage.pos",
            *("    " + line for line in write),
            "    storage.pos = slot + 1 if slot + 1 < storage.capacity else 0",
            "    if storage.size < storage.capacity: storage.size += 1",
            "    storage.n_written += 1",
            "    return True",
        ]
        self.source = "\n".join(body)
        exec(compile(self.source, "<entmachin.buffer fast path>", "exec"), names)  # noqa: S102 - our own code
        self.append: Callable[[Any], bool] = names["append"]

    @classmethod
    def build(cls, schema: Schema, storage: RingStorage) -> Optional["FastPath"]:
        """The compiled path for ``schema``, or None if its transitions never take it."""
        try:
            return cls(schema, storage)
        except ValueError:
            return None
