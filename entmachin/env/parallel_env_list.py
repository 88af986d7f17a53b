"""``ParallelEnvList``: environments stepped in worker processes, one ``EnvList`` per worker.

Worker ``k`` owns a contiguous slice of the environments and steps it with an ``EnvList``
built by ``EnvList._with_seeds``, so environment ``i`` receives ``env_seeds(seed, num_envs)[i]``
whatever the number of workers: a seeded ``ParallelEnvList`` returns exactly what an
``EnvList`` with the same seed returns.
The worker process itself is ``entmachin.env.env_worker``; this module is the parent's side, its
handles on the workers (replies awaited, processes reaped) in ``entmachin.env.worker_processes``.

Wire format: each message is one pickle (protocol 5) frame sent with ``Connection.send_bytes``.
A worker's actions and its ``VecObs`` travel as nested tuples of names, numbers and raw array
bytes (``entmachin.env.wire``), never as pickled numpy arrays or ragged arrays: a step costs a
few copies, not a few microseconds per array. The parent joins the replies field by field
(``wire.unpack_many``: each field's bytes from every worker, copied once). Only
``create_env`` goes through ``dill``, once per worker, so lambdas and classes defined inside
functions work under every start method.

Overlap: ``act_async`` sends the actions of one part of the rows (whole workers, one of
``parts(n)``) and returns at once; ``receive`` waits for that part's observations. Meanwhile the
caller may choose the actions of another part (``RolloutCollector(overlap=True)`` does: the
learner acts on one half while the workers step the other). ``entmachin.env.parts`` keeps the
record of the parts in flight and of each row's last observation.

Failures: an exception in a worker comes back as an ``EnvWorkerError`` carrying the worker's
traceback; a worker that dies is noticed through its process sentinel. Either way the list
closes itself (the environments are left half-stepped) and reaps every worker.
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import dill
import numpy as np
import numpy.typing as npt

from entmachin.env.action import ActionSpace
from entmachin.env.common import ActionName
from entmachin.env.env_worker import PROTOCOL, worker_main
from entmachin.env.environment import Environment, ObsSpace
from entmachin.env.main_guard import guard_advice, refuse_while_bootstrapping, start_forkserver, unguarded_main_line
from entmachin.env.parts import PartLedger
from entmachin.env.vec_actions import check_actions
from entmachin.env.vec_env import RowIndex, VecEnv, VecObs, env_seeds, ragged_actions, split_envs
from entmachin.env.wire import pack_actions, unpack_many
from entmachin.env.worker_error import EnvWorkerError
from entmachin.env.worker_processes import Worker, gather, reap
from entmachin.ragged.array import RaggedArray


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"ParallelEnvList: {name} must be an int >= 1, got {value!r}")
    return int(value)


class ParallelEnvList(VecEnv):
    """Steps ``num_envs`` environments in ``num_processes`` worker processes.

    Behaves like ``EnvList`` (auto-reset, ``final_obs``, observation filters, seeding) and, with
    the same ``seed``, returns identical observations. Environment ``i`` lives in the worker
    whose contiguous slice holds it; the first ``num_envs % num_processes`` workers take one
    environment more than the others.

    Args:
        create_env: builds one environment; sent to the workers with ``dill``.
        num_envs: number of environments.
        num_processes: number of worker processes (at most ``num_envs`` are started).
        start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"``. The default is
            ``"forkserver"`` where available, else ``"spawn"``. Not ``"fork"``: forking a
            process that runs threads (torch's thread pools, a tensorboard writer, a data
            loader) copies locks that those threads hold, and the worker can deadlock on them.
        seed: as for ``EnvList``: environment ``i`` gets ``env_seeds(seed, num_envs)[i]``.
        timeout: seconds the workers may take to answer one request (building their
            environments, ``reset``, ``act``, ``render``); a worker still busy after that is
            reported with ``EnvWorkerError`` and the list is closed, its workers terminated.
            ``None`` (the default) waits as long as the environments take.
        check_finite: the workers raise ``NonFiniteObservationError`` (reported as
            ``EnvWorkerError`` naming the environment, entity type and feature) when an
            observation, final observation or reward holds NaN or infinity, as ``EnvList``
            does; False turns the check off.

    Under ``spawn`` and ``forkserver`` the workers import the main script, so a script must
    guard its entry point with ``if __name__ == "__main__":`` (without it, the error says which
    line to put under the guard). Workers are daemon processes (they
    never outlive the parent), so an environment cannot start ``multiprocessing`` children of
    its own; ``subprocess`` works.

    ``parts(n)``, ``act_async`` and ``receive`` step parts of the rows (whole workers) on their
    own, so that the caller can work on one part while another steps; while a part is in flight
    the calls that concern every row (``reset``, ``act``, ``get_state``, ``set_state``,
    ``render``) raise ``RuntimeError`` until it is received.

    ``reset``, ``act``, ``receive`` and ``render`` raise ``EnvWorkerError`` when a worker raised,
    died or (with ``timeout``) did not answer in time;
    the list is then closed (its environments were left half-stepped) and every later call
    raises ``RuntimeError``. Actions that do not fit the last observation raise ``ValueError``
    before anything is sent, and the list stays usable.

    Raises:
        ValueError: ``num_envs``, ``num_processes``, ``start_method``, ``seed`` or ``timeout`` is
            invalid.
        TypeError: ``create_env`` is not callable or cannot be serialised with ``dill``.
        EnvWorkerError: a worker failed to build its environments (or, from a script without
            the ``__main__`` guard under ``spawn`` / ``forkserver``, to start: the message says
            which line to guard).
        RuntimeError: created in a worker process while it imports such a script.

    Example:
        >>> with ParallelEnvList(MineSweeper, num_envs=16, num_processes=2, seed=0) as envs:
        ...     obs = envs.reset()
        ...     for _ in range(100):
        ...         obs = envs.act(policy(obs))
    """

    def __init__(
        self,
        create_env: Callable[[], Environment],
        num_envs: int,
        num_processes: int,
        start_method: Optional[str] = None,
        seed: Optional[int] = None,
        timeout: Optional[float] = None,
        *,
        check_finite: bool = True,
    ) -> None:
        refuse_while_bootstrapping()  # a worker importing a main script that lacks the guard
        self._workers: List[Worker] = []
        self._closed_reason: Optional[str] = None
        self._ledger = PartLedger("ParallelEnvList", [])  # parts in flight, each row's last observation
        num_envs = _check_count("num_envs", num_envs)
        self.num_processes = min(_check_count("num_processes", num_processes), num_envs)
        available = mp.get_all_start_methods()
        if start_method is None:
            start_method = "forkserver" if "forkserver" in available else "spawn"
        if start_method not in available:
            raise ValueError(
                f"ParallelEnvList: start_method must be one of {available} on this platform, got {start_method!r}"
            )
        self.start_method = start_method
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"ParallelEnvList: seed must be None or an int >= 0, got {seed!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"ParallelEnvList: timeout must be None or a number of seconds > 0, got {timeout!r}")
        self.timeout = timeout
        if not isinstance(check_finite, bool):
            raise TypeError(f"ParallelEnvList: check_finite must be a bool, got {check_finite!r}")
        if not callable(create_env):
            raise TypeError(f"ParallelEnvList: create_env must be callable, got {type(create_env).__name__}")
        try:
            # recurse: a lambda from __main__ carries the globals it uses, which a worker lacks.
            payload = dill.dumps(create_env, recurse=True)
        except Exception as e:
            raise TypeError(
                f"ParallelEnvList: create_env ({create_env!r}) cannot be serialised with dill to reach "
                f"the workers ({type(e).__name__}: {e}); define it at module level"
            ) from e
        seeds = env_seeds(seed, num_envs)
        ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            start_forkserver()
        try:
            for k, (start, stop) in enumerate(split_envs(num_envs, self.num_processes)):
                conn, child_conn = ctx.Pipe()
                process = ctx.Process(
                    target=worker_main,
                    args=(child_conn, payload, seeds[start:stop], seed is not None, start, check_finite),
                    name=f"ParallelEnvList-worker-{k}",
                    daemon=True,  # never outlive the parent
                )
                process.start()
                child_conn.close()
                self._workers.append(Worker(k, process, conn, start, stop))
            spaces = self._gather("start")
        except BaseException as e:
            self._abandon(f"closed because starting the workers failed ({type(e).__name__})")
            if isinstance(e, EnvWorkerError) and e.exitcode and start_method != "fork":
                unguarded = unguarded_main_line(sys._getframe())
                if unguarded is not None:
                    raise EnvWorkerError(
                        f"{e.args[0].split(';')[0]}: {guard_advice(start_method, *unguarded)}", e.worker, None,
                        e.exitcode,
                    ) from e
            raise
        self._obs_space, self._action_space = spaces[0][:2]
        self._rows = RowIndex.of([seats for reply in spaces for seats in reply[2]])
        self._row_bounds = [self._rows.rows_of(w.start, w.stop) for w in self._workers]
        self._ledger = PartLedger("ParallelEnvList", self._row_bounds)

    @property
    def worker_pids(self) -> List[int]:
        """Process ids of the live workers (empty once closed)."""
        return [w.process.pid for w in self._workers]

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def __len__(self) -> int:
        return len(self._rows)

    def row_index(self) -> RowIndex:
        return self._rows

    def __repr__(self) -> str:
        state = "open" if self._closed_reason is None else self._closed_reason
        return (
            f"ParallelEnvList(num_envs={self.num_envs}, num_processes={self.num_processes}, "
            f"start_method={self.start_method!r}, {state})"
        )

    def reset(self, obs_config: Optional[ObsSpace] = None) -> VecObs:
        self._check_open("reset", every_row=True)
        self._ledger.observed_all(unpack_many(self._request("reset", [obs_config] * len(self._workers))))
        return self._ledger.last

    def act(self, actions: Mapping[ActionName, RaggedArray], obs_filter: Optional[ObsSpace] = None) -> VecObs:
        self._check_open("act", every_row=True)
        # Checked here so that a bad batch raises ValueError and leaves the workers running.
        actions = ragged_actions(actions)
        check_actions(actions, self._ledger.last_of((0, len(self)), "act"), self._action_space)
        messages = pack_actions(actions, self._row_bounds)
        self._ledger.observed_all(unpack_many(self._request("act", [(m, obs_filter) for m in messages])))
        return self._ledger.last

    @property
    def _last_vec(self) -> Optional[VecObs]:
        """The last observation of every row (None before ``reset``)."""
        return None if self._ledger.last is None else self._ledger.last_of((0, len(self)), "_last_vec")

    # --- parts stepped on their own (VecEnv.parts) ------------------------------------------

    def parts(self, n_parts: int) -> List[Tuple[int, int]]:
        """Up to ``n_parts`` groups of whole workers, as even as the workers allow (one worker:
        one part); e.g. 3 environments in 2 workers: ``[(0, 2), (2, 3)]``."""
        return self._ledger.parts(_check_count("n_parts", n_parts))

    def act_async(self, actions: Mapping[ActionName, RaggedArray], rows: Tuple[int, int],
                  obs_filter: Optional[ObsSpace] = None) -> None:
        """Sends ``actions`` of the part ``rows`` (one of :meth:`parts`) and returns at once; the
        actions are checked as ``act`` checks them, rows counted within the part. ``obs_filter`` is ``act``'s.

        Raises:
            ValueError: ``rows`` is not a range of whole workers, or the actions do not fit
                (nothing was sent).
            RuntimeError: before ``reset()``, or while some of these rows are in flight.
        """
        self._check_open("act_async")
        start, stop = rows = self._ledger.check(rows, "act_async")
        self._ledger.refuse_in_flight("act_async", rows)
        actions = ragged_actions(actions)
        check_actions(actions, self._ledger.last_of(rows, "act_async"), self._action_space)
        mine = self._ledger.workers(rows)
        messages = pack_actions(actions, [(self._row_bounds[k][0] - start, self._row_bounds[k][1] - start) for k in mine])
        workers = [self._workers[k] for k in mine]
        self._send("act", [(m, obs_filter) for m in messages], workers)
        self._ledger.sent(rows, workers)

    def receive(self, rows: Tuple[int, int]) -> VecObs:
        """The observations of the part ``rows`` that :meth:`act_async` sent (waits for its workers).

        Raises:
            RuntimeError: these rows are not in flight.
            EnvWorkerError: as from ``act`` (the list is then closed).
        """
        self._check_open("receive")
        rows = self._ledger.check(rows, "receive")
        workers = self._ledger.receiving(rows)
        try:
            vec = unpack_many(self._gather("act", workers))
        except BaseException as e:
            self._abandon(f"closed because {type(e).__name__} interrupted act()")
            raise
        self._ledger.received(rows, vec)
        return vec

    def get_state(self) -> bytes:
        """Every worker's environments and the last observations, pickled with ``dill``.

        With :meth:`set_state` (on a ParallelEnvList of the same ``num_envs`` and
        ``num_processes``) this continues the episodes in progress exactly. Loading it runs
        code from the data: restore only your own.
        """
        self._check_open("get_state", every_row=True)
        states = self._request("get_state", [None] * len(self._workers))
        last = self._last_vec
        return dill.dumps({"split": [(w.start, w.stop) for w in self._workers], "workers": states, "last_vec": last})

    def set_state(self, state: bytes) -> None:
        """Restores the environments from ``state``, which :meth:`get_state` returned, into the workers.

        Raises:
            ValueError: the state was taken with another split of environments over workers.
        """
        self._check_open("set_state", every_row=True)
        data = dill.loads(state)
        split = [(w.start, w.stop) for w in self._workers]
        if [tuple(s) for s in data["split"]] != split:
            raise ValueError(f"ParallelEnvList.set_state: the state splits environments over workers as "
                             f"{data['split']}; this ParallelEnvList splits them as {split} (same num_envs and "
                             "num_processes needed)")
        self._request("set_state", data["workers"])
        self._ledger.observed_all(data["last_vec"])

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """Every environment's frame, in environment order: ``[num_envs, ...]``."""
        self._check_open("render", every_row=True)
        frames = self._request("render", [kwargs] * len(self._workers))
        return np.concatenate(frames, axis=0)  # [num_envs, height, width, channels]

    def close(self) -> None:
        """Closes the environments and reaps the workers (idempotent).

        Workers get 2 seconds to close their environments and exit, then are terminated (SIGTERM),
        then killed (SIGKILL). Errors raised by the environments' ``close`` are logged.
        """
        if self._closed_reason is None:
            self._closed_reason = "closed by close()"
        workers, self._workers = self._workers, []
        self._ledger.in_flight.clear()
        reap(workers)

    def __del__(self) -> None:
        try:
            if getattr(self, "_workers", None):
                self.close()
        except Exception:
            pass  # a finaliser must not raise; the workers are daemons and die with the parent

    # --- protocol -------------------------------------------------------------------------

    def _check_open(self, method: str, every_row: bool = False) -> None:
        if self._closed_reason is not None:
            raise RuntimeError(
                f"ParallelEnvList.{method}: the list is unusable, it was {self._closed_reason}; create a new one"
            )
        if every_row:
            self._ledger.refuse_in_flight(method)

    def _request(self, cmd: str, args: Sequence[Any]) -> List[Any]:
        """Sends ``(cmd, args[k])`` to worker ``k`` and returns the replies in worker order."""
        self._send(cmd, args, self._workers)
        try:
            return self._gather(cmd)
        except BaseException as e:
            # Replies may be left in the pipes; no later request could be matched to its reply.
            self._abandon(f"closed because {type(e).__name__} interrupted {cmd}()")
            raise

    def _send(self, cmd: str, args: Sequence[Any], workers: Sequence[Worker]) -> None:
        """Sends ``(cmd, args[i])`` to ``workers[i]``."""
        try:
            for w, a in zip(workers, args):
                try:
                    w.conn.send_bytes(pickle.dumps((cmd, a), protocol=PROTOCOL))
                except OSError:
                    pass  # the worker is gone; _gather finds its process exited and says so
        except BaseException as e:
            self._abandon(f"closed because {type(e).__name__} interrupted {cmd}()")
            raise

    def _gather(self, cmd: str, workers: Optional[Sequence[Worker]] = None) -> List[Any]:
        """Waits for one reply from each of ``workers`` (default: every worker) and returns the replies in their
        order (``worker_processes.gather``). A failure closes the list and raises the lowest-numbered worker's
        error, naming the others' problems after it.
        """
        results, problems = gather(self._workers if workers is None else workers, cmd, self.timeout)
        if problems:
            first = problems[min(problems)]
            self._abandon(f"closed after {first.summary}")
            others = [p.summary for k, p in sorted(problems.items()) if p is not first]
            if others:
                first.error.args = (first.error.args[0] + "\n(also: " + "; ".join(others) + ")",)
            raise first.error
        return results

    def _abandon(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        self.close()
