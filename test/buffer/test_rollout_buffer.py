"""RolloutBuffer: a frame's rollout held by reference, everything else exactly as Buffer."""
import pickle

import numpy as np
import pytest
import torch

from entmachin.buffer import Buffer, RolloutBuffer
from entmachin.ragged import RaggedTensor, ragged_from_arrays

MAJOR = ("state",)


def rows(rng, n):
    counts = rng.integers(0, 4, size=n)
    flat = torch.from_numpy(rng.standard_normal((int(counts.sum()), 2)).astype(np.float32))
    return {"state": {"entities": {"A": RaggedTensor.from_lengths(flat, counts)}, "x": torch.randn(n, 3)},
            "reward": torch.from_numpy(rng.standard_normal((n, 1)).astype(np.float32))}


def everything(buffer):
    return buffer.sample_batch(buffer.size(), sample_method="all")


def assert_same(a, b):
    (n, (state_a, reward_a)), (m, (state_b, reward_b)) = a, b
    assert n == m
    assert torch.equal(state_a["entities"]["A"].data, state_b["entities"]["A"].data)
    assert torch.equal(state_a["entities"]["A"].lengths, state_b["entities"]["A"].lengths)
    assert torch.equal(state_a["x"], state_b["x"]) and torch.equal(reward_a, reward_b)


def test_holds_the_first_trusted_rows_by_reference():
    data = rows(np.random.default_rng(0), 5)
    buffer = RolloutBuffer(10)
    buffer.append_trusted(data, MAJOR)
    assert buffer.size() == 5 and len(buffer) == 5
    assert buffer.held()["state"]["x"] is data["state"]["x"]
    assert buffer.held()["state"]["entities"]["A"] is data["state"]["entities"]["A"]
    buffer.clear()
    assert buffer.size() == 0 and buffer.held() is None


@pytest.mark.parametrize("then", ["append_trusted", "sample_batch", "pickle", "storage_nbytes"])
def test_anything_else_sees_exactly_what_a_buffer_holds(then):
    rng = np.random.default_rng(1)
    first, second = rows(rng, 3), rows(rng, 4)
    ours, theirs = RolloutBuffer(10, seed=0), Buffer(10, seed=0)
    for buffer in (ours, theirs):
        buffer.append_trusted(first, MAJOR)
    if then == "append_trusted":
        for buffer in (ours, theirs):
            buffer.append_trusted(second, MAJOR)
    elif then == "pickle":
        ours = pickle.loads(pickle.dumps(ours))
    elif then == "storage_nbytes":
        assert ours.storage_nbytes() == theirs.storage_nbytes() > 0
    assert ours.size() == theirs.size()
    assert_same(everything(ours), everything(theirs))
    assert ours.held() is None  # the rows moved into the columns
    assert_same(ours.sample_batch(4, sample_attrs=["state", "reward"]),
                theirs.sample_batch(4, sample_attrs=["state", "reward"]))


def test_a_sample_is_a_copy_that_leaves_the_held_rows_alone():
    data = rows(np.random.default_rng(2), 3)
    kept = data["state"]["x"].clone()
    buffer = RolloutBuffer(10)
    buffer.append_trusted(data, MAJOR)
    everything(buffer)[1][0]["x"].mul_(0)
    assert torch.equal(data["state"]["x"], kept)


def test_rows_that_are_not_all_torch_or_do_not_fit_take_the_buffer_path():
    rng = np.random.default_rng(3)
    buffer = RolloutBuffer(10)
    numpy_rows = {"state": {"x": rng.standard_normal((2, 3)).astype(np.float32),
                            "e": ragged_from_arrays(np.zeros((1, 2), np.float32), [1, 0])},
                  "reward": np.zeros((2, 1), np.float32)}
    buffer.append_trusted(numpy_rows, MAJOR)
    assert buffer.held() is None and buffer.size() == 2
    with pytest.raises(ValueError, match=r"append_trusted: the transition holds 11 rows, more than the buffer's"):
        RolloutBuffer(10).append_trusted(rows(rng, 11), MAJOR)


def test_a_held_rollout_that_does_not_fit_the_next_rows_raises_and_stays_held():
    rng = np.random.default_rng(4)
    buffer = RolloutBuffer(10)
    buffer.append_trusted(rows(rng, 3), MAJOR)
    bad = rows(rng, 2)
    bad["state"]["x"] = torch.randn(2, 5)
    with pytest.raises(ValueError, match=r"append_trusted: state\['x'\] is a Tensor of shape \(2, 5\)"):
        buffer.append_trusted(bad, MAJOR)
    assert buffer.size() == 3
