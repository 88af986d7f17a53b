"""Tests for ``RaggedTensor``."""

import copy
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import entmachin.ragged
from entmachin.ragged.arrays import empty_ragged, ragged_equal, ragged_from_arrays, ragged_to_arrays
from entmachin.ragged.tensor import RaggedTensor, is_ragged, ragged_tensor_equal, to_ragged_tensor, tree_to_torch

FAST = settings(max_examples=40, deadline=None)
DTYPES = [np.float32, np.int64, np.bool_]


def _elements(dtype):
    if dtype == np.float32:
        return st.floats(-1e6, 1e6, width=32)
    if dtype == np.int64:
        return st.integers(-1000, 1000)
    return st.booleans()


@st.composite
def ragged_case(draw, dtype=None, trailing=None, two_d=False):
    """Draws ``(data, lengths)`` numpy arrays with zero and empty sequences included."""
    dtype = draw(st.sampled_from(DTYPES)) if dtype is None else dtype
    if two_d:
        trailing = (draw(st.integers(1, 4)),)
    elif trailing is None:
        trailing = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    lengths = np.array(draw(st.lists(st.integers(0, 4), max_size=6)), dtype=np.int64)
    data = draw(hnp.arrays(dtype, (int(lengths.sum()), *trailing), elements=_elements(dtype)))
    return data, lengths


def split(data, lengths):
    return np.split(data, np.cumsum(lengths)[:-1]) if len(lengths) else []


def assert_sequences(rt, seqs):
    assert len(rt) == len(seqs)
    got = rt.to_list()
    for g, s in zip(got, seqs):
        np.testing.assert_array_equal(g.numpy(), s)


def assert_invariants(rt):
    lengths = rt.lengths
    assert rt.offsets[0] == 0
    assert torch.equal(rt.offsets[1:], torch.cumsum(lengths, 0))
    assert torch.equal(rt.batch_index, torch.repeat_interleave(torch.arange(len(rt)), lengths))
    assert torch.equal(rt.starts, rt.offsets[:-1]) and torch.equal(rt.ends, rt.offsets[1:])
    assert rt.inverse is rt.batch_index
    for t in (rt.lengths, rt.offsets, rt.batch_index):
        assert t.dtype == torch.int64 and t.device == rt.data.device
    expected_positions = [p for n in lengths.tolist() for p in range(n)]
    assert rt.positions.tolist() == expected_positions


# --------------------------------------------------------------------------- round trips


@FAST
@given(ragged_case())
def test_from_lengths_invariants(case):
    data, lengths = case
    rt = RaggedTensor.from_lengths(torch.from_numpy(data), lengths)
    assert_invariants(rt)
    assert (len(rt), rt.n_items, rt.trailing_shape) == (len(lengths), len(data), data.shape[1:])
    assert rt.max_length == (int(lengths.max()) if len(lengths) else 0)
    assert_sequences(rt, split(data, lengths))


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=20, deadline=None)
@given(case=st.data())
def test_ragged_buffer_round_trip(dtype, case):
    data, lengths = case.draw(ragged_case(dtype=dtype, two_d=True))
    buf = ragged_from_arrays(data, lengths)
    rt = RaggedTensor.from_ragged_array(buf)
    assert_invariants(rt)
    assert rt.dtype == torch.from_numpy(data).dtype
    np.testing.assert_array_equal(rt.data.numpy(), data)
    assert ragged_equal(rt.to_ragged_array(), buf)


@FAST
@given(ragged_case())
def test_list_round_trip(case):
    data, lengths = case
    seqs = split(data, lengths)
    if not seqs:
        rt = RaggedTensor.from_list([], trailing_shape=data.shape[1:], dtype=torch.int64)
        assert rt.data.shape == (0, *data.shape[1:]) and rt.dtype == torch.int64
    else:
        rt = RaggedTensor.from_list(seqs)
    assert_invariants(rt)
    assert_sequences(rt, seqs)


def test_from_list_casts_and_checks_trailing_shape():
    rt = RaggedTensor.from_list([np.zeros((2, 3)), [[1, 2, 3]]], dtype=torch.float32)
    assert rt.dtype == torch.float32 and rt.lengths.tolist() == [2, 1]
    empty = RaggedTensor.from_list([], trailing_shape=(2,))
    assert empty.dtype == torch.float32 and len(empty) == 0 and empty.data.shape == (0, 2)


@FAST
@given(st.lists(ragged_case(dtype=np.int64, trailing=(2,)), min_size=1, max_size=4))
def test_cat_matches_list_reference(cases):
    rt = RaggedTensor.cat([RaggedTensor.from_lengths(torch.from_numpy(d), l) for d, l in cases])
    assert_invariants(rt)
    assert_sequences(rt, [s for d, l in cases for s in split(d, l)])


@FAST
@given(ragged_case(), st.integers(-2, 2))
def test_padded_matches_loop_reference(case, pad_value):
    data, lengths = case
    rt = RaggedTensor.from_lengths(torch.from_numpy(data), lengths)
    padded, mask = rt.padded(pad_value)
    max_len = rt.max_length
    expected = np.full((len(lengths), max_len, *data.shape[1:]), pad_value, dtype=data.dtype)
    expected_mask = np.zeros((len(lengths), max_len), dtype=bool)
    for i, seq in enumerate(split(data, lengths)):
        expected[i, : len(seq)] = seq
        expected_mask[i, : len(seq)] = True
    np.testing.assert_array_equal(padded.numpy(), expected)
    np.testing.assert_array_equal(mask.numpy(), expected_mask)


def test_padded_and_indexing_are_differentiable():
    data = torch.randn(5, 2, requires_grad=True)
    rt = RaggedTensor.from_lengths(data, [2, 0, 3])
    padded, _ = rt.padded()
    (padded.sum() + rt[[2, 2]].data.sum()).backward()
    np.testing.assert_array_equal(data.grad.numpy(), [[1, 1]] * 2 + [[3, 3]] * 3)
    assert not rt.detach().data.requires_grad


def test_pickle_and_deepcopy():
    rt = RaggedTensor.from_lengths(torch.arange(6.0).view(3, 2), [1, 2])
    for other in (pickle.loads(pickle.dumps(rt)), copy.deepcopy(rt)):
        assert ragged_tensor_equal(other, rt)
        assert_invariants(other)


# ----------------------------------------------------------------------------- indexing


@st.composite
def case_and_index(draw):
    data, lengths = draw(ragged_case(dtype=np.float32))
    n = len(lengths)
    kind = draw(st.sampled_from(["int", "slice", "list", "array", "tensor", "mask", "tmask"]))
    if kind == "int" and n:
        return data, lengths, draw(st.integers(0, n - 1))
    if kind in ("slice", "int"):
        bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
        step = draw(st.one_of(st.none(), st.integers(1, 3), st.integers(-3, -1)))
        return data, lengths, slice(draw(bound), draw(bound), step)
    if kind in ("mask", "tmask"):
        mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        return data, lengths, mask if kind == "mask" else torch.from_numpy(mask)
    picks = draw(st.lists(st.integers(0, n - 1), max_size=8)) if n else []
    index = {"list": picks, "array": np.array(picks, np.int32), "tensor": torch.tensor(picks)}
    return data, lengths, index[kind]


@FAST
@given(case_and_index())
def test_indexing_matches_list_reference(case):
    data, lengths, index = case
    seqs = split(data, lengths)
    rt = RaggedTensor.from_lengths(torch.from_numpy(data), lengths)
    out = rt[index]
    if isinstance(index, int):
        np.testing.assert_array_equal(out.numpy(), seqs[index])
        return
    if isinstance(index, slice):
        expected = seqs[index]
    else:
        arr = np.asarray(index)
        expected = [seqs[i] for i in (np.flatnonzero(arr) if arr.dtype == bool else arr)]
    assert_invariants(out)
    assert out.trailing_shape == rt.trailing_shape
    assert_sequences(out, expected)


def test_scalar_tensor_and_numpy_indices_act_like_ints():
    rt = RaggedTensor.from_lengths(torch.arange(3)[:, None], [1, 2])
    assert rt[torch.tensor(1)].tolist() == [[1], [2]]
    assert rt[np.int64(0)].tolist() == [[0]]
    assert [t.tolist() for t in rt] == [[[0]], [[1], [2]]]


@pytest.mark.parametrize(
    "index, error, match",
    [
        (-1, ValueError, r"RaggedTensor\[...\]: negative indices are not supported, got -1"),
        (2, IndexError, r"RaggedTensor\[...\]: index 2 is out of range for 2 sequences"),
        ([0, -1], ValueError, r"negative indices are not supported, got -1"),
        (torch.tensor([0, -3]), ValueError, r"negative indices are not supported, got -3"),
        (torch.tensor([5]), IndexError, r"index 5 is out of range for 2 sequences"),
        (torch.zeros(1, 1, dtype=torch.int64), ValueError, r"index arrays must be 1-D, got shape \(1, 1\)"),
        (torch.tensor([0.0]), TypeError, r"index arrays must hold integers, got dtype float32"),
        (torch.tensor([True]), IndexError, r"boolean mask has length 1, expected 2 sequences"),
    ],
)
def test_indexing_errors(index, error, match):
    rt = RaggedTensor.from_lengths(torch.zeros(3, 1), [1, 2])
    with pytest.raises(error, match=match):
        rt[index]


# ----------------------------------------------------------------------- devices, misc


def test_to_changes_data_only_and_moves_index_tensors():
    rt = RaggedTensor.from_lengths(torch.zeros(3, 1), [1, 2])
    assert rt.to("cpu") is rt
    wide = rt.to(torch.float64)
    assert wide.dtype == torch.float64 and wide.lengths.dtype == torch.int64
    meta = rt.to("meta")
    assert {t.device.type for t in (meta.data, meta.lengths, meta.offsets, meta.batch_index)} == {"meta"}
    assert meta.device.type == "meta"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_round_trip():
    rt = RaggedTensor.from_ragged_array(
        ragged_from_arrays(np.arange(10, dtype=np.float32).reshape(5, 2), [2, 0, 3]), device="cuda"
    )
    assert {t.device.type for t in (rt.data, rt.lengths, rt.offsets, rt.batch_index)} == {"cuda"}
    assert rt[[2, 0]].lengths.tolist() == [3, 2]
    assert rt[[2, 0]].device.type == "cuda"
    padded, mask = rt.padded()
    assert padded.shape == (3, 3, 2) and mask.sum().item() == 5
    assert ragged_tensor_equal(rt, rt.to("cpu"))
    assert rt.to_ragged_array().size1().tolist() == [2, 0, 3]


def test_with_data_keeps_structure():
    rt = RaggedTensor.from_lengths(torch.ones(3, 2), [1, 2])
    out = rt.with_data(rt.data.sum(-1, keepdim=True))
    assert out.trailing_shape == (1,) and out.offsets is rt.offsets


def test_repr_predicates_and_equality():
    rt = RaggedTensor.from_lengths(torch.zeros(3, 2), [1, 2])
    assert repr(rt) == (
        "RaggedTensor(n_sequences=2, n_items=3, trailing_shape=(2,), dtype=torch.float32, device=cpu)"
    )
    assert is_ragged(rt) and is_ragged(empty_ragged(np.float32, 1)) and not is_ragged(rt.data)
    assert entmachin.ragged.is_ragged(rt)
    assert entmachin.ragged.RaggedTensor is RaggedTensor
    assert not ragged_tensor_equal(rt, RaggedTensor.from_lengths(torch.zeros(3, 2), [2, 1]))
    assert not ragged_tensor_equal(rt, rt.to(torch.float64))
    assert not ragged_tensor_equal(rt, rt.with_data(rt.data + 1))
    assert not ragged_tensor_equal(rt, rt.data)
    nan = RaggedTensor.from_lengths(torch.full((1, 1), float("nan")), [1])
    assert ragged_tensor_equal(nan, copy.deepcopy(nan))
    assert len(RaggedTensor.from_lengths(torch.zeros(0, 1), [])) == 0


def test_to_ragged_array_keeps_lengths_of_buffer_input():
    flat, lengths = ragged_to_arrays(
        RaggedTensor.from_lengths(torch.ones(3, 1, dtype=torch.bool), [0, 3, 0]).to_ragged_array()
    )
    assert lengths.tolist() == [0, 3, 0] and flat.dtype == np.bool_


# ------------------------------------------------------------------------------- errors

Z = torch.zeros(3, 1)
I64 = torch.zeros(2, dtype=torch.int64)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: RaggedTensor.from_lengths(torch.zeros(3), [3]), ValueError,
         r"from_lengths: data must be at least 2-D \[n_items, ...\], got shape \(3,\)"),
        (lambda: RaggedTensor.from_lengths(Z, [[3]]), ValueError,
         r"from_lengths: lengths must be 1-D \[n_sequences\], got shape \(1, 1\)"),
        (lambda: RaggedTensor.from_lengths(Z, [3.0]), TypeError,
         r"from_lengths: lengths must hold integers, got dtype float64"),
        (lambda: RaggedTensor.from_lengths(Z, [4, -1]), ValueError,
         r"from_lengths: lengths must be non-negative, got -1 at position 1"),
        (lambda: RaggedTensor.from_lengths(Z, [1, 1]), ValueError,
         r"from_lengths: lengths sum to 2 items, but data has 3 items"),
        (lambda: RaggedTensor(Z, [3], I64, I64), TypeError,
         r"RaggedTensor.lengths: expected a torch.Tensor, got list"),
        (lambda: RaggedTensor(torch.zeros(3), I64, I64, I64), ValueError,
         r"RaggedTensor.data must be at least 2-D"),
        (lambda: RaggedTensor(Z, I64[None], I64, I64), ValueError,
         r"RaggedTensor.lengths: expected 1-D \[n\], got shape \(1, 2\)"),
        (lambda: RaggedTensor(Z, I64, I64, I64), ValueError,
         r"RaggedTensor.offsets: expected int64 of shape \(3,\), got torch.int64 of shape \(2,\)"),
        (lambda: RaggedTensor(Z.to("meta"), I64[:1], I64.to("meta"), I64.new_zeros(3).to("meta")),
         ValueError, r"RaggedTensor.lengths is on cpu, but data is on meta"),
        (lambda: RaggedTensor.from_ragged_array(Z), TypeError,
         r"from_ragged_array: expected a ragged array, got Tensor"),
        (lambda: RaggedTensor.from_list([]), ValueError,
         r"from_list: an empty list needs trailing_shape="),
        (lambda: RaggedTensor.from_list([torch.zeros(2, 2), torch.zeros(1, 3)]), ValueError,
         r"from_list: seqs\[1\] has shape \(1, 3\); expected \[len_i, \*\(2,\)\]"),
        (lambda: RaggedTensor.from_list([torch.zeros(2)]), ValueError,
         r"from_list: seqs\[0\] has shape \(2,\); expected"),
        (lambda: RaggedTensor.from_list([torch.zeros(2, 1), torch.zeros(1, 1, dtype=torch.int64)]),
         TypeError, r"from_list: seqs\[1\] is torch.int64 on cpu, but seqs\[0\] is torch.float32"),
        (lambda: RaggedTensor.cat([]), ValueError, r"cat: expected at least one RaggedTensor"),
        (lambda: RaggedTensor.cat([Z]), TypeError, r"cat: raggeds\[0\] is a Tensor, not a RaggedTensor"),
        (lambda: RaggedTensor.cat([RaggedTensor.from_lengths(Z, [3]), RaggedTensor.from_lengths(
            torch.zeros(1, 2), [1])]), ValueError, r"cat: raggeds\[1\] has items \(2,\) torch.float32"),
        (lambda: RaggedTensor.from_lengths(Z.double(), [3]).to_ragged_array(), TypeError,
         r"to_ragged_array: data is torch.float64; ragged arrays hold float32, int64 or bool"),
        (lambda: RaggedTensor.from_lengths(torch.zeros(3, 1, 1), [3]).to_ragged_array(), ValueError,
         r"to_ragged_array: ragged arrays hold \[n_items, n_features\], but data has shape"),
        (lambda: RaggedTensor.from_lengths(Z, [3]).with_data(torch.zeros(2, 1)), ValueError,
         r"with_data: expected a tensor \[n_items=3, ...\], got \(2, 1\)"),
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_to_ragged_tensor_converts_buffers_and_moves_ragged_tensors():
    buf = ragged_from_arrays(np.arange(6, dtype=np.float32).reshape(3, 2), [2, 0, 1])
    rt = to_ragged_tensor(buf, torch.device("cpu"))
    assert ragged_tensor_equal(rt, RaggedTensor.from_ragged_array(buf))
    assert to_ragged_tensor(rt) is rt and to_ragged_tensor(rt, "cpu") is rt
    assert entmachin.ragged.to_ragged_tensor is to_ragged_tensor


def test_to_ragged_tensor_rejects_dense_values():
    with pytest.raises(TypeError, match=r"^model: expected a ragged array or RaggedTensor with one sequence per row, got Tensor"):
        to_ragged_tensor(torch.zeros(2, 1), "cpu", "model")


def test_cat_with_rows_gathers_each_selected_sequence_once():
    a = RaggedTensor.from_lengths(torch.arange(12.0).view(6, 2), [2, 0, 3, 1])
    b = RaggedTensor.from_lengths(torch.arange(100.0, 106.0).view(3, 2), [1, 2])
    out = RaggedTensor.cat([a, b, a], rows=[np.array([3, 1, 0]), None, torch.tensor([2])])
    expected = RaggedTensor.cat([a[[3, 1, 0]], b, a[[2]]])
    assert ragged_tensor_equal(out, expected)
    assert torch.equal(out.offsets, expected.offsets) and torch.equal(out.batch_index, expected.batch_index)
    empty = RaggedTensor.cat([a], rows=[np.array([], dtype=np.int64)])
    assert len(empty) == 0 and empty.trailing_shape == (2,)


def test_tree_to_torch_shares_arrays_converts_ragged_buffers_and_keeps_the_rest():
    array = np.ones((3, 2), np.float32)
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    tensor = torch.zeros(3)
    buf = ragged_from_arrays(np.arange(4, dtype=np.float32).reshape(4, 1), [1, 3])
    out = tree_to_torch({"a": array, "f": frozen, "t": tensor, "n": {"r": buf}, "s": "text"})
    assert out["a"].data_ptr() == array.ctypes.data and out["t"] is tensor and out["s"] == "text"
    assert out["f"].data_ptr() != frozen.ctypes.data and torch.equal(out["f"], torch.zeros(2, dtype=torch.float64))
    assert ragged_tensor_equal(out["n"]["r"], RaggedTensor.from_ragged_array(buf))
