"""NaN and ±inf are refused at append (naming the attribute and row) unless allow_nonfinite=True."""

import copy

import numpy as np
import pytest
import torch

from entmachin.buffer import Buffer, PrioritizedBuffer, TransitionBase
from entmachin.ragged import RaggedTensor, ragged_from_arrays

BAD = [float("nan"), float("inf"), -float("inf")]


def _dense(i, n_rows=1):
    rows = torch.arange(i, i + n_rows, dtype=torch.float32)[:, None]  # [n_rows, 1]
    return dict(state={"state": rows.repeat(1, 3)}, action={"action": rows.long()}, next_state={"state": rows.repeat(1, 3) + 1},
                reward=float(i) if n_rows == 1 else rows.clone(), terminal=False if n_rows == 1 else torch.zeros(n_rows, dtype=torch.bool))


def _entity(i, counts=(2, 1, 3)):
    """Entity rows with a float64 ``value`` sub attribute, as frames store it."""
    counts = np.asarray(counts)
    flat = np.full((int(counts.sum()), 2), i, np.float32)
    n_rows = len(counts)
    return TransitionBase(["state"], ["reward", "terminal", "value"], [], [{"entities": {"Robot": ragged_from_arrays(flat, counts)}}],
                          [np.full(n_rows, float(i), np.float32), np.zeros(n_rows, np.bool_), np.zeros((n_rows, 1))], [])


def _snapshot(buffer):
    n, values = Buffer.sample_batch(buffer, 0, sample_method="all")
    storage = buffer._storage
    return n, repr(values), storage.pos, storage.n_written, None if not hasattr(buffer, "_tree") else buffer._tree.leaves.copy()


def _corruptions(bad):
    """(name, make(i), expected message): every kind of float leaf, through both append paths."""

    def dense_state(i):  # one row: the fast path
        step = _dense(i)
        step["next_state"] = {"state": torch.tensor([[0.0, bad, 0.0]])}
        return step

    def numpy_rows(i):
        step = _dense(i, n_rows=3)
        state = np.zeros((3, 3), np.float32)
        state[2, 1] = bad
        step["state"] = {"state": state}
        return step

    def scalar_reward(i):  # fast path
        return {**_dense(i), "reward": bad}

    def vector_reward(i):
        return {**_dense(i, n_rows=3), "reward": np.array([0.0, bad, 0.0], np.float32)}

    def column_reward(i):  # a [1, 1] tensor: the fast path
        return {**_dense(i), "reward": torch.tensor([[bad]])}

    def entity_features(i):
        t = _entity(i)
        flat = np.zeros((6, 2), np.float32)
        flat[2, 1] = bad  # row 1 (counts 2, 1, 3), its first item
        t.state = {"entities": {"Robot": ragged_from_arrays(flat, [2, 1, 3])}}
        return t

    def entity_tensor(i):
        t = _entity(i)
        data = torch.zeros(6, 2)
        data[5, 0] = bad  # row 2, item 2
        t.state = {"entities": {"Robot": RaggedTensor.from_lengths(data, torch.tensor([2, 1, 3]))}}
        return t

    def value(i):
        t = _entity(i)
        t.value = np.array([[0.0], [0.0], [bad]])
        return t

    dense = rf"next_state\['state'\] holds {bad} at row 0"
    return [
        ("dense_state", dense_state, dense),
        ("numpy_rows", numpy_rows, rf"state\['state'\] holds {bad} at row 2"),
        ("scalar_reward", scalar_reward, rf"reward holds {bad} at row 0"),
        ("vector_reward", vector_reward, rf"reward holds {bad} at row 1"),
        ("column_reward", column_reward, rf"reward holds {bad} at row 0"),
        ("entity_features", entity_features, rf"state\['entities'\]\['Robot'\] holds {bad} at row 1 \(item 0 of that row\)"),
        ("entity_tensor", entity_tensor, rf"state\['entities'\]\['Robot'\] holds {bad} at row 2 \(item 2 of that row\)"),
        ("value", value, rf"value holds {bad} at row 2"),
    ]


CASES = [(bad, *case) for bad in BAD for case in _corruptions(bad)]


@pytest.mark.parametrize("cls", [Buffer, PrioritizedBuffer])
@pytest.mark.parametrize("bad, name, make, match", CASES, ids=[f"{c[1]}-{c[0]}" for c in CASES])
def test_nonfinite_values_are_refused_and_nothing_is_stored(cls, bad, name, make, match):
    buffer = cls(4, seed=0)
    good = _entity if name.startswith(("entity", "value")) else _dense
    for i in range(5):  # full, and wrapped: a bad append must not overwrite the oldest row
        buffer.append(good(i))
    before = _snapshot(buffer)
    with pytest.raises(ValueError, match=rf"^append: {match}; the buffer refuses NaN and ±inf .*allow_nonfinite=True"):
        buffer.append(make(9))
    after = _snapshot(buffer)
    assert after[:4] == before[:4]
    if cls is PrioritizedBuffer:
        np.testing.assert_array_equal(after[4], before[4])
    with pytest.raises(ValueError, match=rf"^store_episode: episode\[1\]: {match}"):
        buffer.store_episode([good(7), make(8)])
    assert _snapshot(buffer)[:4] == before[:4]


@pytest.mark.parametrize("cls", [Buffer, PrioritizedBuffer])
def test_allow_nonfinite_stores_them(cls, tmp_path):
    buffer = cls(16, seed=0, allow_nonfinite=True)
    for bad in BAD:
        step = _dense(0)
        step["state"] = {"state": torch.tensor([[bad, 1.0, 2.0]])}
        step["reward"] = bad
        buffer.append(step)  # the fast path (Buffer)
        buffer.append({**_dense(0, n_rows=2), "reward": torch.tensor([[bad], [1.0]])})  # the general path
    _, (state, reward) = Buffer.sample_batch(buffer, 0, sample_method="all", sample_attrs=["state", "reward"])
    assert np.isnan(state.state[0, 0].item()) and state.state[3, 0].item() == float("inf")
    assert np.isnan(reward[1, 0].item()) and reward[6, 0].item() == -float("inf") and reward[7, 0].item() == -float("inf")
    buffer.save(str(tmp_path / "b"))
    for copied in (cls.load(str(tmp_path / "b")), copy.deepcopy(buffer)):
        assert copied.allow_nonfinite
        copied.append({**_dense(1), "reward": float("nan")})
    entities = cls(4, allow_nonfinite=True)
    t = _entity(0)
    t.state = {"entities": {"Robot": ragged_from_arrays(np.full((6, 2), np.nan, np.float32), [2, 1, 3])}}
    entities.append(t)
    assert entities.size() == 3


def test_finite_extremes_and_other_dtypes_pass():
    buffer = Buffer(8)
    big = np.finfo(np.float32).max
    step = _dense(0)
    step["state"] = {"state": torch.full((1, 3), float(big))}  # its sum overflows; the values are finite
    buffer.append(step)
    buffer.append({**_dense(1, n_rows=2), "state": {"state": torch.full((2, 3), -float(big))}})
    half = Buffer(4)
    half.append({**_dense(0), "state": {"state": torch.full((1, 3), 60000.0, dtype=torch.float16)}})
    with pytest.raises(ValueError, match=r"state\['state'\] holds inf at row 1"):
        half.append({**_dense(0, n_rows=2), "state": {"state": torch.tensor([[0.0] * 3, [0.0, 0.0, float("inf")]], dtype=torch.float16)}})
    brain = Buffer(4)
    brain.append({**_dense(0), "state": {"state": torch.zeros(1, 3, dtype=torch.bfloat16)}})
    with pytest.raises(ValueError, match=r"state\['state'\] holds nan at row 0"):
        brain.append({**_dense(0), "state": {"state": torch.full((1, 3), float("nan"), dtype=torch.bfloat16)}})
    assert buffer.size() == 3 and half.size() == 1 and brain.size() == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("as_numpy", [False, True])
def test_the_fast_path_check_sees_every_position(dtype, as_numpy):
    def step(i, state):
        state = state.numpy() if as_numpy else state
        return {**_dense(i), "state": {"state": state}, "next_state": {"state": state}}

    buffer = Buffer(4)
    buffer.append(step(0, torch.zeros(1, 3, dtype=dtype)))
    buffer.append(step(1, torch.ones(1, 3, dtype=dtype)))
    assert buffer._fast is not None and buffer.size() == 2
    for position in range(3):
        for bad in BAD:
            state = torch.zeros(1, 3, dtype=dtype)
            state[0, position] = bad
            for key in ("state", "next_state"):
                transition = step(1, torch.zeros(1, 3, dtype=dtype))
                transition[key] = {"state": state.numpy() if as_numpy else state}
                assert buffer._fast.append(transition) is False  # refused before anything is written
                with pytest.raises(ValueError, match=rf"{key}\['state'\] holds {bad} at row 0"):
                    buffer.append(transition)
    assert buffer.size() == 2
    assert buffer._fast.append(step(2, torch.full((1, 3), 2.0, dtype=dtype))) is True  # finite rows take it
    _, (state,) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state"])
    assert state.state[:, 0].tolist() == [0.0, 1.0, 2.0]


def test_allow_nonfinite_must_be_a_bool():
    for cls in (Buffer, PrioritizedBuffer):
        with pytest.raises(TypeError, match=rf"{cls.__name__}: allow_nonfinite must be a bool, got 'yes'"):
            cls(4, allow_nonfinite="yes")
