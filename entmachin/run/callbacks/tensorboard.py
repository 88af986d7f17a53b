"""``Tensorboard``: each iteration's scalars (episodes, speed, entity counts, action shares, the update's figures).

The run's writer is ``run.writer``; evaluations, self-play and behaviour cloning write their own tags to it.
"""
from __future__ import annotations

from typing import Any

from entmachin.frame.summary import log_update
from entmachin.run import logs
from entmachin.run.callbacks.base import Callback

__all__ = ["Tensorboard"]


class Tensorboard(Callback):
    """``charts/*``, ``entities/*``, ``actions/*`` (from ``tracker``, which the collector feeds) and the update's
    ``losses/*`` after each update."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker

    def after_update(self, run: Any, stats: Any) -> None:
        step = run.state.env_steps
        speed = stats.n_env_steps / max(run.iteration_seconds, 1e-9)
        logs.write_iteration(run.writer, self.tracker, stats, step, speed)
        log_update(run.writer, run.frame.last_update, step)
