"""Atomic, versioned checkpoint directories: named blobs published together by one manifest.

A save writes and fsyncs each blob under a name no earlier save used, then publishes the set by atomically replacing
one small JSON manifest that records each file's size and SHA-256; only then are the superseded manifest's files
deleted. A process killed at any instant (SIGKILL, power loss after the fsyncs, an exception) thus leaves the
previous manifest with all its files or the new one with all of its; the next save sweeps the files of saves that
never published. A load reads only what a manifest names, checking sizes and checksums before decoding anything.

Layout (``v`` is the version; several versions live side by side, Machin-style)::

    checkpoint_<v>.json     the manifest: {"format": ..., "version": v, "meta": {...},
                            "files": {key: {"file", "bytes", "sha256"}}}
    <stem>_<v>.<token>.pt   one blob per key (``token``: 12 random hex digits)

The frame (:mod:`entmachin.frame.checkpoint`) and the runner publish their blobs in one manifest.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Mapping, Optional

from entmachin.files import describe_bytes

__all__ = ["CheckpointError", "Manifest", "publish", "read_manifest", "read_blob", "manifest_versions",
           "remove_version", "MANIFEST_FORMAT"]

MANIFEST_FORMAT = "entmachin-checkpoint"
_MANIFEST_VERSION = 1
_MANIFEST = re.compile(r"^checkpoint_(\d+)\.json$")
_BLOB = re.compile(r"^.+_\d+\.[0-9a-f]{12}\.pt$")
_TEMP = re.compile(r"^\.checkpoint_\d+\.json\.[0-9a-f]{12}\.tmp$")

# Called with a label at every file-operation boundary of a save ("before write actor_0....pt",
# "after fsync ...", ...); tests set it to stop the process at each boundary in turn.
_fault_hook: Optional[Callable[[str], None]] = None


class CheckpointError(ValueError):
    """A checkpoint file that is not what its manifest or the loading frame expects."""


@dataclass(frozen=True)
class Manifest:
    """A published checkpoint version: its path, the saver's metadata and the files by key."""

    path: str
    version: int
    meta: Dict[str, object]
    files: Dict[str, Dict[str, object]]


def _boundary(label: str) -> None:
    if _fault_hook is not None:
        _fault_hook(label)


def manifest_path(directory: str, version: int) -> str:
    return os.path.join(directory, f"checkpoint_{version}.json")


def manifest_versions(directory: str) -> list:
    """Versions with a published manifest in ``directory``, ascending."""
    return sorted(int(m.group(1)) for name in os.listdir(directory) if (m := _MANIFEST.match(name)))


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: str, data: bytes) -> None:
    name = os.path.basename(path)
    _boundary(f"before write {name}")
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        _boundary(f"after write {name}")
        os.fsync(f.fileno())
    _boundary(f"after fsync {name}")


def _remove(path: str) -> None:
    name = os.path.basename(path)
    _boundary(f"before delete {name}")
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    _boundary(f"after delete {name}")


def publish(directory: str, version: int, blobs: Mapping[str, bytes], stems: Mapping[str, str],
            meta: Mapping[str, object]) -> Manifest:
    """Writes ``blobs`` (key -> bytes) to ``directory`` (created if missing) and atomically publishes them as version
    ``version``, replacing an earlier manifest of it; returns that manifest. ``stems`` names each key's file
    (``actor`` -> ``actor_<v>.<token>.pt``); ``meta`` is JSON-serialisable metadata stored in the manifest."""
    os.makedirs(directory, exist_ok=True)
    target = manifest_path(directory, version)
    token = secrets.token_hex(6)
    temp = os.path.join(directory, f".checkpoint_{version}.json.{token}.tmp")
    files: Dict[str, Dict[str, object]] = {}
    written = []
    try:
        for key, data in blobs.items():
            name = f"{stems[key]}_{version}.{token}.pt"
            path = os.path.join(directory, name)
            written.append(path)
            _write(path, data)
            files[key] = {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        _boundary("before fsync directory")
        _fsync_dir(directory)
        document = {"format": MANIFEST_FORMAT, "format_version": _MANIFEST_VERSION, "version": version,
                    "token": token, "meta": dict(meta), "files": files}
        _write(temp, json.dumps(document, indent=1, sort_keys=True).encode())
        _boundary(f"before rename {os.path.basename(temp)}")
        os.replace(temp, target)
        _boundary(f"after rename {os.path.basename(target)}")
        _fsync_dir(directory)
        _boundary("after fsync directory")
    except BaseException:  # KeyboardInterrupt included: leave no half-written files behind...
        try:  # ...unless the manifest was already renamed into place: the disk, not a flag that an interrupt could
            # pre-empt, says whether this save was published
            document = json.loads(Path(target).read_bytes().decode("utf-8"))
            published = isinstance(document, dict) and document.get("token") == token
        except (OSError, ValueError):
            published = False
        for path in ([] if published else written) + [temp]:
            with contextlib.suppress(OSError):
                os.remove(path)
        raise
    _sweep(directory)
    return Manifest(target, version, dict(meta), files)


def remove_version(directory: str, version: int) -> None:
    """Unpublishes ``version`` (its manifest goes first, so a reader sees it whole or not at all),
    then deletes the files no remaining manifest names."""
    _remove(manifest_path(directory, version))
    _fsync_dir(directory)
    _sweep(directory)


def _sweep(directory: str) -> None:
    """Deletes blobs no manifest names and stale temporary manifests."""
    referenced = set()
    for version in manifest_versions(directory):
        try:
            referenced |= {entry["file"] for entry in read_manifest(directory, version).files.values()}
        except (CheckpointError, OSError):
            return  # never delete anything while some manifest cannot be read
    for name in sorted(os.listdir(directory)):
        if (_BLOB.match(name) and name not in referenced) or _TEMP.match(name):
            _remove(os.path.join(directory, name))


def read_manifest(directory: str, version: int) -> Manifest:
    """Reads and checks ``checkpoint_<version>.json``.

    Raises:
        FileNotFoundError: there is no such manifest.
        CheckpointError: the file is not an entmachin manifest of a known format.
    """
    path = manifest_path(directory, version)
    raw = Path(path).read_bytes()
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"{path!r} is not a checkpoint manifest: expected JSON, "
                              f"found {describe_bytes(raw)}") from None
    if not isinstance(document, dict) or document.get("format") != MANIFEST_FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise CheckpointError(f"{path!r} is not a checkpoint manifest: expected format {MANIFEST_FORMAT!r}, "
                              f"found {found!r}")
    if document.get("format_version") != _MANIFEST_VERSION:
        raise CheckpointError(f"{path!r} has manifest format_version {document.get('format_version')!r}; this "
                              f"entmachin reads format_version {_MANIFEST_VERSION} (a newer entmachin wrote it?)")
    files = document.get("files")
    good = isinstance(files, dict) and all(
        isinstance(e, dict) and isinstance(e.get("file"), str) and os.path.basename(e["file"]) == e["file"]
        and isinstance(e.get("bytes"), int) and isinstance(e.get("sha256"), str) for e in files.values())
    if not good or document.get("version") != version or not isinstance(document.get("meta"), dict):
        raise CheckpointError(f"{path!r} is damaged: expected 'files' entries with file, bytes and sha256, "
                              f"'meta' and version {version}, found {document!r:.300}")
    return Manifest(path, version, document["meta"], files)


def read_blob(directory: str, manifest: Manifest, key: str) -> bytes:
    """The bytes of ``key``'s file, checked against the manifest's size and checksum.

    Raises:
        FileNotFoundError: the manifest names a file that is missing.
        CheckpointError: the file's size or checksum differs (truncated or damaged).
    """
    if key not in manifest.files:
        raise CheckpointError(f"{manifest.path!r} names no {key!r} file; it holds {sorted(manifest.files)}")
    entry = manifest.files[key]
    path = os.path.join(directory, str(entry["file"]))
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path!r} does not exist, but {manifest.path!r} names it as {key!r}")
    data = Path(path).read_bytes()
    if len(data) != entry["bytes"]:
        raise CheckpointError(f"{path!r} is truncated or damaged: {manifest.path!r} expects {entry['bytes']} "
                              f"bytes, found {len(data)}")
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise CheckpointError(f"{path!r} is damaged: its SHA-256 differs from the one {manifest.path!r} records")
    return data
