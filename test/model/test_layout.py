"""Row layout and bucket planning."""
import itertools

import numpy as np
import torch
from hypothesis import given, settings, strategies as st

from entmachin.model.layout import build_layout, plan_buckets


def _cost(sorted_lengths, plan, overhead):
    return sum((end - first) * int(sorted_lengths[first]) ** 2 + overhead for first, end in plan)


def _brute_force(sorted_lengths, overhead):
    """Cheapest split of the non-empty rows into consecutive buckets, by trying every split."""
    n = int(np.count_nonzero(sorted_lengths))
    if n == 0:
        return 0
    best = None
    for cuts in itertools.product([False, True], repeat=max(n - 1, 0)):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        plan = list(zip(bounds[:-1], bounds[1:]))
        cost = _cost(sorted_lengths, plan, overhead)
        best = cost if best is None else min(best, cost)
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=9), st.sampled_from([0, 1, 10, 100, 4096]))
def test_plan_is_optimal_and_covers_the_nonempty_rows(lengths, overhead):
    sorted_lengths = np.sort(np.asarray(lengths, dtype=np.int64))[::-1]
    plan = plan_buckets(sorted_lengths, overhead)
    n = int(np.count_nonzero(sorted_lengths))
    assert [b for a in plan for b in a][:1] == ([0] if n else [])
    assert all(a[1] == b[0] for a, b in zip(plan, plan[1:]))
    assert (plan[-1][1] if plan else 0) == n
    assert _cost(sorted_lengths, plan, overhead) == _brute_force(sorted_lengths, overhead)


def test_plan_coarsens_many_distinct_lengths():
    lengths = np.arange(5000, 0, -1)
    plan = plan_buckets(lengths)
    assert plan[0][0] == 0 and plan[-1][1] == 5000


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=12), st.sampled_from([0, 4096]))
def test_layout_places_every_row_contiguously(lengths, overhead):
    layout = build_layout(np.asarray(lengths, dtype=np.int64), torch.device("cpu"), overhead)
    assert layout.n_tokens == sum(lengths)
    for row, (start, n) in enumerate(zip(layout.starts.tolist(), lengths)):
        assert (layout.batch_index[start : start + n] == row).all()
    covered = []
    for b in layout.buckets:
        assert b.n_rows * b.width >= b.n_tokens
        if b.gather is None:
            assert b.n_rows * b.width == b.n_tokens
            covered.extend(range(b.start, b.start + b.n_tokens))
        else:
            real = b.gather[b.valid]
            assert real.tolist() == list(range(b.start, b.start + b.n_tokens))
            assert (b.gather[~b.key_valid.flatten()] == layout.n_tokens).all()
            covered.extend(real.tolist())
    assert covered == list(range(layout.n_tokens))
