"""entmachin's ragged arrays against a list-of-arrays reference (hypothesis), and their errors."""

import copy
import pickle

import dill
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.ragged.array import (
    RaggedArray,
    RaggedArrayBool,
    RaggedArrayF32,
    RaggedArrayI64,
    array_class,
    cat,
)

CLASSES = [RaggedArrayF32, RaggedArrayI64, RaggedArrayBool]


def reference(draw_lengths, n_features, dtype, seed):
    """A list of ``[len_i, n_features]`` arrays: the sequences, one by one."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(n, n_features)) * 10).astype(dtype) for n in draw_lengths]


def build(cls, seqs, n_features):
    flat = np.concatenate(seqs) if seqs else np.zeros((0, n_features), cls.dtype)
    return cls.from_flattened(flat, [len(s) for s in seqs])


def assert_same(array, seqs, n_features):
    assert array.size0() == len(seqs)
    assert array.size1().tolist() == [len(s) for s in seqs]
    assert array.size2() == n_features
    assert array.items() == sum(len(s) for s in seqs)
    assert len(array) == array.items() * n_features  # ragged-buffer's meaning of len
    expected = np.concatenate(seqs) if seqs else np.zeros((0, n_features), array.dtype)
    np.testing.assert_array_equal(array.as_array(), expected)
    assert array.offsets.tolist() == np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).tolist()


ragged_cases = st.tuples(
    st.sampled_from(CLASSES),
    st.lists(st.integers(0, 5), max_size=8),
    st.integers(0, 3),
    st.integers(0, 2**16),
)


@settings(max_examples=60, deadline=None)
@given(ragged_cases, st.data())
def test_take_matches_the_reference(case, data):
    cls, lengths, width, seed = case
    seqs = reference(lengths, width, cls.dtype, seed)
    array = build(cls, seqs, width)
    assert_same(array, seqs, width)
    n = len(seqs)
    if n:
        picks = data.draw(st.lists(st.integers(0, n - 1), max_size=10))
        assert_same(array[np.array(picks, dtype=np.int64)], [seqs[i] for i in picks], width)
        i = data.draw(st.integers(0, n - 1))
        assert_same(array[i], [seqs[i]], width)  # an int selects a one-sequence array
        mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        assert_same(array[mask], [s for s, keep in zip(seqs, mask) if keep], width)
    start, stop = data.draw(st.integers(0, n + 1)), data.draw(st.integers(0, n + 1))
    step = data.draw(st.sampled_from([None, 1, 2, 3]))
    assert_same(array[start:stop:step], seqs[start:stop:step], width)


@settings(max_examples=60, deadline=None)
@given(ragged_cases, st.lists(st.tuples(st.sampled_from(["push", "empty", "extend", "clear"]), st.integers(0, 4)), max_size=12))
def test_push_extend_clear_match_the_reference_and_leave_earlier_views_alone(case, steps):
    cls, lengths, width, seed = case
    seqs = reference(lengths, width, cls.dtype, seed)
    array = build(cls, seqs, width)
    views = [(array.as_array(), np.array(array.as_array())), (array[0:len(seqs)].as_array(), np.array(array.as_array()))]
    rng = np.random.default_rng(seed)
    for op, n in steps:
        if op == "push":
            item = (rng.normal(size=(n, width)) * 10).astype(cls.dtype)
            array.push(item)
            seqs.append(item)
        elif op == "empty":
            array.push_empty()
            seqs.append(np.zeros((0, width), cls.dtype))
        elif op == "extend":
            more = reference([n, 1], width, cls.dtype, seed + n)
            array.extend(build(cls, more, width))
            seqs += more
        else:
            array.clear()
            seqs = []
        assert_same(array, seqs, width)
    for view, values in views:
        np.testing.assert_array_equal(view, values)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CLASSES), st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=1, max_size=4),
       st.integers(1, 3), st.integers(0, 2**16))
def test_cat_on_every_dim_matches_the_reference(cls, all_lengths, width, seed):
    parts = [reference(lengths, width, cls.dtype, seed + i) for i, lengths in enumerate(all_lengths)]
    arrays = [build(cls, seqs, width) for seqs in parts]
    assert_same(cat(arrays, 0), [s for seqs in parts for s in seqs], width)
    together = [np.concatenate([seqs[i] for seqs in parts]) for i in range(3)]
    assert_same(cat(arrays, 1), together, width)
    same_lengths = [reference(all_lengths[0], w, cls.dtype, seed + w) for w in (width, 1)]
    wide = cat([build(cls, seqs, seqs[0].shape[1]) for seqs in same_lengths], 2)
    assert_same(wide, [np.concatenate(pair, axis=1) for pair in zip(*same_lengths)], width + 1)


@settings(max_examples=60, deadline=None)
@given(ragged_cases)
def test_indices_and_padpack_match_the_reference(case):
    cls, lengths, width, seed = case
    array = build(cls, reference(lengths, width, cls.dtype, seed), width)
    seq_of = [s for s, n in enumerate(lengths) for _ in range(n)]
    pos_of = [j for n in lengths for j in range(n)]
    assert array.indices(0).as_array().ravel().tolist() == seq_of
    assert array.indices(1).as_array().ravel().tolist() == pos_of
    assert array.indices(0).size1().tolist() == lengths
    assert array.flat_indices().as_array().ravel().tolist() == list(range(sum(lengths)))
    packed = array.padpack()
    if not lengths or len(set(lengths)) == 1:
        assert packed is None
        return
    # In sequence order, into the row with the most room (the first on ties) if it fits, else a
    # new row: ragged-buffer's packing, written the slow way.
    max_len, rows, starts = max(lengths), [], {}
    for s, n in enumerate(lengths):
        roomiest = min(range(len(rows)), key=lambda r: (rows[r], r), default=None)
        row = roomiest if roomiest is not None and rows[roomiest] + n <= max_len else len(rows)
        if row == len(rows):
            rows.append(0)
        starts[s], rows[row] = row * max_len + rows[row], rows[row] + n
    index, batch, inverse = packed
    assert index.shape == batch.shape == (len(rows), max_len)
    expected_inverse = [starts[s] + j for s, n in enumerate(lengths) for j in range(n)]
    assert inverse.tolist() == expected_inverse
    assert index.ravel()[inverse].tolist() == list(range(sum(lengths)))
    assert batch.ravel()[inverse].tolist() == seq_of
    padding = np.ones(index.size, bool)
    padding[inverse] = False
    assert np.isnan(batch.ravel()[padding]).all() and (index.ravel()[padding] == 0).all()


def test_arithmetic_with_scalars_equal_lengths_and_one_item_per_sequence():
    a = RaggedArrayF32.from_flattened(np.arange(10, dtype=np.float32).reshape(5, 2), [2, 0, 3])
    np.testing.assert_array_equal((a + 1.0).as_array(), a.as_array() + 1)
    np.testing.assert_array_equal((2 * a).as_array(), a.as_array() * 2)
    np.testing.assert_array_equal((a - a).as_array(), np.zeros((5, 2)))
    per_sequence = RaggedArrayF32.from_flattened(np.array([[10, 20], [30, 40], [50, 60]], np.float32), [1, 1, 1])
    expected = a.as_array() + np.array([[10, 20], [10, 20], [50, 60], [50, 60], [50, 60]])
    np.testing.assert_array_equal((a + per_sequence).as_array(), expected)
    np.testing.assert_array_equal((per_sequence + a).as_array(), expected)
    before = a.as_array()
    b = a
    b -= a
    assert b is not a and (before == np.arange(10).reshape(5, 2)).all()  # the old array is untouched
    ints = RaggedArrayI64.from_flattened(np.array([[1], [2]]), [2])
    assert (ints * 3).as_array().ravel().tolist() == [3, 6] and (ints * 3).dtype == np.int64
    with pytest.raises(TypeError, match="int64 ragged array takes int operands"):
        ints + 1.5
    with pytest.raises(TypeError, match="bool ragged arrays have no arithmetic"):
        RaggedArrayBool.from_flattened(np.ones((1, 1), bool), [1]) + 1
    with pytest.raises(ValueError, match=r"lengths differ \(\[2, 0, 3\] vs \[1, 1\]\)"):
        a + RaggedArrayF32.from_flattened(np.ones((2, 2), np.float32), [1, 1])
    with pytest.raises(ValueError, match="has 1 features, this one has 2"):
        a + RaggedArrayF32.from_flattened(np.ones((5, 1), np.float32), [2, 0, 3])


def test_equality_is_exact_and_ragged_arrays_are_unhashable():
    a = RaggedArrayF32.from_flattened(np.array([[1.0], [np.nan]], np.float32), [1, 1])
    assert not (a == a.clone())  # NaN != NaN, as in ragged-buffer
    b = RaggedArrayF32.from_flattened(np.array([[1.0], [2.0]], np.float32), [1, 1])
    assert b == b.clone() and not (b != b.clone())
    assert b != RaggedArrayF32.from_flattened(np.array([[1.0], [2.0]], np.float32), [2, 0])
    assert b != RaggedArrayI64.from_flattened(np.array([[1], [2]]), [1, 1])
    assert (b == 3) is False
    with pytest.raises(TypeError, match="unhashable"):
        hash(b)


@pytest.mark.parametrize("cls", CLASSES)
def test_pickle_dill_and_deepcopy_keep_class_lengths_and_values(cls):
    array = build(cls, reference([2, 0, 3], 2, cls.dtype, 0), 2)[np.array([2, 0])]
    for copied in (pickle.loads(pickle.dumps(array)), dill.loads(dill.dumps(array)), copy.deepcopy(array)):
        assert type(copied) is cls and copied == array
    fn, _ = array.__reduce__()
    assert (fn.__module__, fn.__name__) == ("entmachin.ragged.arrays", "_rebuild_ragged")  # old files name it


def test_from_array_and_empty_construction():
    a = RaggedArrayF32.from_array(np.arange(6, dtype=np.float32).reshape(2, 3, 1))
    assert a.size1().tolist() == [3, 3] and a.as_array().ravel().tolist() == list(range(6))
    empty = RaggedArrayI64(3)
    assert (empty.size0(), empty.size2(), empty.items()) == (0, 3, 0)
    empty.push(np.ones((2, 3), np.int64))
    assert empty.size1().tolist() == [2]
    assert array_class(np.float32) is RaggedArrayF32 and array_class("bool") is RaggedArrayBool


def test_from_flattened_copies_its_input_and_views_are_read_only():
    flat = np.arange(6, dtype=np.int64).reshape(3, 2)
    lengths = np.array([1, 2])
    a = RaggedArrayI64.from_flattened(flat, lengths)
    flat[0, 0], lengths[0] = 100, 0
    assert a.as_array()[0, 0] == 0 and a.size1().tolist() == [1, 2]
    for view in (a.as_array(), a.size1(), a.lengths, a.offsets, a.data):
        with pytest.raises(ValueError, match="read-only"):
            view[0] = 1


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda a: a[3], IndexError, r"index 3 is out of range for 3 sequences"),
        (lambda a: a[np.array([0, 7])], IndexError, r"index 7 is out of range for 3 sequences"),
        (lambda a: a[-1], ValueError, r"negative indices are not supported, got -1"),
        (lambda a: a[np.array([True])], IndexError, r"boolean mask has length 1, expected 3 sequences"),
        (lambda a: a[0.5], TypeError, r"expected an int, slice or 1-D integer array"),
        (lambda a: a[0, 1], TypeError, r"a\[sequences\] or a\[sequences, :, features\]"),
        (lambda a: a.size1(5), IndexError, r"index 5 is out of range for 3 sequences"),
        (lambda a: a.indices(2), ValueError, r"dim must be 0 or 1, got 2"),
        (lambda a: a.push(np.zeros((1, 3), np.float32)), ValueError, r"the array has 3 features, this one has 2"),
        (lambda a: a.push(np.zeros(2, np.float32)), ValueError, r"expected a 2-D \[length, n_features\] array"),
        (lambda a: a.push(np.zeros((1, 2))), TypeError, r"expected float32 items, got float64"),
        (lambda a: a.extend(RaggedArrayI64(2)), TypeError, r"expected a RaggedArrayF32, got a RaggedArrayI64"),
        (lambda a: a.extend(np.zeros((1, 2))), TypeError, r"extend: expected a ragged array"),
        (lambda a: RaggedArrayF32.from_flattened(np.zeros((2, 2)), [2]), TypeError, r"expected float32 items, got float64"),
        (lambda a: RaggedArrayF32.from_flattened(np.zeros((2, 2), np.float32), [3]), ValueError, r"lengths sum to 3 items, but the items array has 2"),
        (lambda a: RaggedArrayF32.from_flattened(np.zeros(2, np.float32), [2]), ValueError, r"items must be 2-D"),
        (lambda a: RaggedArrayF32.from_flattened(np.zeros((2, 1), np.float32), [3, -1]), ValueError, r"lengths must be non-negative, got -1 at position 1"),
        (lambda a: RaggedArrayF32.from_array(np.zeros((2, 2))), ValueError, r"expected a 3-D float32 array"),
        (lambda a: RaggedArray(2), TypeError, r"RaggedArray is abstract"),
        (lambda a: cat([]), ValueError, r"cat: expected at least one ragged array"),
        (lambda a: cat([a, RaggedArrayF32(2)], 1), ValueError, r"cat\(dim=1\): arrays\[1\] has 0 sequences, but arrays\[0\] has 3"),
        (lambda a: cat([a, a], 3), ValueError, r"dim must be 0, 1 or 2, got 3"),
        (lambda a: array_class(np.int32), TypeError, r"dtype int32 has no ragged array; supported dtypes are float32, int64, bool"),
    ],
)
def test_bad_input_raises_naming_the_index_and_the_length(call, error, match):
    a = RaggedArrayF32.from_flattened(np.zeros((5, 2), np.float32), [2, 0, 3])
    with pytest.raises(error, match=match):
        call(a)


def test_feature_selection_and_repr():
    a = RaggedArrayF32.from_flattened(np.arange(10, dtype=np.float32).reshape(5, 2), [2, 0, 3])
    picked = a[np.array([2, 0]), :, 1]
    assert picked.size1().tolist() == [3, 2] and picked.as_array().ravel().tolist() == [5, 7, 9, 1, 3]
    assert repr(a).endswith("'3 * var * 2 * f32')") and repr(a).startswith("RaggedArrayF32([[[0.0, 1.0]")


def test_padpack_puts_each_sequence_in_the_roomiest_row_that_fits():
    assert RaggedArrayI64.from_flattened(np.zeros((6, 1), np.int64), [3, 3]).padpack() is None
    index, batch, inverse = RaggedArrayI64.from_flattened(np.zeros((19, 3), np.int64), [6, 3, 8, 2]).padpack()
    assert index.tolist() == [[0, 1, 2, 3, 4, 5, 0, 0], [6, 7, 8, 17, 18, 0, 0, 0], list(range(9, 17))]
    nan = float("nan")
    np.testing.assert_array_equal(batch, [[0] * 6 + [nan] * 2, [1, 1, 1, 3, 3] + [nan] * 3, [2] * 8])
    assert inverse.tolist() == [*range(6), 8, 9, 10, *range(16, 24), 11, 12]
