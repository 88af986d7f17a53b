"""Ragged leaves: concatenation vs a list-of-arrays reference, ring memory bounds, entity states."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.buffer import Buffer, Transition
from entmachin.env import EnvList, random_actions, to_state
from entmachin.env.examples import MineSweeper
from entmachin.ragged import RaggedTensor, ragged_from_arrays

WIDTHS = {"A": 2, "B": 3}


def _transition(rng, counts_by_type, as_tensor=False):
    """A transition whose entity types have the given per-row counts (None: type absent)."""
    entities, reference = {}, {}
    n_rows = len(next(c for c in counts_by_type.values() if c is not None))
    for etype, counts in counts_by_type.items():
        if counts is None:
            reference[etype] = [np.zeros((0, WIDTHS[etype]), np.float32) for _ in range(n_rows)]
            continue
        flat = rng.standard_normal((int(sum(counts)), WIDTHS[etype])).astype(np.float32)
        value = ragged_from_arrays(flat, counts)
        entities[etype] = RaggedTensor.from_lengths(torch.from_numpy(flat), counts) if as_tensor else value
        offsets = np.concatenate([[0], np.cumsum(counts)])
        reference[etype] = [flat[offsets[i] : offsets[i + 1]] for i in range(n_rows)]
    t = Transition(
        {"entities": entities}, {}, {}, np.zeros(n_rows, np.float32), np.zeros(n_rows, np.bool_)
    )
    return t, reference


def _first_transition(rng):
    """Fixes the schema with both entity types present."""
    return _transition(rng, {"A": [1], "B": [2]})


counts_strategy = st.lists(st.integers(0, 5), min_size=1, max_size=4)
step_strategy = st.tuples(counts_strategy, st.booleans(), st.booleans()).map(
    lambda t: (t[0], None if t[1] else [c % 3 for c in t[0]], t[2])
)


@settings(max_examples=30, deadline=None)
@given(
    steps=st.lists(step_strategy, min_size=1, max_size=12),
    buffer_size=st.integers(1, 9),
    picks=st.lists(st.integers(0, 1000), max_size=10),
    b_at_first=st.booleans(),
)
def test_ragged_concatenation_matches_list_reference(steps, buffer_size, picks, b_at_first):
    rng = np.random.default_rng(0)
    buffer = Buffer(buffer_size, seed=0)
    # without B at the first append, B's column is added when B first appears (test_schema_growth.py)
    first, ref = _first_transition(rng) if b_at_first else _transition(rng, {"A": [1], "B": None})
    buffer.append(first)
    rows = {etype: list(ref[etype]) for etype in WIDTHS}
    for counts_a, counts_b, as_tensor in steps:
        if len(counts_a) > buffer_size:
            counts_a = counts_a[:buffer_size]
            counts_b = None if counts_b is None else counts_b[:buffer_size]
        t, ref = _transition(rng, {"A": counts_a, "B": counts_b}, as_tensor)
        buffer.append(t)
        for etype in WIDTHS:
            rows[etype].extend(ref[etype])
    live = {etype: r[-buffer.size() :] for etype, r in rows.items()}
    assert buffer.size() == min(buffer_size, len(rows["A"]))
    chosen = [p % buffer.size() for p in picks]
    for method, expected_rows in (("all", list(range(buffer.size()))), (lambda b, n: chosen, chosen)):
        n, values = buffer.sample_batch(1, sample_method=method, sample_attrs=["state"])
        if not expected_rows:
            assert (n, values) == (0, None)
            continue
        (state,) = values
        for etype in WIDTHS:
            if etype not in state.entities:  # never appeared: no column
                assert etype == "B" and not b_at_first and all(len(r) == 0 for r in rows["B"])
                continue
            rt = state.entities[etype]
            assert isinstance(rt, RaggedTensor) and len(rt) == len(expected_rows)
            assert rt.trailing_shape == (WIDTHS[etype],)
            expected = [live[etype][i] for i in expected_rows]
            assert rt.lengths.tolist() == [e.shape[0] for e in expected]
            assert rt.offsets[0] == 0 and rt.offsets.tolist()[1:] == np.cumsum([e.shape[0] for e in expected]).tolist()
            assert rt.batch_index.tolist() == [i for i, e in enumerate(expected) for _ in range(e.shape[0])]
            for got, want in zip(rt.to_list(), expected):
                np.testing.assert_array_equal(got.numpy(), want)


def test_unconcatenated_ragged_samples_are_single_sequences():
    rng = np.random.default_rng(0)
    buffer = Buffer(4, seed=0)
    t, ref = _transition(rng, {"A": [2, 0, 1], "B": [1, 1, 1]})
    buffer.append(t)
    n, (state,) = buffer.sample_batch(0, concatenate=False, sample_method="all", sample_attrs=["state"])
    assert n == 3 and all(isinstance(x, RaggedTensor) and len(x) == 1 for x in state.entities.A)
    for got, want in zip(state.entities.A, ref["A"]):
        np.testing.assert_array_equal(got.data.numpy(), want)


def test_ragged_schema_mismatches_raise():
    rng = np.random.default_rng(0)
    buffer = Buffer(4)
    buffer.append(_first_transition(rng)[0])
    wrong_width = ragged_from_arrays(np.zeros((1, 5), np.float32), [1])
    with pytest.raises(ValueError, match=r"state\['entities'\]\['A'\] is a RaggedArrayF32 of 1 sequences of 5 features.*float32 items of shape \(2,\)"):
        buffer.append(Transition({"entities": {"A": wrong_width}}, {}, {}, np.zeros(1, np.float32), np.zeros(1, bool)))
    wrong_dtype = ragged_from_arrays(np.zeros((1, 2), np.int64), [1])
    with pytest.raises(ValueError, match=r"state\['entities'\]\['A'\] is a RaggedArrayI64"):
        buffer.append(Transition({"entities": {"A": wrong_dtype}}, {}, {}, np.zeros(1, np.float32), np.zeros(1, bool)))
    with pytest.raises(TypeError, match=r"state\['entities'\]\['A'\] is a ndarray.*expects a ragged value"):
        buffer.append(Transition({"entities": {"A": np.zeros((1, 2), np.float32)}}, {}, {}, np.zeros(1, np.float32), np.zeros(1, bool)))
    new_type = np.zeros((1, 2), np.float32)  # a new entity type must be ragged (test_schema_growth.py)
    with pytest.raises(ValueError, match=r"state\['entities'\]\['C'\] is a new key holding a ndarray"):
        buffer.append(Transition({"entities": {"C": new_type}}, {}, {}, np.zeros(1, np.float32), np.zeros(1, bool)))


def test_ring_wrap_keeps_entity_memory_bounded():
    rng = np.random.default_rng(1)
    buffer = Buffer(50, seed=0)
    history, peak_live, peak_append = [], 0, 0
    for step in range(900):
        high = 40 if (step // 300) % 2 == 0 else 3  # phases of many and of few entities
        counts = rng.integers(0, high, int(rng.integers(1, 4)))
        t, _ = _transition(rng, {"A": counts, "B": counts % 2})
        buffer.append(t)
        history.extend(counts.tolist())
        peak_live = max(peak_live, sum(history[-buffer.size() :]))
        peak_append = max(peak_append, int(counts.sum()))
    column = buffer._storage.columns[0]
    assert column.item_capacity <= 1.125 * (peak_live + 2 * peak_append) + 300
    _, (state,) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state"])
    assert state.entities.A.lengths.tolist() == history[-50:]


def test_canonical_entity_states_from_an_environment():
    env = EnvList(MineSweeper, 3, seed=0)
    space = env.action_space() if callable(env.action_space) else env.action_space
    obs, rng = env.reset(), np.random.default_rng(0)
    buffer = Buffer(8, seed=0)
    for _ in range(4):
        action = random_actions(obs, space, rng)
        next_obs = env.act(action)
        buffer.append(Transition(to_state(obs, space), {"action": action}, to_state(next_obs, space), next_obs.reward, next_obs.done))
        obs = next_obs
    n, (state, action, reward) = buffer.sample_batch(5, sample_attrs=["state", "action", "reward"])
    assert n == 5 and reward.shape == (5, 1)  # a [B] sub attribute samples as [n, 1]
    moves = action.action["Move"]
    actors = state.action_masks["Move"]["actors"]
    assert isinstance(moves, RaggedTensor) and torch.equal(moves.lengths, actors.lengths)
    assert len(state.entities["Robot"]) == 5


def test_sampled_ragged_tensors_pass_the_constructor_checks():
    """Samples build RaggedTensors without re-running their checks; the checks must still hold."""
    import dataclasses

    assert [f.name for f in dataclasses.fields(RaggedTensor)] == ["data", "lengths", "offsets", "batch_index"]
    rng = np.random.default_rng(0)
    buffer = Buffer(5, seed=0)
    for _ in range(4):
        buffer.append(_transition(rng, {"A": [3, 0], "B": [1, 2]})[0])
    _, (state,) = buffer.sample_batch(4, sample_attrs=["state"])
    for rt in state.entities.values():
        checked = RaggedTensor(rt.data, rt.lengths, rt.offsets, rt.batch_index)  # raises if inconsistent
        assert torch.equal(checked.batch_index, RaggedTensor.from_lengths(rt.data, rt.lengths).batch_index)
