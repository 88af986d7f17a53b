"""Rows of the trees that frames store: a transition's ``state``, ``action`` and ``next_state``.

The tree operations themselves (walk, count, concatenate, select) live in
:mod:`entmachin.ragged.trees`; frames add one rule: what they store is a dict of named values,
never a bare tensor.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entmachin.ragged.trees import n_rows

__all__ = ["tree_rows"]


def tree_rows(tree: Mapping[str, Any], where: str) -> int:
    """Returns the common number of rows of every leaf of ``tree``.

    Raises:
        ValueError: leaves disagree on the number of rows, a leaf has no row dimension, or the
            tree has no leaves.
        TypeError: a leaf is not a tensor, an array or a ragged value, or ``tree`` is not a mapping.
    """
    if not isinstance(tree, Mapping):
        raise TypeError(f"{where} is a {type(tree).__name__}; expected a dict of named values")
    return n_rows(tree, where)
