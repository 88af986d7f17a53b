"""``EnvWorkerError``: what a ``ParallelEnvList`` raises when a worker process fails."""
from __future__ import annotations

from typing import Any, Optional, Tuple

__all__ = ["EnvWorkerError"]


class EnvWorkerError(RuntimeError):
    """An environment worker process raised an exception or died.

    Attributes:
        worker: number of the worker (0-based).
        env_index: the environment that raised, when known.
        exitcode: exit code of a worker that died (negative: killed by that signal); ``None``
            when the worker raised.
        remote_traceback: the worker's formatted traceback (empty when it died).
    """

    def __init__(
        self,
        message: str,
        worker: int,
        env_index: Optional[int] = None,
        exitcode: Optional[int] = None,
        remote_traceback: str = "",
    ) -> None:
        super().__init__(message)
        self.worker = worker
        self.env_index = env_index
        self.exitcode = exitcode
        self.remote_traceback = remote_traceback

    def __reduce__(self) -> Tuple[Any, ...]:
        return type(self), (self.args[0], self.worker, self.env_index, self.exitcode, self.remote_traceback)
