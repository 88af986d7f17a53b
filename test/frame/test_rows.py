"""``tree_rows``: the rows of a stored tree, which frames require to be a dict of named values."""
import numpy as np
import pytest
import torch

from entmachin.frame.rollout import tree_rows
from entmachin.ragged import ragged_from_arrays


def test_tree_rows_counts_a_nested_tree():
    state = {"entities": {"A": ragged_from_arrays(np.zeros((3, 2), np.float32), [2, 0, 1])}, "dense": torch.zeros(3, 1)}
    assert tree_rows(state, "t") == 3


@pytest.mark.parametrize(
    "value, error, match",
    [
        ({}, ValueError, r"t is empty; expected at least one tensor"),
        ({"a": torch.zeros(2), "b": torch.zeros(3)}, ValueError, r"t\['b'\] holds 3 rows, but t\['a'\] holds 2"),
        ({"a": torch.tensor(1.0)}, ValueError, r"t\['a'\] is a 0-d tensor; expected a leading row dimension"),
        ({"a": 3}, TypeError, r"t\['a'\] is a int; expected a tensor, a numpy array or a ragged value"),
        ([1], TypeError, r"t is a list; expected a dict of named values"),
        (torch.zeros(2), TypeError, r"t is a Tensor; expected a dict of named values"),
    ],
)
def test_tree_rows_errors(value, error, match):
    with pytest.raises(error, match=match):
        tree_rows(value, "t")
