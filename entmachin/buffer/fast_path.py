"""The cheap path of ``append`` for the most common transitions.

A one-row dict transition whose leaves are CPU tensors or arrays (and scalars) exactly as the
schema fixed them needs no general validation: each leaf's type, dtype and shape are checked
with a few identity and tuple comparisons, then each is copied into its row of the
pre-allocated columns. A dense leaf is read as the ``bytes`` of its one row: a contiguous CPU
tensor's are read in place through a ``ctypes`` array at its ``data_ptr()`` (the checks
guarantee the byte count), an array's with ``tobytes()``, and the bytes go into the column
with one memoryview slice assignment. That is a fraction of the cost of ``tensor.numpy()``
plus a numpy assignment, and of a ``ctypes.memmove`` call (a foreign-function call that
converts its three arguments). Anything else (several rows, ragged leaves, another device, a
mismatch, a NaN or ±inf) returns False before anything is written, and the buffer takes the
general path, which also produces the error messages.

Floating leaves are refused when they hold NaN or ±inf (unless the buffer allows them): their
bytes are first placed side by side in one staging row per dtype, checked there with one dot
product, and copied to their columns only if it is finite (see ``_Scratch``), so a refused
row never overwrites the oldest one.

The checks and copies are compiled once per schema into one straight-line function (like
``dataclasses`` and ``namedtuple`` do), because at a few microseconds per append the loop over
leaves would otherwise be a fifth of the cost. ``FastPath.source`` shows the generated code.
"""

import ctypes
import math
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

    Args:
        schema: the buffer's schema.
        storage: the buffer's storage (CPU columns with numpy views).
        check_finite: refuse NaN and ±inf (return False, so that the general path raises).

    Raises:
        ValueError: (from the constructor) the schema's transitions can never take the fast
            path; :meth:`build` returns None instead.
    """

    def __init__(self, schema: Schema, storage: RingStorage, check_finite: bool = True) -> None:
        names: Dict[str, Any] = {
            "Tensor": torch.Tensor, "ndarray": np.ndarray,
            "IMMUTABLE": _IMMUTABLE, "storage": storage, "isfinite": math.isfinite, "join": b"".join,
        }
        check: List[str] = []
        write: List[str] = []
        offsets: Dict[int, str] = {}
        roots = {attr: f"n{i}" for i, (attr, path, _) in enumerate(schema.nodes) if not path}
        for i, (attr, path, keys) in enumerate(schema.nodes):
            if path:
                raise ValueError("no fast path: nested major attributes")
            check += [f"n{i} = data[{attr!r}]", f"if type(n{i}) is not dict or len(n{i}) != {len(keys)}: return False"]
        scratch = _Scratch(schema) if check_finite else None
        for j, (spec, column) in enumerate(zip(schema.leaves, storage.columns)):
            array = getattr(column, "array", None)
            if spec.kind == "ragged" or array is None or spec.dtype.is_complex:
                raise ValueError("no fast path: ragged, device or complex columns")
            check.append(f"v{j} = {roots[spec.attr]}[{spec.path[0]!r}]" if spec.path else f"v{j} = data[{spec.attr!r}]")
            if spec.kind == "scalar":
                names[f"F{j}"] = array.reshape(-1)  # one-element assignment beats a broadcast slice
                check.append(f"if type(v{j}) is not {_SCALAR_TYPES[spec.dtype]}: return False")
                if check_finite and spec.dtype.is_floating_point:
                    check.append(f"if not isfinite(v{j}): return False")
                write.append(f"F{j}[slot] = v{j}")
                continue
            row_bytes = array[0:1].nbytes
            names.update({
                f"D{j}": spec.dtype, f"N{j}": spec.np_dtype, f"S{j}": (1, *spec.shape),
                f"A{j}": (ctypes.c_char * row_bytes).from_address,  # the row's bytes where a tensor keeps them
                f"M{j}": memoryview(array.reshape(-1).view(np.uint8)),  # the column's bytes
            })
            check += [  # v{j} becomes the row's bytes
                f"if type(v{j}) is Tensor:",
                # real dtypes only, so no conjugate or negative bit can be pending
                f"    if v{j}.dtype is not D{j} or v{j}.shape != S{j} or not v{j}.is_cpu: return False",
                f"    v{j} = A{j}(v{j}.data_ptr()).raw if v{j}.is_contiguous() else v{j}.numpy().tobytes()",
                f"elif type(v{j}) is ndarray and v{j}.dtype == N{j} and v{j}.shape == S{j}: v{j} = v{j}.tobytes()",
                "else: return False",
            ]
            if scratch is not None and spec.dtype.is_floating_point:
                scratch.add(spec, f"v{j}")
            offsets[row_bytes] = f"o{row_bytes}"  # the slot's first byte in columns of this row size
            write.append(f"M{j}[o{row_bytes} : o{row_bytes} + {row_bytes}] = v{j}")
        stage = scratch.lines(names) if scratch is not None else []
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
            *("    " + line for line in stage),
            "    slot = storage.pos",
            *(f"    {name} = slot * {row_bytes}" for row_bytes, name in offsets.items()),
            *("    " + line for line in write),
            f"    storage.pos = slot + 1 if slot + 1 < {storage.capacity} else 0",
            f"    if storage.size < {storage.capacity}: storage.size += 1",
            "    storage.n_written += 1",
            "    return True",
        ]
        self.source = "\n".join(body)
        exec(compile(self.source, "<entmachin.buffer fast path>", "exec"), names)  # noqa: S102 - our own code
        self.append: Callable[[Any], bool] = names["append"]

    @classmethod
    def build(cls, schema: Schema, storage: RingStorage, check_finite: bool = True) -> Optional["FastPath"]:
        """The compiled path for ``schema``, or None if its transitions never take it."""
        try:
            return cls(schema, storage, check_finite)
        except ValueError:
            return None


class _Scratch:
    """One staging row per floating dtype: the new row's floating leaves side by side.

    The fast path joins the bytes of a dtype's floating leaves into its staging row (one
    copy), checks them all with one dot product against ones (a NaN or ±inf makes it
    non-finite; finite values that overflow it only send the append to the general path, whose
    check is exact), and copies them to their columns only if the check passes, so a refused
    append writes nothing.
    """

    def __init__(self, schema: Schema) -> None:
        widths: Dict[Any, int] = {}
        for spec in schema.leaves:
            if spec.kind == "dense" and spec.dtype.is_floating_point and spec.np_dtype is not None:
                widths[spec.np_dtype] = widths.get(spec.np_dtype, 0) + math.prod(spec.shape)
        self.rows = {dtype: np.zeros(width, dtype) for dtype, width in widths.items()}  # [width] each
        self._values: Dict[Any, List[str]] = {dtype: [] for dtype in widths}  # names of the leaves' bytes

    def add(self, spec: Any, value: str) -> None:
        """Stages ``value`` (a floating leaf's row bytes) next in the row of the leaf's dtype."""
        self._values[spec.np_dtype].append(value)

    def lines(self, names: Dict[str, Any]) -> List[str]:
        """Lines that stage every added value and return False unless all of them are finite."""
        lines = []
        for g, (dtype, row) in enumerate(self.rows.items()):
            names[f"W{g}"] = memoryview(row.view(np.uint8))  # [width * itemsize]
            names[f"G{g}"], names[f"O{g}"] = row.dot, np.ones_like(row)  # a bound method: one lookup less
            names[f"R{g}"] = np.zeros((), dtype)  # the dot product's result, written in place
            values = self._values[dtype]
            staged = values[0] if len(values) == 1 else f"join(({', '.join(values)}))"
            lines += [
                f"W{g}[:] = {staged}",
                f"G{g}(O{g}, R{g})",
                f"if not isfinite(R{g}): return False  # NaN or inf staged",
            ]
        return lines
