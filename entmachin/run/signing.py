"""Signing the pickles a run writes, so that only this user's own are ever unpickled.

A checkpoint keeps the environments' state, which only a pickle can hold (``dill``: arbitrary
Python objects), and unpickling runs whatever code the pickle names. A checksum does not help: who
replaces a file recomputes it. So each pickled blob is signed with HMAC-SHA256 under a key that
lives outside every run directory, and resume unpickles a blob only when its signature holds: a run
directory copied from someone else (or edited by someone else) resumes with fresh episodes instead
of running their code.

The key: ``$ENTMACHIN_KEY_FILE`` if set, else ``checkpoint.key`` in the user's configuration
directory (``$XDG_CONFIG_HOME/entmachin``, ``~/.config/entmachin``; ``%APPDATA%\\entmachin`` on
Windows), 32 random bytes written as hex, created on first use with owner-only permissions. A key
file that others can read or that another user owns is refused: whoever can read it can sign.
Machines that resume each other's runs (a cluster's nodes) share one key file by pointing
``ENTMACHIN_KEY_FILE`` at it.

A signed blob is ``MAGIC``, the 32-byte HMAC of (``MAGIC``, its purpose, the payload), then the
payload; the purpose (``"envs"``) keeps a blob signed for one use from being accepted for another.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat

__all__ = ["KEY_ENV", "MAGIC", "SignatureError", "key_path", "sign", "verify", "is_signed", "payload"]

KEY_ENV = "ENTMACHIN_KEY_FILE"
MAGIC = b"entmachin-signed/1\n"
_DIGEST = 32


class SignatureError(ValueError):
    """A blob whose signature does not hold (or a key that cannot be used); the message says why."""


def key_path() -> str:
    """Where this user's signing key lives (see the module docstring)."""
    if os.environ.get(KEY_ENV):
        return os.path.abspath(os.path.expanduser(os.environ[KEY_ENV]))
    if os.name == "nt":
        base = os.environ.get("APPDATA") or os.path.expanduser("~")
    else:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "entmachin", "checkpoint.key")


def _read_key(path: str) -> bytes:
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        text = f.read().strip()
    if os.name != "nt":
        if info.st_uid != os.getuid():
            raise SignatureError(f"the signing key {path} belongs to another user (uid {info.st_uid}); "
                                 f"remove it or point {KEY_ENV} at a key of your own")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise SignatureError(f"the signing key {path} can be read by others (mode "
                                 f"{stat.S_IMODE(info.st_mode):o}), who could sign code for you to run: "
                                 f"chmod 600 {path}")
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != _DIGEST:
        raise SignatureError(f"the signing key {path} is damaged: expected {2 * _DIGEST} hex digits; remove it and "
                             "a new one is made (checkpoints signed with the old one then resume with fresh episodes)")
    return key


def _key(create: bool) -> bytes:
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:
            raise SignatureError(f"there is no signing key at {path}, so nothing was signed by this user "
                                 "here") from None
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:  # another process made it first
        return _read_key(path)
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_hex(_DIGEST).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return _read_key(path)


def _mac(key: bytes, purpose: str, payload: bytes) -> bytes:
    return hmac.new(key, MAGIC + purpose.encode() + b"\0" + payload, hashlib.sha256).digest()


def sign(payload: bytes, purpose: str) -> bytes:
    """``payload`` signed with this user's key (made on first use) for ``purpose``.

    Raises:
        SignatureError: the key exists but cannot be used (others can read it, another user owns
            it, or it is damaged).
    """
    return MAGIC + _mac(_key(create=True), purpose, payload) + payload


def is_signed(blob: bytes) -> bool:
    """Whether ``blob`` has the form of a signed blob (says nothing of whose signature it is)."""
    return blob.startswith(MAGIC) and len(blob) >= len(MAGIC) + _DIGEST


def payload(blob: bytes) -> bytes:
    """What ``blob`` holds, signature unchecked: the payload of a signed blob, an unsigned one whole
    (for the user who says to trust it)."""
    return blob[len(MAGIC) + _DIGEST:] if is_signed(blob) else blob


def verify(blob: bytes, purpose: str) -> bytes:
    """The payload of ``blob`` if this user's key signed it for ``purpose``.

    Raises:
        SignatureError: saying why not: not signed (written before entmachin signed checkpoints,
            or by something else), signed with another key (another user's or machine's, or
            changed since), or no usable key here.
    """
    if not is_signed(blob):
        raise SignatureError("it is not signed (written before entmachin signed environment state, or not by "
                             "entmachin)")
    mac, payload = blob[len(MAGIC):len(MAGIC) + _DIGEST], blob[len(MAGIC) + _DIGEST:]
    if not hmac.compare_digest(mac, _mac(_key(create=False), purpose, payload)):
        raise SignatureError(f"its signature does not match this user's key ({key_path()}): another user or "
                             "machine wrote it, or it was changed since")
    return payload
