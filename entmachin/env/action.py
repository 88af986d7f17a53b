"""Action spaces, per-step action masks and the actions an environment receives.

Three kinds of action, with entity-gym 0.1.10's names:

* ``GlobalCategoricalActionSpace``: one choice per step, taken by the ``__global__`` entity.
* ``CategoricalActionSpace``: every actor entity picks one of a fixed set of choices.
* ``SelectEntityActionSpace``: every actor entity picks one entity from the step's actees.

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
    """A fixed set of choices from which each actor entity picks one."""

    index_to_label: List[str]

    def __len__(self) -> int:
        return len(self.index_to_label)


@dataclass
class GlobalCategoricalActionSpace:
    """A fixed set of choices from which one is picked per step.

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


ActionSpace = Union[CategoricalActionSpace, SelectEntityActionSpace, GlobalCategoricalActionSpace]


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
        actor_ids / actor_types: as for ``CategoricalActionMask``.
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


ActionMask = Union[CategoricalActionMask, SelectEntityActionMask, GlobalCategoricalActionMask]


@dataclass
class CategoricalAction:
    """The choices made by the actors of a categorical action.

    Attributes:
        actors: ids of the acting entities.
        indices: int64 ``(n_actors,)``, the chosen choice of each actor.
        index_to_label: labels of the action space.
        probs: optional probabilities the policy gave each choice.
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
    """The entities selected by the actors of a select-entity action (ids on both sides)."""

    actors: Sequence[EntityID]
    actees: Sequence[EntityID]
    probs: Optional[npt.NDArray[np.float32]] = None


@dataclass
class GlobalCategoricalAction:
    """The one choice made for a global categorical action."""

    index: int
    label: str
    probs: Optional[npt.NDArray[np.float32]] = None


Action = Union[CategoricalAction, SelectEntityAction, GlobalCategoricalAction]
