"""Symmetries of a game: transformations of its observations that leave its rules unchanged.

A board mirrored left to right is the same game: the mirrored position is as good as the original,
and the mirror of a good move is a good move there. An environment that names such transformations
(``symmetries()``) lets a run train on every stored row and on its mirror images
(``rollout.symmetries``), as AlphaZero trained on the board's symmetries: more training data per
environment step, at the cost of more rows per update.

A :class:`Symmetry` is stated in the environment's own terms: an affine map of named features
(``x -> scale * x + offset``, e.g. a column ``c`` of a 7-column board to ``6 - c``), and for each
categorical action the choice each choice becomes. Select-entity actions are unchanged: the
entities move, their identities (and so which one is selected) do not. Continuous actions and
categorical actions a symmetry does not name are unchanged too: the environment names every
action whose meaning the transformation changes.

``entmachin.frame.augment.augment`` adds each symmetry's image of a rollout's rows as further rows of
every step, on the torch side (this module, as the whole environment layer, imports no torch).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Tuple

import numpy as np

from entmachin.env.action import CategoricalActionSpace

__all__ = ["Symmetry", "check_symmetries"]


@dataclass(frozen=True)
class Symmetry:
    """A transformation of observations (and choices) that leaves the game's rules unchanged.

    Args:
        features: entity type -> feature -> ``(scale, offset)``: the feature ``x`` becomes
            ``scale * x + offset``; features not named are unchanged.
        choices: categorical action -> the choice each choice becomes (a permutation of
            ``range(n_choices)``: choice ``i`` becomes ``choices[i]``).

    Example:
        ConnectFour's left-right mirror, for a 7-column board::

            Symmetry(features={t: {"col": (-1.0, 6.0)} for t in ("Mine", "Theirs", "Column")},
                     choices={"drop": [6, 5, 4, 3, 2, 1, 0]})
    """

    features: Mapping[str, Mapping[str, Tuple[float, float]]]
    choices: Mapping[str, Sequence[int]] = field(default_factory=dict)


def check_symmetries(symmetries: Mapping[str, Symmetry], obs_space: Any, action_space: Mapping[str, Any],
                     where: str) -> None:
    """Raises ``ValueError`` naming the symmetry and the entity, feature or action it names that the
    environment does not have, or a ``choices`` entry that is not a permutation of the action's choices."""
    for name, sym in symmetries.items():
        if not isinstance(sym, Symmetry):
            raise TypeError(f"{where}: symmetry {name!r} is a {type(sym).__name__}; expected a Symmetry")
        for entity, maps in sym.features.items():
            if entity not in obs_space.entities:
                raise ValueError(f"{where}: symmetry {name!r} maps entity type {entity!r}, which the environment does "
                                 f"not have (it has {sorted(obs_space.entities)})")
            known = obs_space.entities[entity].features
            for feature, affine in maps.items():
                if feature not in known:
                    raise ValueError(f"{where}: symmetry {name!r} maps {entity}.{feature}, which is not a feature of "
                                     f"{entity} ({list(known)})")
                if (not isinstance(affine, (tuple, list)) or len(affine) != 2
                        or not all(np.isfinite(float(v)) for v in affine)):
                    raise ValueError(f"{where}: symmetry {name!r} maps {entity}.{feature} by {affine!r}; expected "
                                     "(scale, offset), two finite numbers")
        for action, perm in sym.choices.items():
            space = action_space.get(action)
            if not isinstance(space, CategoricalActionSpace):
                raise ValueError(f"{where}: symmetry {name!r} permutes the choices of {action!r}, which is not a "
                                 f"categorical action of the environment ({sorted(action_space)})")
            n = len(space.index_to_label)
            if sorted(int(c) for c in perm) != list(range(n)):
                raise ValueError(f"{where}: symmetry {name!r}'s choices for {action!r} are {list(perm)}; expected a "
                                 f"permutation of 0..{n - 1}")
