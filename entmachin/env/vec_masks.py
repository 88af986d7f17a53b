"""The action masks of a ``VecObs``, one row per environment: a categorical action's actors and choice mask, a
select-entity action's actors, actees and actor x actee mask, a continuous action's actors and bounds. Each
takes rows (``mask[i]``), appends another batch's rows (``extend``) and converts ragged-buffer's values at
the door; ``entmachin.env.vec_env`` exports them with ``VecObs``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

from entmachin.ragged.array import RaggedArray, RaggedArrayBool, RaggedArrayF32, RaggedArrayI64
from entmachin.ragged.arrays import ragged_full, take
from entmachin.ragged.interop import as_ragged_array


def _ours(value: Any, where: str) -> Any:
    """``value``, or ragged-buffer's ``RaggedBuffer*`` converted to entmachin's ragged array."""
    return value if value is None or isinstance(value, RaggedArray) else as_ragged_array(value, where)


def _extend_optional(
    mine: Optional[RaggedArrayBool],
    theirs: Optional[RaggedArrayBool],
    my_lengths: npt.NDArray[np.int64],
    their_lengths: npt.NDArray[np.int64],
    width: int,
) -> Optional[RaggedArrayBool]:
    """Concatenate two optional bool masks, filling the absent side with True."""
    if mine is None and theirs is None:
        return None
    if mine is None:
        mine = ragged_full(my_lengths, width, True, np.bool_)
    if theirs is None:
        theirs = ragged_full(their_lengths, mine.size2(), True, np.bool_)
    mine.extend(theirs)
    return mine


@dataclass
class VecCategoricalActionMask:
    """Actors and optional choice masks of a (global) categorical action, one row per env.

    Attributes:
        actors: int64 ``[n_actors, 1]`` per row, entity indices of the actors.
        mask: optional bool ``[n_actors, n_choices]`` per row; ``None`` means all allowed.
    """

    actors: RaggedArrayI64
    mask: Optional[RaggedArrayBool] = None

    def __post_init__(self) -> None:
        self.actors = _ours(self.actors, "VecCategoricalActionMask.actors")
        self.mask = _ours(self.mask, "VecCategoricalActionMask.mask")

    def __getitem__(self, i: Union[int, npt.NDArray[np.int64]]) -> "VecCategoricalActionMask":
        return VecCategoricalActionMask(take(self.actors, i), None if self.mask is None else take(self.mask, i))

    def extend(self, other: "VecCategoricalActionMask") -> None:
        """Append the rows of ``other``; where one side has no choice mask, its rows allow every choice.

        Raises:
            TypeError: ``other`` is not a ``VecCategoricalActionMask``.
        """
        if not isinstance(other, VecCategoricalActionMask):
            raise TypeError(f"expected VecCategoricalActionMask, got {type(other).__name__}")
        width = other.mask.size2() if other.mask is not None else 0
        self.mask = _extend_optional(self.mask, other.mask, self.actors.size1(), other.actors.size1(), width)
        self.actors.extend(other.actors)

    def clear(self) -> None:
        """Drop every row, in place."""
        self.actors.clear()
        if self.mask is not None:
            self.mask.clear()


@dataclass
class VecSelectEntityActionMask:
    """Actors, actees and the optional actor x actee mask of a select-entity action.

    Attributes:
        actors: int64 ``[n_actors, 1]`` per row.
        actees: int64 ``[n_actees, 1]`` per row (empty in rows without actors).
        mask: optional bool ``[n_actors * n_actees, 1]`` per row, row-major: item
            ``a * n_actees + e`` allows actor ``a`` to select actee ``e``.
    """

    actors: RaggedArrayI64
    actees: RaggedArrayI64
    mask: Optional[RaggedArrayBool] = None

    def __post_init__(self) -> None:
        self.actors = _ours(self.actors, "VecSelectEntityActionMask.actors")
        self.actees = _ours(self.actees, "VecSelectEntityActionMask.actees")
        self.mask = _ours(self.mask, "VecSelectEntityActionMask.mask")

    def __getitem__(self, i: Union[int, npt.NDArray[np.int64]]) -> "VecSelectEntityActionMask":
        return VecSelectEntityActionMask(
            take(self.actors, i), take(self.actees, i), None if self.mask is None else take(self.mask, i)
        )

    def extend(self, other: "VecSelectEntityActionMask") -> None:
        """Append the rows of ``other``; where one side has no mask, its actors may select every actee.

        Raises:
            TypeError: ``other`` is not a ``VecSelectEntityActionMask``.
        """
        if not isinstance(other, VecSelectEntityActionMask):
            raise TypeError(f"expected VecSelectEntityActionMask, got {type(other).__name__}")
        mine = self.actors.size1() * self.actees.size1()
        theirs = other.actors.size1() * other.actees.size1()
        self.mask = _extend_optional(self.mask, other.mask, mine, theirs, 1)
        self.actors.extend(other.actors)
        self.actees.extend(other.actees)

    def clear(self) -> None:
        """Drop every row, in place."""
        self.actors.clear()
        self.actees.clear()
        if self.mask is not None:
            self.mask.clear()


@dataclass
class VecContinuousActionMask:
    """Actors and their optional bounds of a (global) continuous action, one row per env.

    Attributes:
        actors: int64 ``[n_actors, 1]`` per row, entity indices of the actors.
        low: optional float32 ``[n_actors, n_values]`` per row, each actor's lower bounds (within the
            space's); ``None``: the space's bounds for every actor.
        high: optional float32 ``[n_actors, n_values]`` per row, the upper bounds, likewise.
    """

    actors: RaggedArrayI64
    low: Optional[RaggedArrayF32] = None
    high: Optional[RaggedArrayF32] = None

    def __post_init__(self) -> None:
        self.actors = _ours(self.actors, "VecContinuousActionMask.actors")
        self.low = _ours(self.low, "VecContinuousActionMask.low")
        self.high = _ours(self.high, "VecContinuousActionMask.high")

    @property
    def mask(self) -> None:
        """No choices to mask (the uniform attribute of every vectorised mask)."""
        return None

    def bounds(self, space: Any) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Every actor's ``(low, high)``: float32 ``[n_actors, n_values]`` each (these bounds, or
        the continuous ``space``'s where there are none)."""
        if self.low is not None:
            return self.low.as_array(), self.high.as_array()
        n = int(self.actors.size1().sum())
        return np.broadcast_to(space.low, (n, len(space))), np.broadcast_to(space.high, (n, len(space)))

    def __getitem__(self, i: Union[int, npt.NDArray[np.int64]]) -> "VecContinuousActionMask":
        return VecContinuousActionMask(take(self.actors, i), *(None if b is None else take(b, i)
                                                                  for b in (self.low, self.high)))

    def extend(self, other: "VecContinuousActionMask") -> None:
        """Append the rows of ``other``.

        Raises:
            TypeError: ``other`` is not a ``VecContinuousActionMask``.
            ValueError: one side has bounds and the other none.
        """
        if not isinstance(other, VecContinuousActionMask):
            raise TypeError(f"expected VecContinuousActionMask, got {type(other).__name__}")
        if (self.low is None) != (other.low is None) or (self.high is None) != (other.high is None):
            raise ValueError("VecContinuousActionMask.extend: one side has bounds and the other none; fill both "
                             "with the space's bounds (batch_obs does)")
        if self.low is not None:
            self.low.extend(other.low)
            self.high.extend(other.high)
        self.actors.extend(other.actors)

    def clear(self) -> None:
        """Drop every row, in place."""
        for part in (self.actors, self.low, self.high):
            if part is not None:
                part.clear()


VecActionMask = Union[VecCategoricalActionMask, VecSelectEntityActionMask, VecContinuousActionMask]
