"""PrioritizedBuffer: priorities of new rows, stratified sampling, weights and stale updates."""

import numpy as np
import pytest
import torch

from entmachin.buffer import PrioritizedBuffer


def _step(i, n_rows=1):
    rows = torch.arange(i, i + n_rows, dtype=torch.float32)[:, None]  # [n_rows, 1]
    return dict(
        state={"state": rows}, action={"action": rows.long()}, next_state={"state": rows + 1},
        reward=float(i) if n_rows == 1 else rows, terminal=False if n_rows == 1 else torch.zeros(n_rows, 1, dtype=torch.bool),
    )


def _leaves(buffer):
    return buffer._tree.leaves[: buffer.size()].copy()


def test_new_rows_get_the_current_maximum_priority_exactly():
    buffer = PrioritizedBuffer(8, epsilon=0.01, alpha=0.6, seed=0)
    buffer.append(_step(0))
    assert _leaves(buffer).tolist() == [1.0]  # an empty buffer starts at 1
    buffer.append(_step(1), priority=3.0)
    top = _leaves(buffer)[1]
    assert top == pytest.approx((3.0 + 0.01) ** 0.6)
    buffer.append(_step(2))
    buffer.append(_step(3, n_rows=2))
    assert _leaves(buffer)[2:].tolist() == [top, top, top]  # the stored maximum, not re-normalised
    buffer.update_priority([10.0], buffer._storage.ids_of(np.array([0])))
    buffer.store_episode([_step(5), _step(6)])
    assert _leaves(buffer)[0] == pytest.approx((10.0 + 0.01) ** 0.6)
    assert (_leaves(buffer)[5:] == _leaves(buffer)[0]).all()


def test_priorities_per_row_and_their_checks():
    buffer = PrioritizedBuffer(8, seed=0)
    buffer.append(_step(0, n_rows=3), priority=np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(_leaves(buffer), (np.array([0.0, 1.0, 2.0]) + 0.01) ** 0.6)
    with pytest.raises(ValueError, match="got 2 priorities for a transition of 3 rows"):
        buffer.append(_step(0, n_rows=3), priority=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"append: priorities must be finite and >= 0, got nan at position 0"):
        buffer.append(_step(0), priority=float("nan"))
    with pytest.raises(ValueError, match=r"priorities must be finite and >= 0, got -1.0"):
        buffer.append(_step(0), priority=-1.0)
    with pytest.raises(TypeError, match="priorities must be real numbers"):
        buffer.append(_step(0), priority="high")
    assert buffer.size() == 3  # failed appends stored nothing


def test_sample_batch_returns_and_empty_cases():
    buffer = PrioritizedBuffer(16, seed=0)
    assert buffer.sample_batch(4) == (0, None, None, None)
    for i in range(5):
        buffer.append(_step(i))
    assert buffer.sample_batch(0) == (0, None, None, None)
    n, (state, reward), index, is_weight = buffer.sample_batch(8, sample_attrs=["state", "reward"])
    assert n == 8 and state.state.shape == (8, 1) and reward.shape == (8, 1)
    assert index.dtype == np.int64 and index.shape == (8,) and is_weight.dtype == np.float32
    assert torch.equal(state.state[:, 0], torch.from_numpy(index).float())  # row ids trace the steps
    with pytest.raises(ValueError, match="batch_size must be >= 0"):
        buffer.sample_batch(-2)
    with pytest.raises(ValueError, match="sample_attrs names unknown attribute 'x'"):
        buffer.sample_batch(2, sample_attrs=["x"])
    n, batch, _, _ = buffer.sample_batch(3, concatenate=False)
    assert n == 3 and len(batch[0]["state"]) == 3


def test_stratified_sampling_with_equal_priorities_takes_each_row_once():
    buffer = PrioritizedBuffer(32, seed=0)
    for i in range(20):
        buffer.append(_step(i))
    _, _, index, is_weight = buffer.sample_batch(20)
    assert sorted(index.tolist()) == list(range(20))
    assert np.allclose(is_weight, 1.0)


def test_sampling_frequency_follows_priorities_and_weights_follow_the_formula():
    buffer = PrioritizedBuffer(4, epsilon=0.0, alpha=1.0, beta=0.5, beta_increment_per_sampling=0.0, seed=1)
    for i, p in enumerate([1.0, 2.0, 3.0, 4.0]):
        buffer.append(_step(i), priority=p)
    counts = np.zeros(4)
    for _ in range(200):
        _, _, index, is_weight = buffer.sample_batch(10)
        counts += np.bincount(index, minlength=4)
        probability = (index + 1.0) / 10.0
        expected = (4 * probability) ** -0.5
        np.testing.assert_allclose(is_weight, expected / expected.max(), rtol=1e-6)
    np.testing.assert_allclose(counts / counts.sum(), [0.1, 0.2, 0.3, 0.4], atol=0.01)


def test_beta_grows_to_one_and_clear_resets():
    buffer = PrioritizedBuffer(4, beta=0.9, beta_increment_per_sampling=0.06, seed=0)
    buffer.append(_step(0))
    buffer.sample_batch(1)
    assert buffer.curr_beta == pytest.approx(0.96)
    buffer.sample_batch(1)
    assert buffer.curr_beta == 1.0
    buffer.clear()
    assert buffer.curr_beta == 0.9 and buffer.size() == 0 and buffer._tree.total() == 0.0
    assert buffer.sample_batch(2) == (0, None, None, None)


def test_update_priority_skips_rows_overwritten_since_sampling():
    buffer = PrioritizedBuffer(4, seed=0)
    for i in range(4):
        buffer.append(_step(i))
    _, _, index, _ = buffer.sample_batch(4)
    for i in range(4, 6):  # overwrites the rows with ids 0 and 1
        buffer.append(_step(i), priority=0.5)
    before = _leaves(buffer)
    buffer.update_priority(np.full(4, 7.0), index)
    after = _leaves(buffer)
    fresh = (0.5 + 0.01) ** 0.6
    ids = buffer._storage.ids_of(np.arange(4))
    for slot, row_id in enumerate(ids):
        if row_id in (4, 5):
            assert after[slot] == before[slot] == pytest.approx(fresh)  # not the stale update
        else:
            assert after[slot] == pytest.approx((7.0 + 0.01) ** 0.6)


def test_update_priority_checks():
    buffer = PrioritizedBuffer(4, seed=0)
    buffer.append(_step(0))
    _, _, index, _ = buffer.sample_batch(1)
    for bad, match in ((np.nan, "got nan"), (np.inf, "got inf"), (-0.5, "got -0.5")):
        with pytest.raises(ValueError, match=f"update_priority: priorities must be finite and >= 0, {match}"):
            buffer.update_priority([bad], index)
    with pytest.raises(ValueError, match="got 2 priorities for 1 indexes"):
        buffer.update_priority([1.0, 2.0], index)
    with pytest.raises(TypeError, match="indexes must be the integer index from sample_batch"):
        buffer.update_priority([1.0], [0.5])
    buffer.update_priority(torch.tensor([2.0], requires_grad=True), torch.from_numpy(index))
    assert _leaves(buffer)[0] == pytest.approx(2.01 ** 0.6)
    PrioritizedBuffer(2).update_priority([], [])  # nothing stored yet: a no-op


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(epsilon=-1.0), ValueError, r"epsilon must be in \[0.0, inf\], got -1.0"),
        (dict(alpha=-0.1), ValueError, "alpha must be in"),
        (dict(beta=1.5), ValueError, r"beta must be in \[0.0, 1.0\], got 1.5"),
        (dict(beta_increment_per_sampling="fast"), TypeError, "beta_increment_per_sampling must be a number"),
    ],
)
def test_constructor_checks(kwargs, error, match):
    with pytest.raises(error, match=match):
        PrioritizedBuffer(4, **kwargs)


def test_all_zero_priorities_sample_uniformly():
    buffer = PrioritizedBuffer(4, epsilon=0.0, seed=0)
    for i in range(3):
        buffer.append(_step(i), priority=0.0)
    n, _, index, is_weight = buffer.sample_batch(6)
    assert n == 6 and set(index.tolist()) <= {0, 1, 2} and (is_weight == 1).all()
