"""Saving and loading buffers: one zip file of raw arrays, a JSON header and, maybe, a dill part.

``file_format.py`` describes the file. Dense and ragged data are raw arrays, read back without
pickle. Custom attribute values (any Python object) can only be stored with dill, and
unpickling runs whatever code the file's author chose: ``load`` therefore refuses a file that
has a pickled part unless ``allow_pickle=True`` is passed, naming the custom attributes it
holds. A buffer without custom attributes (or without rows) writes no pickled part at all.

A file is written to a temporary name and renamed, so an interrupted save never leaves a
half-written file under ``path``. Loading checks everything before building the buffer: a
truncated, corrupt, edited or foreign file raises ``ValueError`` naming the file and, where
one is at fault, the attribute, with what was expected and what was found.
"""

import json
import zipfile
from typing import Any, Dict, List, Optional, Type

import dill
import numpy as np
import torch

from entmachin.buffer.file_format import CUSTOM, FORMAT, HEADER, VERSION, FileError, dtype_name, read_arrays, read_header, schema_to_json
from entmachin.buffer.schema import Schema
from entmachin.buffer.storage import RingStorage
from entmachin.files import atomic_path

__all__ = ["save_buffer", "load_buffer"]


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    if tensor.numel() == 0:  # torch cannot view an empty tensor of any stride as bytes
        return b""
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def save_buffer(buffer: Any, path: str) -> None:
    """Writes ``buffer`` (a ``Buffer`` or ``PrioritizedBuffer``) to ``path``; see the module docstring."""
    header: Dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "class": type(buffer).__name__,
        "buffer_size": buffer.buffer_size,
        "buffer_device": str(buffer.buffer_device),
        "allow_nonfinite": buffer.allow_nonfinite,
        "rng_state": buffer._rng.bit_generator.state,
        "schema": None if buffer._schema is None else schema_to_json(buffer._schema),
        "arrays": [],
    }
    blobs: List[bytes] = []

    def add(tensor: torch.Tensor) -> None:
        header["arrays"].append({"dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape)})
        blobs.append(_tensor_bytes(tensor))

    storage: Optional[RingStorage] = buffer._storage
    customs: List[List[Any]] = []
    if storage is not None:
        header.update(pos=storage.pos, size=storage.size, n_written=storage.n_written)
        chrono = storage.slots_of_rows(np.arange(storage.size, dtype=np.int64))  # [size] oldest first
        for column in storage.columns:
            for part in column.export(chrono):
                add(part)
        if storage.size:
            customs = [column.gather(chrono) for column in storage.customs]
    extra = getattr(buffer, "_save_state", None)
    if extra is not None:
        state, tensors = extra()
        header["prioritized"] = state
        for tensor in tensors:
            add(tensor)
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED,
                                                  allowZip64=True) as archive:
        archive.writestr(HEADER, json.dumps(header))
        for i, blob in enumerate(blobs):
            archive.writestr(f"arrays/{i}.bin", blob)
        if customs:
            archive.writestr(CUSTOM, dill.dumps(customs))


def load_buffer(cls: Type[Any], path: str, buffer_device: Any = None, allow_pickle: bool = False) -> Any:
    """Reads a file written by :func:`save_buffer` into a new ``cls``; see the module docstring."""
    where = f"{cls.__name__}.load({path!r})"
    try:
        with zipfile.ZipFile(path, "r") as archive:
            header = read_header(archive, where)
            if header["class"] != cls.__name__:
                raise FileError(f"{where}: the file holds a {header['class']}; load it with {header['class']}.load")
            arrays = read_arrays(archive, header, where)
            customs = _read_customs(archive, header, allow_pickle, where)
    except (FileError, OSError):  # OSError: a missing or unreadable path, named by its message
        raise
    except Exception as error:  # zipfile, json and struct errors of a damaged file, whatever their type
        raise FileError(
            f"{where}: the file is truncated, corrupt or not an entmachin buffer file ({type(error).__name__}: {error})"
        ) from None
    try:
        return _build(cls, header, arrays, customs, buffer_device, where)
    except FileError:
        raise
    except (KeyError, TypeError, IndexError, ValueError, RuntimeError) as error:
        raise FileError(f"{where}: the file's header is inconsistent ({type(error).__name__}: {error})") from None


def _read_customs(archive: zipfile.ZipFile, header: Dict[str, Any], allow_pickle: bool, where: str) -> List[List[Any]]:
    """The custom attribute values, oldest row first; unpickled only when there are any, and allowed."""
    schema: Optional[Schema] = header["schema"]
    size = header.get("size", 0)
    if schema is None or not schema.custom_attr or not size:
        return [[] for _ in (schema.custom_attr if schema is not None else ())]  # nothing to unpickle
    names = list(schema.custom_attr)
    if not allow_pickle:
        raise FileError(
            f"{where}: the file stores custom attribute(s) {names} with dill (pickle), and unpickling runs "
            "whatever code the file's author put in it; pass allow_pickle=True only for files you trust"
        )
    try:
        customs = dill.loads(archive.read(CUSTOM))
    except KeyError:
        raise FileError(f"{where}: {CUSTOM} (custom attribute(s) {names}) is missing") from None
    except Exception as error:  # a damaged pickle can raise nearly anything
        raise FileError(
            f"{where}: the pickled part (custom attribute(s) {names}) cannot be read ({type(error).__name__}: {error})"
        ) from None
    if not isinstance(customs, list) or len(customs) != len(names):
        raise FileError(f"{where}: the pickled part holds {type(customs).__name__} {_count(customs)}, expected one list per custom attribute {names}")
    for attr, values in zip(names, customs):
        if not isinstance(values, list) or len(values) != size:
            raise FileError(f"{where}: custom attribute {attr!r} holds {_count(values)} values, expected {size}")
    return customs


def _count(value: Any) -> str:
    return str(len(value)) if isinstance(value, list) else f"a {type(value).__name__}"


def _build(cls: Type[Any], header: Dict[str, Any], arrays: List[torch.Tensor], customs: List[List[Any]], device: Any, where: str) -> Any:
    device = header["buffer_device"] if device is None else device
    try:
        buffer = cls._from_header(header, device)
    except (TypeError, ValueError, KeyError) as error:
        raise FileError(f"{where}: the header's settings are invalid ({type(error).__name__}: {error})") from None
    buffer._rng.bit_generator.state = header["rng_state"]
    schema: Optional[Schema] = header["schema"]
    storage = None
    n_arrays = 0
    if schema is not None:
        buffer._schema = schema
        if "size" in header:
            n_arrays = sum(2 if spec.kind == "ragged" else 1 for spec in schema.leaves)
    n_needed = n_arrays + ("prioritized" in header)
    if len(arrays) != n_needed:
        raise FileError(f"{where}: the header lists {len(arrays)} arrays, but the schema needs {n_needed}")
    if "size" in header:
        storage = RingStorage(schema, buffer.buffer_size, buffer.buffer_device)
        size, pos = header["size"], header["pos"]
        if not 0 <= size <= buffer.buffer_size or not 0 <= pos < buffer.buffer_size or header["n_written"] < size:
            raise FileError(
                f"{where}: ring position {pos} / size {size} do not fit buffer_size {buffer.buffer_size} "
                f"(and {header['n_written']} rows written)"
            )
        storage.pos, storage.size, storage.n_written = pos, size, header["n_written"]
        _load_columns(storage, arrays[:n_arrays], where)
        first = storage.oldest
        for column, values in zip(storage.customs, customs):
            for age, value in enumerate(values):
                column.write((first + age) % buffer.buffer_size, value, 1)
        buffer._attach(storage)
    if "prioritized" in header:
        buffer._load_state(header["prioritized"], arrays[n_arrays:], where)
    return buffer


def _load_columns(storage: RingStorage, arrays: List[torch.Tensor], where: str) -> None:
    """Checks every column's saved arrays against the schema, then writes them oldest first."""
    size, position, parts_of = storage.size, 0, []
    for column in storage.columns:
        spec = column.spec
        if spec.kind == "ragged":
            flat, lengths = arrays[position : position + 2]
            position += 2
            if flat.dtype != spec.dtype or tuple(flat.shape[1:]) != spec.shape:
                raise FileError(
                    f"{where}: {spec.name}: the file holds {dtype_name(flat.dtype)} items of shape {tuple(flat.shape[1:])}, "
                    f"but its header's schema says {dtype_name(spec.dtype)} items of shape {spec.shape}"
                )
            if lengths.dtype != torch.int64 or lengths.shape != (size,) or bool((lengths < 0).any()) or int(lengths.sum()) != flat.shape[0]:
                raise FileError(
                    f"{where}: {spec.name}: the file's lengths ({dtype_name(lengths.dtype)} {tuple(lengths.shape)}) do not "
                    f"describe {size} rows of the {flat.shape[0]} saved items; expected int64 ({size},) summing to {flat.shape[0]}"
                )
            parts_of.append((flat, lengths))
            continue
        (rows,) = arrays[position : position + 1]
        position += 1
        if spec.kind != "ragged" and not spec.path and spec.shape == (1,) and rows.shape == (size,):
            rows = rows.reshape(size, 1)  # version 1: a [B] sub attribute saved as [n]
        if rows.dtype != spec.dtype or tuple(rows.shape) != (size, *spec.shape):
            raise FileError(
                f"{where}: {spec.name}: the file holds {dtype_name(rows.dtype)} rows of shape {tuple(rows.shape[1:])} for "
                f"{rows.shape[0] if rows.dim() else 0} rows, but its header's schema says {dtype_name(spec.dtype)} rows of "
                f"shape {spec.shape} for {size} rows"
            )
        parts_of.append((rows,))
    if size:
        for column, parts in zip(storage.columns, parts_of):
            column.load(parts, storage.oldest)
