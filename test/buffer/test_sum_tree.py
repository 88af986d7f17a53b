"""SumTree against a plain numpy array (cumsum + searchsorted) over many random updates."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.buffer import SumTree, sum_tree


def _reference_find(weights, values):
    cumsum = np.cumsum(weights)
    return np.searchsorted(cumsum, values, side="right")


@pytest.mark.parametrize("rebuild_every", [4096, 3])
@pytest.mark.parametrize("n_leaves", [1, 2, 7, 64, 1000, 20_000])
def test_matches_cumsum_and_searchsorted_over_random_updates(n_leaves, rebuild_every, monkeypatch):
    monkeypatch.setattr(sum_tree, "_REBUILD_EVERY", rebuild_every)  # also exercise the rebuilds
    rng = np.random.default_rng(n_leaves)
    tree = SumTree(n_leaves)
    weights = np.zeros(n_leaves)
    for _ in range(150 if n_leaves < 10_000 else 50):  # batches of up to 20: thousands of updates
        k = int(rng.integers(1, 21))
        index = rng.integers(0, n_leaves, k)
        # multiples of 1/8 keep every sum exact, so tree and cumsum agree to the last bit
        new = rng.integers(0, 40, k) / 8.0
        tree.update(index, new)
        for i, w in zip(index, new):  # the last of repeated indices wins
            weights[i] = w
        np.testing.assert_array_equal(tree.leaves, weights)
        assert tree.total() == weights.sum() and tree.max() == weights.max()
        if weights.sum() > 0:
            # queries on and between the interval edges
            values = np.concatenate([np.cumsum(weights)[:-1], rng.random(16) * weights.sum()])
            inside = values[values < weights.sum()]  # the reference answers n_leaves beyond the total
            np.testing.assert_array_equal(tree.find(inside), _reference_find(weights, inside))
            last_positive = np.flatnonzero(weights)[-1]
            assert tree.find([weights.sum(), weights.sum() * 2]).tolist() == [last_positive] * 2


def test_random_float_weights_land_in_their_interval():
    rng = np.random.default_rng(0)
    tree, weights = SumTree(500), np.zeros(500)
    for _ in range(50):
        index, new = rng.integers(0, 500, 64), rng.random(64)
        tree.update(index, new)
        for i, w in zip(index, new):
            weights[i] = w
    np.testing.assert_allclose(tree.leaves, weights)
    values = rng.random(2000) * tree.total()
    found = tree.find(values)
    cumsum = np.cumsum(weights)
    lower = np.concatenate([[0.0], cumsum])[found]
    assert (lower <= values + 1e-9).all() and (values < cumsum[found] + 1e-9).all()
    assert (weights[found] > 0).all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.0, 0.25, 1.0, 3.5]), min_size=1, max_size=40), st.data())
def test_zero_weight_leaves_are_never_found(weights, data):
    tree = SumTree(len(weights))
    tree.update(np.arange(len(weights)), weights)
    if sum(weights) == 0:
        with pytest.raises(ValueError, match="every weight is zero"):
            tree.find([0.0])
        return
    values = data.draw(st.lists(st.floats(-1.0, sum(weights) + 1.0), min_size=1, max_size=10))
    found = tree.find(values)
    assert all(weights[i] > 0 for i in found)
    inside = [(i, v) for i, v in zip(found, values) if 0 <= v < sum(weights)]
    for i, v in inside:
        assert i == _reference_find(np.array(weights), [v])[0]


def test_errors():
    with pytest.raises(ValueError, match="n_leaves must be an int >= 1, got 0"):
        SumTree(0)
    tree = SumTree(4)
    with pytest.raises(ValueError, match="index 4 is out of range for 4 leaves"):
        tree.update([4], [1.0])
    with pytest.raises(ValueError, match="index -1 is out of range"):
        tree.get([-1])
    with pytest.raises(ValueError, match="indices must be integers"):
        tree.update([0.5], [1.0])
    with pytest.raises(ValueError, match="got 2 indices but 3 weights"):
        tree.update([0, 1], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        tree.update([0], [np.nan])
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        tree.update([0], [-1.0])
    tree.update([0], [1.0])
    with pytest.raises(ValueError, match="values must be finite"):
        tree.find([np.inf])


def test_scalar_weight_broadcast_clear_and_read_only_leaves():
    tree = SumTree(3)
    tree.update([0, 2], 2.0)
    assert tree.total() == 4.0 and tree.get([0, 1, 2]).tolist() == [2.0, 0.0, 2.0]
    with pytest.raises(ValueError):
        tree.leaves[0] = 5.0
    tree.clear()
    assert tree.total() == 0.0 and tree.max() == 0.0
    tree.update([], [])
    assert tree.total() == 0.0


def test_rebuild_removes_accumulated_rounding(monkeypatch):
    monkeypatch.setattr(sum_tree, "_REBUILD_EVERY", 10**9)
    rng = np.random.default_rng(0)
    tree = SumTree(30_000)
    for _ in range(200):
        tree.update(rng.integers(0, 30_000, 256), rng.random(256) * 1e3)
    exact = SumTree(30_000)
    exact.update(np.arange(30_000), tree.leaves)
    exact._rebuild()  # every kept level summed from the leaves
    np.testing.assert_allclose(tree._sum, exact._sum, rtol=1e-9)  # drifted, but only by rounding
    tree._rebuild()
    np.testing.assert_array_equal(tree._sum[tree._n_top :], exact._sum[exact._n_top :])
