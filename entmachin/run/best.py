"""A run's ``best`` checkpoint (``log.best``): the networks of its evaluation with the highest figure so far.

Beside its regular checkpoints a run whose config sets ``log.best`` keeps one more, in
``checkpoints/best/`` (as Stable-Baselines3's ``EvalCallback`` keeps ``best_model``). After each
evaluation whose figure is strictly higher than every earlier one (a tie keeps the earlier), the
current networks are published there with the regular checkpoints' atomic manifest
(:mod:`entmachin.frame.checkpoint_files`), and the version it replaces is removed: one version, its
environment steps, lives there (two only for the instant between the two steps; the higher is the
best). The figure is ``return`` (the evaluation's mean return, for one player) or an opponent of
``log.eval_opponents`` (the win rate against it, draws counting half).

The runner's state (JSON) published with it holds ``best``: the evaluation that made it, as
``{"env_steps", "figure", "value"}``; every regular checkpoint records the same, and ``--resume``
reads and checks the best checkpoint (sizes, SHA-256, networks) before anything changes, refusing a
damaged or missing one naming the file. The best on disk is the best so far, even where it came
from an evaluation after the checkpoint the run resumes from.

The best of several noisy evaluations on the same games overstates what it does (the winner's
curse): the figure to report is that checkpoint re-evaluated on games the run never played,
``entmachin eval RUN_DIR --checkpoint best --opponent NAME --episodes 1000 --seed S`` (the benchmarks
use ``seeds(config)["fresh"]``), beside the final checkpoint's on the same games.
"""
from __future__ import annotations

import json
import logging
import math
import os
from typing import Any, Dict, Mapping, Optional

from entmachin.frame.checkpoint import read_frame_checkpoint, save_frame
from entmachin.frame.checkpoint_files import CheckpointError, manifest_versions, remove_version
from entmachin.run.callbacks.base import Callback
from entmachin.run.logs import RunError

__all__ = ["BEST", "BestCheckpoint", "best_dir", "best_version", "candidate", "improves", "publish_best", "read_best"]

logger = logging.getLogger(__name__)

BEST = "best"  # the directory under checkpoints/, and how commands name it (--checkpoint best)


class BestCheckpoint(Callback):
    """Publishes ``checkpoints/best/`` after each evaluation that improves on ``figure`` (``log.best``)."""

    def __init__(self, figure: str) -> None:
        self.figure = figure

    def on_evaluation(self, run: Any, record: Dict[str, Any]) -> None:
        if improves(best := candidate(record, self.figure), run.state.best):
            run.state.best = best
            publish_best(run.frame, run.checkpoint_dir, best, {"runner": run.state.to_bytes()})
            logger.info("checkpoints/best: the networks of %d steps (%s %.3f)", best["env_steps"],
                        "mean return" if best["figure"] == "return" else f"win rate against {best['figure']}",
                        best["value"])


def best_dir(checkpoint_dir: str) -> str:
    """Where a run's best checkpoint lives: ``checkpoints/best``."""
    return os.path.join(checkpoint_dir, BEST)


def best_version(checkpoint_dir: str) -> Optional[int]:
    """The version (environment steps) of the best checkpoint under ``checkpoint_dir``; None: there is none."""
    directory = best_dir(checkpoint_dir)
    versions = manifest_versions(directory) if os.path.isdir(directory) else []
    return max(versions) if versions else None


def candidate(evaluation: Mapping[str, Any], figure: str) -> Optional[Dict[str, Any]]:
    """The best-checkpoint record an evaluation record would make: its steps and its ``figure`` (``return`` or
    an opponent's name); None where the figure is not a finite number."""
    value = evaluation["mean"] if figure == "return" else evaluation.get("win_rate", {}).get(figure)
    if value is None or not math.isfinite(value):
        return None
    return {"env_steps": int(evaluation["env_steps"]), "figure": figure, "value": float(value)}


def improves(new: Optional[Mapping[str, Any]], current: Optional[Mapping[str, Any]]) -> bool:
    """Whether ``new`` replaces ``current``: strictly higher, or the first of its figure (a tie keeps the earlier)."""
    if new is None:
        return False
    return current is None or current["figure"] != new["figure"] or new["value"] > current["value"]


def publish_best(frame: Any, checkpoint_dir: str, record: Mapping[str, Any], extras: Mapping[str, bytes]) -> None:
    """Publishes ``frame``'s networks as the best checkpoint (version ``record["env_steps"]``, with ``extras``:
    the runner's state), then removes every other version there."""
    directory, version = best_dir(checkpoint_dir), int(record["env_steps"])
    save_frame(frame, directory, None, version, extras=extras)
    for old in manifest_versions(directory):
        if old != version:
            remove_version(directory, old)


def read_best(frame: Any, checkpoint_dir: str, figure: str, recorded: Optional[Mapping[str, Any]],
              where: str) -> Optional[Dict[str, Any]]:
    """On resume: the best so far (None: none yet, or ``figure`` is not the one it was chosen by), read and
    checked against ``frame`` without changing anything; ``recorded`` is what the resumed checkpoint says.

    Raises:
        RunError: the checkpoint records a best that is missing, or the best checkpoint is damaged
            (naming the file; ``where`` begins the message).
    """
    directory, version = best_dir(checkpoint_dir), best_version(checkpoint_dir)
    if version is None:
        if recorded is not None:
            raise RunError(f"{where}: the checkpoint records a best checkpoint of {recorded['env_steps']} steps, but "
                           f"{directory!r} holds none (removed?); put it back, or resume with --set log.best=null")
        return None
    try:
        loaded = read_frame_checkpoint(frame, directory, None, version, extra_keys=("runner",))
    except (CheckpointError, FileNotFoundError) as e:
        raise RunError(f"{where}: the best checkpoint is damaged: {e}") from None
    path = loaded.extra_paths.get("runner", os.path.join(directory, f"checkpoint_{version}.json"))
    try:
        best = json.loads(loaded.extras["runner"].decode("utf-8"))["best"]
        good = (isinstance(best, dict) and best.get("env_steps") == version and isinstance(best.get("figure"), str)
                and isinstance(best.get("value"), (int, float)) and not isinstance(best.get("value"), bool))
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        good = False
    if not good:
        raise RunError(f"{where}: the best checkpoint is damaged: {path!r} does not record the evaluation that "
                       f"made it (env_steps {version}, figure, value)")
    return {"env_steps": version, "figure": best["figure"], "value": float(best["value"])} \
        if best["figure"] == figure else None
