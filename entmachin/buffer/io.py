"""Saving and loading buffers: one zip file of raw arrays, a JSON header and a dill part.

Layout of the file (a zip archive, stored uncompressed):

* ``header.json``: format name and version, buffer class and settings, ring position, row
  counter, random state, the schema, and the dtype and shape of every array;
* ``arrays/<n>.bin``: the raw bytes of each array (dense rows, ragged items and lengths,
  priorities), oldest row first; read back without pickle;
* ``custom.dill``: the custom attribute values, serialised with dill. Unpickling runs code
  chosen by whoever wrote the file: load buffer files only from sources you trust.

A file is written to a temporary name and renamed, so an interrupted save never leaves a
half-written file under ``path``. Loading checks everything before building the buffer, and a
truncated, corrupt or foreign file raises ``ValueError``.
"""

import json
import os
import pickle
import struct
import zipfile
from typing import Any, Dict, List, Optional, Type

import dill
import numpy as np
import torch

from entmachin.buffer.schema import LeafSpec, Schema, dict_nodes
from entmachin.buffer.storage import RingStorage
from entmachin.buffer.values import numpy_dtype_of

__all__ = ["save_buffer", "load_buffer"]

FORMAT, VERSION = "entmachin-buffer", 1
_HEADER, _CUSTOM = "header.json", "custom.dill"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _parse_dtype(name: str, where: str) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{where}: unknown dtype {name!r}")
    return dtype


def _schema_to_json(schema: Schema) -> Dict[str, Any]:
    return {
        "major_attr": list(schema.major_attr),
        "sub_attr": list(schema.sub_attr),
        "custom_attr": list(schema.custom_attr),
        "leaves": [
            {"attr": s.attr, "path": list(s.path), "kind": s.kind, "dtype": _dtype_name(s.dtype), "shape": list(s.shape)}
            for s in schema.leaves
        ],
        "templates": schema.templates,
    }


def _schema_from_json(data: Dict[str, Any], where: str) -> Schema:
    leaves = []
    for leaf in data["leaves"]:
        dtype = _parse_dtype(leaf["dtype"], where)
        if leaf["kind"] not in ("dense", "ragged", "scalar"):
            raise ValueError(f"{where}: unknown leaf kind {leaf['kind']!r}")
        spec = LeafSpec(str(leaf["attr"]), tuple(map(str, leaf["path"])), leaf["kind"], dtype,
                        tuple(int(d) for d in leaf["shape"]), numpy_dtype_of(dtype))
        leaves.append(spec)
    templates = data["templates"]
    nodes = tuple(node for attr in data["major_attr"] for node in dict_nodes(attr, templates[attr], ()))
    return Schema(tuple(data["major_attr"]), tuple(data["sub_attr"]), tuple(data["custom_attr"]),
                  tuple(leaves), nodes, templates)


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
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
        "schema": None if buffer._schema is None else _schema_to_json(buffer._schema),
        "arrays": [],
    }
    blobs: List[bytes] = []

    def add(tensor: torch.Tensor) -> None:
        header["arrays"].append({"dtype": _dtype_name(tensor.dtype), "shape": list(tensor.shape)})
        blobs.append(_tensor_bytes(tensor))

    storage: Optional[RingStorage] = buffer._storage
    customs: List[List[Any]] = []
    if storage is not None:
        header.update(pos=storage.pos, size=storage.size, n_written=storage.n_written)
        chrono = storage.slots_of_rows(np.arange(storage.size, dtype=np.int64))  # [size] oldest first
        for column in storage.columns:
            for part in column.export(chrono):
                add(part)
        customs = [column.gather(chrono) for column in storage.customs]
    extra = getattr(buffer, "_save_state", None)
    if extra is not None:
        state, tensors = extra()
        header["prioritized"] = state
        for tensor in tensors:
            add(tensor)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            archive.writestr(_HEADER, json.dumps(header))
            for i, blob in enumerate(blobs):
                archive.writestr(f"arrays/{i}.bin", blob)
            archive.writestr(_CUSTOM, dill.dumps(customs))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _read_header(archive: zipfile.ZipFile, where: str) -> Dict[str, Any]:
    try:
        header = json.loads(archive.read(_HEADER))
    except KeyError:
        raise ValueError(f"{where}: the file is a zip archive but not an entmachin buffer file (no {_HEADER})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{where}: the file is not an entmachin buffer file")
    if header.get("version") != VERSION:
        raise ValueError(f"{where}: unsupported buffer file version {header.get('version')!r}; expected {VERSION}")
    return header


def _read_arrays(archive: zipfile.ZipFile, header: Dict[str, Any], where: str) -> List[torch.Tensor]:
    arrays = []
    for i, meta in enumerate(header["arrays"]):
        dtype = _parse_dtype(meta["dtype"], where)
        shape = tuple(int(d) for d in meta["shape"])
        blob = archive.read(f"arrays/{i}.bin")
        expected = int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype).element_size()
        if len(blob) != expected:
            raise ValueError(f"{where}: array {i} holds {len(blob)} bytes, expected {expected} for {shape} {dtype}")
        raw = torch.from_numpy(np.frombuffer(bytearray(blob), dtype=np.uint8))  # [n_bytes]
        arrays.append(raw.view(dtype).reshape(shape))
    return arrays


def load_buffer(cls: Type[Any], path: str, buffer_device: Any = None) -> Any:
    """Reads a file written by :func:`save_buffer` into a new ``cls``; see the module docstring."""
    where = f"{cls.__name__}.load({path!r})"
    try:
        with zipfile.ZipFile(path, "r") as archive:
            header = _read_header(archive, where)
            arrays = _read_arrays(archive, header, where)
            customs = dill.loads(archive.read(_CUSTOM))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, KeyError, struct.error, json.JSONDecodeError,
            UnicodeDecodeError, pickle.UnpicklingError) as error:
        raise ValueError(f"{where}: the file is truncated, corrupt or not an entmachin buffer file ({error})") from None
    if header["class"] != cls.__name__:
        raise ValueError(f"{where}: the file holds a {header['class']}; load it with {header['class']}.load")
    try:
        return _build(cls, header, arrays, customs, buffer_device, where)
    except (KeyError, TypeError, IndexError) as error:
        raise ValueError(f"{where}: the file's header is inconsistent ({error!r})") from None


def _build(cls: Type[Any], header: Dict[str, Any], arrays: List[torch.Tensor], customs: Any, device: Any, where: str) -> Any:
    device = header["buffer_device"] if device is None else device
    buffer = cls._from_header(header, device)
    buffer._rng.bit_generator.state = header["rng_state"]
    position = 0
    if header["schema"] is not None:
        buffer._schema = _schema_from_json(header["schema"], where)
    if "size" in header:
        storage = RingStorage(buffer._schema, buffer.buffer_size, buffer.buffer_device)
        size, pos = int(header["size"]), int(header["pos"])
        if not 0 <= size <= buffer.buffer_size or not 0 <= pos < buffer.buffer_size:
            raise ValueError(f"{where}: ring position {pos} / size {size} do not fit buffer_size {buffer.buffer_size}")
        storage.pos, storage.size, storage.n_written = pos, size, int(header["n_written"])
        first = storage.oldest
        for column in storage.columns:
            n_parts = 2 if column.spec.kind == "ragged" else 1
            parts, position = tuple(arrays[position : position + n_parts]), position + n_parts
            if parts[-1].shape[0] != size:
                raise ValueError(f"{where}: {column.spec.name} holds {parts[-1].shape[0]} rows, expected {size}")
            if size:
                column.load(parts, first)
        if not isinstance(customs, list) or len(customs) != len(storage.customs):
            raise ValueError(f"{where}: the custom part does not match the schema's custom attributes")
        for column, values in zip(storage.customs, customs):
            for age, value in enumerate(values):
                column.write((first + age) % buffer.buffer_size, value, 1)
        buffer._attach(storage)
    if "prioritized" in header:
        buffer._load_state(header["prioritized"], arrays[position:])
    return buffer
