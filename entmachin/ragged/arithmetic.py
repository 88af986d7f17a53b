"""``RaggedArithmetic``: ``+``, ``-`` and ``*`` of ragged arrays, with broadcasting.

A mixin of :class:`entmachin.ragged.array.RaggedArray`. The other operand is a number (an int
for int64 arrays; bool arrays have no arithmetic) or a ragged array (or ragged-buffer value) of
the same class and number of features, with the same lengths or one item per sequence on one
side (broadcast over the other's sequences). Every result is a new array. This module never
imports torch (environment worker processes import it).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

if TYPE_CHECKING:
    from entmachin.ragged.array import RaggedArray

__all__ = ["RaggedArithmetic"]


class RaggedArithmetic:
    """``+``, ``-``, ``*`` (and ``-=``, which rebinds) for :class:`~entmachin.ragged.array.RaggedArray`,
    which provides ``_wrap``, ``_same_kind`` and the sizes."""

    __slots__ = ()
    dtype: ClassVar[np.dtype]
    _data: np.ndarray  # [capacity, n_features]
    _lengths: np.ndarray  # [capacity]
    _n_items: int
    _n_seqs: int

    def _binary(self, other: Any, op: Callable[[Any, Any], Any], symbol: str) -> "RaggedArray":
        where = f"{type(self).__name__} {symbol}"
        if self.dtype == np.bool_:
            raise TypeError(f"{where}: bool ragged arrays have no arithmetic")
        data = self._data[: self._n_items]
        if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, (bool, np.bool_)):
            if self.dtype == np.int64 and not isinstance(other, (int, np.integer)):
                raise TypeError(f"{where}: an int64 ragged array takes int operands, got {other!r}")
            return type(self)._wrap(
                op(data, other).astype(self.dtype, copy=False), self._lengths[: self._n_seqs].copy()
            )
        other = self._same_kind(other, where)
        mine, theirs = self.size1(), other.size1()
        if np.array_equal(mine, theirs):
            values = other._data[: other._n_items]  # [n_items, n_features]
        elif other._n_seqs == self._n_seqs and (theirs == 1).all():
            values = np.repeat(other._data[: other._n_items], mine, axis=0)  # one item per sequence, broadcast
        elif self._n_seqs == other._n_seqs and (mine == 1).all():
            return other._binary(self, lambda a, b: op(b, a), symbol)
        else:
            raise ValueError(
                f"{where}: lengths differ ({mine.tolist()[:8]} vs {theirs.tolist()[:8]}); expected equal "
                "lengths, or one item per sequence on one side"
            )
        return type(self)._wrap(op(data, values), mine.copy())

    def __add__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.add, "+")

    def __radd__(self, other: Any) -> "RaggedArray":
        return self._binary(other, lambda a, b: b + a, "+")

    def __mul__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.mul, "*")

    def __rmul__(self, other: Any) -> "RaggedArray":
        return self._binary(other, lambda a, b: b * a, "*")

    def __sub__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.sub, "-")

    def __isub__(self, other: Any) -> "RaggedArray":
        return self._binary(other, operator.sub, "-")  # a new array: views of the old one keep their values
