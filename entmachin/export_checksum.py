"""The checksum an exported policy carries: its graph, each weight and its metadata, by SHA-256.

``entmachin export`` appends one metadata entry, ``entmachin.checksum``, to the serialised ONNX
model: a JSON object with the SHA-256 of the graph's structure (every field of the model and of
its graph except the weights and the metadata), of each weight (initializer, by name) and of the
``entmachin.*`` metadata entries (sorted, the checksum's own entry left out). ``OnnxPolicy`` checks
it on load from the very bytes it hands onnxruntime, so a flipped byte inside a weight is named
(``weight 'trunk.0.w' differs``) instead of silently changing what the policy does.

The fields are read from protobuf's wire format directly (standard library only): a deployed
policy needs onnxruntime, not the onnx package.

Wire format used (https://protobuf.dev/programming-guides/encoding/): a message is a sequence of
fields, each a varint key ``field_number << 3 | wire_type`` and a value: a varint (type 0), 8
bytes (1), a varint length and that many bytes (2), or 4 bytes (5). ``ModelProto`` keeps its graph
in field 7 and its metadata entries (``StringStringEntryProto``: key 1, value 2) in field 14;
``GraphProto`` keeps its initializers in field 5, and a ``TensorProto`` its name in field 8.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterator, List, Optional, Tuple

__all__ = ["KEY", "ChecksumError", "checksum", "with_checksum", "recorded", "differences"]

KEY = "entmachin.checksum"
_MODEL_GRAPH, _MODEL_METADATA, _GRAPH_INITIALIZER, _TENSOR_NAME = 7, 14, 5, 8


class ChecksumError(ValueError):
    """Bytes that are not a protobuf message of the expected shape."""


def _varint(data: bytes, i: int, end: int) -> Tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= end or shift > 63:
            raise ChecksumError(f"a varint runs past byte {end}")
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if byte < 0x80:
            return value, i


def _fields(data: bytes, start: int = 0, end: Optional[int] = None) -> Iterator[Tuple[int, int, int, int]]:
    """``(field_number, first byte, payload start, end)`` of each field of the message in
    ``data[start:end]``; the payload of a length-delimited field is ``data[payload start:end]``."""
    end = len(data) if end is None else end
    i = start
    while i < end:
        first = i
        key, i = _varint(data, i, end)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, i = _varint(data, i, end)
            payload = i
        elif wire_type == 2:
            length, payload = _varint(data, i, end)
            i = payload + length
        elif wire_type in (1, 5):
            payload, i = i, i + (8 if wire_type == 1 else 4)
        else:
            raise ChecksumError(f"wire type {wire_type} at byte {first}")
        if number == 0 or i > end:
            raise ChecksumError(f"field {number} at byte {first} runs past byte {end}")
        yield number, first, payload, i


def _strings(data: bytes, start: int, end: int) -> Dict[int, str]:
    """The length-delimited fields of a small message, as text by field number."""
    return {n: data[p:e].decode("utf-8", "replace") for n, _, p, e in _fields(data, start, end)}


def _parts(data: bytes) -> Tuple[Any, Dict[str, str], List[Tuple[str, str]]]:
    graph, weights, metadata = hashlib.sha256(), {}, []
    for number, first, payload, end in _fields(data):
        if number == _MODEL_METADATA:
            entry = _strings(data, payload, end)
            if entry.get(1, "").startswith("entmachin.") and entry.get(1) != KEY:
                metadata.append((entry.get(1, ""), entry.get(2, "")))
        elif number == _MODEL_GRAPH:
            graph.update(data[first:payload])
            for inner, f, p, e in _fields(data, payload, end):
                if inner == _GRAPH_INITIALIZER:
                    name = next((data[pp:ee].decode("utf-8", "replace") for n, _, pp, ee in _fields(data, p, e)
                                 if n == _TENSOR_NAME), "")
                    weights[name] = hashlib.sha256(data[f:e]).hexdigest()
                else:
                    graph.update(data[f:e])
        else:
            graph.update(data[first:end])
    return graph, weights, metadata


def checksum(data: bytes) -> Dict[str, object]:
    """The checksum of a serialised ONNX model (its ``entmachin.checksum`` entry left out).

    Raises:
        ChecksumError: ``data`` is not a protobuf message.
    """
    graph, weights, metadata = _parts(data)
    meta = hashlib.sha256(json.dumps(sorted(metadata)).encode())
    return {"algorithm": "sha256", "graph": graph.hexdigest(), "metadata": meta.hexdigest(), "weights": weights}


def _length_delimited(number: int, payload: bytes) -> bytes:
    out, n = bytearray([number << 3 | 2]), len(payload)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + payload


def with_checksum(data: bytes) -> bytes:
    """A serialised ONNX model with its checksum appended as the metadata entry ``KEY`` (a field
    appended to a message is read as part of it, so nothing else is re-encoded)."""
    value = json.dumps(checksum(data), sort_keys=True).encode()
    entry = _length_delimited(1, KEY.encode()) + _length_delimited(2, value)
    return data + _length_delimited(_MODEL_METADATA, entry)


def recorded(data: bytes) -> Optional[str]:
    """The ``entmachin.checksum`` entry of a serialised model (None when it has none)."""
    for number, _, payload, end in _fields(data):
        if number == _MODEL_METADATA:
            entry = _strings(data, payload, end)
            if entry.get(1) == KEY:
                return entry.get(2, "")
    return None


def differences(data: bytes, saved: str) -> List[str]:
    """What differs between ``data`` and the checksum it records (``saved``, the entry's JSON):
    ``[]`` when nothing does.

    Raises:
        ChecksumError: ``data`` is not a protobuf message, or ``saved`` is not a checksum entry.
    """
    try:
        expected = json.loads(saved)
        ok = expected.get("algorithm") == "sha256" and isinstance(expected.get("weights"), dict)
    except (ValueError, AttributeError):
        ok = False
    if not ok:
        raise ChecksumError(f"its {KEY} entry is not a checksum: {saved!r:.100}")
    found = checksum(data)
    out = []
    if found["graph"] != expected.get("graph"):
        out.append("the graph (its operations, inputs or outputs) differs")
    if found["metadata"] != expected.get("metadata"):
        out.append("the entmachin.* metadata differs")
    weights, saved_weights = found["weights"], expected["weights"]
    changed = sorted(n for n in set(weights) & set(saved_weights) if weights[n] != saved_weights[n])
    out += [f"weight {name!r} differs" for name in changed[:5]]
    if len(changed) > 5:
        out.append(f"{len(changed) - 5} more weights differ")
    out += [f"weight {name!r} is missing" for name in sorted(set(saved_weights) - set(weights))[:5]]
    out += [f"weight {name!r} was added" for name in sorted(set(weights) - set(saved_weights))[:5]]
    return out
