"""Action spaces, per-step action masks and the actions an environment receives.

Five kinds of action; the first three with entity-gym 0.1.10's names:

* ``GlobalCategoricalActionSpace``: one choice per step, taken by the ``__global__`` entity.
* ``CategoricalActionSpace``: every actor entity picks one of a fixed set of choices.
* ``SelectEntityActionSpace``: every actor entity picks one entity from the step's actees.
* ``ContinuousActionSpace``: every actor entity outputs a vector of real values, each within
  its bounds (a steering angle, a throttle, an aim).
* ``GlobalContinuousActionSpace``: one such vector per step, output by the ``__global__`` entity.

An ``ActionSpace`` says what is possible at all, an ``ActionMask`` what is possible on this
step, and an ``Action`` what was chosen. Select-entity choices travel as positions in the
step's actee list; ``EnvList`` resolves them to entity ids before ``Environment.act``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from entmachin.env.common import EntityID, EntityName


@dataclass
class CategoricalActionSpace:
    """A fixed set of choices from which each actor entity picks one.

    Attributes:
        index_to_label: the choices' labels; choice ``i`` is ``index_to_label[i]``.
    """

    index_to_label: List[str]

    def __len__(self) -> int:
        return len(self.index_to_label)


@dataclass
class GlobalCategoricalActionSpace:
    """A fixed set of choices from which one is picked per step.

    Attributes:
        index_to_label: the choices' labels; choice ``i`` is ``index_to_label[i]``.

    Example:
        >>> GlobalCategoricalActionSpace(["up", "down", "left", "right"])
        GlobalCategoricalActionSpace(index_to_label=['up', 'down', 'left', 'right'])
    """

    index_to_label: List[str]

    def __len__(self) -> int:
        return len(self.index_to_label)


@dataclass
class SelectEntityActionSpace:
    """Each actor entity selects one entity (an "actee") of the same step."""


class _Bounds:
    """Named values with ``low <= high`` bounds, both finite (the continuous spaces' part)."""

    names: List[str]
    low: npt.NDArray[np.float32]
    high: npt.NDArray[np.float32]

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Checks (and normalises to float32 arrays) the names and bounds; ``ValidatingEnv`` calls it
        again, for bounds changed after the space was built.

        Raises:
            ValueError: bounds not one per value, not finite in float32, or ``low > high``, naming
                the value and its dimension.
        """
        owner = type(self).__name__
        try:
            low = np.asarray(self.low, dtype=np.float64)
            high = np.asarray(self.high, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{owner}: low and high must be numbers ({e})") from None
        if low.ndim > 1 or high.ndim > 1:
            raise ValueError(f"{owner}: low and high must be numbers or 1-d sequences, got shapes "
                             f"{low.shape} and {high.shape}")
        names = None if self.names is None else [str(n) for n in self.names]
        n = len(names) if names is not None else max(low.size if low.ndim else 1, high.size if high.ndim else 1)
        low, high = np.broadcast_to(low, (n,)) if low.ndim == 0 else low, np.broadcast_to(high, (n,)) if high.ndim == 0 else high
        if low.shape != (n,) or high.shape != (n,):
            raise ValueError(f"{owner}: low has {low.size} values and high {high.size}; expected one per value "
                             f"({n}{', the names' if names is not None else ''})")
        if n == 0:
            raise ValueError(f"{owner}: an action of no values; give at least one bound")
        self.names = names if names is not None else [str(i) for i in range(n)]
        if len(set(self.names)) != n:
            raise ValueError(f"{owner}: value names {self.names} repeat a name")
        with np.errstate(over="ignore"):  # a bound beyond float32's range becomes inf, refused below
            low32, high32 = low.astype(np.float32), high.astype(np.float32)
        for i in range(n):
            if not (np.isfinite(low32[i]) and np.isfinite(high32[i])):
                raise ValueError(f"{owner}: value '{self.names[i]}' (dimension {i}) has bounds [{low[i]}, {high[i]}]; "
                                 "both must be finite (and within float32's range, +-3.4e38)")
            if low[i] > high[i]:
                raise ValueError(f"{owner}: value '{self.names[i]}' (dimension {i}) has low {low[i]} > high {high[i]}")
        self.low, self.high = low32, high32

    def __len__(self) -> int:
        return len(self.names)

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and self.names == other.names  # type: ignore[attr-defined]
                and np.array_equal(self.low, other.low) and np.array_equal(self.high, other.high))  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(low={self.low.tolist()}, high={self.high.tolist()}, names={self.names})"


@dataclass(eq=False, repr=False)
class ContinuousActionSpace(_Bounds):
    """Each actor entity outputs ``len(names)`` real values, value ``i`` within ``[low[i], high[i]]``.

    Args:
        low: the lower bounds, one per value (a number applies to every value); finite, with
            ``low <= high`` (equal bounds fix a value).
        high: the upper bounds, likewise.
        names: the values' names (default ``"0"``, ``"1"``, ...).

    Raises:
        ValueError: bounds that are not finite or have ``low > high``, naming the value.

    Example:
        >>> ContinuousActionSpace(low=[-1.0, 0.0], high=[1.0, 1.0], names=["steer", "throttle"])
        ContinuousActionSpace(low=[-1.0, 0.0], high=[1.0, 1.0], names=['steer', 'throttle'])
    """

    low: Union[float, Sequence[float], npt.NDArray[np.float32]]
    high: Union[float, Sequence[float], npt.NDArray[np.float32]]
    names: Optional[List[str]] = None


@dataclass(eq=False, repr=False)
class GlobalContinuousActionSpace(_Bounds):
    """One vector of real values per step (output by the ``__global__`` entity), value ``i`` within
    ``[low[i], high[i]]``.

    Args:
        low: the lower bounds, one per value (a number applies to every value); finite, with
            ``low <= high`` (equal bounds fix a value).
        high: the upper bounds, likewise.
        names: the values' names (default ``"0"``, ``"1"``, ...).

    Raises:
        ValueError: as :class:`ContinuousActionSpace` raises it.
    """

    low: Union[float, Sequence[float], npt.NDArray[np.float32]]
    high: Union[float, Sequence[float], npt.NDArray[np.float32]]
    names: Optional[List[str]] = None


ActionSpace = Union[
    CategoricalActionSpace, SelectEntityActionSpace, GlobalCategoricalActionSpace, ContinuousActionSpace,
    GlobalContinuousActionSpace,
]
CONTINUOUS_SPACES = (ContinuousActionSpace, GlobalContinuousActionSpace)
GLOBAL_SPACES = (GlobalCategoricalActionSpace, GlobalContinuousActionSpace)


def _exclusive(owner: str, a: str, a_value: object, b: str, b_value: object) -> None:
    if a_value is not None and b_value is not None:
        raise ValueError(f"{owner}: give at most one of `{a}` and `{b}`, got both")


@dataclass
class CategoricalActionMask:
    """Which entities act this step, and optionally which choices each of them may take.

    Attributes:
        actor_ids: ids of the acting entities; ``None`` (with ``actor_types`` ``None``) means
            every entity acts. Exclusive with ``actor_types``.
        actor_types: entity types whose entities all act. Exclusive with ``actor_ids``.
        mask: bool ``(n_actors, n_choices)``; ``mask[i, j]`` allows actor ``i`` choice ``j``.
    """

    actor_ids: Optional[Sequence[EntityID]] = None
    actor_types: Optional[Sequence[EntityName]] = None
    mask: Union[Sequence[Sequence[bool]], npt.NDArray[np.bool_], None] = None

    def __post_init__(self) -> None:
        _exclusive("CategoricalActionMask", "actor_ids", self.actor_ids, "actor_types", self.actor_types)


@dataclass
class GlobalCategoricalActionMask:
    """Mask of a global categorical action.

    Attributes:
        mask: optional bool ``(n_choices,)`` (a ``(1, n_choices)`` array is accepted too);
            ``mask[j]`` allows choice ``j``.
    """

    mask: Union[Sequence[bool], npt.NDArray[np.bool_], None] = None


@dataclass
class SelectEntityActionMask:
    """Which entities act this step and which entities they may select.

    Attributes:
        actor_ids: as for ``CategoricalActionMask``. Exclusive with ``actor_types``.
        actor_types: as for ``CategoricalActionMask``.
        actee_ids: ids of the selectable entities. Exclusive with ``actee_types``.
        actee_types: entity types whose entities are all selectable.
        mask: optional bool ``(n_actors, n_actees)``; ``mask[i, j]`` lets actor ``i`` select
            actee ``j``. Carried into ``VecObs`` so that a model can honour it.
    """

    actor_ids: Optional[Sequence[EntityID]] = None
    actor_types: Optional[Sequence[EntityName]] = None
    actee_types: Optional[Sequence[EntityName]] = None
    actee_ids: Optional[Sequence[EntityID]] = None
    mask: Optional[npt.NDArray[np.bool_]] = None

    def __post_init__(self) -> None:
        _exclusive("SelectEntityActionMask", "actor_ids", self.actor_ids, "actor_types", self.actor_types)
        _exclusive("SelectEntityActionMask", "actee_ids", self.actee_ids, "actee_types", self.actee_types)


@dataclass
class ContinuousActionMask:
    """Which entities output values this step, and optionally narrower bounds for each of them.

    Attributes:
        actor_ids: as for ``CategoricalActionMask``. Exclusive with ``actor_types``.
        actor_types: as for ``CategoricalActionMask``.
        low: optional float ``(n_actors, n_values)``: actor ``i``'s value ``j`` lies in
            ``[low[i, j], high[i, j]]``, within the space's bounds (a mask narrows, never widens).
        high: optional float ``(n_actors, n_values)``, the upper bounds, likewise.
    """

    actor_ids: Optional[Sequence[EntityID]] = None
    actor_types: Optional[Sequence[EntityName]] = None
    low: Union[Sequence[Sequence[float]], npt.NDArray[np.float32], None] = None
    high: Union[Sequence[Sequence[float]], npt.NDArray[np.float32], None] = None

    def __post_init__(self) -> None:
        _exclusive("ContinuousActionMask", "actor_ids", self.actor_ids, "actor_types", self.actor_types)


@dataclass
class GlobalContinuousActionMask:
    """Optional narrower bounds of a global continuous action on this step.

    Attributes:
        low: optional float ``(n_values,)`` (or ``(1, n_values)``), the lower bounds, within the space's.
        high: optional float ``(n_values,)`` (or ``(1, n_values)``), the upper bounds, within the space's.
    """

    low: Union[Sequence[float], npt.NDArray[np.float32], None] = None
    high: Union[Sequence[float], npt.NDArray[np.float32], None] = None


ActionMask = Union[
    CategoricalActionMask, SelectEntityActionMask, GlobalCategoricalActionMask, ContinuousActionMask,
    GlobalContinuousActionMask,
]
GLOBAL_MASKS = (GlobalCategoricalActionMask, GlobalContinuousActionMask)


@dataclass
class CategoricalAction:
    """The choices made by the actors of a categorical action.

    Attributes:
        actors: ids of the acting entities.
        indices: int64 ``(n_actors,)``, the chosen choice of each actor.
        index_to_label: labels of the action space.
        probs: optional probabilities the policy gave each choice (``OnnxPolicy.act`` fills it; a Q-network's
            policy gives its Q-values).
    """

    actors: Sequence[EntityID]
    indices: npt.NDArray[np.int64]
    index_to_label: List[str]
    probs: Optional[npt.NDArray[np.float32]] = None

    @property
    def labels(self) -> List[str]:
        """The labels of the chosen choices, one per actor."""
        return [self.index_to_label[i] for i in self.indices]


@dataclass
class SelectEntityAction:
    """The entities selected by the actors of a select-entity action (ids on both sides).

    Attributes:
        actors: ids of the acting entities.
        actees: ids of the selected entities, one per actor.
        probs: optional probabilities the policy gave each actee, per actor (as ``CategoricalAction``'s).
    """

    actors: Sequence[EntityID]
    actees: Sequence[EntityID]
    probs: Optional[npt.NDArray[np.float32]] = None


@dataclass
class GlobalCategoricalAction:
    """The one choice made for a global categorical action.

    Attributes:
        index: the chosen choice.
        label: its label in the action space.
        probs: optional probabilities the policy gave each choice (as ``CategoricalAction``'s).
    """

    index: int
    label: str
    probs: Optional[npt.NDArray[np.float32]] = None


@dataclass
class ContinuousAction:
    """The values output by the actors of a continuous action.

    Attributes:
        actors: ids of the acting entities.
        values: float32 ``(n_actors, n_values)``, each within its actor's bounds.
        names: the values' names (the action space's).
    """

    actors: Sequence[EntityID]
    values: npt.NDArray[np.float32]
    names: List[str]

    def __getitem__(self, name: str) -> npt.NDArray[np.float32]:
        """Every actor's value ``name``: float32 ``(n_actors,)``."""
        return self.values[:, self.names.index(name)]


@dataclass
class GlobalContinuousAction:
    """The one vector of values output for a global continuous action.

    Attributes:
        values: float32 ``(n_values,)``, within the bounds.
        names: the values' names.
    """

    values: npt.NDArray[np.float32]
    names: List[str]

    def __getitem__(self, name: str) -> float:
        return float(self.values[self.names.index(name)])


Action = Union[CategoricalAction, SelectEntityAction, GlobalCategoricalAction, ContinuousAction, GlobalContinuousAction]
