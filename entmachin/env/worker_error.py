"""``EnvWorkerError``: what a ``ParallelEnvList`` raises when a worker process fails, and how
each kind of failure (an exception, a death) is described."""
from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["EnvWorkerError"]


class EnvWorkerError(RuntimeError):
    """An environment worker process raised an exception or died. ``message`` (the error's text) says which
    worker failed and how, and for an exception, in which environment (where known), with the worker's traceback.

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


@dataclass(frozen=True)
class Problem:
    """A worker's failure during one request: a one-line summary and the error to raise."""

    summary: str  # e.g. "worker 1 raised ValueError in environment 3"
    error: EnvWorkerError


def during(cmd: str) -> str:
    return "while building its environments" if cmd == "start" else f"during {cmd}()"


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "stopped answering and is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name} (exit code {code})"
    return f"exited with code {code}"


def raised(worker: str, number: int, cmd: str, failure: Any) -> Problem:
    """Worker ``number`` (described as ``worker``) raised during ``cmd``; ``failure`` is the
    ``env_worker.Failure`` it sent back."""
    where = "" if failure.env_index is None else f" in environment {failure.env_index}"
    message = (
        f"{worker} raised {failure.type_name}{where} {during(cmd)}: {failure.message}\n"
        f"--- traceback in worker {number} ---\n{failure.traceback.rstrip()}"
    )
    error = EnvWorkerError(message, number, failure.env_index, None, failure.traceback)
    return Problem(f"worker {number} raised {failure.type_name}{where}", error)


def died(worker: str, number: int, cmd: str, code: Optional[int]) -> Problem:
    """Worker ``number`` exited (with ``code``; None: still running) during ``cmd``."""
    how = describe_exit(code)
    error = EnvWorkerError(f"{worker} {how} {during(cmd)}; its stderr may say why", number, None, code)
    return Problem(f"worker {number} {how}", error)
