"""The ragged actions of a ``VecEnv``'s rows on their way to the environments: checked against the action masks
of the last ``VecObs`` (:func:`check_actions`, a continuous action's values by :func:`check_values`), split
into each row's choices (:func:`row_choices`) and turned into the ``Action`` objects ``Environment.act`` takes
(:func:`to_env_actions`). ``entmachin.env.env_list`` exports these names as well.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CONTINUOUS_SPACES,
    CategoricalActionSpace,
    ContinuousAction,
    GlobalCategoricalAction,
    GlobalCategoricalActionSpace,
    GlobalContinuousAction,
    GlobalContinuousActionSpace,
    SelectEntityAction,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Observation, ObsSpace
from entmachin.env.vec_env import VecObs
from entmachin.ragged.array import RaggedArray, RaggedArrayF32, RaggedArrayI64


def check_actions(
    actions: Mapping[ActionName, RaggedArray], vec: VecObs, action_space: Mapping[ActionName, ActionSpace]
) -> None:
    """Check that ``actions`` fit the masks of ``vec`` (one row per environment).

    Raises:
        ValueError: unknown action name, wrong number of rows or actors, a choice out of range,
            a continuous value of the wrong width, not finite or outside its actor's bounds
            (naming the row, the actor and the value).
        TypeError: an action is not a ragged int64 array (float32 for a continuous action).
    """
    for name, act in actions.items():
        if name not in action_space:
            raise ValueError(f"actions['{name}']: unknown action; the environment has {list(action_space)}")
        space = action_space[name]
        continuous = isinstance(space, CONTINUOUS_SPACES)
        kind = RaggedArrayF32 if continuous else RaggedArrayI64
        if not isinstance(act, kind):
            raise TypeError(f"actions['{name}']: expected a {kind.__name__}"
                            f"{' (a continuous action)' if continuous else ''}, got {type(act).__name__}")
        mask = vec.action_masks[name]
        if act.size0() != len(vec):
            raise ValueError(f"actions['{name}'] has {act.size0()} rows; expected one per environment ({len(vec)})")
        want = mask.actors.size1()
        got = act.size1()
        if not np.array_equal(want, got):
            row = int(np.flatnonzero(want != got)[0])
            raise ValueError(
                f"actions['{name}'] row {row} has {got[row]} choices; the observation has {want[row]} actors"
            )
        if continuous:
            check_values(name, act, mask, space)
            continue
        values = act.as_array().reshape(-1)
        if values.size == 0:
            continue
        if isinstance(space, SelectEntityActionSpace):
            limit = np.repeat(mask.actees.size1(), got)  # actees available to each actor
        else:
            limit = len(space.index_to_label)
        bad = (values < 0) | (values >= limit)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            bound = limit if np.isscalar(limit) else limit[k]
            raise ValueError(f"actions['{name}'] item {k} is {values[k]}; expected a value in [0, {bound})")


def check_values(name: ActionName, act: RaggedArrayF32, mask: Any, space: Any) -> None:
    """A continuous action's values: the space's width, finite, within each actor's bounds.

    Raises:
        ValueError: naming the row, the actor (its position among the row's actors) and the value.
    """
    if act.size2() != len(space):
        raise ValueError(f"actions['{name}'] has {act.size2()} values per actor; the space has {len(space)} "
                         f"({space.names})")
    values = act.as_array()  # [n_actors, n_values]
    if values.size == 0:
        return
    low, high = mask.bounds(space)
    finite = np.isfinite(values)
    bad = ~finite | (values < low) | (values > high)
    if not bad.any():
        return
    k, j = (int(i[0]) for i in np.nonzero(bad))
    starts = np.concatenate([[0], np.cumsum(act.size1())])
    row = int(np.searchsorted(starts, k, side="right") - 1)
    # str(): float32's shortest form (an f-string of a float32 prints its float64 digits)
    what = f"{values[k, j]!s} is not finite" if not finite[k, j] else \
        f"{values[k, j]!s} is outside its bounds [{low[k, j]!s}, {high[k, j]!s}]"
    raise ValueError(f"actions['{name}'] row {row}, actor {k - starts[row]}, value '{space.names[j]}' "
                     f"(dimension {j}): {what}")


def row_choices(actions: Mapping[ActionName, RaggedArray], n_rows: int) -> List[Dict[ActionName, npt.NDArray[Any]]]:
    """Each of ``n_rows`` rows' choices of ragged actions: ``[{name: int64 [n_actors]}]`` (continuous:
    float32 ``[n_actors, n_values]``), views of the flat items."""
    flats = {name: a.as_array() if isinstance(a, RaggedArrayF32) else a.as_array().reshape(-1)
             for name, a in actions.items()}  # [n_actors_total] or [n_actors_total, n_values] each
    offsets = {name: np.concatenate([[0], np.cumsum(a.size1())]).tolist() for name, a in actions.items()}
    return [{name: flats[name][offsets[name][r]:offsets[name][r + 1]] for name in flats} for r in range(n_rows)]


def to_env_actions(
    obs_space: ObsSpace,
    action_space: Mapping[ActionName, ActionSpace],
    choices: Mapping[ActionName, npt.NDArray[np.int64]],
    last_obs: Observation,
    probs: Optional[Mapping[ActionName, npt.NDArray[np.float32]]] = None,
) -> Dict[ActionName, Action]:
    """Turn one row's chosen indices into the ``Action`` objects ``Environment.act`` takes.

    Select-entity choices are positions in the row's actee list and become actee ids; continuous
    values (float32 ``[n_actors, n_values]``) go as they are.
    """
    out: Dict[ActionName, Action] = {}
    for name, chosen in choices.items():
        space = action_space[name]
        p = probs.get(name) if probs is not None else None
        if isinstance(space, GlobalContinuousActionSpace):
            if len(chosen):
                out[name] = GlobalContinuousAction(values=np.array(chosen[0], dtype=np.float32),
                                                   names=list(space.names))
            continue
        if isinstance(space, GlobalCategoricalActionSpace):
            if len(chosen) == 0:
                continue
            index = int(chosen[0])
            out[name] = GlobalCategoricalAction(index=index, label=space.index_to_label[index], probs=p)
            continue
        mask = last_obs.actions.get(name)
        if mask is None:
            continue
        actors = last_obs.entity_ids(obs_space, mask.actor_ids, last_obs._actor_indices(name, obs_space))
        if isinstance(space, CategoricalActionSpace):
            out[name] = CategoricalAction(actors=actors, indices=chosen, index_to_label=space.index_to_label, probs=p)
        elif isinstance(space, CONTINUOUS_SPACES):
            values = np.array(chosen, dtype=np.float32).reshape(len(actors), len(space))  # [n_actors, n_values]
            out[name] = ContinuousAction(actors=actors, values=values, names=list(space.names))
        elif isinstance(space, SelectEntityActionSpace):
            if len(actors) == 0:
                actees: List[Any] = []
            else:
                actee_index = last_obs._actee_indices(name, obs_space)
                candidates = last_obs.entity_ids(obs_space, mask.actee_ids, actee_index)
                actees = [candidates[c] for c in chosen]
            out[name] = SelectEntityAction(actors=actors, actees=actees, probs=p)
        else:
            raise TypeError(f"action '{name}': unsupported action space {type(space).__name__}")
    return out
