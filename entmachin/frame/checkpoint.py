"""Saving and restoring a frame: atomic versions, all-or-nothing loads, ``weights_only`` files.

A save publishes one version of the checkpoint directory atomically (:mod:`entmachin.frame.checkpoint_files`):
``checkpoint_<version>.json`` names three files with their checksums,

    actor        actor.state_dict() (input normalisation statistics included)
    critic       critic.state_dict()
    frame_state  optimizers, schedulers, update counts, and the RNG states: the frame's shuffling generator and
                 torch's global generators (CPU and, where initialised, CUDA), which sample actions

A process killed at any instant of a save leaves the previous version or the new one, complete. A load reads and
checks every file (format, frame class, network names, each ``state_dict``'s keys and shapes, optimizer and
scheduler layout, RNG states) before it assigns anything, and restores the frame's earlier state if assigning
fails, so it either applies completely or changes nothing. Files are read with ``torch.load(weights_only=True)``:
no code from a file ever runs. Restoring everything makes a resumed run repeat an uninterrupted one exactly (on
CPU, one thread, deterministic algorithms, environments re-created with the same seeds).
"""
from __future__ import annotations

import copy
import io
import logging
import os
import re
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from entmachin.files import describe_bytes
from entmachin.frame.checkpoint_files import CheckpointError, manifest_versions, publish, read_blob, read_manifest

__all__ = ["CheckpointError", "LoadedCheckpoint", "save_frame", "load_frame", "read_frame_checkpoint",
           "latest_version", "check_state_dict"]

logger = logging.getLogger(__name__)

_FORMAT = 1
_STATE = "frame_state"
_STATE_KEYS = {"format", "frame", "optimizers", "lr_schedulers", "n_updates", "shuffle_rng", "torch_rng", "cuda_rng"}
# torch optimizers whose per-parameter state tensors all have the parameter's shape
_ELEMENTWISE = {"Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "ASGD", "Adadelta", "Rprop"}


def _arguments(frame: Any, network_map: Optional[Mapping[str, str]], version: Any,
               verb: str) -> Tuple[str, Dict[str, str]]:
    """Checks the ``version`` and ``network_map`` of a save or load; returns the prefix of its messages (``PPO.save``)
    and each network attribute's file stem (its own name unless ``network_map`` renames it)."""
    where, allow_latest = f"{type(frame).__name__}.{verb}", verb == "load"
    if isinstance(version, bool) or not isinstance(version, int) or version < (-1 if allow_latest else 0):
        low = "-1 (the highest saved)" if allow_latest else "0"
        raise ValueError(f"{where}: version must be an int >= {low}, got {version!r}")
    names = {name: name for name in getattr(frame, "network_names", ("actor", "critic"))}
    if network_map is None:
        return where, names
    if not isinstance(network_map, Mapping):
        raise TypeError(f"{where}: network_map must map {' / '.join(map(repr, names))} to file names, "
                        f"got {network_map!r}")
    if unknown := sorted(set(network_map) - set(names)):
        raise ValueError(f"{where}: network_map has unknown key {unknown[0]!r}; allowed keys are {list(names)}")
    if bad := [v for v in network_map.values() if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", v)]:
        raise ValueError(f"{where}: network_map names must be non-empty and use only letters, digits, '_' and '-', "
                         f"got {bad[0]!r}")
    return where, {**names, **network_map}


def _encode(obj: Any) -> bytes:
    torch.save(obj, buffer := io.BytesIO())
    return buffer.getvalue()


def _frame_state(frame: Any, optimizers: bool = True) -> Dict[str, Any]:
    """The frame's state as a checkpoint holds it (without the optimizers' unless ``optimizers``)."""
    return {"format": _FORMAT, "frame": type(frame).__name__,
            **({"optimizers": frame._optimizers.state_dicts()} if optimizers else {}),
            "lr_schedulers": [s.state_dict() for s in frame.lr_schedulers],
            **frame.training_counters(),  # n_updates, skipped_updates, shuffle_rng
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": (torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized()
                         else [])}


def save_frame(frame: Any, model_dir: str, network_map: Optional[Mapping[str, str]], version: int,
               extras: Optional[Mapping[str, bytes]] = None) -> None:
    """Publishes version ``version`` of ``model_dir`` atomically (see the module docstring) with ``extras``
    (key -> bytes, e.g. a runner's state) in the same manifest, read back by :func:`read_frame_checkpoint`."""
    where, names = _arguments(frame, network_map, version, "save")
    extras = dict(extras or {})
    if set(extras) & {*names, _STATE} or not all(isinstance(k, str) and re.fullmatch(r"[a-z0-9_]+", k) for k in extras):
        raise ValueError(f"{where}: extras keys must be lower-case names other than {', '.join(names)} "
                         f"and {_STATE}, got {sorted(extras)}")
    if rows := frame.replay_buffer.size():
        logger.warning("%s: %d stored rows are not saved (%s)", where, rows,
                       getattr(frame, "unsaved_buffer_note", "the on-policy buffer is only kept until update()"))
    blobs = {**{attr: _encode(getattr(frame, attr).state_dict()) for attr in names},
             _STATE: _encode(_frame_state(frame)), **extras}
    stems = {**names, _STATE: _STATE, **{k: k for k in extras}}
    publish(model_dir, version, blobs, stems, {"frame": type(frame).__name__, "networks": names})


def latest_version(model_dir: str, where: str = "load") -> int:
    """The highest version published in ``model_dir`` (the highest ``checkpoint_<version>.json``)."""
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{where}: {model_dir!r} is not a directory")
    if not (versions := manifest_versions(model_dir)):
        raise FileNotFoundError(f"{where}: {model_dir!r} holds no checkpoint_<version>.json, the manifest every "
                                "save publishes; nothing was saved there")
    return max(versions)


def _decode(path: str, data: bytes) -> Any:
    try:
        if not data.startswith(b"PK\x03\x04"):  # torch.save writes a zip archive
            raise ValueError("not a zip archive")
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types; the message is what matters
        if "weights only load failed" in str(e).lower():
            raise CheckpointError(f"{path!r} holds Python objects other than tensors and plain containers; entmachin "
                                  "loads checkpoints with weights_only=True and never runs code from a file") from None
        raise CheckpointError(f"{path!r} is not a checkpoint file: expected a file written by torch.save, "
                              f"found {describe_bytes(data)}") from None


def check_state_dict(path: str, what: str, saved: Any, module: torch.nn.Module) -> None:
    """Raises ``CheckpointError`` (naming ``path`` and the key) unless ``saved`` is a state_dict with
    ``module``'s names and shapes; ``what`` names the module in the message."""
    if not isinstance(saved, Mapping) or not all(isinstance(v, torch.Tensor) for v in saved.values()):
        raise CheckpointError(f"{path!r}: expected the {what}'s state_dict (names -> tensors), "
                              f"found {type(saved).__name__}")
    current = module.state_dict()
    missing, unexpected = sorted(set(current) - set(saved)), sorted(set(saved) - set(current))
    if missing or unexpected:
        raise CheckpointError(f"{path!r}: the {what}'s state_dict does not match this frame's {what}: missing "
                              f"keys {missing[:5]}, unexpected keys {unexpected[:5]} (another model or config?)")
    for key, tensor in current.items():
        if saved[key].shape != tensor.shape:
            raise CheckpointError(f"{path!r}: the {what}'s {key!r} has shape {tuple(saved[key].shape)} in the file "
                                  f"and {tuple(tensor.shape)} in this frame's {what} (another model config?)")


def _check_optimizer(path: str, i: int, saved: Any, kind: str, param_groups: List[List[torch.Tensor]]) -> None:
    """``saved`` against optimizer ``i``: a ``kind`` (its class name) over ``param_groups``."""
    where = f"{path!r}: optimizer {i} ({kind})"
    if not isinstance(saved, Mapping) or not isinstance(saved.get("param_groups"), list) \
            or not isinstance(saved.get("state"), Mapping):
        raise CheckpointError(f"{where}: expected an optimizer state_dict with 'state' and 'param_groups', "
                              f"found {type(saved).__name__}")
    groups = [len(g) for g in param_groups]
    found = [len(g.get("params", ())) if isinstance(g, Mapping) else None for g in saved["param_groups"]]
    if found != groups:
        raise CheckpointError(f"{where}: expected {len(groups)} parameter group(s) of sizes {groups}, found "
                              f"{found} (another model, or shared vs separate parameters?)")
    params = [p for g in param_groups for p in g]
    ids = [i for g in saved["param_groups"] for i in g["params"]]
    for index, entry in saved["state"].items():
        if index not in ids or not isinstance(entry, Mapping):
            raise CheckpointError(f"{where}: state for parameter {index!r}, which no parameter group names")
        param = params[ids.index(index)]
        for name, value in entry.items():
            if kind in _ELEMENTWISE and isinstance(value, torch.Tensor) and value.dim() > 0 \
                    and value.shape != param.shape:
                raise CheckpointError(f"{where}: state {name!r} of parameter {index} has shape {tuple(value.shape)}; "
                                      f"the parameter has shape {tuple(param.shape)}")


def _check_header(path: str, state: Any, frame: Any) -> None:
    name = type(frame).__name__
    if not isinstance(state, Mapping) or state.get("format") != _FORMAT or state.get("frame") != name:
        found = (f"a {state.get('frame')!r} save of format {state.get('format')!r}" if isinstance(state, Mapping)
                 else f"a {type(state).__name__}")
        raise CheckpointError(f"{path!r} holds {found}; expected a {name!r} save of format {_FORMAT}")
    if missing := sorted(_STATE_KEYS - set(state)):
        raise CheckpointError(f"{path!r}: the frame state lacks {missing}; the file is damaged")


def _check_frame_state(path: str, state: Any, frame: Any) -> None:
    found = len(state["optimizers"]), len(state["lr_schedulers"])
    own = len(frame._optimizers), len(frame.lr_schedulers)
    if found != own:
        raise CheckpointError(f"{path!r} holds {found[0]} optimizer(s) and {found[1]} scheduler(s); this frame has "
                              f"{own[0]} and {own[1]} (shared parameters and lr_scheduler must match the saved frame)")
    for i, saved in enumerate(state["optimizers"]):
        _check_optimizer(path, i, saved, frame._optimizers.class_name(i), frame._optimizers.param_groups(i))
    if any(not isinstance(s, Mapping) for s in state["lr_schedulers"]):
        raise CheckpointError(f"{path!r}: expected scheduler state_dicts, found {state['lr_schedulers']!r:.100}")
    n_updates, skipped = state["n_updates"], state.get("skipped_updates", {})
    if isinstance(n_updates, bool) or not isinstance(n_updates, int) or n_updates < 0:
        raise CheckpointError(f"{path!r}: expected an update count >= 0, found {n_updates!r}")
    if not isinstance(skipped, Mapping) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                                   for k, v in skipped.items()):
        raise CheckpointError(f"{path!r}: expected counts of skipped updates per optimizer, found {skipped!r:.100}")
    rng, kind = state["shuffle_rng"], frame.training_counters()["shuffle_rng"]["bit_generator"]
    if not isinstance(rng, Mapping) or rng.get("bit_generator") != kind:
        raise CheckpointError(f"{path!r}: expected the shuffling generator's {kind} state, found {rng!r:.100}")
    torch_rng, like = state["torch_rng"], torch.get_rng_state()
    if not isinstance(torch_rng, torch.Tensor) or torch_rng.dtype != like.dtype or torch_rng.shape != like.shape:
        raise CheckpointError(f"{path!r}: expected torch's RNG state (uint8 {tuple(like.shape)}), found "
                              f"{getattr(torch_rng, 'dtype', type(torch_rng).__name__)} "
                              f"{tuple(getattr(torch_rng, 'shape', ()))}")
    if not isinstance(state["cuda_rng"], (list, tuple)):
        raise CheckpointError(f"{path!r}: expected a list of CUDA RNG states, found {state['cuda_rng']!r:.100}")


class LoadedCheckpoint:
    """A checkpoint read and checked against a frame, not yet applied: its ``version`` and the ``extras`` published
    with it (key -> bytes, e.g. a runner's state), with the file each came from (``extra_paths``)."""

    def __init__(self, frame: Any, version: int, models: Dict[str, Any], state: Dict[str, Any],
                 extras: Dict[str, bytes], extra_paths: Optional[Dict[str, str]] = None):
        self.frame, self.version, self.extras, self.extra_paths = frame, version, extras, dict(extra_paths or {})
        self._models, self._state = models, state

    def apply(self) -> None:
        """Assigns everything to the frame; if any part fails, the frame is restored as it was."""
        frame = self.frame
        optimizers = frame._optimizers.snapshot()  # builds nothing: a policy loaded to act never does
        state = _frame_state(frame, optimizers=False)
        before = ({attr: copy.deepcopy(getattr(frame, attr).state_dict()) for attr in self._models},
                  copy.deepcopy(state))
        try:
            _assign(frame, self._models, self._state)
        except BaseException:
            _assign(frame, *before)
            frame._optimizers.restore(optimizers)
            raise


def _assign(frame: Any, models: Dict[str, Any], state: Dict[str, Any]) -> None:
    networks = [(getattr(frame, attr), state_dict) for attr, state_dict in models.items()]
    for target, saved in [*networks, *zip(frame.lr_schedulers, state["lr_schedulers"])]:
        target.load_state_dict(saved)
    if "optimizers" in state:
        frame._optimizers.load_state_dicts(state["optimizers"])
    frame.set_training_counters(state)  # skipped_updates is absent from checkpoints of entmachin 0.1
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])


def read_frame_checkpoint(frame: Any, model_dir: str, network_map: Optional[Mapping[str, str]] = None,
                          version: int = -1, extra_keys: Optional[Sequence[str]] = None) -> LoadedCheckpoint:
    """Reads and checks version ``version`` (-1: the highest) of ``model_dir`` against ``frame``, with the extra blobs
    ``extra_keys`` names (default: all of them; ``()``: none, e.g. for a policy evaluated without environment state).

    Raises:
        FileNotFoundError: the directory, the version or a file it names is missing.
        CheckpointError: (a ``ValueError``) a file is not a checkpoint, is damaged, or belongs to another frame class,
            format, model or parameter layout; the message names the file.
    """
    where, names = _arguments(frame, network_map, version, "load")
    if version == -1:
        version = latest_version(model_dir, where)
    elif not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{where}: {model_dir!r} is not a directory")
    if version not in (saved := manifest_versions(model_dir)):
        raise FileNotFoundError(f"{where}: {model_dir!r} holds no version {version}; saved versions are {saved}")
    try:  # every file is read (sizes and checksums checked) before any is decoded
        manifest = read_manifest(model_dir, version)
        if (networks := manifest.meta.get("networks")) != names:
            raise CheckpointError(f"{manifest.path!r} was saved with network names {networks!r}; this load asks for "
                                  f"{names!r} (pass the network_map used when saving)")
        if manifest.meta.get("frame") != type(frame).__name__:
            raise CheckpointError(f"{manifest.path!r} holds a {manifest.meta.get('frame')!r} save; expected a "
                                  f"{type(frame).__name__!r} save")
        blobs = {key: read_blob(model_dir, manifest, key) for key in (*names, _STATE)}  # raises if a key is missing
        wanted = [key for key in manifest.files if key not in blobs] if extra_keys is None else extra_keys
        extras = {key: read_blob(model_dir, manifest, key) for key in wanted if key in manifest.files}
        paths = {key: os.path.join(model_dir, str(manifest.files[key]["file"])) for key in blobs}
        decoded = {key: _decode(paths[key], data) for key, data in blobs.items()}
        _check_header(paths[_STATE], decoded[_STATE], frame)
        for attr in names:
            check_state_dict(paths[attr], attr, decoded[attr], getattr(frame, attr))
        _check_frame_state(paths[_STATE], decoded[_STATE], frame)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{where}: {e}") from None
    except CheckpointError as e:
        raise CheckpointError(f"{where}: {e}") from None
    return LoadedCheckpoint(frame, version, {attr: decoded[attr] for attr in names}, decoded[_STATE], extras,
                            {key: os.path.join(model_dir, str(manifest.files[key]["file"])) for key in extras})


def load_frame(frame: Any, model_dir: str, network_map: Optional[Mapping[str, str]], version: int) -> None:
    """Restores a frame from :func:`save_frame`'s files, completely or not at all."""
    read_frame_checkpoint(frame, model_dir, network_map, version).apply()

