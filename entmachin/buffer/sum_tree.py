"""``SumTree``: non-negative leaf weights with vectorised batch update and prefix-sum search.

The tree is a complete binary tree stored heap-style in one array (root at 1, children of
node ``i`` at ``2i`` and ``2i + 1``, leaves at ``n_base .. 2 n_base - 1``). Each inner node
holds the sum of its children, and a second array the maximum, so ``total()`` and ``max()``
are O(1). A batch update writes the leaves and then recomputes their ancestors level by level;
a batch search descends all queries together. Both cost O(log n) numpy calls per batch,
whatever the batch size, and no Python loop over items.

Example:
    >>> tree = SumTree(4)
    >>> tree.update([0, 1, 2, 3], [1.0, 0.0, 2.0, 1.0])
    >>> tree.total(), tree.max()
    (4.0, 2.0)
    >>> tree.find([0.5, 1.0, 2.9, 3.5])  # leaf i owns [cumsum[i-1], cumsum[i])
    array([0, 2, 2, 3])
"""

from typing import Any

import numpy as np

__all__ = ["SumTree"]


class SumTree:
    """Sum (and max) tree over ``n_leaves`` non-negative float64 weights, all zero at first.

    Args:
        n_leaves: number of leaves (>= 1).

    Raises:
        ValueError: ``n_leaves`` is not a positive int.
    """

    def __init__(self, n_leaves: int) -> None:
        if isinstance(n_leaves, bool) or not isinstance(n_leaves, (int, np.integer)) or n_leaves < 1:
            raise ValueError(f"SumTree: n_leaves must be an int >= 1, got {n_leaves!r}")
        self.n_leaves = int(n_leaves)
        self._n_base = 1 << (self.n_leaves - 1).bit_length()  # leaves padded to a power of two
        self._depth = self._n_base.bit_length() - 1  # levels below the root
        self._sum = np.zeros(2 * self._n_base, dtype=np.float64)  # [2 n_base], index 0 unused
        self._max = np.zeros(2 * self._n_base, dtype=np.float64)  # [2 n_base]

    # --------------------------------------------------------------------------- reads

    def total(self) -> float:
        """Sum of all leaf weights."""
        return float(self._sum[1])

    def max(self) -> float:
        """Largest leaf weight (0 when all are zero)."""
        return float(self._max[1])

    @property
    def leaves(self) -> np.ndarray:
        """``[n_leaves]`` read-only view of the leaf weights."""
        view = self._sum[self._n_base : self._n_base + self.n_leaves]
        view.flags.writeable = False
        return view

    def get(self, index: Any) -> np.ndarray:
        """Weights of leaves ``index`` (``[n]``)."""
        return self._sum[self._n_base + self._check_index(index, "get")]

    def find(self, values: Any) -> np.ndarray:
        """Leaves whose prefix-sum interval holds each value.

        Leaf ``i`` owns ``[c[i-1], c[i])`` with ``c = cumsum(weights)``, as
        ``np.searchsorted(c, value, side="right")`` would answer, except that values outside
        ``[0, total())`` land on the first / last leaf of positive weight, so a leaf of weight
        zero is never returned while ``total() > 0``.

        Args:
            values: ``[n]`` floats.

        Returns:
            ``[n]`` int64 leaf indices.

        Raises:
            ValueError: values are not finite, or every weight is zero.
        """
        remaining = np.array(values, dtype=np.float64, ndmin=1).reshape(-1)  # [n]
        if not np.isfinite(remaining).all():
            raise ValueError("SumTree.find: values must be finite")
        if self._sum[1] <= 0:
            raise ValueError("SumTree.find: every weight is zero; nothing can be found")
        np.maximum(remaining, 0.0, out=remaining)
        nodes = np.ones(remaining.shape[0], dtype=np.int64)  # [n] start at the root
        for _ in range(self._depth):
            left = nodes * 2  # [n]
            left_sum = self._sum[left]  # [n]
            # Go right past the left subtree, unless the right one is empty (rounding at the edge).
            go_right = (remaining >= left_sum) & (self._sum[left + 1] > 0)  # [n]
            remaining -= np.where(go_right, left_sum, 0.0)
            nodes = left + go_right
        return nodes - self._n_base

    # -------------------------------------------------------------------------- writes

    def update(self, index: Any, weights: Any) -> None:
        """Sets leaves ``index`` to ``weights``; the last of repeated indices wins.

        Args:
            index: ``[n]`` leaf indices (or one int).
            weights: ``[n]`` non-negative finite weights (or one, used for every index).

        Raises:
            ValueError: an index out of range, weights of another length, negative, NaN or
                infinite weights.
        """
        leaves = self._check_index(index, "update")
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim == 0:
            weights = np.full(leaves.shape[0], float(weights))  # [n]
        weights = weights.reshape(-1)  # [n]
        if weights.shape[0] != leaves.shape[0]:
            raise ValueError(
                f"SumTree.update: got {leaves.shape[0]} indices but {weights.shape[0]} weights"
            )
        if weights.size and (not np.isfinite(weights).all() or weights.min() < 0):
            raise ValueError("SumTree.update: weights must be finite and >= 0")
        if leaves.size == 0:
            return
        if np.unique(leaves).size != leaves.size:  # keep the last occurrence of each index
            reverse_first = np.unique(leaves[::-1], return_index=True)[1]
            keep = leaves.size - 1 - reverse_first
            leaves, weights = leaves[keep], weights[keep]
        nodes = leaves + self._n_base  # [n]
        self._sum[nodes] = weights
        self._max[nodes] = weights
        for _ in range(self._depth):
            nodes = np.unique(nodes >> 1)  # parents, each once
            left = nodes * 2
            self._sum[nodes] = self._sum[left] + self._sum[left + 1]
            self._max[nodes] = np.maximum(self._max[left], self._max[left + 1])

    def clear(self) -> None:
        """Sets every weight to zero."""
        self._sum[:] = 0.0
        self._max[:] = 0.0

    def _check_index(self, index: Any, where: str) -> np.ndarray:
        arr = np.array(index, ndmin=1).reshape(-1)  # [n]
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"SumTree.{where}: indices must be integers, got dtype {arr.dtype}")
        if arr.min() < 0 or arr.max() >= self.n_leaves:
            bad = int(arr.min() if arr.min() < 0 else arr.max())
            raise ValueError(f"SumTree.{where}: index {bad} is out of range for {self.n_leaves} leaves")
        return arr.astype(np.int64, copy=False)
