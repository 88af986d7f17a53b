"""The few collectives data-parallel training needs, over one ``torch.distributed`` process group.

:class:`Collectives` calls the process group's own methods (``allreduce``, ``allgather``, ``broadcast``), so it
works the same over the default group that ``torchrun`` sets up and over process groups built directly (several
ranks in one process, as the tests do). Every call waits with the group's timeout; a peer that crashed or stopped
answering surfaces as :class:`RankFailureError`, which names the failed rank when it left word in the group's store
(see :func:`report_failure`) and says what else to check otherwise.
"""
from __future__ import annotations

import datetime
import logging
from typing import Any, Callable, List, Optional

import torch

__all__ = ["Collectives", "RankFailureError", "report_failure", "failed_ranks"]

logger = logging.getLogger(__name__)

_FAILED_KEY = "entmachin/failed/{rank}"


class RankFailureError(RuntimeError):
    """A collective could not complete because another rank crashed, stopped or timed out."""


def report_failure(store: Any, rank: int, message: str) -> None:
    """Leaves ``message`` in ``store`` so the other ranks can name ``rank`` as the one that failed; best effort: a
    store that is already gone is ignored (the other ranks then say that a peer failed without naming it)."""
    try:
        store.set(_FAILED_KEY.format(rank=rank), message.encode("utf-8", "replace")[:2000])
    except Exception:  # the store went down with the run: nothing left to tell
        logger.debug("could not report the failure of rank %d to the store", rank, exc_info=True)


def failed_ranks(store: Any, world_size: int) -> List[str]:
    """``"rank R: message"`` for every rank that reported a failure in ``store``."""
    found = []
    if store is None:
        return found
    for rank in range(world_size):
        key = _FAILED_KEY.format(rank=rank)
        try:
            if store.check([key]):
                found.append(f"rank {rank}: {store.get(key).decode('utf-8', 'replace')}")
        except Exception:  # the store itself is gone
            break
    return found


class Collectives:
    """Sum-all-reduce, all-gather and broadcast of tensors within one process group.

    Args:
        group: a ``torch.distributed`` ``ProcessGroup`` (e.g. ``torch.distributed.group.WORLD``).
        store: the group's key-value store, read to name a failed rank (None: not named).
        timeout: seconds each collective may wait before the run stops with an error.
        rank: this process's rank in the group (default: the group's ``rank()``).
        world_size: the number of ranks in the group (default: the group's ``size()``).

    Raises:
        RankFailureError: from any collective, when another rank failed or did not answer.
    """

    def __init__(self, group: Any, *, store: Any = None, timeout: float = 300.0, rank: Optional[int] = None,
                 world_size: Optional[int] = None) -> None:
        self.group = group
        self.store = store
        self.timeout = float(timeout)
        self.rank = group.rank() if rank is None else rank
        self.world_size = group.size() if world_size is None else world_size

    def release(self) -> None:
        """Forgets the group and its store (after the group was destroyed); no collective runs after this."""
        self.group = self.store = None

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sums ``tensor`` over the ranks, in place; returns it."""
        self._wait(lambda: self.group.allreduce([tensor]), "all-reduce")
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> List[torch.Tensor]:
        """Every rank's ``tensor`` (same shape and dtype on every rank), in rank order."""
        out = [torch.empty_like(tensor) for _ in range(self.world_size)]
        self._wait(lambda: self.group.allgather([out], [tensor]), "all-gather")
        return out

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Overwrites ``tensor`` with rank ``src``'s, in place; returns it."""
        from torch.distributed import BroadcastOptions

        options = BroadcastOptions()
        options.rootRank = src  # the tensor to send is the list's first (rootTensor = 0)
        self._wait(lambda: self.group.broadcast([tensor], options), "broadcast")
        return tensor

    def _wait(self, start: Callable[[], Any], what: str) -> None:
        try:
            start().wait(datetime.timedelta(seconds=self.timeout))
        except RankFailureError:
            raise
        except Exception as e:  # gloo / nccl raise RuntimeError subclasses that vary between versions
            raise self.failure(what, e) from e

    def failure(self, what: str, error: BaseException) -> RankFailureError:
        """The error to raise when ``what`` failed with ``error`` on this rank."""
        reported = [r for r in failed_ranks(self.store, self.world_size) if not r.startswith(f"rank {self.rank}:")]
        failed = f"rank {self.rank}: the {what} of data-parallel training failed"
        if reported:
            return RankFailureError(f"{failed} because {'; '.join(reported)}; this rank stops too")
        return RankFailureError(f"{failed} ({type(error).__name__}: {str(error).strip()[:300]}); another of the "
                                f"{self.world_size} ranks crashed, was killed or did not answer within "
                                f"distributed.timeout = {self.timeout:g} s; look at the other ranks' output")
