"""Saving and restoring a frame: state dicts and RNG states, read back with ``weights_only=True``.

Layout of a save directory (``version`` defaults to 0; Machin's naming)::

    <actor name>_<version>.pt       actor.state_dict() (input normalisation statistics included)
    <critic name>_<version>.pt      critic.state_dict()
    frame_state_<version>.pt        optimizers, schedulers, update count, and the RNG states:
                                    the frame's shuffling generator and torch's global
                                    generators (CPU and, where initialised, CUDA), which
                                    sample actions

Restoring all of it makes a resumed run repeat an uninterrupted one exactly (on CPU, one
thread, deterministic algorithms, environments re-created with the same seeds).
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any, Dict, Optional

import torch

__all__ = ["save_frame", "load_frame"]

logger = logging.getLogger(__name__)

_FORMAT = 1
_STATE_FILE = "frame_state"


def _names(network_map: Optional[Mapping[str, str]], where: str) -> Dict[str, str]:
    names = {"actor": "actor", "critic": "critic"}
    if network_map is None:
        return names
    if not isinstance(network_map, Mapping):
        raise TypeError(f"{where}: network_map must map 'actor' / 'critic' to file names, got {network_map!r}")
    unknown = sorted(set(network_map) - set(names))
    if unknown:
        raise ValueError(f"{where}: network_map has unknown key {unknown[0]!r}; allowed keys are ['actor', 'critic']")
    names.update(network_map)
    return names


def _check_version(version: Any, where: str, allow_latest: bool) -> None:
    if isinstance(version, bool) or not isinstance(version, int) or version < (-1 if allow_latest else 0):
        low = "-1 (the highest saved)" if allow_latest else "0"
        raise ValueError(f"{where}: version must be an int >= {low}, got {version!r}")


def save_frame(frame: Any, model_dir: str, network_map: Optional[Mapping[str, str]], version: int) -> None:
    """Writes the files described in the module docstring."""
    where = f"{type(frame).__name__}.save"
    _check_version(version, where, allow_latest=False)
    names = _names(network_map, where)
    os.makedirs(model_dir, exist_ok=True)
    if frame.replay_buffer.size():
        logger.warning("%s: %d stored rows are not saved (the on-policy buffer is only kept until update())",
                       where, frame.replay_buffer.size())
    for attr, name in names.items():
        torch.save(getattr(frame, attr).state_dict(), os.path.join(model_dir, f"{name}_{version}.pt"))
    state = {
        "format": _FORMAT,
        "frame": type(frame).__name__,
        "optimizers": [opt.state_dict() for opt in frame.optimizers],
        "lr_schedulers": [s.state_dict() for s in frame.lr_schedulers],
        "n_updates": frame._n_updates,
        "shuffle_rng": frame._rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else [],
    }
    torch.save(state, os.path.join(model_dir, f"{_STATE_FILE}_{version}.pt"))


def _latest(model_dir: str, where: str) -> int:
    pattern = re.compile(rf"^{_STATE_FILE}_(\d+)\.pt$")
    versions = [int(m.group(1)) for f in os.listdir(model_dir) if (m := pattern.match(f))]
    if not versions:
        raise FileNotFoundError(f"{where}: {model_dir!r} holds no {_STATE_FILE}_<version>.pt; nothing was saved there")
    return max(versions)


def load_frame(frame: Any, model_dir: str, network_map: Optional[Mapping[str, str]], version: int) -> None:
    """Restores a frame from :func:`save_frame`'s files (trusted or not: no pickled code runs).

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: the files belong to another frame class, another format, or another
            parameter layout (e.g. shared vs separate optimizers).
    """
    where = f"{type(frame).__name__}.load"
    _check_version(version, where, allow_latest=True)
    names = _names(network_map, where)
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{where}: {model_dir!r} is not a directory")
    if version == -1:
        version = _latest(model_dir, where)
    path = os.path.join(model_dir, f"{_STATE_FILE}_{version}.pt")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{where}: {path!r} does not exist")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("format") != _FORMAT or state.get("frame") != type(frame).__name__:
        raise ValueError(
            f"{where}: {path!r} holds a {state.get('frame')!r} save of format {state.get('format')!r}; "
            f"expected a {type(frame).__name__!r} save of format {_FORMAT}"
        )
    if len(state["optimizers"]) != len(frame.optimizers) or len(state["lr_schedulers"]) != len(frame.lr_schedulers):
        raise ValueError(
            f"{where}: {path!r} holds {len(state['optimizers'])} optimizer(s) and {len(state['lr_schedulers'])} "
            f"scheduler(s); this frame has {len(frame.optimizers)} and {len(frame.lr_schedulers)} (shared "
            "parameters and lr_scheduler must match the saved frame)"
        )
    models = {}
    for attr, name in names.items():
        model_path = os.path.join(model_dir, f"{name}_{version}.pt")
        if not os.path.exists(model_path):
            raise FileNotFoundError(f"{where}: {model_path!r} does not exist")
        models[attr] = torch.load(model_path, map_location="cpu", weights_only=True)
    for attr, state_dict in models.items():
        getattr(frame, attr).load_state_dict(state_dict)
    for opt, opt_state in zip(frame.optimizers, state["optimizers"]):
        opt.load_state_dict(opt_state)
    for scheduler, sched_state in zip(frame.lr_schedulers, state["lr_schedulers"]):
        scheduler.load_state_dict(sched_state)
    frame._n_updates = int(state["n_updates"])
    frame._rng.bit_generator.state = state["shuffle_rng"]
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
