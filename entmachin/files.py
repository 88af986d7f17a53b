"""Writing files that leave the process: atomically, with the permissions the umask gives.

Every file entmachin writes for someone else to read (a run's ``config.yaml`` and ``eval.json``, a
league's record, an exported policy, a dataset's parts and description, a buffer file) goes through
:func:`atomic_write` or :func:`atomic_path`: the content is written under a temporary name in the
same directory, flushed to disk, and renamed over the target, so a reader sees the old file or the
new one, never a half-written one. The temporary file is created with mode ``0o666`` less the
umask, the mode ``open()`` gives, so a policy exported under a 022 umask is readable by the service
account that deploys it (``tempfile.mkstemp`` would make it owner-only).

Standard library only: every layer, the dataset writer and ``entmachin.deploy`` may import it.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from typing import Iterator

__all__ = ["atomic_write", "atomic_path", "sha256_of", "describe_bytes"]


def _temp_name(path: str) -> str:
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """A temporary path beside ``path`` to write (by name, e.g. with pyarrow); on a clean exit it
    is flushed to disk and renamed over ``path``; on an exception it is removed.

    Example::

        with atomic_path("data/part-00000.parquet") as temp:
            pq.write_table(table, temp)
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temp = _temp_name(path)
    os.close(os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask applies, as for open()
    try:
        yield temp
        with open(temp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp)
        raise


def atomic_write(path: str, data: bytes) -> None:
    """Writes ``data`` to ``path`` so that a reader sees the old or the new content, never a mix."""
    with atomic_path(path) as temp, open(temp, "wb") as f:
        f.write(data)


def sha256_of(data: bytes) -> str:
    """The SHA-256 of ``data`` as hex digits."""
    return hashlib.sha256(data).hexdigest()


def describe_bytes(data: bytes) -> str:
    """``'an empty file'`` or ``'123 bytes starting with b"..."'``: what a file held, for messages."""
    return f"{len(data)} bytes starting with {data[:16]!r}" if data else "an empty file"
