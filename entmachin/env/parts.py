"""The parent's record of environments stepped in parts (``VecEnv.parts`` / ``act_async`` /
``receive``): which parts are in flight, and the last observation of every row.

A part is a range of rows ``(start, stop)`` made of whole workers. ``ParallelEnvList`` keeps one
:class:`PartLedger`: it checks each part it is given, refuses a part whose rows are still in
flight, and answers what a part's actions are checked against (the part's last observation,
cut from the observation of every row where the part was not received on its own).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from entmachin.env.vec_env import VecObs, merge_vec_obs, split_envs
from entmachin.ragged.arrays import take

__all__ = ["PartLedger", "take_rows"]

Rows = Tuple[int, int]


def take_rows(vec: VecObs, rows: npt.NDArray[np.int64]) -> VecObs:
    """Rows ``rows`` of ``vec``, in that order, as a new ``VecObs`` (values copied): features,
    visibility, masks, rewards and flags, and the final observations of those rows
    (``final_index`` renumbered). Metrics, which are not per row, are left out."""
    rows = np.asarray(rows, dtype=np.int64)  # [n]
    place = np.full(len(vec), -1, dtype=np.int64)  # [n_rows]: each row's position in `rows`, or -1
    place[rows] = np.arange(rows.shape[0], dtype=np.int64)
    out = VecObs(
        features={etype: take(buf, rows) for etype, buf in vec.features.items()},
        visible={etype: take(buf, rows) for etype, buf in vec.visible.items()},
        action_masks={name: mask[rows] for name, mask in vec.action_masks.items()},
        reward=vec.reward[rows], done=vec.done[rows], metrics={}, truncated=vec.truncated[rows],
        result=vec.result[rows],
    )
    if vec.final_obs is not None:
        kept = np.flatnonzero(place[vec.final_index] >= 0)  # [n_kept]: places in final_obs
        if kept.size:
            out.final_obs, out.final_index = take_rows(vec.final_obs, kept), place[vec.final_index[kept]]
    return out


class PartLedger:
    """The parts in flight and each row's last observation, for a list of ``len(bounds)`` workers.

    Args:
        name: the owner's name in messages (``"ParallelEnvList"``).
        bounds: each worker's rows ``(start, stop)``, contiguous and in order.
    """

    def __init__(self, name: str, bounds: Sequence[Rows]) -> None:
        self.name, self.bounds = name, [tuple(b) for b in bounds]
        self.n_rows = self.bounds[-1][1] if self.bounds else 0
        self.last: Optional[VecObs] = None  # the last observation of every row ...
        self.last_parts: Dict[Rows, VecObs] = {}  # ... except these rows, received on their own since
        self.in_flight: Dict[Rows, Any] = {}  # part -> what its owner needs to receive it

    def parts(self, n_parts: int) -> List[Rows]:
        """Up to ``n_parts`` groups of whole workers, as even as the workers allow."""
        groups = split_envs(len(self.bounds), max(1, min(n_parts, len(self.bounds))))
        return [(self.bounds[a][0], self.bounds[b - 1][1]) for a, b in groups]

    def check(self, rows: Any, method: str) -> Rows:
        """``rows`` as ``(start, stop)``, if it is a range of whole workers.

        Raises:
            ValueError: it is not.
        """
        try:
            start, stop = (int(r) for r in rows)
        except (TypeError, ValueError):
            start = stop = -1
        if start not in [b[0] for b in self.bounds] or stop not in [b[1] for b in self.bounds] or stop <= start:
            raise ValueError(f"{self.name}.{method}: rows {rows!r} is not a range of whole workers' rows; give one of "
                             f"parts(n)'s ranges, e.g. {self.parts(2)}")
        return start, stop

    def workers(self, rows: Rows) -> List[int]:
        """The workers whose rows make up the part ``rows``."""
        return [k for k, (first, last) in enumerate(self.bounds) if rows[0] <= first and last <= rows[1]]

    def refuse_in_flight(self, method: str, rows: Optional[Rows] = None) -> None:
        """Raises ``RuntimeError`` if some rows (of ``rows``; default: any) are in flight."""
        busy = sorted(p for p in self.in_flight if rows is None or (p[0] < rows[1] and rows[0] < p[1]))
        if busy:
            raise RuntimeError(f"{self.name}.{method}: rows {', '.join(map(str, busy))} were sent by act_async() and "
                               "are still stepping; receive() them first")

    def sent(self, rows: Rows, handle: Any) -> None:
        self.in_flight[rows] = handle

    def receiving(self, rows: Rows) -> Any:
        """The handle :meth:`sent` stored for ``rows``, which are no longer in flight.

        Raises:
            RuntimeError: ``rows`` is not in flight.
        """
        if rows not in self.in_flight:
            raise RuntimeError(f"{self.name}.receive: rows {rows} are not in flight (in flight: "
                               f"{sorted(self.in_flight)}); send them with act_async() first")
        return self.in_flight.pop(rows)

    def received(self, rows: Rows, vec: VecObs) -> None:
        self.last_parts[rows] = vec

    def observed_all(self, vec: Optional[VecObs]) -> None:
        """Every row's last observation is ``vec`` (after ``reset``, ``act``, ``set_state``)."""
        self.last, self.last_parts = vec, {}

    def last_of(self, rows: Rows, method: str) -> VecObs:
        """The last observation of the part ``rows``, which its actions are checked against.

        Raises:
            RuntimeError: nothing was observed yet (before ``reset()``).
        """
        if self.last is None:
            raise RuntimeError(f"{self.name}.{method} called before reset()")
        if rows in self.last_parts:
            return self.last_parts[rows]
        if self.last_parts:  # parts of another split: first one observation of every row, each row's latest
            pieces, at = [], 0
            for (start, stop), vec in sorted(self.last_parts.items(), key=lambda item: item[0]):
                pieces += [take_rows(self.last, np.arange(at, start))] if at < start else []
                pieces.append(take_rows(vec, np.arange(stop - start)))  # a copy: merging extends the first
                at = stop
            pieces += [take_rows(self.last, np.arange(at, self.n_rows))] if at < self.n_rows else []
            self.observed_all(merge_vec_obs(pieces))
        return self.last if rows == (0, self.n_rows) else take_rows(self.last, np.arange(*rows))
