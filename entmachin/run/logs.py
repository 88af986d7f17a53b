"""The run directory's files: resolved config, tensorboard scalars, evaluations, learning curve;
:class:`RunError`, the error of a run directory that cannot be used as asked; and :func:`next_due`,
when an event every N environment steps (an evaluation, a checkpoint, a pool snapshot) comes next.

Tensorboard tags follow CleanRL, with environment steps on the x-axis::

    charts/episodic_return      mean return of the episodes that ended in the rollout
    charts/episodic_length      their mean length
    charts/SPS                  environment steps per second of the iteration (collect + update)
    charts/learning_rate, losses/*   the frame's update statistics (entmachin.frame.summary)
    entities/<type>             mean number of entities of that type per observation
    actions/<action>/<choice>   share of actors choosing each choice of a categorical action
    eval/mean_return            mean return of each evaluation
    eval/win_rate/<opponent>    games: each evaluation's win rate against an opponent
    selfplay/*                  self-play: the learner's Elo, win and draw rates, pool size (entmachin.run.selfplay)

plus the resolved config as text and the hyperparameters with the final evaluation.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
from typing import Any, Dict, Iterator, Optional, Sequence

import numpy as np

from entmachin.files import atomic_write
from entmachin.run.config import RunConfig, config_from_dict, config_to_dict, dump_yaml, parse_yaml
from entmachin.settings import NOT_DECLARED, marker_of

__all__ = ["RunError", "prepare_run_dir", "remove_run_files", "write_config", "load_run_config", "make_writer",
           "write_iteration", "write_evals", "write_hparams", "progress_bar", "NullWriter", "next_due"]

logger = logging.getLogger(__name__)


def next_due(due: int, step: int, interval: int) -> int:
    """When an every-``interval``-steps event that was due at ``due`` and ran at ``step`` is due next:
    the first of ``due + interval``, ``due + 2 interval``, ... after ``step`` (a rollout may cross several)."""
    return due + interval * max(1, math.ceil((step - due + 1) / interval))


class RunError(RuntimeError):
    """A run that cannot start or continue (run directory, checkpoint, resume)."""


def prepare_run_dir(run_dir: str, checkpoint_dir: str, *, resume: bool, force: bool) -> None:
    """Checks that ``run_dir`` can hold this run and creates it.

    Raises:
        RunError: resuming a directory without a run, starting over one that holds a run
            (without ``force``), or a directory that cannot be written.
    """
    holds_run = os.path.exists(os.path.join(run_dir, "config.yaml")) or os.path.isdir(checkpoint_dir)
    if resume:
        if not holds_run:
            raise RunError(f"--resume {run_dir}: no run there (no config.yaml or checkpoints/)")
        return
    if holds_run and not force:
        raise RunError(f"{run_dir!r} already holds a run; resume it with --resume {run_dir}, start over with --force, "
                       "or choose another --run-dir")
    try:
        os.makedirs(run_dir, exist_ok=True)
        probe = os.path.join(run_dir, ".entmachin-write-probe")
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as e:
        raise RunError(f"cannot write to the run directory {run_dir!r}: {e.strerror or e}") from None
    if holds_run:  # --force: the old run's files go
        remove_run_files(run_dir, checkpoint_dir)


def remove_run_files(run_dir: str, checkpoint_dir: str, whole_dir: bool = False) -> None:
    """Removes the files a run writes in ``run_dir`` (``whole_dir``: the directory itself, if
    nothing else is in it)."""
    shutil.rmtree(checkpoint_dir, ignore_errors=True)
    if not os.path.isdir(run_dir):
        return
    for name in os.listdir(run_dir):
        if name.startswith("events.out.tfevents") or name in ("config.yaml", "eval.json", "curve.png"):
            os.remove(os.path.join(run_dir, name))
    if whole_dir and not os.listdir(run_dir):
        os.rmdir(run_dir)


class NullWriter:
    """Stands in for the tensorboard writer on ranks other than 0: every call does nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def write_config(run_dir: str, config: RunConfig, world_size: int = 1, notes: Sequence[str] = ()) -> None:
    """Writes the resolved config, with a header saying how it ran: ranks, environments in all,
    where the environment workers were, and ``notes`` (what ``auto`` settings chose, one line each)."""
    header = "# The resolved config of this run: `entmachin train config.yaml --run-dir NEW_DIR` runs it again.\n"
    where = "Ray (rollout.workers)" if config.rollout.workers is not None else "this machine"
    if world_size > 1:
        header += (f"# Ran on {world_size} data-parallel ranks (torchrun): rollout.num_envs and frame.batch_size are "
                   f"per rank; {world_size} x {config.rollout.num_envs} = {world_size * config.rollout.num_envs} "
                   f"environments in all; environment workers on {where}.\n")
    else:
        header += f"# Ran in one process; environment workers on {where}.\n"
    header += "".join(f"# {note}.\n" for note in notes)
    atomic_write(os.path.join(run_dir, "config.yaml"), (header + dump_yaml(config_to_dict(config))).encode())



def _before_the_settings() -> Dict[Any, Any]:
    """Settings that came after runs were written, and what such runs did without them (each field's
    declared ``before``): their config reads back so, since a default such as ``auto`` might choose
    otherwise on this machine and a resumed run would then not repeat its sampled actions."""
    out = {}
    for section in dataclasses.fields(RunConfig):
        cls = section.default_factory
        for f in dataclasses.fields(cls):
            before = marker_of(cls, f.name, "before")
            if before is not NOT_DECLARED:
                out[(section.name, f.name)] = list(before) if isinstance(before, tuple) else before
    return out


_BEFORE_THE_SETTING = _before_the_settings()


def load_run_config(run_dir: str) -> RunConfig:
    """The resolved config a run directory holds (a run from before ``rollout.overlap`` or
    ``model.compile`` existed reads back sequential and eager, as it ran)."""
    path = os.path.join(run_dir, "config.yaml")
    if not os.path.exists(path):
        if not os.path.exists(run_dir):
            raise RunError(f"{run_dir!r} does not exist; name a run directory (entmachin train writes one)")
        raise RunError(f"{run_dir!r} holds no config.yaml (the directory exists); it is not an entmachin run "
                       "directory")
    with open(path, encoding="utf-8") as f:
        data = parse_yaml(f.read(), path)
    if isinstance(data, dict):
        for (section, key), value in _BEFORE_THE_SETTING.items():
            part = data.setdefault(section, {})
            if isinstance(part, dict):  # another kind of value is left for config_from_dict to refuse
                part.setdefault(key, value)
    return config_from_dict(data, path)


def make_writer(run_dir: str, purge_step: Optional[int]) -> Any:
    """The run's ``SummaryWriter``; on resume, events past ``purge_step`` are dropped."""
    from torch.utils.tensorboard import SummaryWriter  # slow to import: only when a run starts

    return SummaryWriter(log_dir=run_dir, purge_step=purge_step)


def write_iteration(writer: Any, tracker: Any, stats: Any, step: int, sps: float) -> None:
    """Episode, speed, entity-count and action-frequency scalars of one iteration."""
    if stats.episode_returns:
        writer.add_scalar("charts/episodic_return", float(np.mean(stats.episode_returns)), step)
        writer.add_scalar("charts/episodic_length", float(np.mean(stats.episode_lengths)), step)
    writer.add_scalar("charts/SPS", sps, step)
    for name, value in tracker.entity_means().items():
        writer.add_scalar(f"entities/{name}", value, step)
    for tag, value in tracker.action_shares().items():
        writer.add_scalar(f"actions/{tag}", value, step)
    tracker.clear()


def write_evals(run_dir: str, state: Any) -> None:
    """``eval.json`` (every evaluation so far) and ``curve.png``."""
    atomic_write(os.path.join(run_dir, "eval.json"), json.dumps(state.evals, indent=1).encode())
    from entmachin.run.plot import plot_curve

    try:
        plot_curve(os.path.join(run_dir, "curve.png"), state.curve, state.evals)
    except Exception as e:  # a plot must never stop a run
        logger.warning("curve.png not written: %s: %s", type(e).__name__, e)


def _scalars(data: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_scalars(value, f"{prefix}{key}."))
        elif isinstance(value, (bool, int, float, str)):
            out[f"{prefix}{key}"] = value if not (isinstance(value, float) and math.isinf(value)) else str(value)
        elif value is None:
            out[f"{prefix}{key}"] = "null"
        else:
            out[f"{prefix}{key}"] = str(value)
    return out


def write_hparams(writer: Any, config: RunConfig, final: Dict[str, float]) -> None:
    writer.add_hparams(_scalars(config_to_dict(config)), {"hparams/final_mean_return": final["mean"]}, run_name=".")


@contextlib.contextmanager
def progress_bar(config: RunConfig, initial: int, total: int, enabled: bool) -> Iterator[Any]:
    """A tqdm bar over environment steps up to ``total`` (steps/s, mean return, ETA); logging goes above it."""
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(), tqdm(total=total, initial=initial, unit="step",
                                       desc=config.env.name.rpartition(":")[2], disable=not enabled,
                                       dynamic_ncols=True) as bar:
        yield bar
