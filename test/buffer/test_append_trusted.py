"""The trusted path: rows a frame already checked go in without a second check or copy."""
import numpy as np
import pytest
import torch

from entmachin.buffer import Buffer, PrioritizedBuffer, TransitionBase
from entmachin.ragged import ragged_from_arrays

MAJOR = ("state",)


def rows(rng, n, *, value=None):
    counts = rng.integers(0, 4, size=n)
    flat = rng.standard_normal((int(counts.sum()), 2)).astype(np.float32)
    reward = np.full((n, 1), value, np.float32) if value is not None else rng.standard_normal((n, 1)).astype(np.float32)
    return {"state": {"entities": {"A": ragged_from_arrays(flat, counts)}, "x": torch.randn(n, 3)},
            "reward": torch.from_numpy(reward)}


def as_transition(data):
    sub = [k for k in data if k not in MAJOR]
    return TransitionBase(MAJOR, sub, (), [data[k] for k in MAJOR], [data[k] for k in sub], ())


def stored(buffer):
    _, (state, reward) = buffer.sample_batch(buffer.size(), sample_method="all", sample_attrs=["state", "reward"])
    return state["entities"]["A"].data, state["entities"]["A"].lengths, state["x"], reward


def test_stores_exactly_what_append_stores():
    rng = np.random.default_rng(0)
    batches = [rows(rng, n) for n in (3, 1, 5)]
    trusted, checked = Buffer(20), Buffer(20)
    for data in batches:
        trusted.append_trusted(data, MAJOR)
        checked.append(as_transition(data))
    for a, b in zip(stored(trusted), stored(checked)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_prioritized_rows_get_the_maximum_priority_as_appended_rows_do():
    rng = np.random.default_rng(4)
    batches = [rows(rng, n) for n in (3, 5)]
    trusted, checked = PrioritizedBuffer(20, seed=0), PrioritizedBuffer(20, seed=0)
    trusted.append_trusted(batches[0], MAJOR)
    checked.append(as_transition(batches[0]))
    for buffer in (trusted, checked):
        buffer.update_priority(np.array([5.0, 1.0, 2.0]), np.arange(3))
    trusted.append_trusted(batches[1], MAJOR)
    checked.append(as_transition(batches[1]))
    a, b = trusted.sample_batch(64, sample_attrs=["reward"]), checked.sample_batch(64, sample_attrs=["reward"])
    np.testing.assert_array_equal(a[2], b[2])
    np.testing.assert_array_equal(a[3], b[3])


def test_builds_no_transition_after_the_first(monkeypatch):
    rng = np.random.default_rng(1)
    buffer = Buffer(20)
    buffer.append_trusted(rows(rng, 2), MAJOR)  # fixes the schema through append
    built = []
    original = TransitionBase.__init__
    monkeypatch.setattr(TransitionBase, "__init__", lambda self, *a: (built.append(1), original(self, *a))[1])
    buffer.append_trusted(rows(rng, 4), MAJOR)
    assert built == [] and buffer.size() == 6


def test_values_that_do_not_fit_the_schema_still_raise_and_store_nothing():
    rng = np.random.default_rng(2)
    buffer = Buffer(20)
    buffer.append_trusted(rows(rng, 2), MAJOR)
    bad = rows(rng, 3)
    bad["state"]["x"] = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"append_trusted: state\['x'\] is a Tensor of shape \(3, 4\).*expects a tensor or array \[n_rows, 3\]"):
        buffer.append_trusted(bad, MAJOR)
    too_many = rows(rng, 21)
    with pytest.raises(ValueError, match=r"append_trusted: the transition holds 21 rows, more than the buffer's"):
        buffer.append_trusted(too_many, MAJOR)
    assert buffer.size() == 2


def test_is_not_scanned_for_non_finite_values_but_append_is():
    rng = np.random.default_rng(3)
    buffer = Buffer(20)
    buffer.append_trusted(rows(rng, 2), MAJOR)
    buffer.append_trusted(rows(rng, 2, value=float("nan")), MAJOR)  # the caller vouched for it
    assert buffer.size() == 4
    with pytest.raises(ValueError, match=r"NaN"):
        buffer.append(as_transition(rows(rng, 2, value=float("nan"))))
