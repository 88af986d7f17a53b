"""Recomputing a dataset's rewards with a function, into a new dataset (the original is only read).

The function takes one part's rows as an ``arrdict``:

* ``state``: the canonical state each row saw (``entities``, ``visible``, ``action_masks``);
* ``action``: action name -> int64 ragged ``[n_actors, 1]`` (a choice), or float32 ragged
  ``[n_actors, n_values]`` for a continuous action (final rows: none);
* ``next_state``: the state of the same seat's next row in its episode (a final row: its own);
* ``reward`` (the recorded one), ``terminal``, ``truncated``, ``final``, ``episode``, ``step``:
  arrays ``[n]``; ``seat``: a list of ``n`` seats (``None`` with one player);

and returns float32 rewards ``[n]``, one per row (a final row's is kept as 0: no action led from it).
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Callable, Optional

import numpy as np

from entmachin.data.dataset import Dataset, DatasetError, DatasetWriter
from entmachin.data.rows import Rows
from entmachin.ragged.arrdict import arrdict

__all__ = ["next_rows", "relabel"]


def next_rows(rows: Rows) -> np.ndarray:
    """int64 ``[n]``: each row's next row of the same episode and seat (a final row: itself)."""
    n = len(rows)
    seats = np.unique(np.array([str(s) for s in rows.seat]), return_inverse=True)[1]
    order = np.lexsort((rows.step, rows.episode, seats))
    same = (rows.episode[order][1:] == rows.episode[order][:-1]) & (seats[order][1:] == seats[order][:-1])
    nxt = np.arange(n, dtype=np.int64)
    nxt[order[:-1][same]] = order[1:][same]
    nxt[rows.final] = np.flatnonzero(rows.final)
    return nxt


def relabel(source: str, out: str, fn: Callable[[arrdict], Any], name: str = "reward function",
            progress: Optional[Callable[[int], None]] = None) -> DatasetWriter:
    """Writes ``source``'s rows with ``fn``'s rewards to the new dataset ``out``, part by part.

    Raises:
        DatasetError: ``out`` is ``source`` or already holds a dataset; ``fn`` raised, or returned
            other than ``n`` finite numbers (naming the part and the first bad row); a damaged part.
    """
    if os.path.realpath(source) == os.path.realpath(out):
        raise DatasetError(f"{out}: relabelling writes a new dataset; give another directory than the source")
    dataset = Dataset(source)
    created = not os.path.exists(out)
    recorded = dict(dataset.recorded)
    recorded["relabelled"] = {"from": os.path.abspath(source), "reward": name, "recorded": dataset.recorded}
    writer = DatasetWriter(out, dataset.obs_space, dataset.action_space, seats=dataset.seats, recorded=recorded,
                           probs=dataset.probs, id_kinds=dataset.id_kinds(), rows_per_part=1)
    try:
        _relabel_parts(dataset, writer, fn, name, progress)
    except BaseException:
        if created:  # no half-relabelled dataset stays behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    return writer


def _relabel_parts(dataset: Dataset, writer: DatasetWriter, fn: Callable[[arrdict], Any], name: str,
                   progress: Optional[Callable[[int], None]]) -> None:
    for path in dataset.paths:
        rows = dataset.read_part(path)
        tree = arrdict(state=rows.state(), action=dict(rows.action), next_state=rows.take(next_rows(rows)).state(),
                       reward=rows.reward, terminal=rows.terminal, truncated=rows.truncated, final=rows.final,
                       episode=rows.episode, step=rows.step, seat=list(rows.seat))
        where = f"{name} on {path}"
        try:
            rewards = fn(tree)
        except Exception as e:
            raise DatasetError(f"{where} raised {type(e).__name__}: {e}") from e
        try:
            rewards = np.asarray(rewards, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError) as e:
            raise DatasetError(f"{where} returned {type(rewards).__name__}, not {len(rows)} numbers ({e})") from None
        if rewards.shape != (len(rows),):
            raise DatasetError(f"{where} returned {rewards.shape[0]} rewards for {len(rows)} rows")
        bad = ~np.isfinite(rewards)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise DatasetError(f"{where} returned {rewards[k]} for row {k} (episode {rows.episode[k]}, step "
                               f"{rows.step[k]}); rewards must be finite")
        rows.reward = np.where(rows.final, np.float32(0.0), rewards).astype(np.float32)
        writer.write(rows)
        writer.flush()
        if progress is not None:
            progress(len(rows))
    writer.close()
