"""``entmachin verify PATH``: checks a run directory, a checkpoint, an export or a dataset for damage
and for what entmachin would refuse to load, without unpickling anything.

What it checks, by what ``PATH`` is:

- a run directory: ``config.yaml`` (a run config), ``eval.json`` (JSON), every checkpoint version,
  the best checkpoint (``checkpoints/best/``, ``log.best``) where there is one, and ``policy.onnx``
  where there is one;
- a checkpoint directory (``checkpoints/``, with its ``best/``) or one manifest (``checkpoint_<steps>.json``): each
  file's size and SHA-256 against its manifest; that each torch file is a whole zip archive whose
  pickle refers only to what ``torch.load(weights_only=True)`` accepts (its opcodes are read, never
  run); the runner's state (JSON); the environments' state: whether this user's key signed it
  (resume restores it only then, or with ``--trust-checkpoint``) and which modules its pickle
  would import;
- an export (``.onnx``): its checksum (graph, each weight, metadata);
- a dataset (a directory with ``dataset.json``): each listed part's size, rows, SHA-256 and Parquet
  page checksums, and parts on disk that the description does not list.

Each finding is ``ok``, ``warning`` (loads, but cannot be fully checked or will not restore
everything) or ``FAILED`` (entmachin refuses it); the command exits 1 when any failed.
"""
from __future__ import annotations

import glob
import io
import json
import os
import pickletools
import zipfile
from dataclasses import dataclass
from typing import Callable, Iterable, List, Literal, Optional, Set

from entmachin.files import describe_bytes

__all__ = ["Finding", "verify", "main"]


@dataclass(frozen=True)
class Finding:
    """What was found about one file: ``status`` and a line saying what was checked or what is wrong."""

    path: str
    status: Literal["ok", "warning", "FAILED"]
    what: str


def _pickle_globals(data: bytes) -> Set[str]:
    """The ``module.name`` of every global a pickle refers to, read from its opcodes (never run)."""
    found: Set[str] = set()
    pushed: List[Optional[str]] = []  # the last values pushed (strings; None for others), for STACK_GLOBAL
    memo: dict = {}
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            pushed.append(arg)
        elif op.name in ("BINGET", "LONG_BINGET", "GET"):
            pushed.append(memo.get(arg))
        elif op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = pushed[-1] if pushed else None
        elif op.name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif op.name in ("GLOBAL", "INST"):
            found.add(str(arg).replace(" ", "."))
        elif op.name == "STACK_GLOBAL":
            module, name = (pushed[-2:] if len(pushed) >= 2 else [None, None])
            found.add(f"{module}.{name}" if module and name else "(a global named by computed values)")
            pushed.append(None)
        elif op.stack_after:
            pushed.append(None)
        pushed = pushed[-2:]
    return found


# What a pickle has no business calling in a checkpoint: running commands, code or imports, files, sockets.
_DANGEROUS_MODULES = {"os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "importlib", "runpy", "pty",
                      "ctypes", "pickle", "marshal", "code", "webbrowser"}
_DANGEROUS_BUILTINS = {"eval", "exec", "compile", "__import__", "open", "breakpoint", "input"}


def _dangerous(names: Set[str]) -> List[str]:
    return sorted(n for n in names if n.split(".")[0] in _DANGEROUS_MODULES
                  or (n.split(".")[0] in ("builtins", "__builtin__") and n.split(".")[-1] in _DANGEROUS_BUILTINS))


def _allowed_globals() -> Set[str]:
    """What ``torch.load(weights_only=True)`` accepts (torch's own list where it exposes one)."""
    try:
        from torch._weights_only_unpickler import _get_allowed_globals

        return set(_get_allowed_globals())
    except (ImportError, AttributeError):  # another torch: the globals entmachin's own files use
        return {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch.ByteStorage", "torch.FloatStorage",
                "torch.LongStorage", "torch.DoubleStorage", "torch.IntStorage", "torch.BoolStorage"}


def _torch_file(path: str, data: bytes) -> Optional[str]:
    """Why a ``torch.save`` file would be refused (None: it would not)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        if (broken := archive.testzip()) is not None:
            return f"member {broken} of its zip archive is damaged"
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if not pickles:
            return "not a torch.save archive (no data.pkl)"
        refers = _pickle_globals(archive.read(pickles[0]))
    except (zipfile.BadZipFile, ValueError, EOFError) as e:
        return f"not a torch.save archive ({describe_bytes(data) if len(data) < 64 else e})"
    if bad := sorted(refers - _allowed_globals()):
        return f"its pickle refers to {', '.join(bad[:5])}, which torch.load(weights_only=True) refuses"
    return None


def _envs(path: str, blob: bytes, what: str) -> Finding:
    from entmachin.run import signing
    from entmachin.run.env_state import PURPOSE

    try:
        signing.verify(blob, PURPOSE)
        return Finding(path, "ok", f"{what}: signed with your key ({signing.key_path()}); resume restores it")
    except signing.SignatureError as e:
        reason = str(e)
    try:
        names = _pickle_globals(signing.payload(blob))
    except Exception:  # pickletools raises several types on what is not a pickle
        return Finding(path, "FAILED", f"{what}: not restored on resume ({reason}), and not a pickle either")
    if bad := _dangerous(names):
        return Finding(path, "FAILED", f"{what}: not restored on resume ({reason}); its pickle calls "
                                       f"{', '.join(bad[:5])}: never resume it with --trust-checkpoint")
    modules = sorted({name.split(".")[0] for name in names})
    return Finding(path, "warning", f"{what}: not restored on resume ({reason}): the environments restart their "
                                    "episodes unless you resume with --trust-checkpoint; its pickle would import from "
                                    f"{', '.join(modules[:12]) or 'nothing'}")


def _checkpoint_version(directory: str, version: int) -> List[Finding]:
    from entmachin.frame.checkpoint_files import CheckpointError, read_blob, read_manifest
    from entmachin.run.distributed import ranks_from_bytes

    try:
        manifest = read_manifest(directory, version)
    except (CheckpointError, OSError) as e:
        return [Finding(os.path.join(directory, f"checkpoint_{version}.json"), "FAILED", str(e))]
    out, checked = [], 0
    for key, entry in sorted(manifest.files.items()):
        path = os.path.join(directory, str(entry["file"]))
        try:
            data = read_blob(directory, manifest, key)
        except (CheckpointError, OSError) as e:
            out.append(Finding(path, "FAILED", str(e).replace(repr(path), "the file")))
            continue
        checked += 1
        if key == "runner":
            try:
                json.loads(data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                out.append(Finding(path, "FAILED", "the runner's state is not JSON"))
        elif key == "envs":
            out.append(_envs(path, data, "environment state"))
        elif key == "ranks":
            try:
                for rank, state in enumerate(ranks_from_bytes(data)):
                    if state["envs"] is not None:
                        out.append(_envs(path, state["envs"], f"rank {rank}'s environment state"))
            except (ValueError, UnicodeDecodeError):
                out.append(Finding(path, "warning", "the ranks' state is not JSON (damaged, or pickled by an older "
                                                    "entmachin): not restored unless you resume with "
                                                    "--trust-checkpoint"))
        elif (why := _torch_file(path, data)) is not None:
            out.append(Finding(path, "FAILED", why))
    if checked < len(manifest.files):  # the files that do not match say so
        return out
    return [Finding(manifest.path, "ok", f"its {checked} files match their sizes and SHA-256")] + out


def _checkpoints(directory: str, versions: Optional[Iterable[int]] = None) -> List[Finding]:
    from entmachin.frame.checkpoint_files import manifest_versions

    best = os.path.join(directory, "best")
    below = _checkpoints(best) if versions is None and os.path.isdir(best) else []  # the run's best checkpoint
    versions = manifest_versions(directory) if versions is None else list(versions)
    if not versions:
        if os.path.basename(os.path.normpath(directory)) == "best":  # a save stopped before it published
            return [Finding(directory, "warning", "holds no published best checkpoint (checkpoint_<steps>.json)")]
        return [Finding(directory, "FAILED", "holds no checkpoint_<steps>.json: no checkpoint was published here")]
    return [f for v in versions for f in _checkpoint_version(directory, v)] + below


def _export(path: str) -> List[Finding]:
    from entmachin import export_checksum

    try:
        with open(path, "rb") as f:
            data = f.read()
        saved = export_checksum.recorded(data)
        if saved is None:
            return [Finding(path, "warning", "carries no checksum (exported before exports did, or not by "
                                             "entmachin): it cannot be checked")]
        differ = export_checksum.differences(data, saved)
    except OSError as e:
        return [Finding(path, "FAILED", f"cannot be read ({e.strerror or e})")]
    except export_checksum.ChecksumError as e:
        return [Finding(path, "FAILED", f"not an ONNX file entmachin wrote ({e})")]
    if differ:
        return [Finding(path, "FAILED", "; ".join(differ))]
    n = len(json.loads(saved)["weights"])
    return [Finding(path, "ok", f"its graph, {n} weights and metadata match the checksum it carries")]


def _dataset(directory: str) -> List[Finding]:
    from entmachin.data.dataset import DESCRIPTION, LOCK, Dataset, DatasetError

    try:
        dataset = Dataset(directory)
    except DatasetError as e:
        return [Finding(os.path.join(directory, DESCRIPTION), "FAILED", str(e))]
    out = []
    for path in dataset.paths:
        try:
            dataset.read_part(path)
            out.append(Finding(path, "ok" if dataset.checked else "warning",
                               "size, rows, SHA-256 and page checksums match the description" if dataset.checked
                               else "reads, but the description records no checksum to check it against"))
        except DatasetError as e:
            out.append(Finding(path, "FAILED", str(e).replace(f"{path}: ", "")))
    listed = set(dataset.paths)
    for path in sorted(glob.glob(os.path.join(directory, "*.parquet"))):
        if dataset.checked and path not in listed:
            out.append(Finding(path, "warning", "not listed in the description: never read (a writer stopped "
                                                "before listing it, or a file put there)"))
    if os.path.exists(os.path.join(directory, LOCK)):
        out.append(Finding(os.path.join(directory, LOCK), "warning", "a writer is recording here now, or was "
                                                                     "stopped before it closed"))
    return out


def _run_dir(directory: str) -> List[Finding]:
    from entmachin.run.logs import load_run_config

    out = []
    try:
        load_run_config(directory)
        out.append(Finding(os.path.join(directory, "config.yaml"), "ok", "a run config entmachin reads"))
    except Exception as e:  # ConfigError, RunError: the message says what
        out.append(Finding(os.path.join(directory, "config.yaml"), "FAILED", str(e)))
    evals = os.path.join(directory, "eval.json")
    if os.path.exists(evals):
        try:
            n = len(json.loads(open(evals, "rb").read().decode("utf-8")))
            out.append(Finding(evals, "ok", f"{n} evaluations"))
        except (ValueError, UnicodeDecodeError, TypeError):
            out.append(Finding(evals, "FAILED", "not JSON"))
    if os.path.isdir(os.path.join(directory, "checkpoints")):
        out += _checkpoints(os.path.join(directory, "checkpoints"))
    for path in sorted(glob.glob(os.path.join(directory, "*.onnx"))):
        out += _export(path)
    return out


def verify(path: str) -> List[Finding]:
    """What ``entmachin verify`` finds about ``path`` (see the module docstring)."""
    base = os.path.basename(os.path.normpath(path))
    if not os.path.exists(path):
        return [Finding(path, "FAILED", "does not exist")]
    if os.path.isfile(path):
        if base.startswith("checkpoint_") and base.endswith(".json") and base[11:-5].isdigit():
            return _checkpoints(os.path.dirname(path) or ".", [int(base[11:-5])])
        if base == "dataset.json":
            return _dataset(os.path.dirname(path) or ".")
        return _export(path)
    kinds: List[Callable[[str], List[Finding]]] = []
    if os.path.exists(os.path.join(path, "dataset.json")):
        kinds.append(_dataset)
    elif os.path.exists(os.path.join(path, "config.yaml")) or os.path.isdir(os.path.join(path, "checkpoints")):
        kinds.append(_run_dir)
    elif glob.glob(os.path.join(path, "checkpoint_*.json")):
        kinds.append(_checkpoints)
    if not kinds:
        return [Finding(path, "FAILED", "is not a run directory, a checkpoint directory or a dataset (no config.yaml, "
                                        "checkpoints/, checkpoint_<steps>.json or dataset.json)")]
    return [f for kind in kinds for f in kind(path)]


def main(paths: List[str]) -> int:
    """Prints every finding and a summary; 0 when nothing failed, else 1."""
    findings = [f for path in paths for f in verify(path)]
    for f in findings:
        print(f"{f.status:<8}{f.path}: {f.what}")
    failed = sum(f.status == "FAILED" for f in findings)
    warned = sum(f.status == "warning" for f in findings)
    print(f"{len(findings)} checked: {failed} failed, {warned} warning{'s' if warned != 1 else ''}")
    return 1 if failed else 0
