"""``SumTree``: non-negative leaf weights with vectorised batch update and prefix-sum search.

A binary tree stored heap-style in one array (children of node ``i`` at ``2i`` and ``2i + 1``,
leaves at ``n_base .. 2 n_base - 1``), whose nodes hold the sum of their leaves. Only the
levels up to a *top level* of at most 4096 nodes are kept: a search takes one ``cumsum`` +
``searchsorted`` over the top level, then descends the few levels below it for all queries
together, a few numpy calls per level for the whole batch, and no Python
loop runs over items. An update adds each leaf's change to all its kept ancestors in one
``np.add.at``, and every 4096 updates the levels are rebuilt from the leaves, so rounding cannot
pile up. The maximum leaf is kept exactly: raised by updates, and recomputed (one vectorised
pass) only when asked for after an update may have lowered it.

Example:
    >>> tree = SumTree(4)
    >>> tree.update([0, 1, 2, 3], [1.0, 0.0, 2.0, 1.0])
    >>> tree.total(), tree.max()
    (4.0, 2.0)
    >>> tree.find([0.5, 1.0, 2.9, 3.5])  # leaf i owns [cumsum[i-1], cumsum[i])
    array([0, 2, 2, 3])
"""

from typing import Any, Tuple

import numpy as np

__all__ = ["SumTree"]

_TOP_LEVEL_BITS = 12  # the top level holds at most 2 ** 12 nodes
_REBUILD_EVERY = 4096  # updates between exact rebuilds of the levels below the top


class SumTree:
    """Sum tree over ``n_leaves`` non-negative float64 weights, all zero at first.

    Args:
        n_leaves: number of leaves (>= 1).

    Raises:
        ValueError: ``n_leaves`` is not a positive int.
    """

    def __init__(self, n_leaves: int) -> None:
        if isinstance(n_leaves, bool) or not isinstance(n_leaves, (int, np.integer)) or n_leaves < 1:
            raise ValueError(f"SumTree: n_leaves must be an int >= 1, got {n_leaves!r}")
        self.n_leaves = int(n_leaves)
        depth = (self.n_leaves - 1).bit_length()  # levels below the root
        self._n_base = 1 << depth  # leaves padded to a power of two
        self._n_top = 1 << min(depth, _TOP_LEVEL_BITS)  # nodes of the top level kept
        self._depth_below_top = depth - min(depth, _TOP_LEVEL_BITS)
        self._sum = np.zeros(2 * self._n_base, dtype=np.float64)  # [2 n_base]; nodes above the top unused
        self._shifts = np.arange(1, self._depth_below_top + 1)  # [depth_below_top] leaf -> ancestor
        self._writer = np.zeros(self.n_leaves, dtype=np.int64)  # [n_leaves] scratch to drop repeats
        self._before = np.zeros(self._n_top + 1)  # [n_top + 1] scratch for the top-level prefix sums
        self._order = np.arange(0)
        self._n_updates = 0
        self._total = 0.0
        self._max = 0.0
        self._max_stale = False

    # --------------------------------------------------------------------------- reads

    def total(self) -> float:
        """Sum of all leaf weights."""
        return self._total

    def max(self) -> float:
        """Largest leaf weight (0 when all are zero)."""
        if self._max_stale:
            self._max = float(self._sum[self._n_base :].max())
            self._max_stale = False
        return self._max

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
        if self._total <= 0:
            raise ValueError("SumTree.find: every weight is zero; nothing can be found")
        np.maximum(remaining, 0.0, out=remaining)
        return self.find_unchecked(remaining)[0]

    def find_unchecked(self, remaining: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """:meth:`find` for callers that already checked: ``remaining`` holds ``[n]`` finite float64
        values ``>= 0`` (the array is overwritten) and ``total() > 0``; nothing is checked here.

        Returns:
            ``(leaves, weights)``: ``[n]`` int64 leaf indices and ``[n]`` their weights.
        """
        before = self._before  # [n_top + 1] sum of the top-level nodes before each; before[0] = 0
        np.cumsum(self._sum[self._n_top : 2 * self._n_top], out=before[1:])
        nodes = np.searchsorted(before[1:], remaining, side="right")  # [n] top-level node of each value
        np.minimum(nodes, self._n_top - 1, out=nodes)
        remaining -= before.take(nodes)
        nodes += self._n_top
        for _ in range(self._depth_below_top):
            nodes <<= 1  # left child
            left = self._sum.take(nodes)  # [n]
            go_right = remaining >= left  # [n]
            np.subtract(remaining, left, out=remaining, where=go_right)
            nodes += go_right
        weights = self._sum.take(nodes)  # [n]
        leaves = nodes - self._n_base  # [n]
        if weights.min() <= 0:  # past the last positive leaf: a value >= total, or rounding
            empty = weights <= 0
            leaves[empty] = self._last_positive_leaf_before(leaves[empty])
            weights = self._sum.take(leaves + self._n_base)
        return leaves, weights

    def _last_positive_leaf_before(self, leaves: np.ndarray) -> np.ndarray:
        """For each leaf, the last leaf of positive weight at or before it (else the first one)."""
        positive = np.flatnonzero(self._sum[self._n_base :] > 0)  # [n_positive]
        at = np.searchsorted(positive, leaves, side="right") - 1  # [n]
        return positive[np.maximum(at, 0)]

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
        if weights.size and not (weights.min() >= 0 and weights.max() < np.inf):  # NaN fails both
            raise ValueError("SumTree.update: weights must be finite and >= 0")
        self.update_unchecked(leaves, weights)

    def update_unchecked(self, leaves: np.ndarray, weights: np.ndarray) -> None:
        """:meth:`update` for callers that already checked: ``leaves`` int64 ``[n]`` leaf indices in range
        and ``weights`` ``[n]`` finite non-negative float64 weights; nothing is checked here."""
        if leaves.size == 0:
            return
        if leaves.size > 1:  # repeated indices: keep the last weight of each
            if self._order.size < leaves.size:
                self._order = np.arange(leaves.size)
            order = self._order[: leaves.size]  # [n] 0, 1, ..., n - 1
            self._writer[leaves] = order  # numpy writes repeated indices in order: the last stays
            last = self._writer.take(leaves) == order  # [n]
            if not last.all():
                leaves, weights = leaves[last], weights[last]
        nodes = leaves + self._n_base  # [n]
        old = self._sum.take(nodes)  # [n]
        lowered = not self._max_stale and old.max() >= self._max
        self._sum[nodes] = weights
        if self._depth_below_top:
            # every ancestor up to the top level, for all leaves at once: [n, depth_below_top]
            ancestors = nodes[:, None] >> self._shifts[None, :]
            np.add.at(self._sum, ancestors.ravel(), np.repeat(weights - old, self._depth_below_top))
            self._n_updates += 1
            if self._n_updates % _REBUILD_EVERY == 0:
                self._rebuild()
        self._total = float(self._sum[self._n_top : 2 * self._n_top].sum())
        highest = float(weights.max())
        if highest >= self._max and not self._max_stale:
            self._max = highest
        elif lowered:  # a leaf holding the maximum got less: recompute the maximum when asked
            self._max_stale = True

    def _rebuild(self) -> None:
        """Recomputes the levels below the top from the leaves (discarding accumulated rounding)."""
        for height in range(1, self._depth_below_top + 1):
            first = self._n_base >> height  # the level's first node
            self._sum[first : 2 * first] = self._sum[2 * first : 4 * first].reshape(-1, 2).sum(axis=1)

    def clear(self) -> None:
        """Sets every weight to zero."""
        self._sum[:] = 0.0
        self._total = 0.0
        self._max = 0.0
        self._max_stale = False

    def _check_index(self, index: Any, where: str) -> np.ndarray:
        arr = np.array(index, ndmin=1).reshape(-1)  # [n]
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"SumTree.{where}: indices must be integers, got dtype {arr.dtype}")
        low, high = arr.min(), arr.max()
        if low < 0 or high >= self.n_leaves:
            bad = int(low if low < 0 else high)
            raise ValueError(f"SumTree.{where}: index {bad} is out of range for {self.n_leaves} leaves")
        return arr.astype(np.int64, copy=False)
