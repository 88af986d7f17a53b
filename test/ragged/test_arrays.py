"""Tests for the numpy-side ragged helpers."""

import copy
import pickle
import subprocess
import sys
from multiprocessing.reduction import ForkingPickler

import dill
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from entmachin.ragged.array import RaggedArrayBool, RaggedArrayF32, RaggedArrayI64
from entmachin.ragged.arrays import (
    RAGGED_ARRAY_TYPES,
    concat,
    empty_ragged,
    is_ragged,
    is_ragged_array,
    n_features,
    n_items,
    n_sequences,
    pad,
    ragged_dtype,
    ragged_equal,
    ragged_from_arrays,
    ragged_full,
    ragged_to_arrays,
    take,
    take_nested,
)

DTYPES = [np.float32, np.int64, np.bool_]
CLASSES = {np.float32: RaggedArrayF32, np.int64: RaggedArrayI64, np.bool_: RaggedArrayBool}
FAST = settings(max_examples=40, deadline=None)


def _elements(dtype):
    if dtype == np.float32:
        return st.floats(-1e6, 1e6, width=32)
    if dtype == np.int64:
        return st.integers(-1000, 1000)
    return st.booleans()


@st.composite
def ragged_case(draw, dtype=None, width=None):
    """Draws ``(flat, lengths)``: zero sequences, empty sequences and 1-4 features included."""
    dtype = draw(st.sampled_from(DTYPES)) if dtype is None else dtype
    width = draw(st.integers(1, 4)) if width is None else width
    lengths = np.array(draw(st.lists(st.integers(0, 4), max_size=6)), dtype=np.int64)
    flat = draw(hnp.arrays(dtype, (int(lengths.sum()), width), elements=_elements(dtype)))
    return flat, lengths


def split(flat, lengths):
    """Reference list-of-arrays form of ``(flat, lengths)``."""
    return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []


def as_list(buf):
    return split(*ragged_to_arrays(buf))


def assert_same_sequences(buf, seqs, width):
    got = as_list(buf)
    assert len(got) == len(seqs) == n_sequences(buf)
    assert n_features(buf) == width
    for g, s in zip(got, seqs):
        np.testing.assert_array_equal(g, s.reshape(-1, width))


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_arrays_round_trip(dtype, data):
    flat, lengths = data.draw(ragged_case(dtype=dtype))
    buf = ragged_from_arrays(flat, lengths)
    assert type(buf) is CLASSES[flat.dtype.type]
    assert ragged_dtype(buf) == flat.dtype
    assert (n_sequences(buf), n_items(buf), n_features(buf)) == (
        len(lengths),
        len(flat),
        flat.shape[1],
    )
    flat2, lengths2 = ragged_to_arrays(buf)
    assert flat2.dtype == flat.dtype and lengths2.dtype == np.int64
    np.testing.assert_array_equal(flat2, flat)
    np.testing.assert_array_equal(lengths2, lengths)


def test_round_trip_copies_and_accepts_non_contiguous_input():
    flat = np.arange(12, dtype=np.float32).reshape(6, 2)
    buf = ragged_from_arrays(flat[::2], [1, 2])
    flat[0, 0] = 100.0
    out, lengths = ragged_to_arrays(buf)
    np.testing.assert_array_equal(out, [[0, 1], [4, 5], [8, 9]])
    for view in (out, lengths):  # views of the array's own memory, which no one may write to
        with pytest.raises(ValueError, match="read-only"):
            view[0] = 0


def test_dtype_casts_before_choosing_the_class():
    buf = ragged_from_arrays(np.ones((3, 2)), [3], dtype=np.float32)
    assert isinstance(buf, RaggedArrayF32)
    assert isinstance(ragged_from_arrays(np.ones((2, 1), np.int32), [1, 1], dtype=np.int64), RaggedArrayI64)
    assert isinstance(ragged_from_arrays([[True], [False]], [2, 0]), RaggedArrayBool)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_pickle_dill_deepcopy_round_trips(dtype, data):
    buf = ragged_from_arrays(*data.draw(ragged_case(dtype=dtype)))
    copies = [
        pickle.loads(pickle.dumps(buf)),
        pickle.loads(pickle.dumps(buf, protocol=0)),
        dill.loads(dill.dumps(buf)),
        copy.deepcopy(buf),
        copy.copy(buf),
        pickle.loads(bytes(ForkingPickler.dumps(buf))),
    ]
    for other in copies:
        assert type(other) is type(buf)
        assert ragged_equal(other, buf)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduces_to_flat_array_and_lengths(dtype):
    buf = ragged_from_arrays(np.zeros((3, 2), dtype), [1, 2])
    fn, (flat, lengths) = buf.__reduce__()
    assert fn.__module__ == "entmachin.ragged.arrays"  # importable by name: picklable everywhere
    assert isinstance(flat, np.ndarray) and flat.shape == (3, 2)
    assert isinstance(lengths, np.ndarray) and lengths.tolist() == [1, 2]


def test_pickles_selected_views():
    buf = ragged_from_arrays(np.arange(10, dtype=np.int64)[:, None], [3, 0, 2, 5])
    view = take(buf, [3, 0])
    back = pickle.loads(pickle.dumps(view))
    np.testing.assert_array_equal(back.size1(), [5, 3])
    np.testing.assert_array_equal(ragged_to_arrays(back)[0][:, 0], [5, 6, 7, 8, 9, 0, 1, 2])


def test_numpy_side_does_not_import_torch():
    code = (
        "import entmachin.ragged.arrays, entmachin.ragged.arrdict, entmachin.ragged, sys; "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------- constructors


def test_empty_ragged_and_counts():
    buf = empty_ragged(np.int64, 3, n_sequences=2)
    assert isinstance(buf, RaggedArrayI64)
    assert (n_sequences(buf), n_items(buf), n_features(buf)) == (2, 0, 3)
    assert n_sequences(empty_ragged(bool, 1)) == 0


def test_counts_differ_from_len():
    buf = ragged_from_arrays(np.zeros((6, 2), np.float32), [3, 0, 1, 2])
    assert len(buf) == 12  # ragged_buffer counts items x features
    assert n_sequences(buf) == 4


@FAST
@given(st.lists(st.integers(0, 4), max_size=6), st.integers(0, 3), st.sampled_from(DTYPES))
def test_ragged_full(lengths, width, dtype):
    buf = ragged_full(np.array(lengths, dtype=np.int64), width, 1, dtype)
    assert type(buf) is CLASSES[dtype]
    flat, out_lengths = ragged_to_arrays(buf)
    assert out_lengths.tolist() == lengths
    assert flat.shape == (sum(lengths), width) and (flat == 1).all()


def test_type_predicates():
    buf = empty_ragged(np.float32, 1)
    assert is_ragged_array(buf) and is_ragged(buf)
    assert not is_ragged_array(np.zeros((1, 1))) and not is_ragged(np.zeros((1, 1)))
    assert len(RAGGED_ARRAY_TYPES) == 3


# --------------------------------------------------------------------------- operations


@st.composite
def case_and_index(draw):
    flat, lengths = draw(ragged_case())
    n = len(lengths)
    kind = draw(st.sampled_from(["int", "slice", "array", "list", "mask"]))
    if kind == "int" and n:
        index = draw(st.integers(0, n - 1))
    elif kind == "slice" or (kind == "int" and not n):
        bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
        step = draw(st.one_of(st.none(), st.integers(1, 3), st.integers(-3, -1)))
        index = slice(draw(bound), draw(bound), step)
    elif kind == "mask":
        index = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    else:
        picks = draw(st.lists(st.integers(0, n - 1), max_size=8)) if n else []
        index = np.array(picks, dtype=np.int32) if kind == "array" else picks
    return flat, lengths, index


@FAST
@given(case_and_index())
def test_take_matches_list_reference(case):
    flat, lengths, index = case
    seqs = split(flat, lengths)
    if isinstance(index, int):
        expected = [seqs[index]]
    elif isinstance(index, slice):
        expected = seqs[index]
    else:
        positions = np.flatnonzero(index) if np.asarray(index).dtype == bool else index
        expected = [seqs[i] for i in positions]
    out = take(ragged_from_arrays(flat, lengths), index)
    assert_same_sequences(out, expected, flat.shape[1])


@FAST
@given(st.lists(ragged_case(dtype=np.int64, width=2), min_size=1, max_size=4))
def test_concat_matches_list_reference(cases):
    out = concat([ragged_from_arrays(*c) for c in cases])
    expected = [seq for c in cases for seq in split(*c)]
    assert_same_sequences(out, expected, 2)


@FAST
@given(ragged_case(), st.integers(-3, 3))
def test_pad_matches_loop_reference(case, pad_value):
    flat, lengths = case
    padded, mask = pad(ragged_from_arrays(flat, lengths), pad_value)
    max_len = int(lengths.max()) if len(lengths) else 0
    assert padded.shape == (len(lengths), max_len, flat.shape[1]) and padded.dtype == flat.dtype
    expected = np.full(padded.shape, pad_value, dtype=flat.dtype)
    expected_mask = np.zeros((len(lengths), max_len), dtype=bool)
    for i, seq in enumerate(split(flat, lengths)):
        expected[i, : len(seq)] = seq
        expected_mask[i, : len(seq)] = True
    np.testing.assert_array_equal(padded, expected)
    np.testing.assert_array_equal(mask, expected_mask)


def test_ragged_equal_compares_class_lengths_and_values():
    a = ragged_from_arrays(np.arange(4, dtype=np.int64)[:, None], [1, 3])
    assert ragged_equal(a, ragged_from_arrays(np.arange(4, dtype=np.int64)[:, None], [1, 3]))
    assert not ragged_equal(a, ragged_from_arrays(np.arange(4, dtype=np.int64)[:, None], [2, 2]))
    assert not ragged_equal(a, ragged_from_arrays(np.arange(4, dtype=np.float32)[:, None], [1, 3]))
    assert not ragged_equal(a, ragged_from_arrays(np.arange(1, 5, dtype=np.int64)[:, None], [1, 3]))
    assert not ragged_equal(a, ragged_from_arrays(np.zeros((4, 2), np.int64), [1, 3]))
    assert not ragged_equal(a, np.arange(4))
    nan = ragged_from_arrays(np.full((1, 1), np.nan, np.float32), [1])
    assert ragged_equal(nan, copy.deepcopy(nan))


# ------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: ragged_from_arrays(np.zeros((2, 1), np.int32), [2]), TypeError,
         r"dtype int32 has no ragged array; supported dtypes are float32, int64, bool"),
        (lambda: ragged_from_arrays(np.zeros(2, np.float32), [2]), ValueError,
         r"flat must be 2-D \[n_items, n_features\], got shape \(2,\)"),
        (lambda: ragged_from_arrays(np.zeros((2, 1), np.float32), [[2]]), ValueError,
         r"lengths must be 1-D \[n_sequences\], got shape \(1, 1\)"),
        (lambda: ragged_from_arrays(np.zeros((2, 1), np.float32), [2.0]), TypeError,
         r"lengths must hold integers, got dtype float64"),
        (lambda: ragged_from_arrays(np.zeros((2, 1), np.float32), [3, -1]), ValueError,
         r"lengths must be non-negative, got -1 at position 1"),
        (lambda: ragged_from_arrays(np.zeros((2, 1), np.float32), [1, 2]), ValueError,
         r"lengths sum to 3 items, but flat has 2 items"),
        (lambda: n_sequences(np.zeros((2, 1))), TypeError,
         r"n_sequences: expected a ragged array .* got ndarray"),
        (lambda: empty_ragged(np.float32, -1), ValueError,
         r"empty_ragged: n_features must be an int >= 0, got -1"),
        (lambda: ragged_full([1], 1.5, 0, np.float32), ValueError,
         r"ragged_full: n_features must be an int >= 0, got 1.5"),
        (lambda: concat([]), ValueError, r"concat: expected at least one ragged array"),
        (lambda: concat([empty_ragged(np.float32, 1), empty_ragged(np.int64, 1)]), ValueError,
         r"concat: arrays\[1\] is a RaggedArrayI64, but arrays\[0\] is a RaggedArrayF32"),
        (lambda: concat([empty_ragged(np.float32, 1), empty_ragged(np.float32, 2)]), ValueError,
         r"concat: arrays\[1\] has 2 features, but arrays\[0\] has 1"),
        (lambda: concat([np.zeros(1)]), TypeError, r"concat: arrays\[0\]: expected a ragged array"),
    ],
)
def test_construction_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


BUF = ragged_from_arrays(np.zeros((3, 1), np.float32), [1, 0, 2])


@pytest.mark.parametrize(
    "index, error, match",
    [
        (-1, ValueError, r"take: negative indices are not supported, got -1"),
        (3, IndexError, r"take: index 3 is out of range for 3 sequences"),
        (np.array([0, -2]), ValueError, r"take: negative indices are not supported, got -2"),
        ([0, 7], IndexError, r"take: index 7 is out of range for 3 sequences"),
        (True, TypeError, r"take: a bool is not a sequence index"),
        ("a", TypeError, r"take: expected an int, slice or 1-D integer array .* got str"),
        ((0, 1), TypeError, r"take: expected an int, slice or 1-D integer array .* got tuple"),
        (np.zeros((1, 1), np.int64), ValueError, r"take: index arrays must be 1-D, got shape \(1, 1\)"),
        (np.array([0.0]), TypeError, r"take: index arrays must hold integers, got dtype float64"),
        (np.array([True]), IndexError, r"take: boolean mask has length 1, expected 3 sequences"),
    ],
)
def test_take_errors(index, error, match):
    with pytest.raises(error, match=match):
        take(BUF, index)


def test_take_nested_selects_the_inner_sequences_of_the_selected_outer_ones():
    # 3 rows with 2, 0 and 3 actors; each actor has a sequence of probabilities of its own
    actors = ragged_from_arrays(np.arange(5, dtype=np.int64)[:, None], [2, 0, 3])
    probs = ragged_from_arrays(np.arange(9, dtype=np.float32)[:, None], [1, 2, 3, 1, 2])
    picked = take_nested(probs, actors, np.array([2, 1, 0]))
    assert ragged_equal(picked, take(probs, [2, 3, 4, 0, 1]))  # row 2's actors, then row 0's
    assert n_sequences(take_nested(probs, actors, [])) == 0
    with pytest.raises(IndexError, match=r"take_nested"):
        take_nested(probs, actors, [3])


def test_take_accepts_numpy_scalars_and_empty_selections():
    assert n_sequences(take(BUF, np.int64(2))) == 1
    assert n_sequences(take(BUF, np.array(1))) == 1
    empty = take(BUF, [])
    assert (n_sequences(empty), n_features(empty)) == (0, 1)
    assert n_sequences(take(empty_ragged(np.float32, 2), slice(None))) == 0
