"""Refusing, at ``store_episode`` / ``store_rollout``, transitions that ``update()`` could not train on.

A transition the buffer accepts but the actor cannot be re-evaluated on (a state without its
``action_masks``, an entity type missing, actions that do not match the actors) used to make
every later ``update()`` fail until the buffer was cleared; a NaN reward or feature turned every
value target and loss into NaN. :func:`check_steps` runs on the stacked ``Steps`` before the
critic is called, so a refused call leaves the buffer, the frame and every input statistic as
they were. Its checks are vectorised over the rollout's rows (numpy on the flat arrays), and
messages name the transition, the key and the environment row:
``PPO.store_rollout[3]['action']['action']['move'] row 2 has 0 values, but ...``.

What is checked:

* every transition: rewards are finite; float features of ``state`` (and of the ``next_state``
  rows that bootstrap) are finite; the actor's and the critic's required ``forward``
  parameters are among the keys ``safe_call`` will offer them;
* entity actors (an ``obs_space: ObsSpace`` and ``action_space`` attribute, as RogueNet has):
  every entity type of the ObsSpace is present with its declared width (and ``__global__``
  with one item per row when there are global features), no unknown type; masks for every
  action, row lengths that agree with the actors, actors and actees within their row, every
  actor with an allowed choice; one action value per actor, in range and allowed by the mask;
  with ``next_state_masks`` (a Q-frame's targets read them), the same of the ``next_state``
  rows that bootstrap, except the actions;
* what a model checks itself: the actor and the critic (once if they are one model) are
  asked through :class:`StoredRowsCheck` when they have a ``check_stored`` method (entmachin's
  MLPs check that ``state['state']`` is ``[N, d_state]`` and, for ``MLPActor`` and ``MLPQNet``,
  that the stored choices lie in ``[0, n_actions)``).

Checked once: rows that :func:`check_steps` accepted need no second check when ``update()``
feeds them to the models again. :func:`trusted_inputs` enters the models' trusted entries
(``RogueNet.trusted_inputs``) for those passes, so that they skip the value checks of their
inputs and the device syncs those take.
"""
from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Mapping
from typing import Any, Callable, Iterator, List, Optional, Protocol, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.env.action import ActionSpace, GlobalCategoricalActionSpace, SelectEntityActionSpace
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.frame.rollout import Steps
from entmachin.model.wrappers import unwrap
from entmachin.ragged.arrays import is_ragged_array, ragged_dtype
from entmachin.ragged.tensor import RaggedTensor

__all__ = ["StoredRowsCheck", "check_steps", "trusted_inputs"]

_TO_STATE = "store the state the actor acted on (to_state(obs, action_space) holds every entity type and mask)"


class StoredRowsCheck(Protocol):
    """A model that checks stored rows itself, beyond what :func:`check_steps` checks generically.

    ``check_stored(state, action, role, where)`` is called at ``store_episode`` /
    ``store_rollout`` with the stacked rows, before anything changes; it raises ``ValueError``
    (or ``TypeError``) for rows that the model could not be trained on, and a refused call stores
    nothing. A model without the method is not asked. The frame unwraps ``DataParallel`` /
    ``DistributedDataParallel`` first and asks a model that is both actor and critic once (as
    the actor).

    Args:
        state: the ``N`` stacked state rows, the tree ``update()`` will feed (numpy, torch or
            ragged leaves, one row per environment step).
        action: the ``N`` stacked action rows (``{"action": ...}`` as stored).
        role: ``"actor"`` or ``"critic"``, for messages.
        where: names a stored value: ``where(key, path="", row=None)`` is
            ``"PPO.store_episode[0]['state']['state']"`` for ``where("state", "['state']")``; with
            ``row=r`` it names the transition and environment row of stacked row ``r``
            (``"PPO.store_rollout[3]['action']['action'] row 2"``).
    """

    def check_stored(self, state: Mapping[str, Any], action: Mapping[str, Any], role: str,
                     where: Callable[..., str]) -> None: ...


class _Rows:
    """Names row ``r`` of the stacked steps (step-major) as ``name[t][key]... row b``."""

    def __init__(self, name: str, n_envs: int, n_rows: int, rows: Optional[np.ndarray] = None) -> None:
        self.name, self.n_envs, self.n_rows, self.rows = name, n_envs, n_rows, rows

    def __call__(self, r: int, key: str, path: str = "") -> str:
        r = int(r if self.rows is None else self.rows[r])
        t, b = divmod(r, self.n_envs)
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
    """Enters each model's trusted entry (``model.trusted_inputs()``, as ``RogueNet`` has) for
    the block; models without one are called as usual.

    For the passes of ``update()`` over rows that :func:`check_steps` accepted when they were
    stored: the models then skip the value checks of their inputs (and their device syncs).
    Rows that were not stored through ``check_steps`` (a fresh observation in ``act``) must
    not be passed inside the block (see ``RogueNet.trusted_inputs``).

    Wrappers (``DataParallel``, ``DistributedDataParallel``) are looked through; a model given
    twice is entered once (a critic view and its network are entered each, which nests). The
    entries are left in reverse order when the block ends or raises.

    Example:
        >>> with trusted_inputs(self.actor, self.critic):
        ...     losses = self._losses(rollout.minibatch(index), ...)
    """
    with contextlib.ExitStack() as stack:
        entered = set()
        for model in models:
            inner = _module(model)
            enter = getattr(inner, "trusted_inputs", None)
            if enter is None or id(inner) in entered:
                continue
            entered.add(id(inner))
            stack.enter_context(enter())
        yield


def _lengths(value: Any) -> np.ndarray:
    if isinstance(value, RaggedTensor):
        return value.lengths.cpu().numpy()  # [N]
    return np.asarray(value.size1(), dtype=np.int64)  # [N]


def _flat(value: Any) -> np.ndarray:
    if isinstance(value, RaggedTensor):
        return value.data.detach().cpu().numpy()  # [n_items, ...]
    return value.as_array()  # [n_items, width]


def _width(value: Any) -> int:
    """Values per item of a ragged value (-1 when its items are not vectors)."""
    if isinstance(value, RaggedTensor):
        return int(value.data.shape[1]) if value.data.dim() == 2 else -1
    return int(value.size2())


def _is_float_ragged(value: Any) -> bool:
    return value.data.is_floating_point() if isinstance(value, RaggedTensor) else ragged_dtype(value) == np.float32


def _is_ragged(value: Any) -> bool:
    return isinstance(value, RaggedTensor) or is_ragged_array(value)


def _first(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


def check_steps(steps: Steps, actor: Any, critic: Any, name: str, *, next_state_masks: bool = False) -> None:
    """Raises if ``update()`` could not train on ``steps``; see the module docstring.

    Args:
        steps: the stacked transitions (``storing.read_episode`` / ``read_rollout``).
        actor: the frame's actor; its attributes decide the entity checks, and its
            ``check_stored`` (:class:`StoredRowsCheck`) is called.
        critic: the frame's critic (its required parameters are checked, its ``check_stored``
            called).
        name: the call in messages, e.g. ``"PPO.store_rollout"``.
        next_state_masks: also check the entities and action masks of the ``next_state`` rows
            that bootstrap, for a frame whose ``update()`` acts on them (the DQN frames).

    Raises:
        ValueError: a value is missing, does not fit the actor, or is not finite.
        TypeError: a value has the wrong kind (dense where ragged is needed, floats for actions).
    """
    n_envs = steps.reward.shape[1]
    at = _Rows(name, n_envs, steps.n_rows)
    reward = steps.reward.reshape(-1)  # [N]
    finite = np.isfinite(reward)
    if not finite.all():
        r = _first(~finite)
        raise ValueError(f"{at(r, 'reward')} is {reward[r]}; rewards must be finite (a NaN or infinite reward "
                         "makes every value target and loss of the update NaN)")
    _check_parameters(actor, steps, name, "actor", with_action=True)
    _check_parameters(critic, steps, name, "critic", with_action=False)
    spaces = _entity_spaces(actor)
    if spaces is not None:
        n_entities = _check_entity_state(steps.state, spaces[0], at, name)  # [N]
        _check_masks_and_actions(steps.state, steps.action, spaces[1], n_entities, at, name)
        if next_state_masks and steps.next_state is not None and steps.inputs is not None:
            # (Without inputs next_state lacks the state's structure, which value_targets reports.)
            boot = _Rows(name, n_envs, int(steps.bootstrap.size), steps.bootstrap)
            n_next = _check_entity_state(steps.next_state, spaces[0], boot, name, "next_state")  # [k]
            _check_masks_and_actions(steps.next_state, None, spaces[1], n_next, boot, name, "next_state")
    _check_model(actor, "actor", steps, at)
    if _module(critic) is not _module(actor):
        _check_model(critic, "critic", steps, at)
    _check_finite_tree(steps.state, at, "state", "", spaces[0] if spaces else None)
    if steps.next_state is not None:
        _check_finite_tree(steps.next_state, _Rows(name, n_envs, steps.n_rows, steps.bootstrap), "next_state", "",
                           spaces[0] if spaces else None)


def _check_model(model: Any, role: str, steps: Steps, at: _Rows) -> None:
    """The model's own checks (:class:`StoredRowsCheck`), if it has any."""
    check = getattr(_module(model), "check_stored", None)
    if check is not None:
        check(steps.state, steps.action, role, at.where)


def _entity_spaces(actor: Any) -> Optional[Tuple[ObsSpace, Mapping[str, ActionSpace]]]:
    inner = _module(actor)
    obs_space, action_space = getattr(inner, "obs_space", None), getattr(inner, "action_space", None)
    if isinstance(obs_space, ObsSpace) and isinstance(action_space, Mapping):
        return obs_space, action_space
    return None


def _check_parameters(model: Any, steps: Steps, name: str, role: str, with_action: bool) -> None:
    """The model's required ``forward`` parameters are keys of ``state`` (or ``action``)."""
    inner = unwrap(model)
    fn = inner.forward if isinstance(inner, nn.Module) else inner
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return  # safe_call says why at update()
    required = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    offered = set(steps.state) | (set(steps.action) if with_action else set())
    missing = [p for p in required if p not in offered]
    if missing:
        where = f"{name}[0]['state'] has keys {sorted(map(str, steps.state))}"
        if with_action:
            where += f" and {name}[0]['action'] has {sorted(map(str, steps.action))}"
        hint = _TO_STATE if _entity_spaces(inner) is not None else "store those keys in every transition's dicts"
        raise ValueError(
            f"{where}, but the {role} ({type(inner).__name__}.forward) needs {missing}; update() could not call "
            f"it: {hint}"
        )


def _mapping(tree: Any, key: str, where: str) -> Mapping:
    value = tree.get(key) if isinstance(tree, Mapping) else None
    if value is None:
        raise ValueError(f"{where} lacks {key!r}; {_TO_STATE}")
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}[{key!r}] is a {type(value).__name__}; expected a dict")
    return value


def _ragged(value: Any, where: str) -> Any:
    if not _is_ragged(value):
        raise TypeError(f"{where} is a {type(value).__name__}; expected a ragged value (RaggedArray or "
                        "RaggedTensor) with one sequence per row")
    return value


def _check_entity_state(state: Mapping, obs_space: ObsSpace, at: _Rows, name: str, key: str = "state") -> np.ndarray:
    """Checks the entity types and widths and ``visible``; returns ``[N]`` real entities per row."""
    where = f"{name}[0][{key!r}]"
    entities = _mapping(state, "entities", where)
    where += "['entities']"
    declared = dict((etype, entity.features) for etype, entity in obs_space.entities.items())
    if obs_space.global_features:
        declared[GLOBAL_ENTITY] = obs_space.global_features
    for etype, features in declared.items():
        if etype not in entities:
            what = "the global features" if etype == GLOBAL_ENTITY else "an entity type of the actor's ObsSpace"
            raise ValueError(f"{where} lacks {etype!r}, {what} ({list(declared)}); {_TO_STATE}")
        value = _ragged(entities[etype], f"{where}[{etype!r}]")
        width = _width(value)
        if width != len(features):
            raise ValueError(f"{where}[{etype!r}] has {width} features per entity; the actor's ObsSpace declares "
                             f"{len(features)} ({list(features)})")
    unknown = [e for e in entities if e not in declared and e != GLOBAL_ENTITY]
    if unknown:
        raise ValueError(f"{where}[{unknown[0]!r}] is not an entity type of the actor's ObsSpace; expected "
                         f"{list(declared)}")
    if obs_space.global_features:
        lengths = _lengths(entities[GLOBAL_ENTITY])  # [N]
        if (lengths != 1).any():
            r = _first(lengths != 1)
            path = f"['entities'][{GLOBAL_ENTITY!r}]"
            raise ValueError(f"{at(r, key, path)} holds {lengths[r]} items; the global features take exactly "
                             "one per row")
    n_entities = np.zeros(at.n_rows, dtype=np.int64)  # [N]
    for etype in obs_space.entities:
        n_entities += _lengths(entities[etype])
    visible = state.get("visible")
    if visible is not None:
        _check_visible(_mapping(state, "visible", f"{name}[0][{key!r}]"), entities, obs_space, at, name, key)
    return n_entities


def _check_visible(visible: Mapping, entities: Mapping, obs_space: ObsSpace, at: _Rows, name: str, key: str) -> None:
    """One bool per entity of the type in each row."""
    where = f"{name}[0][{key!r}]['visible']"
    for etype, value in visible.items():
        if etype not in obs_space.entities:
            raise ValueError(f"{where}[{etype!r}] names no entity type of the actor's ObsSpace; expected some of "
                             f"{list(obs_space.entities)}")
        _ragged(value, f"{where}[{etype!r}]")
        if _width(value) != 1:
            raise ValueError(f"{where}[{etype!r}] has {_width(value)} values per item; expected 1 (one bool per entity)")
        got, expected = _lengths(value), _lengths(entities[etype])  # [N] each
        if not np.array_equal(got, expected):
            r = _first(got != expected)
            path = f"['visible'][{etype!r}]"
            raise ValueError(f"{at(r, key, path)} has {got[r]} items, but ['entities'][{etype!r}] has "
                             f"{expected[r]} in that row; one per entity")


def _check_masks_and_actions(state: Mapping, action: Optional[Mapping], action_space: Mapping[str, ActionSpace],
                             n_entities: np.ndarray, at: _Rows, name: str, key: str = "state") -> None:
    """The masks of ``state`` and, unless ``action`` is None, one allowed value per actor; without
    ``action``, that every actor has an allowed choice (which an allowed value implies)."""
    masks = _mapping(state, "action_masks", f"{name}[0][{key!r}]")
    where = f"{name}[0][{key!r}]['action_masks']"
    unknown = [a for a in masks if a not in action_space]
    if unknown:
        raise ValueError(f"{where}[{unknown[0]!r}] is not an action of the actor; its actions are {list(action_space)}")
    sub, chosen = "", action  # {name: value}, or the stored form {"action": {name: value}}
    if action is not None and set(action) == {"action"} and "action" not in action_space \
            and isinstance(action["action"], Mapping):
        sub, chosen = "['action']", action["action"]
    for aname, space in action_space.items():
        if aname not in masks:
            raise ValueError(f"{where} lacks {aname!r}, an action of the actor ({list(action_space)}); {_TO_STATE}")
        entry = masks[aname]
        path = f"['action_masks'][{aname!r}]"
        if not isinstance(entry, Mapping) or "actors" not in entry:
            raise ValueError(f"{where}[{aname!r}] lacks 'actors'; {_TO_STATE}")
        actors = _lengths(_ragged(entry["actors"], f"{where}[{aname!r}]['actors']"))  # [N]
        # An actor is a real entity of its row, or the __global__ one after them for a global action.
        glob = isinstance(space, GlobalCategoricalActionSpace)
        _check_indices(entry["actors"], actors, n_entities, glob, at, f"{path}['actors']", key)
        select = isinstance(space, SelectEntityActionSpace)
        actees = None
        if select:
            if "actees" not in entry:
                raise ValueError(f"{where}[{aname!r}] lacks 'actees', which a select-entity action needs; {_TO_STATE}")
            actees = _lengths(_ragged(entry["actees"], f"{where}[{aname!r}]['actees']"))  # [N]
            _check_indices(entry["actees"], actees, n_entities, False, at, f"{path}['actees']", key)
        mask_key = "actee_mask" if select else "mask"
        mask = entry.get(mask_key)
        if mask is not None:
            expected = actors * actees if select else actors  # [N]
            got = _lengths(_ragged(mask, f"{where}[{aname!r}][{mask_key!r}]"))  # [N]
            width = 1 if select else len(space.index_to_label)
            if _width(mask) != width:
                raise ValueError(f"{where}[{aname!r}][{mask_key!r}] has {_width(mask)} values per item; expected "
                                 f"{width}")
            if not np.array_equal(got, expected):
                r = _first(got != expected)
                raise ValueError(f"{at(r, key, f'{path}[{mask_key!r}]')} has {got[r]} items; expected "
                                 f"{expected[r]} ({'n_actors * n_actees' if select else 'one per actor'})")
        if chosen is None:
            _check_some_allowed(actors, actees, mask, at, path, key)
            continue
        value_path = f"{sub}[{aname!r}]"
        if aname not in chosen:
            raise ValueError(f"{name}[0]['action']{sub} lacks {aname!r}; store one value per actor of every action "
                             f"({list(action_space)})")
        _check_choices(chosen[aname], actors, actees, mask, space, at, value_path, f"{name}[0]['action']{value_path}")
    extra = [a for a in chosen if a not in action_space] if chosen is not None else []
    if extra:
        raise ValueError(f"{name}[0]['action']{sub}[{extra[0]!r}] is not an action of the actor; its actions are "
                         f"{list(action_space)}")


def _check_indices(value: Any, lengths: np.ndarray, n_entities: np.ndarray, glob: bool, at: _Rows, path: str,
                   key: str = "state") -> None:
    """Entity indices of each row: the row's ``__global__`` entity if ``glob``, else a real entity."""
    index = _flat(value).reshape(-1)  # [n_items]
    if index.size == 0:
        return
    row_of = np.repeat(np.arange(len(lengths)), lengths)  # [n_items]
    limit = n_entities[row_of]  # [n_items]
    bad = index != limit if glob else (index < 0) | (index >= limit)
    if bad.any():
        k = _first(bad)
        expected = (f"the {GLOBAL_ENTITY} entity, index {limit[k]} (after the row's entities)" if glob
                    else f"an entity index in [0, {limit[k]})")
        raise ValueError(f"{at(row_of[k], key, path)} holds {index[k]}; expected {expected}")


def _check_some_allowed(actors: np.ndarray, actees: Optional[np.ndarray], mask: Any, at: _Rows, path: str,
                        key: str) -> None:
    """Every actor of each row has a choice its mask allows (an actee, for select-entity actions)."""
    n_actors = int(actors.sum())
    if n_actors == 0:
        return
    row_of = np.repeat(np.arange(len(actors)), actors)  # [n_actors]
    if actees is not None:
        choices = actees[row_of]  # [n_actors]
        if mask is None:
            allowed = choices  # [n_actors]
        else:
            pair_actor = np.repeat(np.arange(n_actors), choices)  # [n_pairs]
            allowed = np.bincount(pair_actor, weights=_flat(mask)[:, 0].astype(np.int64), minlength=n_actors)
    elif mask is None:
        return
    else:
        allowed = _flat(mask).any(axis=1)  # [n_actors]
    none = allowed == 0  # [n_actors]
    if none.any():
        k = _first(none)
        actor = k - int(np.cumsum(actors)[row_of[k]] - actors[row_of[k]])
        raise ValueError(f"{at(row_of[k], key, path)} leaves actor {actor} without an allowed choice; every "
                         "actor needs one")


def _check_choices(value: Any, actors: np.ndarray, actees: Optional[np.ndarray], mask: Any, space: ActionSpace,
                   at: _Rows, path: str, where: str) -> None:
    """One integer value per actor of each row, in range and allowed by the mask."""
    _ragged(value, where)
    got = _lengths(value)  # [N]
    if not np.array_equal(got, actors):
        r = _first(got != actors)
        raise ValueError(f"{at(r, 'action', path)} has {got[r]} values, but the state's action_masks has {actors[r]} "
                         "actors in that row; one value per actor")
    flat = _flat(value)  # [n_actors, 1]
    if flat.ndim != 2 or flat.shape[1] != 1 or not np.issubdtype(flat.dtype, np.integer):
        raise TypeError(f"{where} holds {flat.dtype} items of shape {flat.shape[1:]}; expected int64 [n_actors, 1]")
    choice = flat[:, 0]  # [n_actors]
    if choice.size == 0:
        return
    row_of = np.repeat(np.arange(len(actors)), actors)  # [n_actors]
    if actees is not None:
        limit = actees[row_of]  # [n_actors]: the actees of each actor's row
    else:
        limit = np.full(choice.shape, len(space.index_to_label))  # [n_actors]
    bad = (choice < 0) | (choice >= limit)
    if bad.any():
        k = _first(bad)
        raise ValueError(f"{at(row_of[k], 'action', path)} holds {choice[k]}; expected a value in [0, {limit[k]})")
    if mask is None:
        return
    allowed = _flat(mask)  # [n_actors, n_choices] or [n_pairs, 1]
    if actees is None:
        ok = allowed[np.arange(choice.size), choice]  # [n_actors]
    else:
        pairs = limit  # each actor has one pair per actee of its row
        start = np.cumsum(pairs) - pairs  # [n_actors]
        ok = allowed[start + choice, 0]  # [n_actors]
    if not ok.all():
        k = _first(~ok)
        raise ValueError(f"{at(row_of[k], 'action', path)} holds {choice[k]}, which the state's mask forbids for "
                         "that actor")


def _check_finite_tree(tree: Mapping, at: _Rows, key: str, path: str, obs_space: Optional[ObsSpace]) -> None:
    """Every float leaf of ``tree`` is finite; a bad one is named by transition, row and feature."""
    for k, value in tree.items():
        here = f"{path}[{k!r}]"
        if isinstance(value, Mapping):
            _check_finite_tree(value, at, key, here, obs_space)
            continue
        if isinstance(value, torch.Tensor):
            if not value.is_floating_point() or bool(torch.isfinite(value).all()):
                continue
            array = value.detach().cpu().numpy()
        elif isinstance(value, np.ndarray):
            if not np.issubdtype(value.dtype, np.floating) or np.isfinite(value).all():
                continue
            array = value
        elif _is_ragged(value):
            if not _is_float_ragged(value):
                continue
            array = _flat(value)  # [n_items, width]
            if np.isfinite(array).all():
                continue
            item, column = (int(i) for i in np.argwhere(~np.isfinite(array))[0])
            ends = np.cumsum(_lengths(value))  # [N]
            r = int(np.searchsorted(ends, item, side="right"))
            entity = item - int(ends[r] - _lengths(value)[r])
            names = _feature_names(obs_space, path, k)
            feature = f"feature {names[column]!r}" if names is not None and column < len(names) else f"column {column}"
            raise ValueError(f"{at(r, key, here)} item {entity} has {array[item, column]} in {feature}; features "
                             "must be finite (NaN or infinity would poison the critic's targets and the running "
                             "input statistics)")
        else:
            continue
        flat = array.reshape(array.shape[0], -1)  # [N, k]
        bad = ~np.isfinite(flat)
        r, column = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{at(r, key, here)} has {flat[r, column]} at column {column}; states must be finite (NaN "
                         "or infinity would poison the critic's targets and the running input statistics)")


def _feature_names(obs_space: Optional[ObsSpace], path: str, key: Any) -> Optional[List[str]]:
    if obs_space is None or path != "['entities']":
        return None
    if key == GLOBAL_ENTITY:
        return list(obs_space.global_features)
    entity = obs_space.entities.get(key)
    return list(entity.features) if entity is not None else None
