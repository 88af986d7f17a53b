"""The rollout record: how stored transitions become one, and what an on-policy ``update()`` reads.

``read_episode`` (one environment's ``T`` one-row transitions) and ``read_rollout`` (``T`` transitions of
``B`` rows each) check and stack the caller's transitions into a :class:`Steps` record without touching
them; rows are ordered step-major (row ``t * B + b``). ``value_targets`` then evaluates the critic once on
every row's state plus the ``next_state`` of the rows that bootstrap (truncated rows, and the last step's
rows unless terminal), and runs GAE by the terminal/truncated rules of ``docs/architecture.md``.
``to_rollout`` packs the result as one :class:`Rollout`, which ``store_episode`` / ``store_rollout``
append to the frame's buffer as one transition. A transition's optional ``stored`` flags (``[B]`` bools)
say which rows are training data: every row takes part in GAE (a row is one environment's, or seat's,
sequence of steps, and its episodes' values need all of them), and only the stored rows go into the
``Rollout`` and so into the losses. Self-play stores the rows its current parameters acted and not
those of frozen snapshots playing the same games. ``update()`` reads the buffer back as one ``Rollout`` of
every stored row and takes minibatches of it with :meth:`Rollout.minibatch` (:func:`minibatch_schedule`).
Fields are read by name everywhere; the buffer keys stay Machin-like (``value`` for the return target,
``gae`` for the advantage), so a user sampling the buffer directly sees the same columns as before.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch

from entmachin.buffer import RolloutBuffer, TransitionBase
from entmachin.frame.gae import gae
from entmachin.ragged import arrdict, trees
from entmachin.ragged.tensor import tree_to_torch

__all__ = ["Rollout", "BUFFER_KEYS", "MAJOR_ATTRS", "minibatch_schedule", "Steps", "read_episode", "read_rollout",
           "tree_rows", "value_targets", "to_rollout"]

# Rollout field -> the buffer's attribute name.
BUFFER_KEYS: Dict[str, str] = {
    "state": "state", "action": "action", "reward": "reward", "terminal": "terminal", "truncated": "truncated",
    "value_target": "value", "advantage": "gae",
}
MAJOR_ATTRS = ("state", "action")  # the buffer's dicts of values; the other fields are columns


class Rollout(NamedTuple):
    """``N`` stored rows (step-major from a rollout): ``state`` and ``action`` trees, the rest ``[N, 1]`` columns."""

    state: Any  # a canonical entity state or Machin's {"state": tensor}
    action: Any  # as the actor's `action` keywords take them
    reward: torch.Tensor  # float32
    terminal: torch.Tensor  # bool
    truncated: torch.Tensor  # bool
    value_target: torch.Tensor  # float32, the return the critic learns (buffer key "value")
    advantage: torch.Tensor  # float32, GAE's advantage (buffer key "gae")

    @property
    def n_rows(self) -> int:
        return int(self.advantage.shape[0])

    @property
    def old_value(self) -> torch.Tensor:
        """The critic's values when the rows were stored, ``[N, 1]`` (target minus advantage)."""
        return self.value_target - self.advantage

    def minibatch(self, index: torch.Tensor) -> "Rollout":
        """The rows ``index`` (int64 ``[b]``) of the fields ``update()`` reads: ``state``, ``action``, ``value_target``
        and ``advantage`` (and so ``old_value``); ``reward``, ``terminal`` and ``truncated`` are None."""
        return Rollout(_take(self.state, index), _take(self.action, index), None, None, None,
                       _take(self.value_target, index), _take(self.advantage, index))

    def buffer_data(self) -> Dict[str, Any]:
        """The fields under the buffer's attribute names (``Buffer.append_trusted``'s input)."""
        return {BUFFER_KEYS[f]: value for f, value in zip(self._fields, self)}

    @classmethod
    def read(cls, buffer: Any) -> "Rollout":
        """Every row of an on-policy ``buffer`` as one record: the rows a ``RolloutBuffer`` holds by reference,
        else ``sample_batch(..., "all")``'s copy."""
        held = buffer.held() if isinstance(buffer, RolloutBuffer) else None
        if held is not None:
            return cls(*(arrdict(held[BUFFER_KEYS[f]]) if f in MAJOR_ATTRS else held[BUFFER_KEYS[f]]
                         for f in cls._fields))
        _, values = buffer.sample_batch(buffer.size(), sample_method="all",
                                        sample_attrs=[BUFFER_KEYS[f] for f in cls._fields])
        return cls(*values)


def minibatch_schedule(n_rows: int, batch_size: int, n_minibatches: int, rng: np.random.Generator) -> List[np.ndarray]:
    """``n_minibatches`` int64 index arrays walking shuffled epochs over ``n_rows`` rows.

    Each epoch is a fresh permutation (no row repeats within it) cut into ``ceil(n_rows / batch_size)``
    near-equal minibatches, so none is much smaller than the others; minibatch ``i`` of an update serves
    both the policy step (while ``i < actor_update_times``) and the value step (while ``i <
    critic_update_times``).
    """
    per_epoch = max(1, math.ceil(n_rows / batch_size))
    out: List[np.ndarray] = []
    while len(out) < n_minibatches:
        permutation = rng.permutation(n_rows).astype(np.int64)  # [N]
        out.extend(np.array_split(permutation, per_epoch))
    return out[:n_minibatches]


def _take(value: Any, index: torch.Tensor) -> Any:
    """Rows ``index`` of a field: a tensor gathered on its own device, a tree by its ``[]``."""
    return value[index.to(value.device)] if isinstance(value, torch.Tensor) else value[index]


# ------------------------------------------------------------ storing: transitions -> Steps -> Rollout

_REQUIRED = ("state", "action", "next_state", "reward", "terminal")
_ACCEPTED = (*_REQUIRED, "truncated")  # and, in a rollout's steps, "stored"
_REQUIRED_KEYS, _ACCEPTED_KEYS = frozenset(_REQUIRED), frozenset(_ACCEPTED)
_ROLLOUT_KEYS = _ACCEPTED_KEYS | {"stored"}


class Steps(NamedTuple):
    """``T`` steps of ``B`` environments, stacked step-major (``N = T * B`` rows).

    ``inputs`` is the critic's input: the ``N`` state rows, then the ``k`` next_state rows; ``state`` and
    ``next_state`` are views of it (torch leaves; each value was copied once, when the caller's steps were
    concatenated). It is None when next_state does not have the structure of state (``value_targets`` raises
    about it).
    """

    state: Dict[str, Any]  # tree of N rows
    action: Dict[str, Any]  # tree of N rows
    reward: np.ndarray  # float64 [T, B]
    terminal: np.ndarray  # bool [T, B]
    truncated: np.ndarray  # bool [T, B]
    bootstrap: np.ndarray  # int64 [k]: the flat rows whose next_state value is needed
    next_state: Any  # tree of the k next_state rows of `bootstrap`, or None if k == 0
    inputs: Optional[Dict[str, Any]]
    stored: Optional[np.ndarray] = None  # bool [T, B]: the rows that are training data; None: every row

    @property
    def n_rows(self) -> int:
        return int(self.reward.size)

    @property
    def n_stored(self) -> int:
        """The rows that go into the buffer."""
        return self.n_rows if self.stored is None else int(self.stored.sum())


def tree_rows(tree: Mapping[str, Any], where: str) -> int:
    """The common number of rows of every leaf of a stored ``tree`` (``state``, ``action``, ``next_state``),
    which must be a dict of named values, never a bare tensor.

    Raises:
        ValueError: leaves disagree on the number of rows, a leaf has no row dimension, or the tree has no leaves.
        TypeError: a leaf is not a tensor, an array or a ragged value, or ``tree`` is not a mapping.
    """
    if not isinstance(tree, Mapping):
        raise TypeError(f"{where} is a {type(tree).__name__}; expected a dict of named values")
    return trees.n_rows(tree, where)


def _column(value: Any, n_rows: int, where: str, flag: bool) -> np.ndarray:
    """A per-row scalar (a number or bool for one row, else ``[n]`` / ``[n, 1]``) as ``[n]``."""
    what = "a bool or a bool tensor/array" if flag else "a number or a numeric tensor/array"
    if isinstance(value, (bool, np.bool_)) or (not flag and isinstance(value, (numbers.Real, np.generic))):
        if flag != isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{where} is {value!r}; expected {what}")
        if n_rows != 1:
            raise ValueError(f"{where} is a single value, but the transition holds {n_rows} rows; give [{n_rows}]")
        return np.array([value], dtype=np.bool_ if flag else np.float64)  # [1]
    if isinstance(value, torch.Tensor):
        array = value.detach().cpu().numpy()
    elif isinstance(value, np.ndarray):
        array = value
    else:
        raise TypeError(f"{where} is a {type(value).__name__}; expected {what}")
    if flag and array.dtype != np.bool_:
        raise TypeError(f"{where} has dtype {value.dtype}; expected bool (for example terminal != 0)")
    if not flag and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number)
                     or np.issubdtype(array.dtype, np.complexfloating)):
        raise TypeError(f"{where} has dtype {value.dtype}; expected real numbers")
    if array.size != n_rows or array.ndim > 2 or (array.ndim == 2 and array.shape[1] != 1):
        raise ValueError(f"{where} has shape {tuple(array.shape)}; expected [{n_rows}] or [{n_rows}, 1] (one value "
                         "per row)")
    return array.reshape(n_rows).astype(np.bool_ if flag else np.float64)  # [n_rows]


def _flag_column(values: List[Any], n_rows: int, name: str, key: str, flag: bool) -> np.ndarray:
    """One key's per-row values of every transition as ``[T, B]`` (fast when all are plain)."""
    plain = (bool,) if flag else (float, int)
    dtype = np.bool_ if flag else np.float64
    if n_rows == 1 and all(type(v) in plain for v in values):
        return np.array(values, dtype=dtype).reshape(len(values), 1)  # [T, 1]
    kinds = "b" if flag else "fiu"  # [B] arrays of these kinds (what a collector hands over) need no checks
    if all(type(v) is np.ndarray and v.shape == (n_rows,) and v.dtype.kind in kinds for v in values):
        return np.array(values, dtype=dtype)  # [T, B]
    return np.stack([_column(v, n_rows, f"{name}[{t}][{key!r}]", flag) for t, v in enumerate(values)])  # [T, B]


def _check_rows(steps: Sequence[Any], key: str, n_envs: int, name: str, episode: bool) -> None:
    """Every transition's ``key`` holds ``n_envs`` rows."""
    for t, transition in enumerate(steps):
        rows = tree_rows(transition[key], f"{name}[{t}][{key!r}]")
        if rows != n_envs:
            if episode:
                raise ValueError(f"{name}[{t}][{key!r}] holds {rows} rows; store_episode takes one environment's "
                                 "transitions (one row each); use store_rollout for steps of several environments")
            raise ValueError(f"{name}[{t}][{key!r}] holds {rows} rows, but {name}[0]['state'] holds {n_envs}")


def _read(steps: Sequence[Any], name: str, episode: bool) -> Steps:
    if isinstance(steps, (Mapping, TransitionBase)) or not isinstance(steps, Sequence):
        raise TypeError(f"{name}: expected a list of transitions, got {type(steps).__name__}")
    if len(steps) == 0:
        raise ValueError(f"{name}: got an empty list; store at least one transition")
    accepted = _ACCEPTED_KEYS if episode else _ROLLOUT_KEYS
    for t, transition in enumerate(steps):
        if type(transition) is dict and _REQUIRED_KEYS <= transition.keys() <= accepted:
            continue  # the usual case, in one comparison
        if not isinstance(transition, (Mapping, TransitionBase)):
            raise TypeError(f"{name}[{t}] is a {type(transition).__name__}; expected a dict or a Transition")
        if episode and "stored" in transition:
            raise ValueError(f"{name}[{t}]: 'stored' chooses rows of a rollout's steps; an episode's rows are all "
                             "stored (use store_rollout)")
        if missing := [k for k in _REQUIRED if k not in transition]:
            raise ValueError(f"{name}[{t}] lacks {missing}; a transition needs {list(_REQUIRED)} (and optionally "
                             "'truncated')")
        if unknown := [k for k in transition.keys() if k not in accepted]:
            raise ValueError(f"{name}[{t}] has unknown key(s) {unknown}; a transition takes only "
                             f"{list(_ACCEPTED) + ([] if episode else ['stored'])}")
    n_envs = 1 if episode else tree_rows(steps[0]["state"], f"{name}[0]['state']")
    n_steps = len(steps)
    n_rows = n_steps * n_envs
    _check_rows(steps, "state", n_envs, name, episode)
    with torch.no_grad():
        action = tree_to_torch(trees.stack([t["action"] for t in steps], lambda t: f"{name}[{t}]['action']"))
    if tree_rows(action, f"{name}[...]['action']") != n_rows:  # some transition holds another number of rows
        _check_rows(steps, "action", n_envs, name, episode)
    reward = _flag_column([t["reward"] for t in steps], n_envs, name, "reward", False)  # [T, B]
    terminal = _flag_column([t["terminal"] for t in steps], n_envs, name, "terminal", True)  # [T, B]
    truncated = np.zeros((n_steps, n_envs), dtype=np.bool_)  # [T, B]
    if any("truncated" in t for t in steps):
        truncated = _flag_column([t["truncated"] if "truncated" in t else truncated[0] for t in steps], n_envs,
                                 name, "truncated", True)
    truncated &= ~terminal  # [T, B]; terminal wins
    stored = None
    if any("stored" in t for t in steps):  # a missing entry stores every row of its step
        every = np.ones(n_envs, dtype=np.bool_)
        stored = _flag_column([t.get("stored", every) for t in steps], n_envs, name, "stored", True)  # [T, B]
        stored = None if stored.all() else stored
    needs = truncated.copy()  # [T, B]
    needs[-1] |= ~terminal[-1]  # the rollout's last rows bootstrap unless terminal
    bootstrap = np.flatnonzero(needs).astype(np.int64)  # [k]
    used = np.unique(bootstrap // n_envs)  # steps whose next_state is read
    for t in used:
        rows = tree_rows(steps[t]["next_state"], f"{name}[{t}]['next_state']")
        if rows != n_envs:
            raise ValueError(f"{name}[{t}]['next_state'] holds {rows} rows, but {name}[{t}]['state'] holds {n_envs}")
    parts = [steps[t]["next_state"] for t in used]
    picks = [None if needs[t].all() else np.flatnonzero(needs[t]).astype(np.int64) for t in used]  # [k_t] each

    def where_state(i: int) -> str:
        return f"{name}[{i}]['state']" if i < n_steps else f"{name}[{used[i - n_steps]}]['next_state']"

    # Every state row and every bootstrap next_state row in one concatenation: each value is
    # copied once, the critic reads them in one call, and the stored state is a view of it.
    states = [t["state"] for t in steps]
    with torch.no_grad():
        try:
            inputs = tree_to_torch(trees.stack(states + parts, where_state, [None] * n_steps + picks))
        except (TypeError, ValueError):
            if not parts:
                raise
            # The states differ from each other (raised here, naming the step) or from next_state:
            # then the checks of the state come first and value_targets says what next_state lacks.
            state = tree_to_torch(trees.stack(states, where_state))
            next_state = trees.stack(parts, lambda i: where_state(n_steps + i), picks)
            return Steps(state, action, reward, terminal, truncated, bootstrap, next_state, None, stored)
    state = trees.row_range(inputs, 0, n_rows)
    next_state = trees.row_range(inputs, n_rows, n_rows + bootstrap.size) if bootstrap.size else None
    return Steps(state, action, reward, terminal, truncated, bootstrap, next_state, inputs, stored)


def read_episode(episode: Sequence[Any], name: str = "store_episode") -> Steps:
    """Checks and stacks one environment's transitions (one row each) into ``[T, 1]`` steps.

    Raises:
        TypeError / ValueError: not a list, empty, a transition lacking a key, rows that differ, flags that
            are not bools; messages name the position and key.
    """
    return _read(episode, name, True)


def read_rollout(steps: Sequence[Any], name: str = "store_rollout") -> Steps:
    """Checks and stacks ``T`` transitions of ``B`` rows each into ``[T, B]`` steps."""
    return _read(steps, name, False)


def value_targets(steps: Steps, criticize: Callable[[Any], torch.Tensor], discount: float, gae_lambda: float,
                  name: str = "store") -> Tuple[torch.Tensor, torch.Tensor]:
    """Returns ``(returns, advantages)``, float32 ``[T * B, 1]`` (step-major) on the CPU, from one critic call;
    ``name`` is the call in error messages, e.g. ``"PPO.store_rollout"``.

    Raises:
        ValueError: the critic returned the wrong number of values, or NaN or infinity (the message names
            the transition and row whose state it was).
    """
    n_steps, n_envs = steps.reward.shape
    n_rows = n_steps * n_envs
    if steps.inputs is None:  # _read could not concatenate state and next_state
        try:
            trees.stack([steps.state, steps.next_state], lambda i: ("state", "next_state")[i])
        except (TypeError, ValueError) as e:
            raise ValueError(f"next_state must have the same keys and value kinds as state: {e}") from None
    with torch.no_grad():
        out = criticize(steps.inputs)
    values = out.detach().reshape(-1).to("cpu", torch.float64)  # [N + k]
    if values.shape[0] != n_rows + steps.bootstrap.size:
        raise ValueError(f"the critic returned {values.shape[0]} values for {n_rows + steps.bootstrap.size} states; "
                         "expected one value per row ([B, 1] or [B])")
    finite = torch.isfinite(values)  # [N + k]
    if not bool(finite.all()):
        i = int(torch.nonzero(~finite)[0, 0])
        key, r = ("state", i) if i < n_rows else ("next_state", int(steps.bootstrap[i - n_rows]))
        t, b = divmod(r, n_envs)
        row = f" row {b}" if n_envs > 1 else ""
        raise ValueError(f"{name}: the critic returned {float(values[i])} for {name}[{t}][{key!r}]{row}; values must "
                         "be finite (the critic's weights may hold NaN or infinity); nothing was stored")
    state_values = values[:n_rows].reshape(n_steps, n_envs)  # [T, B]
    next_values = torch.zeros_like(state_values)  # [T, B]
    next_values[:-1] = state_values[1:]
    next_values.view(-1)[torch.from_numpy(steps.bootstrap)] = values[n_rows:]  # the rows that bootstrap
    result = gae(torch.from_numpy(steps.reward), state_values, next_values, torch.from_numpy(steps.terminal),
                 torch.from_numpy(steps.truncated), discount=discount, gae_lambda=gae_lambda)
    return result.returns.reshape(n_rows, 1).float(), result.advantages.reshape(n_rows, 1).float()  # [N, 1] each


def to_rollout(steps: Steps, returns: torch.Tensor, advantages: torch.Tensor) -> Rollout:
    """The record of ``steps``' stored rows with the value targets and advantages of :func:`value_targets`
    (computed over every row); columns ``[N, 1]``."""
    columns = (steps.reward.astype(np.float32), steps.terminal, steps.truncated)
    if steps.stored is None:
        return Rollout(steps.state, steps.action, *(torch.from_numpy(c.reshape(steps.n_rows, 1)) for c in columns),
                       returns, advantages)
    index = np.flatnonzero(steps.stored.reshape(-1))  # [n_stored]
    rows = torch.from_numpy(index)
    return Rollout(trees.take(steps.state, index), trees.take(steps.action, index),
                   *(torch.from_numpy(c.reshape(-1, 1)[index]) for c in columns), returns[rows], advantages[rows])
