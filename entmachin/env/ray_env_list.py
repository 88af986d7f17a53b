"""``RayEnvList``: environments stepped by Ray actors (the optional extra ``entmachin[ray]``).

Worker ``k`` is a Ray actor that owns a contiguous slice of the environments, as a
``ParallelEnvList`` worker does, and steps it with an ``EnvList`` built with the same seeds:
a seeded ``RayEnvList`` returns exactly what a ``ParallelEnvList`` (or an ``EnvList``) with the
same seed returns. Actions and observations cross the object store in ``entmachin.env.wire``'s
form (flat arrays and lengths as raw bytes, never per-entity Python objects); the learner stays
in the driver. Workers may live on any node of the cluster Ray is connected to.

Failures: an exception in a worker is raised as an ``EnvWorkerError`` naming the worker, its
environments and its node; so is a worker that died. With ``restart=True`` a dead worker is
replaced instead, its environments re-seeded and reset: those rows come back ``done`` and
``truncated`` (their episode was cut short; the new episode's first observation stands in for
the lost last one) and :attr:`RayEnvList.reset_rows` lists them.

Importing this module never imports Ray; building a ``RayEnvList`` does, and says which extra
to install when Ray is missing.
"""
from __future__ import annotations

import logging
import socket
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import dill
import numpy as np
import numpy.typing as npt

from entmachin.env.action import ActionSpace
from entmachin.env.common import ActionName
from entmachin.env.env_list import EnvList, check_actions
from entmachin.env.environment import Environment, ObsSpace
from entmachin.env.vec_env import RowIndex, VecEnv, VecObs, env_seeds, ragged_actions, split_envs
from entmachin.env.wire import pack, pack_actions, unpack, unpack_actions, unpack_many
from entmachin.env.worker_error import EnvWorkerError
from entmachin.ragged.array import RaggedArray

__all__ = ["RayEnvList", "import_ray"]

logger = logging.getLogger(__name__)


def import_ray() -> Any:
    """The ``ray`` module, or an ``ImportError`` saying which extra installs it."""
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "RayEnvList needs Ray, which entmachin does not install by default: pip install 'entmachin[ray]' "
            f"(or 'ray==2.60.0'); importing it failed with: {e}"
        ) from e
    return ray


class _EnvWorker:
    """The body of one Ray actor: an ``EnvList`` answering the driver's requests in wire form."""

    def __init__(self, create_env: bytes, seeds: Sequence[Optional[int]], seeded: bool, first_index: int,
                 check_finite: bool) -> None:
        self.envs = EnvList._with_seeds(dill.loads(create_env), seeds, seeded, first_index, check_finite,
                                        "RayEnvList")

    def where(self) -> Tuple[str, str, ObsSpace, Dict[ActionName, ActionSpace], Tuple[Any, ...]]:
        import ray

        return (ray.get_runtime_context().get_node_id(), socket.gethostname(), self.envs.obs_space(),
                self.envs.action_space(), self.envs.row_index().seats)

    def reset(self, obs_config: Optional[ObsSpace]) -> Tuple[Any, ...]:
        return pack(self.envs.reset(obs_config))

    def act(self, message: Dict[ActionName, Any], obs_filter: Optional[ObsSpace]) -> Tuple[Any, ...]:
        return pack(self.envs.act(unpack_actions(message), obs_filter))

    def get_state(self) -> bytes:
        return self.envs.get_state()

    def set_state(self, state: bytes) -> None:
        self.envs.set_state(state)

    def render(self, kwargs: Dict[str, Any]) -> npt.NDArray[np.uint8]:
        return self.envs.render(**kwargs)

    def close(self) -> None:
        self.envs.close()


class RayEnvList(VecEnv):
    """Steps ``num_envs`` environments in ``num_workers`` Ray actors.

    Args:
        create_env: builds one environment (serialised with ``dill``; module-level is safest).
        num_envs: environments in all.
        num_workers: Ray actors (at most ``num_envs``), one CPU each.
        seed: as ``EnvList``'s: environment ``i`` gets ``env_seeds(seed, num_envs)[i]``.
        address: ``None`` uses the Ray instance this process is connected to, or starts a
            local one; ``"auto"`` or ``"ray://host:port"`` connects there (``ray.init``).
        restart: replace a worker that dies instead of raising (see the module doc).
        check_finite: workers check observations for NaN / infinity as ``EnvList`` does.

    Raises:
        ImportError: Ray is not installed (the message names the extra).
        ValueError: counts or seed out of range.
        EnvWorkerError: a worker failed while building its environments.
    """

    def __init__(self, create_env: Callable[[], Environment], num_envs: int, num_workers: int, *,
                 seed: Optional[int] = None, address: Optional[str] = None, restart: bool = False,
                 check_finite: bool = True) -> None:
        ray = import_ray()
        for name, value in (("num_envs", num_envs), ("num_workers", num_workers)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"RayEnvList: {name} must be an int >= 1, got {value!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"RayEnvList: seed must be None or an int >= 0, got {seed!r}")
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        self._ray = ray
        self._remote = ray.remote(num_cpus=1)(_EnvWorker)
        self._create_env = dill.dumps(create_env, recurse=True)
        num_envs = int(num_envs)
        self.restart, self.seed = restart, seed
        self._check_finite = check_finite
        self._seeds = list(env_seeds(seed, num_envs))
        self._bounds = split_envs(num_envs, min(int(num_workers), num_envs))
        self._seats: List[Any] = [None] * len(self._bounds)  # each worker's environments' seats
        self._restarts = [0] * len(self._bounds)
        self._actors: List[Any] = [None] * len(self._bounds)
        self._nodes: List[str] = ["?"] * len(self._bounds)
        self._last_vec: Optional[VecObs] = None
        self.reset_rows = np.zeros(0, dtype=np.int64)
        try:
            for k in range(len(self._bounds)):
                self._start(k)
        except BaseException:
            self.close()
            raise
        self._rows = RowIndex.of([seats for worker in self._seats for seats in worker])
        self._row_bounds = [self._rows.rows_of(start, stop) for start, stop in self._bounds]

    @property
    def num_workers(self) -> int:
        return len(self._bounds)

    def _start(self, k: int) -> None:
        start, stop = self._bounds[k]
        seeds = self._seeds[start:stop]
        if self._restarts[k] and self.seed is not None:  # a replacement plays new episodes
            seeds = [int(np.random.SeedSequence([s, self._restarts[k]]).generate_state(1, dtype=np.uint64)[0])
                     for s in seeds]
        self._actors[k] = self._remote.remote(self._create_env, seeds, self.seed is not None, start,
                                              self._check_finite)
        node, host, obs_space, action_space, self._seats[k] = self._get(k, self._actors[k].where.remote(), "start")
        self._nodes[k] = f"{host}, node {node[:12]}"
        self._obs_space, self._action_space = obs_space, action_space

    def describe(self, k: int) -> str:
        start, stop = self._bounds[k]
        envs = f"environment {start}" if stop - start == 1 else f"environments {start}..{stop - 1}"
        return f"worker {k} ({envs}, on {self._nodes[k]})"

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def __len__(self) -> int:
        return len(self._rows)

    def row_index(self) -> RowIndex:
        return self._rows

    def __repr__(self) -> str:
        return f"RayEnvList(num_envs={self.num_envs}, num_workers={self.num_workers}, restart={self.restart})"

    def reset(self, obs_config: Optional[ObsSpace] = None) -> VecObs:
        self._check_open("reset")
        refs = [a.reset.remote(obs_config) for a in self._actors]
        self.reset_rows = np.zeros(0, dtype=np.int64)
        batches = [self._reply(k, ref, "reset", lambda k=k: self._actors[k].reset.remote(obs_config), False)
                   for k, ref in enumerate(refs)]
        self._last_vec = unpack_many(batches)
        return self._last_vec

    def act(self, actions: Mapping[ActionName, RaggedArray], obs_filter: Optional[ObsSpace] = None) -> VecObs:
        self._check_open("act")
        if self._last_vec is None:
            raise RuntimeError("RayEnvList.act called before reset()")
        actions = ragged_actions(actions)
        check_actions(actions, self._last_vec, self._action_space)
        messages = pack_actions(actions, self._row_bounds)
        refs = [a.act.remote(m, obs_filter) for a, m in zip(self._actors, messages)]
        self.reset_rows = np.zeros(0, dtype=np.int64)
        batches = [self._reply(k, ref, "act", lambda k=k: self._actors[k].reset.remote(obs_filter), True)
                   for k, ref in enumerate(refs)]
        self._last_vec = unpack_many(batches)
        return self._last_vec

    def get_state(self) -> bytes:
        """Every worker's environments and the last observations (``dill``), as ``ParallelEnvList``'s."""
        self._check_open("get_state")
        states = [self._get(k, a.get_state.remote(), "get_state") for k, a in enumerate(self._actors)]
        return dill.dumps({"split": self._bounds, "workers": states, "last_vec": self._last_vec})

    def set_state(self, state: bytes) -> None:
        self._check_open("set_state")
        data = dill.loads(state)
        if [tuple(s) for s in data["split"]] != self._bounds:
            raise ValueError(f"RayEnvList.set_state: the state splits environments over workers as {data['split']}; "
                             f"this RayEnvList splits them as {self._bounds} (same num_envs and num_workers needed)")
        for k, (a, s) in enumerate(zip(self._actors, data["workers"])):
            self._get(k, a.set_state.remote(s), "set_state")
        self._last_vec = data["last_vec"]

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        self._check_open("render")
        frames = [self._get(k, a.render.remote(kwargs), "render") for k, a in enumerate(self._actors)]
        return np.concatenate(frames, axis=0)  # [num_envs, height, width, channels]

    def close(self) -> None:
        """Closes the environments and ends the actors (idempotent)."""
        for k, actor in enumerate(self._actors):
            if actor is None:
                continue
            try:
                self._ray.get(actor.close.remote(), timeout=5.0)
            except Exception:  # a dead or stuck worker: ended below either way
                logger.debug("RayEnvList: %s did not close cleanly", self.describe(k), exc_info=True)
            self._ray.kill(actor)
            self._actors[k] = None

    def __del__(self) -> None:
        try:
            if getattr(self, "_actors", None) and any(a is not None for a in self._actors):
                self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ replies and failures

    def _check_open(self, method: str) -> None:
        if any(a is None for a in self._actors):
            raise RuntimeError(f"RayEnvList.{method}: the list is closed")

    def _get(self, k: int, ref: Any, cmd: str) -> Any:
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayActorError as e:
            raise self._died(k, cmd, e) from None
        except self._ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None) or e
            index = getattr(cause, "env_index", None)
            where = f" in environment {index}" if index is not None else ""
            raise EnvWorkerError(f"RayEnvList: {self.describe(k)} raised {type(cause).__name__}{where} during "
                                 f"{cmd}(): {cause}", k, index, None, str(e)) from None

    def _died(self, k: int, cmd: str, error: BaseException) -> EnvWorkerError:
        detail = " ".join(str(error).split())[:400]
        return EnvWorkerError(f"RayEnvList: {self.describe(k)} died during {cmd}() ({type(error).__name__}: "
                              f"{detail}); pass restart=True to replace dead workers (a worker that cannot start, e.g. "
                              "one that cannot import the environment's module, fails the same way again)", k, None, -1)

    def _reply(self, k: int, ref: Any, cmd: str, again: Callable[[], Any], mark: bool) -> Tuple[Any, ...]:
        """Worker ``k``'s batch, packed; a dead worker is replaced and reset when ``restart`` is set."""
        try:
            return self._get(k, ref, cmd)
        except EnvWorkerError as e:
            if not (self.restart and e.exitcode == -1):
                raise
        logger.warning("RayEnvList: %s died during %s(); replacing it and resetting its environments",
                       self.describe(k), cmd)
        self._ray.kill(self._actors[k])
        self._restarts[k] += 1
        self._start(k)
        packed = self._get(k, again(), "reset")
        start, stop = self._row_bounds[k]
        self.reset_rows = np.concatenate([self.reset_rows, np.arange(start, stop, dtype=np.int64)])
        if not mark:
            return packed
        vec = unpack(packed)  # the episodes in progress were cut short
        vec.done[:] = True
        vec.truncated[:] = True
        vec.final_obs, vec.final_index = unpack(pack(vec)), np.arange(len(vec), dtype=np.int64)
        return pack(vec)
