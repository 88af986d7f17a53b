"""``entmachin train`` on several ranks: ``torchrun --nproc-per-node N -m entmachin train CONFIG``.

Each rank steps ``rollout.num_envs`` environments of its own (seeds derived from ``train.seed``
and the rank; rank 0's are those of a one-process run) and holds its own rows; updates are
data-parallel (:mod:`entmachin.distributed.data_parallel`), so every rank keeps identical weights.
Rank 0 writes the run directory (config, tensorboard, evaluations, checkpoints); a checkpoint
holds every rank's environments and random generators, gathered to rank 0 and published in
one atomic version. A rank that raises leaves word in the group's store before it exits, so
the others stop with an error naming it instead of waiting (every collective waits at most
``distributed.timeout`` seconds).
"""
from __future__ import annotations

import base64
import datetime
import gc
import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from entmachin.frame import RolloutStats
from entmachin.distributed.collectives import Collectives, report_failure
from entmachin.distributed.data_parallel import DataParallel
from entmachin.run.sections import DistributedSection

__all__ = ["DistributedRun", "from_environment", "process_group_backend", "rank_device", "rank_seed",
           "resolve_backend"]

logger = logging.getLogger(__name__)


def resolve_backend(section: DistributedSection, device: str) -> str:
    """``gloo`` on CPU, ``nccl`` on CUDA devices, unless the section names one."""
    if section.backend != "auto":
        return section.backend
    return "nccl" if torch.device(device).type == "cuda" and torch.cuda.is_available() else "gloo"


def process_group_backend(backend: str) -> str:
    """The backend string the process group is made with: nccl carries the CUDA tensors and gloo
    the CPU ones (counts, flags, gathered checkpoints), which nccl alone cannot carry."""
    return "cpu:gloo,cuda:nccl" if backend == "nccl" else backend


def rank_device(device: str, local_rank: int) -> str:
    """The device of one rank: ``cuda`` without an index becomes ``cuda:LOCAL_RANK`` (one GPU per
    rank of a node, as torchrun lays them out); any other device is kept as given."""
    parsed = torch.device(device)
    if parsed.type == "cuda" and parsed.index is None:
        return f"cuda:{local_rank}"
    return device


def rank_seed(seed: int, rank: int) -> int:
    """Rank 0 keeps ``seed`` (a one-rank run is a one-process run); others derive their own."""
    if rank == 0:
        return seed
    return int(np.random.SeedSequence([seed, rank]).generate_state(1, dtype=np.uint32)[0])


@dataclass
class DistributedRun:
    """One rank of a data-parallel run: its collectives and what the runner asks of them."""

    collectives: Collectives
    backend: str
    device: str = "cpu"  # this rank's ``train.device`` (see :func:`rank_device`)

    def __post_init__(self) -> None:
        self.data_parallel = DataParallel(self.collectives)

    @property
    def rank(self) -> int:
        return self.collectives.rank

    @property
    def world_size(self) -> int:
        return self.collectives.world_size

    def barrier(self) -> None:
        self.collectives.all_reduce_sum(torch.zeros(1))

    def report(self, error: BaseException) -> None:
        """Tells the other ranks that this one failed (see :func:`report_failure`)."""
        report_failure(self.collectives.store, self.rank, f"{type(error).__name__}: {error}")

    def any_true(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (a stop signal stops every rank at the same iteration)."""
        return bool(self.collectives.all_reduce_sum(torch.tensor([float(flag)]))[0] > 0)

    def gather_rollout(self, stats: RolloutStats) -> RolloutStats:
        """The rollout statistics of every rank: steps summed, episodes in rank order."""
        returns = self.gather_floats(stats.episode_returns)
        lengths = self.gather_floats([float(v) for v in stats.episode_lengths])
        return RolloutStats(stats.n_env_steps * self.world_size, tuple(returns), tuple(int(v) for v in lengths),
                            stats.longest_running)  # this rank's: a hint, not a statistic

    def gather_floats(self, values: Sequence[float]) -> List[float]:
        counts = self.collectives.all_gather(torch.tensor([len(values)], dtype=torch.int64))
        longest = max(int(c) for c in counts)
        padded = torch.zeros(longest, dtype=torch.float64)  # [longest]
        padded[: len(values)] = torch.tensor(list(values), dtype=torch.float64)
        gathered = self.collectives.all_gather(padded)
        return [float(v) for g, c in zip(gathered, counts) for v in g[: int(c)].tolist()]

    def gather_bytes(self, blob: bytes) -> List[bytes]:
        """Every rank's ``blob``, in rank order, on every rank."""
        counts = self.collectives.all_gather(torch.tensor([len(blob)], dtype=torch.int64))
        longest = max(int(c) for c in counts)
        padded = torch.zeros(longest, dtype=torch.uint8)  # [longest]
        padded[: len(blob)] = torch.frombuffer(bytearray(blob), dtype=torch.uint8) if blob else padded[:0]
        gathered = self.collectives.all_gather(padded)
        return [bytes(g[: int(c)].numpy().tobytes()) for g, c in zip(gathered, counts)]

    def close(self) -> None:
        """Destroys the process group, and with it this rank's last reference to it.

        ``destroy_process_group`` only forgets torch's own references; the group object lives on
        while the collectives hold it. Left to the interpreter's shutdown, its destruction can
        meet gloo's worker threads and abort the process ("terminate called without an active
        exception"), so the references go now, while the interpreter is whole.
        """
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        self.collectives.release()
        gc.collect()  # a reference cycle may still hold the group


def from_environment(section: DistributedSection, device: str) -> Optional[DistributedRun]:
    """The rank ``torchrun`` (or any launcher setting ``RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR``)
    started, with its process group; None when not launched that way or on one rank."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    import torch.distributed as dist

    device = rank_device(device, int(os.environ.get("LOCAL_RANK", "0")))
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        torch.cuda.set_device(torch.device(device))  # before the group: nccl binds the current device
    backend = resolve_backend(section, device)
    timeout = datetime.timedelta(seconds=section.timeout)
    if not dist.is_initialized():
        dist.init_process_group(process_group_backend(backend), timeout=timeout)
    store = dist.distributed_c10d._get_default_store()
    collectives = Collectives(dist.group.WORLD, store=store, timeout=section.timeout)
    logger.info("rank %d of %d (backend %s, device %s)", collectives.rank, collectives.world_size, backend, device)
    return DistributedRun(collectives, backend, device)


def rank_state(frame: Any, envs_blob: Optional[bytes]) -> bytes:
    """What a checkpoint keeps of one rank besides the shared frame: environments (a signed blob, or
    None) and generators, as JSON (read back by :func:`ranks_from_bytes`, never unpickled)."""
    return json.dumps({"envs": None if envs_blob is None else base64.b64encode(envs_blob).decode(),
                       "torch_rng": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode(),
                       "shuffle_rng": frame.training_counters()["shuffle_rng"]}).encode()


def ranks_to_bytes(ranks: List[bytes]) -> bytes:
    """Every rank's :func:`rank_state`, in rank order, as one JSON list."""
    return b"[" + b",".join(ranks) + b"]"


def ranks_from_bytes(blob: bytes) -> List[Dict[str, Any]]:
    """The ranks' states of :func:`ranks_to_bytes` (environments and torch generators as bytes).

    Raises:
        ValueError: not such a list (damaged, or a pickle written before the ranks' states were JSON).
    """
    ranks = json.loads(blob.decode("utf-8"))
    if not isinstance(ranks, list) or not all(isinstance(r, dict) and {"envs", "torch_rng", "shuffle_rng"} <= set(r)
                                              for r in ranks):
        raise ValueError("expected a list of ranks' states with envs, torch_rng and shuffle_rng")
    return [{**r, "envs": None if r["envs"] is None else base64.b64decode(r["envs"]),
             "torch_rng": base64.b64decode(r["torch_rng"])} for r in ranks]


def restore_rank_state(frame: Any, state: Dict[str, Any]) -> None:
    torch.set_rng_state(torch.frombuffer(bytearray(state["torch_rng"]), dtype=torch.uint8))
    counters = frame.training_counters()
    frame.set_training_counters({**counters, "shuffle_rng": state["shuffle_rng"]})
