"""The body of a ``ParallelEnvList`` worker process and the messages it exchanges.

A worker builds its ``EnvList`` from the ``dill``-pickled ``create_env``, answers the parent's
requests (``(command, arguments)``, one pickle frame each) and replies with ``(True, result)``
or ``(False, Failure)``: an exception travels as plain strings, since it may not pickle. It
exits when told to close, when the parent closes its end of the pipe, or when the parent dies.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import pickle
import signal
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import dill

from entmachin.env.action import ActionSpace
from entmachin.env.common import ActionName
from entmachin.env.env_list import EnvList
from entmachin.env.environment import ObsSpace
from entmachin.env.wire import pack, unpack_actions

logger = logging.getLogger(__name__)

PROTOCOL = 5
CLOSE = pickle.dumps(("close", None), protocol=PROTOCOL)  # the request that closes a worker


@dataclass(frozen=True)
class Failure:
    """An exception raised in a worker, as plain strings (the exception may not pickle)."""

    type_name: str
    message: str
    traceback: str
    env_index: Optional[int]


def failure(e: BaseException) -> Failure:
    kind = type(e)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    text = "".join(traceback.format_exception(kind, e, e.__traceback__))
    return Failure(name, str(e), text, getattr(e, "env_index", None))


def run(fn: Callable[[], Any]) -> bytes:
    """Runs ``fn`` and pickles ``(True, result)``, or ``(False, Failure)`` if either step raised."""
    try:
        return pickle.dumps((True, fn()), protocol=PROTOCOL)
    except Exception as e:
        return pickle.dumps((False, failure(e)), protocol=PROTOCOL)


def worker_main(
    conn: Connection, create_env_bytes: bytes, seeds: Sequence[Optional[int]], seeded: bool, first_index: int,
    check_finite: bool = True,
) -> None:
    """Body of a worker process: build an ``EnvList``, then answer commands until told to close."""
    # Ctrl-C (and a SIGTERM sent to the whole process group, as job schedulers and containers
    # do) reaches the workers too; the parent handles it and closes them. A worker still exits
    # when the parent dies, and close() falls back to SIGKILL.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = mp.parent_process()
    watched = [conn] if parent is None else [conn, parent.sentinel]
    envs: Optional[EnvList] = None

    def start() -> Tuple[ObsSpace, Dict[ActionName, ActionSpace], Tuple[Any, ...]]:
        nonlocal envs
        envs = EnvList._with_seeds(dill.loads(create_env_bytes), seeds, seeded, first_index, check_finite,
                                   "ParallelEnvList")
        return envs.obs_space(), envs.action_space(), envs.row_index().seats

    try:
        conn.send_bytes(run(start))
        while envs is not None:
            if conn not in wait(watched):
                return  # the parent died without closing us
            data = conn.recv_bytes()
            if data == CLOSE:
                closing, envs = envs, None
                conn.send_bytes(run(closing.close))
            else:
                conn.send_bytes(run(lambda: serve(envs, data)))
    except (EOFError, OSError):
        return  # the parent closed its end of the pipe
    finally:
        if envs is not None:
            try:
                envs.close()
            except Exception:
                logger.exception("worker for environments from %d: close() raised", first_index)


def serve(envs: EnvList, data: bytes) -> Any:
    """Decodes one request and runs it on the worker's ``EnvList``."""
    cmd, args = pickle.loads(data)
    if cmd == "reset":
        return pack(envs.reset(args))
    if cmd == "act":
        message, obs_filter = args
        return pack(envs.act(unpack_actions(message), obs_filter))
    if cmd == "render":
        return envs.render(**args)
    if cmd == "get_state":
        return envs.get_state()
    if cmd == "set_state":
        return envs.set_state(args)
    raise ValueError(f"ParallelEnvList worker: unknown command {cmd!r}")
