"""Tree helpers on numpy, torch and ragged leaves, against list-of-arrays references."""
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.ragged import arrdict, ragged_from_arrays, ragged_to_arrays, trees
from entmachin.ragged.tensor import RaggedTensor


def tree(rng, n_rows):
    lengths = rng.integers(0, 3, n_rows)
    flat = rng.random((int(lengths.sum()), 2)).astype(np.float32)
    return {
        "entities": {"A": ragged_from_arrays(flat, lengths),
                     "B": RaggedTensor.from_lengths(torch.from_numpy(flat.copy()), torch.from_numpy(lengths))},
        "dense": torch.from_numpy(rng.random((n_rows, 3)).astype(np.float32)),
        "array": rng.random((n_rows, 1)),
    }


def rows_of(t, i):
    """Row ``i`` of every leaf as plain arrays (the reference)."""
    flat, lengths = ragged_to_arrays(t["entities"]["A"])
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return (flat[starts[i]:starts[i + 1]], t["entities"]["B"][i].numpy(), t["dense"][i].numpy(), t["array"][i])


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def ragged_buffer(n_rows, n_features=2):
    return ragged_from_arrays(np.zeros((n_rows, n_features), np.float32), [1] * n_rows)


def ragged_tensor(n_rows):
    return RaggedTensor.from_lengths(torch.zeros(n_rows, 2), [1] * n_rows)


LEAVES = {
    "tensor": lambda n: torch.zeros(n, 3),
    "array": lambda n: np.zeros((n, 3)),
    "ragged_array": ragged_buffer,
    "ragged_tensor": ragged_tensor,
}


# ----------------------------------------------------------------------------- leaves


def test_leaves_walk_depth_first_in_key_order_with_tuple_paths():
    rng = np.random.default_rng(0)
    t = tree(rng, 2)
    t["empty"] = {}
    paths = [path for path, _ in trees.leaves(t)]
    assert paths == [("entities", "A"), ("entities", "B"), ("dense",), ("array",)]
    assert [p for p, _ in trees.leaves(t["entities"], ("state", "entities"))] == [
        ("state", "entities", "A"), ("state", "entities", "B")]
    assert dict(trees.leaves(t))[("dense",)] is t["dense"]  # leaves are the tree's own objects
    assert trees.format_path("state", ("entities", "A")) == "state['entities']['A']"
    assert trees.format_path("state", ()) == "state"


def test_leaf_kind_without_importing_torch_types_by_name():
    assert [trees.leaf_kind(LEAVES[k](2)) for k in LEAVES] == list(LEAVES)
    assert trees.leaf_kind(torch.nn.Parameter(torch.zeros(2))) == "tensor"  # subclasses count
    assert trees.leaf_kind(arrdict(a=np.zeros(1))) == "tree"
    assert trees.leaf_kind(3) == "other"


# ----------------------------------------------------------------------------- n_rows


@pytest.mark.parametrize("kind", list(LEAVES))
def test_n_rows_of_each_leaf_kind_alone_and_nested(kind):
    assert trees.n_rows(LEAVES[kind](3), "x") == 3
    assert trees.n_rows({"a": {"b": LEAVES[kind](3)}, "c": np.zeros(3)}, "t") == 3


def test_n_rows_slow_path_skips_empty_subtrees():
    assert trees.n_rows({"empty": {}, "a": np.zeros(2)}, "t") == 2


@pytest.mark.parametrize(
    "value, error, match",
    [
        ({}, ValueError, r"t is empty; expected at least one tensor"),
        ({"a": {}}, ValueError, r"t is empty; expected at least one tensor"),
        ({"a": torch.zeros(2), "b": {"c": ragged_buffer(3)}}, ValueError,
         r"t\['b'\]\['c'\] holds 3 rows, but t\['a'\] holds 2; every value needs the same rows"),
        ({"a": torch.tensor(1.0)}, ValueError, r"t\['a'\] is a 0-d tensor; expected a leading row dimension"),
        ({"a": np.array(1.0)}, ValueError, r"t\['a'\] is a 0-d array; expected a leading row"),
        ({"a": 3}, TypeError, r"t\['a'\] is a int; expected a tensor, a numpy array or a ragged value"),
        ([1], TypeError, r"t is a list; expected a tensor, a numpy array or a ragged value"),
        (torch.tensor(2), ValueError, r"t is a 0-d tensor; expected a leading row dimension"),
    ],
)
def test_n_rows_errors(value, error, match):
    with pytest.raises(error, match=match):
        trees.n_rows(value, "t")


# ------------------------------------------------------------------------ stack, take


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_stack_then_take_match_the_reference(sizes, seed):
    rng = np.random.default_rng(seed)
    ts = [tree(rng, n) for n in sizes]
    reference = [rows_of(t, i) for t, n in zip(ts, sizes) for i in range(n)]
    stacked = trees.stack(ts, lambda i: f"t[{i}]")
    assert trees.n_rows(stacked, "s") == sum(sizes)
    assert all(same(rows_of(stacked, i), r) for i, r in enumerate(reference))
    index = rng.permutation(sum(sizes)).astype(np.int64)
    taken = trees.take(stacked, index)
    assert all(same(rows_of(taken, j), reference[i]) for j, i in enumerate(index))


def test_stack_and_take_keep_each_leaf_kind():
    rng = np.random.default_rng(0)
    ts = [arrdict(tree(rng, 2)), tree(rng, 1)]
    for out in (trees.stack(ts, lambda i: f"t[{i}]"), trees.take(ts[0], np.array([1, 0, 1]))):
        assert type(out) is dict and type(out["entities"]) is dict
        assert type(out["entities"]["A"]) is type(ts[0]["entities"]["A"])
        assert type(out["entities"]["B"]) is RaggedTensor
        assert type(out["dense"]) is torch.Tensor and type(out["array"]) is np.ndarray


def test_inputs_are_not_modified():
    rng = np.random.default_rng(0)
    ts = [tree(rng, 2), tree(rng, 3)]
    before = [rows_of(t, i) for t in ts for i in range(trees.n_rows(t, "t"))]
    trees.stack(ts, lambda i: f"t[{i}]")
    trees.take(ts[1], np.array([2, 0]))
    after = [rows_of(t, i) for t in ts for i in range(trees.n_rows(t, "t"))]
    assert all(same(a, b) for a, b in zip(before, after))
    assert ts[0]["entities"]["A"].size0() == 2


def wide_buffer():
    return {"x": ragged_buffer(1, 3)}


@pytest.mark.parametrize(
    "second, error, match",
    [
        (wide_buffer(), ValueError, r"t\[0\]\['x'\] and the following transitions' values cannot be concatenated"),
        ([], TypeError, r"t\[1\] is a list; expected a dict of named values"),
        ({"y": ragged_buffer(1)}, ValueError, r"t\[1\] has keys \['y'\], but t\[0\] has \['x'\]; every transition"),
        ({"x": np.zeros((1, 2))}, ValueError,
         r"t\[1\]\['x'\] is a ndarray, but t\[0\]\['x'\] is a RaggedArrayF32; a value must keep its type"),
    ],
)
def test_stack_errors_name_the_tree(second, error, match):
    with pytest.raises(error, match=match):
        trees.stack([{"x": ragged_buffer(1)}, second], lambda i: f"t[{i}]")


@pytest.mark.parametrize("kind", ["tensor", "array"])
def test_stack_dense_width_mismatch_names_the_leaf(kind):
    make = torch.zeros if kind == "tensor" else np.zeros
    with pytest.raises(ValueError, match=r"t\[0\]\['d'\] and the following transitions' values cannot be"):
        trees.stack([{"d": make((1, 2))}, {"d": make((1, 3))}], lambda i: f"t[{i}]")


def test_stack_rejects_unsupported_leaves():
    with pytest.raises(TypeError, match=r"t\[0\]\['n'\] is a int; expected a tensor, a numpy array or a ragged"):
        trees.stack([{"n": 1}, {"n": 2}], lambda i: f"t[{i}]")


def test_take_rejects_unsupported_leaves():
    with pytest.raises(TypeError, match=r"take: expected a ragged array .*got int"):
        trees.take({"n": 1}, np.array([0]))


# ---------------------------------------------------------------------------- describe


@pytest.mark.parametrize(
    "value, expected",
    [
        (torch.zeros(2, 3), "Tensor of shape (2, 3) and dtype torch.float32"),
        (np.zeros((2,), np.int64), "ndarray of shape (2,) and dtype int64"),
        (ragged_buffer(2, 4), "RaggedArrayF32 of 2 sequences of 4 features"),
        (ragged_tensor(3), "RaggedTensor of 3 sequences of (2,) torch.float32"),
        (3, "int 3"),
        ("x" * 200, "str '" + "x" * 115),
    ],
)
def test_describe_names_type_shape_and_dtype(value, expected):
    assert trees.describe(value) == expected


# ------------------------------------------------------------------------------ torch


def test_importing_trees_does_not_load_torch():
    code = "import sys, entmachin.ragged.trees; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0, "importing entmachin.ragged.trees loads torch"


# ------------------------------------------------------------- stack with rows, row_range


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_stack_with_rows_equals_stacking_the_selected_rows(sizes, seed):
    rng = np.random.default_rng(seed)
    parts = [tree(rng, n) for n in sizes]
    picks = [None if rng.random() < 0.4 else rng.integers(0, n, int(rng.integers(0, n + 1))) for n in sizes]
    joined = trees.stack(parts, lambda i: f"t[{i}]", picks)
    expected = [rows_of(p, int(r)) for p, pick in zip(parts, picks) for r in (range(len(p["dense"])) if pick is None else pick)]
    assert trees.n_rows(joined, "joined") == len(expected)
    assert all(same(rows_of(joined, i), e) for i, e in enumerate(expected))


def test_stack_with_rows_writes_each_torch_leaf_once_into_new_storage():
    rng = np.random.default_rng(0)
    a, b = tree(rng, 4), tree(rng, 3)
    joined = trees.stack([a, b], lambda i: f"t[{i}]", [None, np.array([2, 0])])
    assert joined["dense"].data_ptr() not in (a["dense"].data_ptr(), b["dense"].data_ptr())
    assert torch.equal(joined["dense"], torch.cat([a["dense"], b["dense"][[2, 0]]]))
    assert not joined["dense"].requires_grad


def test_row_range_views_torch_leaves_and_copies_ragged_buffers():
    rng = np.random.default_rng(1)
    t = trees.stack([tree(rng, 5), tree(rng, 2)], lambda i: f"t[{i}]")
    t = {**t, "entities": {**t["entities"]}}
    part = trees.row_range(t, 2, 6)
    assert all(same(rows_of(part, i), rows_of(t, 2 + i)) for i in range(4))
    assert part["dense"].data_ptr() == t["dense"][2:].data_ptr()
    b = part["entities"]["B"]
    assert b.data.untyped_storage().data_ptr() == t["entities"]["B"].data.untyped_storage().data_ptr()
    assert b.offsets[0] == 0 and (b.n_items == 0 or int(b.batch_index.min()) == int(torch.nonzero(b.lengths)[0, 0]))
    assert trees.n_rows(trees.row_range(t, 3, 3), "empty") == 0
    with pytest.raises(IndexError, match=r"RaggedTensor.row_range: \[2, 9\) is not within the 7 sequences"):
        t["entities"]["B"].row_range(2, 9)


def test_stack_with_rows_refuses_tensors_of_different_widths():
    """Selecting rows must not let a narrower leaf be resized into the result (uninitialised values)."""
    values = [{"state": torch.ones(2, 4)}, {"state": torch.full((2, 3), 7.0)}]
    with pytest.raises(ValueError, match=r"cannot be concatenated: shapes \[\(2, 4\), \(2, 3\)\] differ past the row "
                                         r"dimension"):
        trees.stack(values, lambda i: f"[{i}]", [None, np.array([1])])
