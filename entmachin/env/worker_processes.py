"""The parent's handles on ``ParallelEnvList``'s worker processes: waiting for their replies, each worker's
pipe and process watched together, and reaping them when the list closes.

``entmachin.env.env_worker`` is the other end of each pipe; ``entmachin.env.parallel_env_list`` sends the
requests and decides what a failure does to the list.
"""
from __future__ import annotations

import logging
import math
import pickle
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Dict, List, Optional, Sequence, Tuple

from entmachin.env.env_worker import CLOSE
from entmachin.env.worker_error import EnvWorkerError, Problem, died, during, raised

logger = logging.getLogger("entmachin.env.parallel_env_list")  # what closing reports is the list's

CLOSE_TIMEOUT_S = 2.0  # for the workers to close their environments and exit
KILL_TIMEOUT_S = 1.0  # for each of SIGTERM and then SIGKILL to take effect


@dataclass(frozen=True)
class Worker:
    """The parent's handle on one worker: its process, its pipe end and its environments."""

    number: int
    process: BaseProcess
    conn: Connection
    start: int  # first environment index
    stop: int  # one past the last environment index

    def describe(self) -> str:
        envs = (f"environment {self.start}" if self.stop - self.start == 1
                else f"environments {self.start}..{self.stop - 1}")
        return f"worker {self.number} ({envs}, pid {self.process.pid})"


def gather(workers: Sequence[Worker], cmd: str, timeout: Optional[float]) -> Tuple[List[Any], Dict[int, Problem]]:
    """Waits for one reply from each of ``workers``, watching each one's pipe and process together;
    returns the replies in their order and the problems by worker number (none when every worker
    answered).

    After a failure the other workers get ``CLOSE_TIMEOUT_S`` to answer, so that the
    failure reported is the lowest-numbered worker's whatever the timing. With a
    ``timeout``, workers that have not answered by then are reported as late.
    """
    place = {w.number: i for i, w in enumerate(workers)}
    results: List[Any] = [None] * len(workers)
    problems: Dict[int, Problem] = {}
    pending = {w.number: w for w in workers}
    deadline = None if timeout is None else time.monotonic() + timeout
    failed_at: Optional[float] = None
    while pending:
        handles = {}
        for w in pending.values():
            handles[w.conn] = w
            handles[w.process.sentinel] = w
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready = wait(list(handles), left)
        if not ready:
            break  # the others are left to close()
        for k in sorted({handles[h].number for h in ready}):
            w = pending.pop(k)
            try:  # a pipe that is not ready may still hold a reply sent before the process exited
                has_reply = w.conn in ready or w.conn.poll()
                ok, payload = pickle.loads(w.conn.recv_bytes()) if has_reply else (None, None)
            except (EOFError, OSError):
                ok = None
            if ok is None:  # nothing to read and the process exited
                problems[k] = death(w, cmd)
            elif not ok:
                problems[k] = raised(w.describe(), w.number, cmd, payload)
            else:
                results[place[k]] = payload
        if problems and failed_at is None:
            failed_at = time.monotonic()
            deadline = min(math.inf if deadline is None else deadline, failed_at + CLOSE_TIMEOUT_S)
    if not problems and pending:  # the timeout passed
        for k, w in sorted(pending.items()):
            error = EnvWorkerError(f"{w.describe()} did not answer within {timeout:g} s {during(cmd)}", k)
            problems[k] = Problem(f"worker {k} did not answer within {timeout:g} s", error)
    return results, problems


def death(w: Worker, cmd: str) -> Problem:
    """The problem of a worker whose process exited without answering ``cmd``."""
    w.process.join(KILL_TIMEOUT_S)
    return died(w.describe(), w.number, cmd, w.process.exitcode)


def reap(workers: Sequence[Worker]) -> None:
    """Tells ``workers`` to close, gives them ``CLOSE_TIMEOUT_S`` to close their environments and exit
    (their replies read and dropped, errors logged), then terminates (SIGTERM) and kills (SIGKILL)
    those still running, and closes their pipes."""
    for w in workers:
        try:
            w.conn.send_bytes(CLOSE)
        except OSError:
            pass  # already gone; reaped below
    deadline = time.monotonic() + CLOSE_TIMEOUT_S
    for w in workers:
        _drain(w, deadline)
    for w in workers:
        for stop in (w.process.terminate, w.process.kill):
            if w.process.is_alive():
                stop()
                w.process.join(KILL_TIMEOUT_S)
        w.conn.close()
        if not w.process.is_alive():
            w.process.close()


def _drain(w: Worker, deadline: float) -> None:
    """Reads and drops ``w``'s replies until its process exits or ``deadline`` passes."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        ready = wait([w.conn, w.process.sentinel], remaining)
        if not ready:
            return
        if w.conn not in ready:
            w.process.join(remaining)
            return
        try:
            ok, payload = pickle.loads(w.conn.recv_bytes())
        except (EOFError, OSError):
            w.process.join(remaining)
            return
        except Exception:
            logger.exception("%s: unreadable reply while closing", w.describe())
            continue
        if not ok:
            logger.warning(
                "while closing, %s reported %s: %s\n%s", w.describe(), payload.type_name, payload.message,
                payload.traceback,
            )
