"""Row operations on state trees against list-of-arrays references; inputs never modified."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.frame.rows import stack_trees, take_rows, tree_rows
from entmachin.ragged import ragged_from_arrays, ragged_to_arrays
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


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_stack_then_take_match_the_reference(sizes, seed):
    rng = np.random.default_rng(seed)
    trees = [tree(rng, n) for n in sizes]
    reference = [rows_of(t, i) for t, n in zip(trees, sizes) for i in range(n)]
    stacked = stack_trees(trees, lambda i: f"t[{i}]")
    assert tree_rows(stacked, "s") == sum(sizes)
    assert all(same(rows_of(stacked, i), r) for i, r in enumerate(reference))
    index = rng.permutation(sum(sizes)).astype(np.int64)
    taken = take_rows(stacked, index)
    assert all(same(rows_of(taken, j), reference[i]) for j, i in enumerate(index))
    assert type(taken["array"]) is np.ndarray and isinstance(taken["entities"]["B"], RaggedTensor)


def test_inputs_are_not_modified():
    rng = np.random.default_rng(0)
    trees = [tree(rng, 2), tree(rng, 3)]
    before = [rows_of(t, i) for t in trees for i in range(tree_rows(t, "t"))]
    stack_trees(trees, lambda i: f"t[{i}]")
    after = [rows_of(t, i) for t in trees for i in range(tree_rows(t, "t"))]
    assert all(same(a, b) for a, b in zip(before, after))
    assert trees[0]["entities"]["A"].size0() == 2


@pytest.mark.parametrize(
    "value, error, match",
    [
        ({}, ValueError, r"t is empty; expected at least one tensor"),
        ({"a": torch.zeros(2), "b": torch.zeros(3)}, ValueError, r"t\['b'\] holds 3 rows, but t\['a'\] holds 2"),
        ({"a": torch.tensor(1.0)}, ValueError, r"t\['a'\] is a 0-d tensor; expected a leading row dimension"),
        ({"a": 3}, TypeError, r"t\['a'\] is a int; expected a tensor, a numpy array or a ragged value"),
        ([1], TypeError, r"t is a list; expected a dict of named values"),
    ],
)
def test_tree_rows_errors(value, error, match):
    with pytest.raises(error, match=match):
        tree_rows(value, "t")


def test_stack_errors_name_the_tree():
    a = {"x": ragged_from_arrays(np.zeros((1, 2), np.float32), [1])}
    b = {"x": ragged_from_arrays(np.zeros((1, 3), np.float32), [1])}
    with pytest.raises(ValueError, match=r"t\[0\]\['x'\] and the following transitions' values cannot be concatenated"):
        stack_trees([a, b], lambda i: f"t[{i}]")
    with pytest.raises(TypeError, match=r"t\[1\] is a list; expected a dict"):
        stack_trees([a, []], lambda i: f"t[{i}]")
