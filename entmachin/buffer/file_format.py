"""The buffer file's parts, read and checked without running any code from the file.

Layout of the file (a zip archive, stored uncompressed):

* ``header.json``: format name and version, buffer class and settings, ring position, row
  counter, random state, the schema, and the dtype and shape of every array;
* ``arrays/<n>.bin``: the raw bytes of each array (dense rows, ragged items and lengths,
  priorities), oldest row first;
* ``custom.dill``: the custom attribute values, serialised with dill; only written when the
  buffer holds rows with custom attributes.

Every check here raises ``FileError`` (a ``ValueError``) whose message starts with ``where``,
which names the file. Version 1 files (always with a ``custom.dill`` part, and ``[B]`` sub
attributes stored as ``[n]``) still load.
"""

import json
import zipfile
from typing import Any, Callable, Dict, List

import numpy as np
import torch

from entmachin.buffer.leaf import LeafSpec
from entmachin.buffer.schema import Schema, dict_nodes
from entmachin.buffer.values import numpy_dtype_of

__all__ = ["FORMAT", "VERSION", "HEADER", "CUSTOM", "FileError", "dtype_name", "schema_to_json", "read_header", "read_arrays"]

FORMAT, VERSION, READABLE = "entmachin-buffer", 2, (1, 2)
HEADER, CUSTOM = "header.json", "custom.dill"


class FileError(ValueError):
    """A buffer file that cannot be loaded; the message names the file and what is wrong."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _parse_dtype(name: Any, where: str) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise FileError(f"{where}: unknown dtype {name!r}")
    return dtype


def schema_to_json(schema: Schema) -> Dict[str, Any]:
    return {
        "major_attr": list(schema.major_attr),
        "sub_attr": list(schema.sub_attr),
        "custom_attr": list(schema.custom_attr),
        "leaves": [
            {"attr": s.attr, "path": list(s.path), "kind": s.kind, "dtype": dtype_name(s.dtype), "shape": list(s.shape)}
            for s in schema.leaves
        ],
        "templates": schema.templates,
    }


def _schema_from_json(data: Dict[str, Any], where: str) -> Schema:
    leaves = []
    for leaf in data["leaves"]:
        dtype = _parse_dtype(leaf["dtype"], where)
        if leaf["kind"] not in ("dense", "ragged", "scalar"):
            raise FileError(f"{where}: unknown leaf kind {leaf['kind']!r}")
        shape = tuple(int(d) for d in leaf["shape"])
        if not leaf["path"] and leaf["kind"] == "dense" and not shape:
            shape = (1,)  # version 1 kept a [B] sub attribute as [n]; it is [n, 1] now
        leaves.append(LeafSpec(str(leaf["attr"]), tuple(map(str, leaf["path"])), leaf["kind"], dtype, shape, numpy_dtype_of(dtype)))
    major, templates = tuple(map(str, data["major_attr"])), data["templates"]
    indices = sorted(index for attr in major for index in _leaf_indices(templates[attr]))
    if indices != [i for i, leaf in enumerate(leaves) if leaf.path]:
        raise FileError(f"{where}: the header's 'schema' templates do not number the major attributes' leaves")
    nodes = tuple(node for attr in major for node in dict_nodes(attr, templates[attr], ()))
    return Schema(major, tuple(map(str, data["sub_attr"])), tuple(map(str, data["custom_attr"])), tuple(leaves), nodes, templates)


def _leaf_indices(template: Any) -> List[int]:
    if not isinstance(template, dict):
        raise TypeError(f"a template node is a {type(template).__name__}, expected a dict")
    out: List[int] = []
    for value in template.values():
        if not isinstance(value, dict) and not _is_int(value):
            raise TypeError(f"a template leaf is {value!r}, expected a leaf index (an int >= 0)")
        out += _leaf_indices(value) if isinstance(value, dict) else [value]
    return out


def _is_int(value: Any, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


_FIELDS: Dict[str, Any] = {  # key -> (check, what is expected)
    "class": (lambda v: isinstance(v, str), "a buffer class name"),
    "buffer_size": (lambda v: _is_int(v, 1), "an int >= 1"),
    "buffer_device": (lambda v: isinstance(v, str), "a device name"),
    "allow_nonfinite": (lambda v: isinstance(v, bool), "a bool"),
    "rng_state": (lambda v: isinstance(v, dict), "a numpy random state"),
    "arrays": (lambda v: isinstance(v, list) and all(_is_array_meta(m) for m in v),
               "a list of {'dtype': name, 'shape': [ints >= 0]}"),
    "pos": (_is_int, "an int >= 0"),
    "size": (_is_int, "an int >= 0"),
    "n_written": (_is_int, "an int >= 0"),
    "prioritized": (lambda v: isinstance(v, dict), "the prioritized buffer's settings"),
}
_OPTIONAL = ("allow_nonfinite", "pos", "size", "n_written", "prioritized")


def _is_array_meta(meta: Any) -> bool:
    return (isinstance(meta, dict) and isinstance(meta.get("dtype"), str) and isinstance(meta.get("shape"), list)
            and all(_is_int(d) for d in meta["shape"]))


def read_header(archive: zipfile.ZipFile, where: str) -> Dict[str, Any]:
    """Reads and checks ``header.json``; its schema is returned parsed, under ``"schema"``."""
    try:
        raw = archive.read(HEADER)
    except KeyError:
        raise FileError(f"{where}: the file is a zip archive but not an entmachin buffer file (no {HEADER})") from None
    header = json.loads(raw)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise FileError(f"{where}: the file is not an entmachin buffer file (its {HEADER} names no format {FORMAT!r})")
    if header.get("version") not in READABLE:
        raise FileError(f"{where}: unsupported buffer file version {header.get('version')!r}; expected one of {list(READABLE)}")
    for key, (check, expected) in _FIELDS.items():
        if key not in header:
            if key not in _OPTIONAL or (key in ("pos", "n_written") and "size" in header):
                raise FileError(f"{where}: the header has no {key!r}; expected {expected}")
            continue
        if not check(header[key]):
            raise FileError(f"{where}: the header's {key!r} is {_short(header[key])}; expected {expected}")
    _try(lambda: np.random.default_rng().bit_generator.__setattr__("state", header["rng_state"]), "rng_state", where)
    schema = header.get("schema")
    if schema is not None:
        header["schema"] = _try(lambda: _schema_from_json(schema, where), "schema", where)
    elif "size" in header:
        raise FileError(f"{where}: the header has rows but no 'schema'")
    return header


def _try(read: Callable[[], Any], key: str, where: str) -> Any:
    try:
        return read()
    except FileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise FileError(f"{where}: the header's {key!r} is malformed ({type(error).__name__}: {error})") from None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_arrays(archive: zipfile.ZipFile, header: Dict[str, Any], where: str) -> List[torch.Tensor]:
    """Reads every ``arrays/<n>.bin`` as the dtype and shape the header gives it."""
    arrays = []
    for i, meta in enumerate(header["arrays"]):
        dtype = _parse_dtype(meta["dtype"], where)
        shape = tuple(meta["shape"])
        try:
            blob = archive.read(f"arrays/{i}.bin")
        except KeyError:
            raise FileError(f"{where}: arrays/{i}.bin is missing (the header lists {len(header['arrays'])} arrays)") from None
        expected = int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype).element_size()
        if len(blob) != expected:
            raise FileError(f"{where}: array {i} holds {len(blob)} bytes, expected {expected} for {shape} {dtype_name(dtype)}")
        raw = torch.from_numpy(np.frombuffer(bytearray(blob), dtype=np.uint8))  # [n_bytes]
        arrays.append(raw.view(dtype).reshape(shape))
    return arrays

