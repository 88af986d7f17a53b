"""Buffers pickle (pickle, dill, deepcopy) with rows, schema, priorities and random state; Machin's required_attrs."""

import copy
import pickle

import dill
import numpy as np
import pytest
import torch

from entmachin.buffer import Buffer, PrioritizedBuffer, Transition, TransitionBase
from entmachin.ragged import ragged_from_arrays, ragged_tensor_equal

ROUND_TRIPS = {
    "pickle": lambda b: pickle.loads(pickle.dumps(b)),
    "dill": lambda b: dill.loads(dill.dumps(b)),
    "deepcopy": copy.deepcopy,
}


def _dense(i):
    return {"state": {"s": torch.full((1, 3), float(i))}, "action": {"a": torch.full((1, 1), i, dtype=torch.int64)},
            "next_state": {"s": torch.full((1, 3), i + 1.0)}, "reward": float(i), "terminal": i % 3 == 0}


def _entity(i):
    counts = np.array([i % 3, 1])
    return Transition({"entities": {"Robot": ragged_from_arrays(np.full((int(counts.sum()), 2), i, np.float32), counts)}},
                      {"action": {"move": ragged_from_arrays(np.full((2, 1), i, np.int64), [1, 1])}}, {},
                      np.full(2, float(i), np.float32), np.zeros(2, np.bool_), info={"step": i})


def _same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif hasattr(a, "lengths"):
        assert ragged_tensor_equal(a, b)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def _filled(cls, make, n=11, size=7):
    buffer = cls(size, seed=1)
    for i in range(n):  # wraps around
        buffer.append(make(i))
    if cls is PrioritizedBuffer:
        _, _, index, _ = buffer.sample_batch(4)
        buffer.update_priority(np.arange(4) + 0.5, index)
    return buffer


@pytest.mark.parametrize("how", list(ROUND_TRIPS))
@pytest.mark.parametrize("cls", [Buffer, PrioritizedBuffer])
@pytest.mark.parametrize("make", [_dense, _entity], ids=["dense", "entity"])
def test_round_trips_keep_rows_schema_priorities_and_random_state(how, cls, make):
    buffer = _filled(cls, make)
    copied = ROUND_TRIPS[how](buffer)
    assert type(copied) is cls and copied.size() == buffer.size() and copied.schema == buffer.schema
    assert (copied._fast is not None) == (buffer._fast is not None) == (make is _dense)  # the fast path is rebuilt
    if cls is PrioritizedBuffer:
        np.testing.assert_array_equal(copied._tree.leaves, buffer._tree.leaves)
        assert copied.curr_beta == buffer.curr_beta
    _same(Buffer.sample_batch(buffer, 0, sample_method="all"), Buffer.sample_batch(copied, 0, sample_method="all"))
    _same(buffer.sample_batch(5), copied.sample_batch(5))  # the same random state draws the same rows
    for i in range(20, 26):  # appends after the round trip: the fast path writes the copy's own columns
        buffer.append(make(i))
        copied.append(make(i))
    _same(buffer.sample_batch(5), copied.sample_batch(5))
    _same(Buffer.sample_batch(buffer, 0, sample_method="all"), Buffer.sample_batch(copied, 0, sample_method="all"))
    copied.append(make(40))  # the two are independent
    assert Buffer.sample_batch(buffer, 0, sample_method="all", sample_attrs=["reward"])[1][0][-1, 0] == 25.0


def test_empty_buffers_and_settings_round_trip():
    for how in ROUND_TRIPS.values():
        empty = how(PrioritizedBuffer(5, alpha=0.3, allow_nonfinite=True))
        assert empty.size() == 0 and empty.alpha == 0.3 and empty.allow_nonfinite and empty.schema is None
        empty.append(_dense(0))
        assert empty.size() == 1


def test_required_attrs_machin_signature():
    buffer = Buffer(5)
    machin = ("state", "action", "next_state", "reward", "terminal")
    buffer.append(_dense(0), machin)  # positional, as Machin's frames pass it
    buffer.append(_dense(1), required_attrs=machin)
    buffer.append(_dense(2), required_attrs=())
    buffer.store_episode([_dense(3)], required_attrs=machin)
    with pytest.raises(ValueError, match=r"append: the transition lacks the required attribute\(s\) \['value'\]"):
        buffer.append(_dense(4), required_attrs=("state", "value"))
    with pytest.raises(ValueError, match=r"store_episode: episode\[1\]: the transition lacks the required attribute\(s\) \['gae'\]"):
        Buffer(5).store_episode([Transition(**_dense(4), gae=1.0), _dense(5)], required_attrs=("gae",))
    with pytest.raises(TypeError, match=r"required_attrs must be a sequence of attribute names, got str"):
        buffer.append(_dense(4), required_attrs="state")
    with pytest.raises(TypeError, match=r"append: expected a Transition or a dict, got list"):
        buffer.append([_dense(4)], required_attrs=machin)
    assert buffer.size() == 4
    prioritized = PrioritizedBuffer(5)
    prioritized.append(_dense(0), 2.0, machin)  # Machin's (transition, priority, required_attrs)
    with pytest.raises(ValueError, match=r"lacks the required attribute\(s\) \['value'\]"):
        prioritized.append(_dense(1), required_attrs=("value",))
    empty = Buffer(3)
    with pytest.raises(ValueError, match=r"lacks the required attribute\(s\) \['action', 'next_state', 'reward', 'terminal'\]"):
        empty.append(TransitionBase(["state"], [], [], [{"s": torch.zeros(1, 1)}], [], []), required_attrs=machin)
    assert empty.schema is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_buffers_round_trip_and_refuse_nonfinite_values():
    for make in (_dense, _entity):
        buffer = PrioritizedBuffer(6, buffer_device="cuda", seed=0)
        for i in range(8):
            buffer.append(make(i))
        bad = make(9)
        bad["reward"] = float("nan") if make is _dense else np.array([np.nan, 0.0], np.float32)
        with pytest.raises(ValueError, match="reward holds nan at row 0"):
            buffer.append(bad)
        for how in ROUND_TRIPS.values():
            copied = how(buffer)
            _same(Buffer.sample_batch(buffer, 0, sample_method="all", device="cpu"), Buffer.sample_batch(copied, 0, sample_method="all", device="cpu"))
            copied.append(make(20))
            assert copied.size() == 6 and next(iter(copied._storage.columns)).tensor.is_cuda
