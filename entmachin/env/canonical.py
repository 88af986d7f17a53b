"""Conversions between ``VecObs`` / model actions and entmachin's canonical entity state.

The canonical state (``docs/architecture.md``) is what buffers store, what ``safe_call`` converts and
what ``RogueNet.forward`` takes::

    state = {
        "entities":     {entity_type: ragged float32 [n_entities, n_features]},
        "visible":      {entity_type: ragged bool [n_entities, 1]},         # optional
        "action_masks": {action_name: {"actors": ragged int64 [n_actors, 1],
                                       "mask": ragged bool [n_actors, n_choices],
                                       "actees": ragged int64 [n_actees, 1],
                                       "actee_mask": ragged bool [n_actors * n_actees, 1],
                                       "low": ragged float32 [n_actors, n_values],     # continuous
                                       "high": ragged float32 [n_actors, n_values]}},  # continuous
    }

Actions are ragged int64 ``[n_actors, 1]`` (a choice, or an actee position) or, for continuous
actions, ragged float32 ``[n_actors, n_values]``.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np

from entmachin.env.action import CONTINUOUS_SPACES, ActionSpace, SelectEntityActionSpace
from entmachin.env.common import ActionName
from entmachin.env.vec_env import (
    VecCategoricalActionMask,
    VecContinuousActionMask,
    VecObs,
    VecSelectEntityActionMask,
)
from entmachin.ragged.array import RaggedArray, RaggedArrayF32, RaggedArrayI64
from entmachin.ragged.arrays import ragged_from_arrays, ragged_full
from entmachin.ragged.interop import as_ragged_array, is_foreign_ragged


def to_state(obs: VecObs, action_space: Optional[Mapping[ActionName, ActionSpace]] = None) -> Dict[str, Any]:
    """The canonical state of a ``VecObs`` (shares its buffers; nothing is copied).

    Args:
        obs: a batch of observations.
        action_space: if given, every categorical ``mask`` and select-entity ``actee_mask`` is
            present (all True where the environment gave none), so that every step has the
            same keys, as a replay buffer's schema requires. Without it, masks appear only
            where the environment supplied them.
    """
    masks: Dict[str, Dict[str, Any]] = {}
    for name, amask in obs.action_masks.items():
        if isinstance(amask, VecSelectEntityActionMask):
            entry = {"actors": amask.actors, "actees": amask.actees}
            mask = amask.mask
            if mask is None and action_space is not None:
                mask = ragged_full(amask.actors.size1() * amask.actees.size1(), 1, True, np.bool_)
            if mask is not None:
                entry["actee_mask"] = mask
        elif isinstance(amask, VecContinuousActionMask):
            entry = {"actors": amask.actors}
            low, high = amask.low, amask.high
            if low is None and action_space is not None:
                lengths = amask.actors.size1()
                low, high = (ragged_from_arrays(b, lengths, dtype=np.float32) for b in amask.bounds(action_space[name]))
            if low is not None:
                entry["low"], entry["high"] = low, high
        elif isinstance(amask, VecCategoricalActionMask):
            entry = {"actors": amask.actors}
            mask = amask.mask
            if mask is None and action_space is not None:
                mask = ragged_full(amask.actors.size1(), len(action_space[name].index_to_label), True, np.bool_)
            if mask is not None:
                entry["mask"] = mask
        else:
            raise TypeError(f"action_masks['{name}']: unsupported mask type {type(amask).__name__}")
        masks[name] = entry
    state: Dict[str, Any] = {"entities": dict(obs.features), "action_masks": masks}
    if obs.visible:
        state["visible"] = dict(obs.visible)
    return state


def to_vec_actions(action: Mapping[str, Any]) -> Dict[ActionName, RaggedArray]:
    """Model actions -> what ``VecEnv.act`` takes: ``{name: RaggedArrayI64 [n_actors, 1]}``, or
    ``RaggedArrayF32 [n_actors, n_values]`` for a continuous action.

    ``action`` is ``{"action": {name: value}}`` (the canonical action) or ``{name: value}``; a value
    is a ``RaggedArrayI64`` (or ragged-buffer's ``RaggedBufferI64``), anything with ``to_ragged_array()``
    (a ``RaggedTensor`` on any device), or a ``(flat, lengths)`` pair of arrays.

    Raises:
        TypeError: a value of another kind.
        ValueError: a choice action of more than one value per actor.
    """
    if "action" in action and isinstance(action["action"], Mapping):
        action = action["action"]
    out: Dict[ActionName, RaggedArray] = {}
    for name, value in action.items():
        if hasattr(value, "to_ragged_array"):
            value = value.to_ragged_array()
        elif is_foreign_ragged(value):
            value = as_ragged_array(value, f"action['{name}']")
        elif isinstance(value, tuple) and len(value) == 2:
            flat, lengths = value
            value = ragged_from_arrays(np.asarray(flat).reshape(-1, 1), np.asarray(lengths), dtype=np.int64)
        if isinstance(value, RaggedArrayF32):
            out[name] = value  # continuous values: their width is the space's, checked by VecEnv.act
            continue
        if not isinstance(value, RaggedArrayI64):
            raise TypeError(
                f"action['{name}']: expected a RaggedArrayI64 (or, continuous, a RaggedArrayF32), a RaggedTensor "
                f"or (flat, lengths), got {type(value).__name__}"
            )
        if value.size2() != 1:
            raise ValueError(f"action['{name}'] has {value.size2()} values per actor; expected 1")
        out[name] = value
    return out


def random_actions(
    obs: VecObs, action_space: Mapping[ActionName, ActionSpace], rng: np.random.Generator
) -> Dict[ActionName, RaggedArray]:
    """A uniformly random allowed choice for every actor of every action (masks honoured);
    continuous values uniform within each actor's bounds.

    Args:
        obs: the batch whose actors act; its action masks say who acts and what is allowed.
        action_space: the environments' actions by name (``VecEnv.action_space()``).
        rng: the random stream the choices are drawn from.

    Returns:
        What ``VecEnv.act`` takes: action name -> ragged int64 ``[n_actors, 1]``, or float32
        ``[n_actors, n_values]`` for a continuous action.
    """
    out: Dict[ActionName, RaggedArray] = {}
    for name, amask in obs.action_masks.items():
        lengths = amask.actors.size1()
        n_actors = int(lengths.sum())
        space = action_space[name]
        if isinstance(space, CONTINUOUS_SPACES):
            low, high = amask.bounds(space)  # [n_actors, n_values] each
            # float64 arithmetic: high - low of float32 bounds may overflow float32 (near +-3.4e38)
            width = high.astype(np.float64) - low  # [n_actors, n_values]
            values = (low + rng.random(low.shape, dtype=np.float32) * width).astype(np.float32)
            out[name] = ragged_from_arrays(np.clip(values, low, high), lengths, dtype=np.float32)
            continue
        if isinstance(space, SelectEntityActionSpace):
            n_actees = np.repeat(amask.actees.size1(), lengths)  # [n_actors]
            if amask.mask is None:
                choice = np.floor(rng.random(n_actors) * n_actees).astype(np.int64)
            else:
                flat = amask.mask.as_array().reshape(-1)
                starts = np.concatenate([[0], np.cumsum(n_actees)[:-1]]).astype(np.int64)
                choice = np.array(
                    [rng.choice(np.flatnonzero(flat[s : s + k])) for s, k in zip(starts, n_actees)], dtype=np.int64
                )
        else:
            n_choices = len(action_space[name].index_to_label)
            scores = rng.random((n_actors, n_choices))  # [n_actors, n_choices]
            if amask.mask is not None:
                scores[~amask.mask.as_array()] = -1.0
            choice = scores.argmax(axis=1).astype(np.int64)
        out[name] = ragged_from_arrays(choice.reshape(-1, 1), lengths)
    return out
