"""Refusing, at ``store_episode`` / ``store_rollout``, transitions that ``update()`` could not train on.

A transition the actor cannot be re-evaluated on (a state without its ``action_masks``, an entity type
missing, actions that do not match the actors) would make every later ``update()`` fail until the buffer
was cleared; a NaN reward or feature would turn every value target and loss into NaN. :func:`check_steps`
runs on the stacked ``Steps`` before the critic is called, so a refused call leaves the buffer, the frame
and every input statistic as they were. Its checks are vectorised over the rows (numpy on the flat
arrays), and messages name the transition, key and environment row:
``PPO.store_rollout[3]['action']['action']['move'] row 2 has 0 values, but ...``.

What is checked:

* every transition: rewards are finite; float features of ``state`` (and of the ``next_state`` rows that
  bootstrap) are finite; the actor's and the critic's required ``forward`` parameters are among the keys
  ``safe_call`` will offer them;
* entity actors (an ``obs_space: ObsSpace`` and ``action_space`` attribute, as RogueNet has): every entity
  type of the ObsSpace is present with its declared width (and ``__global__`` with one item per row when
  there are global features), no unknown type; masks for every action, row lengths that agree with the
  actors, actors and actees within their row, every actor with an allowed choice; one action value per
  actor, in range and allowed by the mask; with ``next_state_masks`` (a Q-frame's targets read them), the
  same of the ``next_state`` rows that bootstrap, except the actions;
* what a model checks itself: the actor and the critic (once if they are one model) are asked through
  :class:`StoredRowsCheck` when they have a ``check_stored`` method (entmachin's MLPs check that
  ``state['state']`` is ``[N, d_state]`` and, for ``MLPActor`` and ``MLPQNet``, that the stored choices
  lie in ``[0, n_actions)``).

Checked once: when ``update()`` feeds accepted rows to the models again, :func:`trusted_inputs` lets them
skip the value checks of their inputs and the device syncs those take.
"""
from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.env.action import CONTINUOUS_SPACES, GLOBAL_SPACES, ActionSpace, SelectEntityActionSpace
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.frame.rollout import Steps
from entmachin.model.wrappers import unwrap
from entmachin.ragged import trees
from entmachin.ragged.arrays import is_ragged, ragged_dtype
from entmachin.ragged.tensor import RaggedTensor

__all__ = ["StoredRowsCheck", "check_steps", "trusted_inputs"]

_TO_STATE = "store the state the actor acted on (to_state(obs, action_space) holds every entity type and mask)"


class StoredRowsCheck(Protocol):
    """A model that checks stored rows itself, beyond what :func:`check_steps` checks generically.

    ``check_stored(state, action, role, where)`` is called at ``store_episode`` / ``store_rollout`` with the
    stacked rows, before anything changes; it raises ``ValueError`` (or ``TypeError``) for rows that the model
    could not be trained on, and a refused call stores nothing. A model without the method is not asked;
    ``DataParallel`` / ``DistributedDataParallel`` are unwrapped first, and a model that is both actor and
    critic is asked once (as the actor).

    Args:
        state: the ``N`` stacked state rows, the tree ``update()`` will feed (numpy, torch or ragged
            leaves, one row per environment step).
        action: the ``N`` stacked action rows (``{"action": ...}`` as stored).
        role: ``"actor"`` or ``"critic"``, for messages.
        where: names a stored value, ``where(key, path="", row=None)``: ``where("state", "['state']")`` is
            ``"PPO.store_episode[0]['state']['state']"``; with ``row=r``, the transition and environment row
            of stacked row ``r`` (``"PPO.store_rollout[3]['action']['action'] row 2"``).
    """

    def check_stored(self, state: Mapping[str, Any], action: Mapping[str, Any], role: str,
                     where: Callable[..., str]) -> None: ...


class _Rows:
    """Names row ``r`` of the stacked steps (step-major) as ``name[t][key]... row b``; ``rows`` maps the
    ``n_rows`` rows of a subset (the ``next_state`` rows that bootstrap) to the stacked rows."""

    def __init__(self, name: str, n_envs: int, n_rows: int, rows: Optional[np.ndarray] = None) -> None:
        self.name, self.n_envs, self.n_rows, self.rows = name, n_envs, n_rows, rows

    def __call__(self, r: int, key: str, path: str = "") -> str:
        t, b = divmod(int(r if self.rows is None else self.rows[r]), self.n_envs)
        return f"{self.name}[{t}][{key!r}]{path}" + (f" row {b}" if self.n_envs > 1 else "")

    def where(self, key: str, path: str = "", row: Optional[int] = None) -> str:
        """:class:`StoredRowsCheck`'s ``where``: the value as a whole, or row ``row`` of it."""
        return f"{self.name}[0][{key!r}]{path}" if row is None else self(row, key, path)


def _module(model: Any) -> Any:
    """The model a frame was given, looked through wrappers and bound methods (``net.q_values``)."""
    inner = unwrap(model)
    return inner.__self__ if isinstance(inner, types.MethodType) else inner


@contextlib.contextmanager
def trusted_inputs(*models: Any) -> Iterator[None]:
    """Enters each model's trusted entry (``model.trusted_inputs()``, as ``RogueNet`` has; models without one
    are called as usual) for the passes of ``update()`` over rows that :func:`check_steps` accepted: the models
    then skip the value checks of their inputs (and their device syncs). Rows not stored through
    ``check_steps`` (a fresh observation in ``act``) must not be passed inside the block.

    Wrappers are looked through; a model given twice is entered once (a critic view and its network are
    entered each, which nests). The entries are left in reverse order when the block ends or raises.

    Example:
        >>> with trusted_inputs(self.actor, self.critic):
        ...     losses = self._losses(rollout.minibatch(index), ...)
    """
    with contextlib.ExitStack() as stack:
        for inner in {id(inner): inner for inner in map(_module, models)}.values():  # each model once, in order
            enter = getattr(inner, "trusted_inputs", None)
            if enter is not None:
                stack.enter_context(enter())
        yield


def _lengths(value: Any) -> np.ndarray:
    """Items per row of a ragged value, ``[N]``."""
    return value.lengths.cpu().numpy() if isinstance(value, RaggedTensor) else np.asarray(value.size1(), np.int64)


def _flat(value: Any) -> np.ndarray:
    """The items of a ragged value, ``[n_items, ...]``."""
    return value.data.detach().cpu().numpy() if isinstance(value, RaggedTensor) else value.as_array()


def _width(value: Any) -> int:
    """Values per item of a ragged value (-1 when its items are not vectors)."""
    if isinstance(value, RaggedTensor):
        return int(value.data.shape[1]) if value.data.dim() == 2 else -1
    return int(value.size2())


def _first(bad: np.ndarray) -> Optional[int]:
    """The first index where ``bad`` holds, or None."""
    found = np.flatnonzero(bad)
    return int(found[0]) if found.size else None


def _row_of(lengths: np.ndarray) -> np.ndarray:
    """The row of each item, ``[n_items]``, from the items per row ``[N]``."""
    return np.repeat(np.arange(len(lengths)), lengths)


def check_steps(steps: Steps, actor: Any, critic: Any, name: str, *, next_state_masks: bool = False) -> None:
    """Raises if ``update()`` could not train on ``steps``; see the module docstring.

    Args:
        steps: the stacked transitions (``read_episode`` / ``read_rollout``).
        actor, critic: the frame's models; the actor's attributes decide the entity checks.
        name: the call in messages, e.g. ``"PPO.store_rollout"``.
        next_state_masks: also check the entities and action masks of the ``next_state`` rows
            that bootstrap, for a frame whose ``update()`` acts on them (the DQN frames).

    Raises:
        ValueError: a value is missing, does not fit the actor, or is not finite.
        TypeError: a value has the wrong kind (dense where ragged is needed, floats for actions).
    """
    n_envs = steps.reward.shape[1]
    at, boot = _Rows(name, n_envs, steps.n_rows), _Rows(name, n_envs, int(steps.bootstrap.size), steps.bootstrap)
    reward = steps.reward.reshape(-1)  # [N]
    if (r := _first(~np.isfinite(reward))) is not None:
        raise ValueError(f"{at(r, 'reward')} is {reward[r]}; rewards must be finite (a NaN or infinite reward "
                         "makes every value target and loss of the update NaN)")
    _check_parameters(actor, steps, name, "actor", with_action=True)
    _check_parameters(critic, steps, name, "critic", with_action=False)
    obs_space, action_space = _entity_spaces(actor)
    if obs_space is not None:
        _check_entity_rows(steps.state, steps.action, obs_space, action_space, at)
        if next_state_masks and steps.next_state is not None and steps.inputs is not None:
            # (Without inputs next_state lacks the state's structure, which value_targets reports.)
            _check_entity_rows(steps.next_state, None, obs_space, action_space, boot, "next_state")
    for role, model in (("actor", actor), ("critic", critic))[:1 if _module(critic) is _module(actor) else 2]:
        check = getattr(_module(model), "check_stored", None)  # StoredRowsCheck, if the model has it
        if check is not None:
            check(steps.state, steps.action, role, at.where)
    _check_finite_tree(steps.state, at, "state", obs_space)
    if steps.next_state is not None:
        _check_finite_tree(steps.next_state, boot, "next_state", obs_space)


def _entity_spaces(actor: Any) -> Tuple[Optional[ObsSpace], Optional[Mapping[str, ActionSpace]]]:
    """The actor's ``(obs_space, action_space)`` if it is an entity actor, else ``(None, None)``."""
    inner = _module(actor)
    obs_space, action_space = getattr(inner, "obs_space", None), getattr(inner, "action_space", None)
    entity = isinstance(obs_space, ObsSpace) and isinstance(action_space, Mapping)
    return (obs_space, action_space) if entity else (None, None)


def _check_parameters(model: Any, steps: Steps, name: str, role: str, with_action: bool) -> None:
    """The model's required ``forward`` parameters are keys of ``state`` (or ``action``)."""
    inner = unwrap(model)
    fn = inner.forward if isinstance(inner, nn.Module) else inner
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return  # safe_call says why at update()
    offered = set(steps.state) | (set(steps.action) if with_action else set())
    if missing := [p.name for p in params if p.default is p.empty and p.name not in offered
                   and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]:
        where = f"{name}[0]['state'] has keys {sorted(map(str, steps.state))}"
        if with_action:
            where += f" and {name}[0]['action'] has {sorted(map(str, steps.action))}"
        hint = _TO_STATE if _entity_spaces(inner)[0] is not None else "store those keys in every transition's dicts"
        raise ValueError(f"{where}, but the {role} ({type(inner).__name__}.forward) needs {missing}; update() could "
                         f"not call it: {hint}")


def _mapping(tree: Any, key: str, where: str) -> Mapping:
    value = tree.get(key) if isinstance(tree, Mapping) else None
    if value is None:
        raise ValueError(f"{where} lacks {key!r}; {_TO_STATE}")
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}[{key!r}] is a {type(value).__name__}; expected a dict")
    return value


def _ragged(value: Any, where: str) -> Any:
    if not is_ragged(value):
        raise TypeError(f"{where} is a {type(value).__name__}; expected a ragged value (RaggedArray or "
                        "RaggedTensor) with one sequence per row")
    return value


def _check_entity_state(state: Mapping, obs_space: ObsSpace, at: _Rows, key: str = "state") -> np.ndarray:
    """Checks the entity types and widths and ``visible``; returns ``[N]`` real entities per row."""
    entities = _mapping(state, "entities", at.where(key))
    where = at.where(key, "['entities']")
    declared = {etype: entity.features for etype, entity in obs_space.entities.items()}
    if obs_space.global_features:
        declared[GLOBAL_ENTITY] = obs_space.global_features
    for etype, features in declared.items():
        if etype not in entities:
            what = "the global features" if etype == GLOBAL_ENTITY else "an entity type of the actor's ObsSpace"
            raise ValueError(f"{where} lacks {etype!r}, {what} ({list(declared)}); {_TO_STATE}")
        width = _width(_ragged(entities[etype], f"{where}[{etype!r}]"))
        if width != len(features):
            raise ValueError(f"{where}[{etype!r}] has {width} features per entity; the actor's ObsSpace declares "
                             f"{len(features)} ({list(features)})")
    if unknown := [e for e in entities if e not in declared and e != GLOBAL_ENTITY]:
        raise ValueError(f"{where}[{unknown[0]!r}] is not an entity type of the actor's ObsSpace; expected "
                         f"{list(declared)}")
    if obs_space.global_features:
        lengths = _lengths(entities[GLOBAL_ENTITY])  # [N]
        if (r := _first(lengths != 1)) is not None:
            path = f"['entities'][{GLOBAL_ENTITY!r}]"
            raise ValueError(f"{at(r, key, path)} holds {lengths[r]} items; the global features take exactly "
                             "one per row")
    n_entities = np.zeros(at.n_rows, dtype=np.int64)  # [N]
    for etype in obs_space.entities:
        n_entities += _lengths(entities[etype])
    if state.get("visible") is None:
        return n_entities
    where = at.where(key, "['visible']")  # one bool per entity of the type in each row
    for etype, value in _mapping(state, "visible", at.where(key)).items():
        if etype not in obs_space.entities:
            raise ValueError(f"{where}[{etype!r}] names no entity type of the actor's ObsSpace; expected some of "
                             f"{list(obs_space.entities)}")
        if _width(_ragged(value, f"{where}[{etype!r}]")) != 1:
            raise ValueError(f"{where}[{etype!r}] has {_width(value)} values per item; expected 1 (one bool per "
                             "entity)")
        got, expected = _lengths(value), _lengths(entities[etype])  # [N] each
        if (r := _first(got != expected)) is not None:
            path = f"['visible'][{etype!r}]"
            raise ValueError(f"{at(r, key, path)} has {got[r]} items, but ['entities'][{etype!r}] has "
                             f"{expected[r]} in that row; one per entity")
    return n_entities


def _check_entity_rows(state: Mapping, action: Optional[Mapping], obs_space: ObsSpace,
                       action_space: Mapping[str, ActionSpace], at: _Rows, key: str = "state") -> None:
    """The entities and masks of ``state`` and, unless ``action`` is None, one allowed value per actor;
    without ``action``, that every actor has an allowed choice (which an allowed value implies)."""
    n_entities = _check_entity_state(state, obs_space, at, key)  # [N]
    masks = _mapping(state, "action_masks", at.where(key))
    where = at.where(key, "['action_masks']")
    if unknown := [a for a in masks if a not in action_space]:
        raise ValueError(f"{where}[{unknown[0]!r}] is not an action of the actor; its actions are {list(action_space)}")
    # {name: value}, or the stored form {"action": {name: value}} (a value is never a mapping, so an action
    # named "action", as adapted gymnasium and PettingZoo environments have, reads right either way).
    sub, chosen = "", action
    if action is not None and set(action) == {"action"} and isinstance(action["action"], Mapping):
        sub, chosen = "['action']", action["action"]
    for aname, space in action_space.items():
        if aname not in masks:
            raise ValueError(f"{where} lacks {aname!r}, an action of the actor ({list(action_space)}); {_TO_STATE}")
        entry, path = masks[aname], f"['action_masks'][{aname!r}]"
        if not isinstance(entry, Mapping) or "actors" not in entry:
            raise ValueError(f"{where}[{aname!r}] lacks 'actors'; {_TO_STATE}")
        # An actor is a real entity of its row, or the __global__ one after them for a global action.
        glob = isinstance(space, GLOBAL_SPACES)
        actors = _check_indices(entry["actors"], n_entities, glob, at, key, f"{path}['actors']")  # [N]
        if isinstance(space, CONTINUOUS_SPACES):
            bounds = _check_bounds(entry, actors, space, at, key, path)
            if chosen is not None:
                if aname not in chosen:
                    raise ValueError(f"{at.where('action', sub)} lacks {aname!r}; store one value per actor of every "
                                     f"action ({list(action_space)})")
                _check_values(chosen[aname], actors, bounds, space, at, f"{sub}[{aname!r}]")
            continue
        select = isinstance(space, SelectEntityActionSpace)
        actees = None
        if select:
            if "actees" not in entry:
                raise ValueError(f"{where}[{aname!r}] lacks 'actees', which a select-entity action needs; {_TO_STATE}")
            actees = _check_indices(entry["actees"], n_entities, False, at, key, f"{path}['actees']")  # [N]
        mask_key = "actee_mask" if select else "mask"
        mask = entry.get(mask_key)
        if mask is not None:
            expected = actors * actees if select else actors  # [N]
            got = _lengths(_ragged(mask, f"{where}[{aname!r}][{mask_key!r}]"))  # [N]
            width = 1 if select else len(space.index_to_label)
            if _width(mask) != width:
                raise ValueError(f"{where}[{aname!r}][{mask_key!r}] has {_width(mask)} values per item; expected "
                                 f"{width}")
            if (r := _first(got != expected)) is not None:
                raise ValueError(f"{at(r, key, f'{path}[{mask_key!r}]')} has {got[r]} items; expected "
                                 f"{expected[r]} ({'n_actors * n_actees' if select else 'one per actor'})")
        if chosen is None:
            _check_some_allowed(actors, actees, mask, at, path, key)
        elif aname not in chosen:
            raise ValueError(f"{at.where('action', sub)} lacks {aname!r}; store one value per actor of every action "
                             f"({list(action_space)})")
        else:
            _check_choices(chosen[aname], actors, actees, mask, space, at, f"{sub}[{aname!r}]")
    if chosen is not None and (extra := [a for a in chosen if a not in action_space]):
        raise ValueError(f"{at.where('action', sub)}[{extra[0]!r}] is not an action of the actor; its actions are "
                         f"{list(action_space)}")


def _check_indices(value: Any, n_entities: np.ndarray, glob: bool, at: _Rows, key: str, path: str) -> np.ndarray:
    """Ragged entity indices of each row, the row's ``__global__`` entity if ``glob``, else a real entity;
    returns their number per row, ``[N]``."""
    lengths = _lengths(_ragged(value, at.where(key, path)))  # [N]
    index = _flat(value).reshape(-1)  # [n_items]
    if index.size == 0:
        return lengths
    row_of = _row_of(lengths)  # [n_items]
    limit = n_entities[row_of]  # [n_items]
    if (k := _first(index != limit if glob else (index < 0) | (index >= limit))) is not None:
        expected = (f"the {GLOBAL_ENTITY} entity, index {limit[k]} (after the row's entities)" if glob
                    else f"an entity index in [0, {limit[k]})")
        raise ValueError(f"{at(row_of[k], key, path)} holds {index[k]}; expected {expected}")
    return lengths


def _check_some_allowed(actors: np.ndarray, actees: Optional[np.ndarray], mask: Any, at: _Rows, path: str,
                        key: str) -> None:
    """Every actor of each row has a choice its mask allows (an actee, for select-entity actions)."""
    n_actors = int(actors.sum())
    if n_actors == 0 or (actees is None and mask is None):
        return
    row_of = _row_of(actors)  # [n_actors]
    if actees is None:
        allowed = _flat(mask).any(axis=1)  # [n_actors]
    elif mask is None:
        allowed = actees[row_of]  # [n_actors]
    else:
        pair_actor = _row_of(actees[row_of])  # [n_pairs]
        allowed = np.bincount(pair_actor, weights=_flat(mask)[:, 0].astype(np.int64), minlength=n_actors)
    if (k := _first(allowed == 0)) is not None:
        actor = k - int(np.cumsum(actors)[row_of[k]] - actors[row_of[k]])
        raise ValueError(f"{at(row_of[k], key, path)} leaves actor {actor} without an allowed choice; every "
                         "actor needs one")


def _check_choices(value: Any, actors: np.ndarray, actees: Optional[np.ndarray], mask: Any, space: ActionSpace,
                   at: _Rows, path: str) -> None:
    """One integer value per actor of each row, in range and allowed by the mask."""
    where = at.where("action", path)
    got = _lengths(_ragged(value, where))  # [N]
    if (r := _first(got != actors)) is not None:
        raise ValueError(f"{at(r, 'action', path)} has {got[r]} values, but the state's action_masks has {actors[r]} "
                         "actors in that row; one value per actor")
    flat = _flat(value)  # [n_actors, 1]
    if flat.ndim != 2 or flat.shape[1] != 1 or not np.issubdtype(flat.dtype, np.integer):
        raise TypeError(f"{where} holds {flat.dtype} items of shape {flat.shape[1:]}; expected int64 [n_actors, 1]")
    choice = flat[:, 0]  # [n_actors]
    if choice.size == 0:
        return
    row_of = _row_of(actors)  # [n_actors]
    # The choices of each actor: the actees of its row, or the action's labels.
    limit = actees[row_of] if actees is not None else np.full(choice.shape, len(space.index_to_label))  # [n_actors]
    if (k := _first((choice < 0) | (choice >= limit))) is not None:
        raise ValueError(f"{at(row_of[k], 'action', path)} holds {choice[k]}; expected a value in [0, {limit[k]})")
    if mask is None:
        return
    allowed = _flat(mask)  # [n_actors, n_choices] or, one pair per actee of the actor's row, [n_pairs, 1]
    ok = allowed[np.arange(choice.size), choice] if actees is None else allowed[np.cumsum(limit) - limit + choice, 0]
    if (k := _first(~ok)) is not None:
        raise ValueError(f"{at(row_of[k], 'action', path)} holds {choice[k]}, which the state's mask forbids for "
                         "that actor")


def _actor_at(actors: np.ndarray, k: int) -> Tuple[int, int]:
    """``(row, actor within the row)`` of item ``k`` of a flat per-actor array."""
    ends = np.cumsum(actors)
    row = int(np.searchsorted(ends, k, side="right"))
    return row, k - int(ends[row] - actors[row])


def _check_bounds(entry: Mapping, actors: np.ndarray, space: Any, at: _Rows, key: str,
                  path: str) -> Tuple[np.ndarray, np.ndarray]:
    """A continuous action's ``low`` / ``high`` (both or neither): one row per actor, the space's
    width, finite, ordered, within the space's bounds; returns each actor's ``(low, high)``
    (``[n_actors, n_values]`` each, the space's where the entry has none)."""
    n = int(actors.sum())
    if (entry.get("low") is None) != (entry.get("high") is None):
        raise ValueError(f"{at.where(key, path)} has only one of 'low' and 'high'; give both or neither")
    if entry.get("low") is None:
        return np.broadcast_to(space.low, (n, len(space))), np.broadcast_to(space.high, (n, len(space)))
    out = []
    for side in ("low", "high"):
        value = _ragged(entry[side], at.where(key, f"{path}[{side!r}]"))
        if _width(value) != len(space):
            raise ValueError(f"{at.where(key, f'{path}[{side!r}]')} has {_width(value)} values per item; expected "
                             f"{len(space)} ({space.names})")
        got = _lengths(value)
        if (r := _first(got != actors)) is not None:
            raise ValueError(f"{at(r, key, f'{path}[{side!r}]')} has {got[r]} items; expected one per actor "
                             f"({actors[r]})")
        out.append(_flat(value))
    low, high = out
    bad = ~np.isfinite(low) | ~np.isfinite(high) | (low > high) | (low < space.low) | (high > space.high)
    if bad.any():
        k, j = (int(i[0]) for i in np.nonzero(bad))
        row, actor = _actor_at(actors, k)
        raise ValueError(f"{at(row, key, path)} gives actor {actor} bounds [{low[k, j]}, {high[k, j]}] for value "
                         f"'{space.names[j]}' (dimension {j}); expected finite bounds, low <= high, within the "
                         f"space's [{space.low[j]}, {space.high[j]}]")
    return low, high


def _check_values(value: Any, actors: np.ndarray, bounds: Tuple[np.ndarray, np.ndarray], space: Any, at: _Rows,
                  path: str) -> None:
    """Float values, ``[n_actors, n_values]`` per row, finite and within each actor's bounds."""
    where = at.where("action", path)
    got = _lengths(_ragged(value, where))  # [N]
    if (r := _first(got != actors)) is not None:
        raise ValueError(f"{at(r, 'action', path)} has {got[r]} values, but the state's action_masks has {actors[r]} "
                         "actors in that row; one value per actor")
    flat = _flat(value)  # [n_actors, n_values]
    if flat.ndim != 2 or flat.shape[1] != len(space) or not np.issubdtype(flat.dtype, np.floating):
        raise TypeError(f"{where} holds {flat.dtype} items of shape {flat.shape[1:]}; expected float32 "
                        f"[n_actors, {len(space)}] (a continuous action's values)")
    low, high = bounds
    bad = ~np.isfinite(flat) | (flat < low) | (flat > high)
    if bad.any():
        k, j = (int(i[0]) for i in np.nonzero(bad))
        row, actor = _actor_at(actors, k)
        raise ValueError(f"{at(row, 'action', path)} holds {flat[k, j]} for actor {actor}, value '{space.names[j]}' "
                         f"(dimension {j}); expected a finite value in [{low[k, j]}, {high[k, j]}]")


def _check_finite_tree(tree: Mapping, at: _Rows, key: str, obs_space: Optional[ObsSpace]) -> None:
    """Every float leaf of ``tree`` is finite; a bad one is named by transition, row and feature."""
    for path, value in trees.leaves(tree):
        here = trees.format_path("", path)
        if is_ragged(value):
            floating = value.data.is_floating_point() if isinstance(value, RaggedTensor) else \
                ragged_dtype(value) == np.float32
            array = _flat(value) if floating else None  # [n_items, width]
            if array is None or np.isfinite(array).all():
                continue
            item, column = (int(i) for i in np.argwhere(~np.isfinite(array))[0])
            ends = np.cumsum(_lengths(value))  # [N]
            r = int(np.searchsorted(ends, item, side="right"))
            entity = item - int(ends[r] - _lengths(value)[r])
            names: Sequence[str] = []  # the features of an entity type (or of __global__)
            if obs_space is not None and path[:-1] == ("entities",):
                names = obs_space.global_features if path[-1] == GLOBAL_ENTITY else \
                    getattr(obs_space.entities.get(path[-1]), "features", [])
            feature = f"feature {names[column]!r}" if column < len(names) else f"column {column}"
            raise ValueError(f"{at(r, key, here)} item {entity} has {array[item, column]} in {feature}; features "
                             "must be finite (NaN or infinity would poison the critic's targets and the running "
                             "input statistics)")
        else:
            # A tensor is checked where it lives, and copied to the host only to name a bad value.
            if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
                array = value.detach().cpu().numpy()
            elif isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating) \
                    and not np.isfinite(value).all():
                array = value
            else:
                continue
            flat = array.reshape(array.shape[0], -1)  # [N, k]
            r, column = (int(i) for i in np.argwhere(~np.isfinite(flat))[0])
            raise ValueError(f"{at(r, key, here)} has {flat[r, column]} at column {column}; states must be finite "
                             "(NaN or infinity would poison the critic's targets and the running input statistics)")

