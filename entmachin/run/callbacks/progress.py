"""``ProgressBar``: a tqdm bar over the run's environment steps (steps/s, mean return, ETA)."""
from __future__ import annotations

import contextlib
from typing import Any

from entmachin.run import logs
from entmachin.run.callbacks.base import Callback

__all__ = ["ProgressBar"]


class ProgressBar(Callback):
    """The bar (``enabled=False``: none; logging goes above it while it is open)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._open = contextlib.ExitStack()
        self.bar: Any = None

    def on_start(self, run: Any) -> None:
        self.bar = self._open.enter_context(
            logs.progress_bar(run.config, run.state.env_steps, run.planned_steps, self.enabled))

    def after_update(self, run: Any, stats: Any) -> None:
        self.bar.update(stats.n_env_steps)
        self.bar.set_postfix(mean_return=f"{run.state.mean_return:.3f}", refresh=False)

    def close(self, run: Any) -> None:
        self._open.close()
