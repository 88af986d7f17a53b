"""Where each entity of a ragged batch lives inside RogueNet, and how rows are padded for attention.

RogueNet keeps its residual stream flat, ``[n_tokens, d_model]``, one token per entity plus the
optional ``__global__`` token. Each row's tokens are contiguous and in entity-index order, but
rows are stored longest first, so that rows of similar length sit next to each other. Attention
pads only inside *buckets* of consecutive stored rows: a bucket whose rows all have the same
length needs no padding at all (a plain ``view``), and the rest waste little.

Shape:
    ``lengths``/``starts``: ``[n_rows]``; ``batch_index``: ``[n_tokens]`` (the original row of each
    stored token); a bucket pads its ``n_tokens`` tokens to ``[n_bucket_rows, width]``.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import numpy as np
import torch

# Cost of one extra bucket, in padded query x key pairs per row-head; tuned by
# benchmarks/bench_rogue_net.py (each bucket costs a handful of extra kernel launches).
BUCKET_OVERHEAD_PAIRS = 16384
# Rows are coarsened to this many distinct lengths before planning, to bound the planner's cost.
MAX_PLAN_LENGTHS = 64


class Bucket(NamedTuple):
    """A run of consecutive stored rows that attention pads to a common ``width``.

    Attributes:
        start: index of the bucket's first token in the flat stream.
        n_tokens: number of real tokens in the bucket.
        n_rows: number of rows.
        width: length of the longest row (the padded length).
        gather: ``[n_rows * width]`` index into the flat stream extended by one zero token
            (index ``n_stream_tokens``) for padding; ``None`` when every row has ``width`` tokens.
        valid: ``[n_tokens]`` positions of the bucket's tokens (in stream order) within its
            ``n_rows * width`` grid; ``None`` when every row has ``width`` tokens.
        key_valid: bool ``[n_rows, width]`` real (not padding) positions; ``None`` when dense.
    """

    start: int
    n_tokens: int
    n_rows: int
    width: int
    gather: Optional[torch.Tensor]
    valid: Optional[torch.Tensor]
    key_valid: Optional[torch.Tensor]


class RowLayout(NamedTuple):
    """The token layout of one forward.

    Attributes:
        n_rows: number of rows (environment steps) ``B``.
        lengths: ``[B]`` tokens of each row, in original row order.
        starts: ``[B]`` index of each row's first token in the flat stream.
        batch_index: ``[n_tokens]`` original row of each token, in stream order.
        buckets: the attention buckets, covering every non-empty row in stream order.
    """

    n_rows: int
    lengths: torch.Tensor
    starts: torch.Tensor
    batch_index: torch.Tensor
    buckets: Tuple[Bucket, ...]

    @property
    def n_tokens(self) -> int:
        return self.batch_index.shape[0]


def plan_buckets(sorted_lengths: np.ndarray, overhead: int = BUCKET_OVERHEAD_PAIRS) -> List[Tuple[int, int]]:
    """Splits rows sorted longest first into ``[(first_row, end_row), ...]`` buckets.

    Minimises ``sum(n_rows * width ** 2) + overhead * n_buckets`` (padded attention pairs plus a
    fixed price per bucket) by dynamic programming over the distinct lengths. Rows of length 0
    are left out.
    """
    lengths = np.asarray(sorted_lengths, dtype=np.int64)
    n_nonempty = int(np.count_nonzero(lengths))
    if n_nonempty == 0:
        return []
    lengths = lengths[:n_nonempty]
    top = int(lengths[0])
    step = max(1, -(-top // MAX_PLAN_LENGTHS))
    coarse = -(-lengths // step) * step  # [n_nonempty] lengths rounded up to the planning grid
    # Group boundaries: first row of each distinct (coarse) length.
    firsts = np.flatnonzero(np.r_[True, coarse[1:] != coarse[:-1]])  # [m]
    widths = lengths[firsts].astype(np.float64)  # [m] exact longest row of each group
    ends = np.r_[firsts[1:], n_nonempty]  # [m]
    m = firsts.shape[0]
    best = np.zeros(m + 1)  # best[j]: cost of bucketing groups j.. ; best[m] = 0
    choice = np.zeros(m, dtype=np.int64)
    for j in range(m - 1, -1, -1):
        # A bucket over groups j..k-1 has width widths[j] and rows firsts[j]..ends[k-1].
        n_rows = ends[j:] - firsts[j]  # [m - j]
        cost = n_rows * widths[j] ** 2 + overhead + best[j + 1 :]  # [m - j]
        k = int(np.argmin(cost))
        best[j], choice[j] = cost[k], j + k + 1
    plan, j = [], 0
    while j < m:
        k = int(choice[j])
        plan.append((int(firsts[j]), int(ends[k - 1])))
        j = k
    return plan


def _stream_order(lengths: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(order, sorted_lengths, sorted_starts, starts)`` of rows laid out longest first."""
    n_rows = lengths.shape[0]
    order = np.argsort(-lengths, kind="stable")  # [B] stored position -> original row
    sorted_lengths = lengths[order]  # [B]
    sorted_starts = np.zeros(n_rows + 1, dtype=np.int64)  # [B + 1]
    np.cumsum(sorted_lengths, out=sorted_starts[1:])
    starts = np.empty(n_rows, dtype=np.int64)  # [B]
    starts[order] = sorted_starts[:-1]
    return order, sorted_lengths, sorted_starts, starts


def row_starts(lengths: np.ndarray) -> np.ndarray:
    """``[B]`` stream index of each row's first token, as :func:`build_layout` lays the rows out."""
    return _stream_order(np.asarray(lengths, dtype=np.int64))[3]


def build_layout(lengths: np.ndarray, device: torch.device, overhead: int = BUCKET_OVERHEAD_PAIRS) -> RowLayout:
    """Builds the stream layout and attention buckets for rows of ``lengths`` tokens.

    Args:
        lengths: ``[B]`` int tokens per row (on the CPU: planning needs the values).
        device: where the index tensors go.
        overhead: price of one bucket for :func:`plan_buckets`.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n_rows = lengths.shape[0]
    order, sorted_lengths, sorted_starts, starts = _stream_order(lengths)
    batch_index = np.repeat(order, sorted_lengths)  # [n_tokens]
    n_tokens = int(sorted_starts[-1])

    buckets = []
    for first, end in plan_buckets(sorted_lengths, overhead):
        rows = sorted_lengths[first:end]  # [n_bucket_rows]
        width = int(rows[0])
        start, stop = int(sorted_starts[first]), int(sorted_starts[end])
        if (rows == width).all():
            buckets.append(Bucket(start, stop - start, end - first, width, None, None, None))
            continue
        key_valid = np.arange(width)[None, :] < rows[:, None]  # [n_bucket_rows, width]
        valid = np.flatnonzero(key_valid)  # [n_bucket_tokens]
        gather = np.full(key_valid.size, n_tokens, dtype=np.int64)  # [n_bucket_rows * width]
        gather[valid] = np.arange(start, stop)
        buckets.append(
            Bucket(
                start,
                stop - start,
                end - first,
                width,
                on_device(gather, device),
                on_device(valid, device),
                on_device(key_valid, device),
            )
        )
    return RowLayout(
        n_rows,
        on_device(lengths, device),
        on_device(starts, device),
        on_device(batch_index, device),
        tuple(buckets),
    )


def on_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """``array`` as a tensor on ``device`` (sharing its memory on the CPU: no copy, no ``to`` call)."""
    tensor = torch.from_numpy(array)
    return tensor if torch.device(device).type == "cpu" else tensor.to(device)
