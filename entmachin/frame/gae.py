"""Advantages: generalised advantage estimation over ``[T, B]`` rollouts whose episodes end two ways, and
the pieces of A2C's and PPO's losses that take them (below).

Row ``t`` of column ``b`` is one environment step: ``rewards[t, b]`` was received for it, ``values[t, b]``
is the critic's value of its ``state`` and ``next_values[t, b]`` the value of its ``next_state``. Episodes
end two ways (``docs/architecture.md``):

* ``terminal``: the environment ended; nothing follows, so the row does not bootstrap (its next value
  counts as 0) and the recursion restarts above it;
* ``truncated``: the episode was cut short (time limit, end of the rollout); the row bootstraps from
  ``next_values`` (the value of the final observation) and the recursion restarts above it too, since
  the next row belongs to another episode;
* any other row chains to the next row. The last row of a rollout chains to nothing, so it behaves like
  a truncated one (as in Stable-Baselines3's ``last_values``).

A row that is both terminal and truncated counts as terminal. For every row::

    delta[t] = rewards[t] + discount * next_values[t] * (1 - terminal[t]) - values[t]
    adv[t]   = delta[t] + discount * gae_lambda * (1 - terminal[t]) * (1 - truncated[t]) * adv[t + 1]
    returns  = adv + values

For an ordinary row ``next_values[t]`` is the value of the state in row ``t + 1``; a frame that evaluates
the critic once per state may fill those entries with ``values[t + 1]``.

The recursion runs on the host in float64, vectorised over ``B`` with a loop over ``T``; the results are
detached from autograd and come back as tensors with the promoted dtype of the inputs, on their device.

The losses' pieces: an actor's log-probabilities and entropies flattened to *units* (rows for dense
actors, actors for ragged ones, each with its row), the old log-probabilities of the stored rows,
advantage normalisation over the rows that have units, and the statistics an update reports.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch

from entmachin.ragged.tensor import RaggedTensor

__all__ = ["GAEResult", "gae", "gae_episode", "Losses", "Units", "units_of", "OldLogProbs", "old_log_probs",
           "old_units", "cat_old", "normalized", "acting_rows", "mean_of", "explained_variance", "REPORTED"]

_NAMES = ("rewards", "values", "next_values", "terminal", "truncated")


class GAEResult(NamedTuple):
    """Advantages and returns (``advantages + values``), shaped like the rewards.

    Attributes:
        advantages: the GAE advantages, ``[T, B]`` (:func:`gae`) or ``[T]`` (:func:`gae_episode`).
        returns: ``advantages + values``, the value targets, in the same shape.
    """

    advantages: torch.Tensor
    returns: torch.Tensor


def _gae(where: str, ndim: int, inputs: Sequence[Any], discount: Any, gae_lambda: Any) -> GAEResult:
    """Checks the five inputs (in the order of ``_NAMES``, each with ``ndim`` dimensions) and runs GAE."""
    for name, x in (("discount", discount), ("gae_lambda", gae_lambda)):
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"{where}: {name} must be a real number in [0, 1], got {x!r}")
        if not 0.0 <= float(x) <= 1.0:
            raise ValueError(f"{where}: {name} must be in [0, 1], got {x!r}")
    discount, gae_lambda = float(discount), float(gae_lambda)
    tensors = []
    for x, name in zip(inputs, _NAMES):
        if x is None and name == "truncated":  # no row truncated
            x = torch.zeros(tensors[0].shape, dtype=torch.bool, device=tensors[1].device)
        try:
            tensors.append(x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x)))
        except (TypeError, ValueError, RuntimeError) as e:
            raise TypeError(f"{where}: {name} must be a tensor, a numpy array or a sequence of numbers, "
                            f"got {type(x).__name__}") from e
    rewards, values, next_values = tensors[:3]
    layout = "[T, B]" if ndim == 2 else "[T]"
    shape = tuple(rewards.shape)
    if len(shape) != ndim:
        hint = {1: " (use gae_episode for one episode's [T] vectors)", 2: " (use gae for [T, B] rollouts)"}
        raise ValueError(f"{where}: rewards has shape {shape}; expected {layout}{hint.get(len(shape), '')}")
    for t, name in zip(tensors[1:], _NAMES[1:]):
        if tuple(t.shape) != shape:
            raise ValueError(f"{where}: {name} has shape {tuple(t.shape)}, but rewards has shape {shape}; "
                             f"every input must be {layout} with the same shape")
    device = values.device
    for t, name in zip(tensors, _NAMES):
        if t.device != device:
            raise ValueError(f"{where}: {name} is on {t.device}, but values is on {device}")
    for t, name in zip(tensors[3:], _NAMES[3:]):
        if t.dtype != torch.bool:
            raise TypeError(f"{where}: {name} has dtype {t.dtype}; expected bool (for example {name} != 0)")
    for t, name in zip(tensors[1:3], _NAMES[1:3]):
        if not t.is_floating_point():
            raise TypeError(f"{where}: {name} has dtype {t.dtype}; expected a floating dtype")
    if rewards.is_complex() or rewards.dtype == torch.bool:
        raise TypeError(f"{where}: rewards has dtype {rewards.dtype}; expected real numbers")
    dtype = torch.promote_types(values.dtype, next_values.dtype)
    if rewards.is_floating_point():
        dtype = torch.promote_types(dtype, rewards.dtype)
    # The recursion, in float64 on the host; the names now hold arrays.
    arrays = [t.detach().cpu().numpy().astype(np.float64) for t in tensors]  # [T, B] (or [T]) each
    rewards, values, next_values, terminal, truncated = (a[:, None] for a in arrays) if ndim == 1 else arrays
    alive = 1.0 - terminal  # [T, B]
    delta = rewards + discount * next_values * alive - values  # [T, B]
    chain = (discount * gae_lambda) * alive * (1.0 - truncated)  # [T, B]
    n_steps, n_envs = delta.shape
    if n_envs == 1:  # one column: Python floats beat numpy's per-call overhead
        last, column = 0.0, []
        for d, c in zip(delta[::-1, 0].tolist(), chain[::-1, 0].tolist()):
            last = d + c * last
            column.append(last)
        advantages = np.array(column[::-1], dtype=np.float64).reshape(n_steps, 1)  # [T, 1]
    else:
        advantages = np.empty_like(delta)  # [T, B]
        last_row = np.zeros(n_envs)  # [B]
        for t in range(n_steps - 1, -1, -1):
            last_row = delta[t] + chain[t] * last_row  # [B]
            advantages[t] = last_row
    returns = advantages + values  # [T, B]
    if ndim == 1:
        advantages, returns = advantages[:, 0], returns[:, 0]  # [T]
    return GAEResult(*(torch.from_numpy(a).to(device=device, dtype=dtype) for a in (advantages, returns)))


def gae(rewards: Any, values: Any, next_values: Any, terminal: Any, truncated: Any = None, *, discount: float,
        gae_lambda: float) -> GAEResult:
    """Computes advantages and returns for ``T`` steps of ``B`` environments.

    Args:
        rewards: ``[T, B]`` rewards (floating or integer).
        values: ``[T, B]`` critic values of each row's state (floating).
        next_values: ``[T, B]`` critic values of each row's next state (floating).
        terminal: ``[T, B]`` bool: the environment ended at this row.
        truncated: ``[T, B]`` bool: the episode was cut short at this row; ``None`` means no row is truncated.
        discount: the discount factor, in ``[0, 1]``.
        gae_lambda: the GAE lambda, in ``[0, 1]``: 0 gives one-step TD errors, 1 discounted returns minus values.

    Tensors, numpy arrays and nested sequences are accepted; all tensors must be on one device.

    Returns:
        ``GAEResult(advantages, returns)``, ``[T, B]`` tensors on the inputs' device, detached.

    Raises:
        ValueError: shapes differ or are not 2-D, inputs on several devices, or a coefficient outside ``[0, 1]``.
        TypeError: a dtype or a coefficient of the wrong kind.
    """
    return _gae("gae", 2, (rewards, values, next_values, terminal, truncated), discount, gae_lambda)


def gae_episode(rewards: Any, values: Any, next_values: Any, terminal: Any, truncated: Optional[Any] = None, *,
                discount: float, gae_lambda: float) -> GAEResult:
    """Computes advantages and returns for one environment's ``[T]`` steps, by the rules of :func:`gae`:
    every input and output is ``[T]`` (``terminal`` and ``truncated`` usually all False but the last
    entry, or with resets inside when the steps span several episodes); Python lists are accepted.

    Args:
        rewards: ``[T]`` rewards (floating or integer).
        values: ``[T]`` critic values of each step's state (floating).
        next_values: ``[T]`` critic values of each step's next state (floating; unread where ``terminal``).
        terminal: ``[T]`` bool: the environment ended at this step.
        truncated: ``[T]`` bool: the episode was cut short at this step; ``None`` means no step is truncated.
        discount: the discount factor, in ``[0, 1]``.
        gae_lambda: the GAE lambda, in ``[0, 1]``.

    Returns:
        ``GAEResult(advantages, returns)``, ``[T]`` tensors on the inputs' device, detached.

    Raises:
        ValueError / TypeError: as :func:`gae`'s (inputs that are not 1-D, for one).

    Example:
        >>> gae_episode([1.0, 1.0], [0.5, 0.5], [0.5, 0.0], [False, True], discount=1.0, gae_lambda=1.0).returns
        tensor([2., 1.], dtype=torch.float64)
    """
    return _gae("gae_episode", 1, (rewards, values, next_values, terminal, truncated), discount, gae_lambda)


# ---------------------------------------------------------------------- the losses' pieces

# Per action name, one RaggedTensor over all rows (ragged actors), or a [N] tensor (dense ones).
OldLogProbs = Union[torch.Tensor, Dict[str, RaggedTensor]]

# The Losses fields an update reports, in UpdateStats' order.
REPORTED = ("policy", "value", "entropy", "approx_kl", "clip_fraction")

# Rows per no-grad pass when computing old log-probabilities (at least batch_size).
OLD_LOG_PROB_ROWS = 4096


class Losses(NamedTuple):
    """One minibatch's losses (None: not computed on this minibatch) and diagnostics.

    ``policy_parts`` names the terms of the policy loss (``"policy loss"``, ``"entropy"``) so that a
    non-finite step can say which one went wrong.
    """

    policy: Optional[torch.Tensor]
    value: Optional[torch.Tensor]
    policy_parts: Dict[str, torch.Tensor]
    entropy: Optional[torch.Tensor]
    approx_kl: Optional[torch.Tensor]
    clip_fraction: Optional[torch.Tensor]


class Units(NamedTuple):
    """An actor's log-probabilities and entropies flattened to units.

    Attributes:
        log_prob: ``[n_units]``.
        entropy: ``[n_units]`` or None when the actor returns no entropy.
        row: ``[n_units]`` int64 row of each unit; None for dense actors (unit ``i`` is row ``i``).
        per_actor: per action name ``RaggedTensor`` of log-probs (ragged actors), else None.
    """

    log_prob: torch.Tensor
    entropy: Optional[torch.Tensor]
    row: Optional[torch.Tensor]
    per_actor: Optional[Dict[str, RaggedTensor]]


def _flatten(values: Mapping[str, Any], names: List[str], where: str, n_rows: int) -> List[RaggedTensor]:
    out = []
    for name in names:
        value = values.get(name) if isinstance(values, Mapping) else None
        if not isinstance(value, RaggedTensor):
            raise TypeError(f"{where}[{name!r}] is a {type(value).__name__}; expected a RaggedTensor [n_actors, 1]")
        if len(value) != n_rows or value.data.numel() != value.n_items:
            raise ValueError(
                f"{where}[{name!r}] has {len(value)} rows and data of shape {tuple(value.data.shape)}; "
                f"expected {n_rows} rows of [n_actors, 1]"
            )
        out.append(value)
    return out


def _dense(value: Any, n_rows: int, where: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where} is a {type(value).__name__}; expected a tensor [B] or [B, 1]")
    if value.numel() != n_rows or value.dim() > 2 or (value.dim() == 2 and value.shape[1] != 1):
        raise ValueError(f"{where} has shape {tuple(value.shape)}; expected [B] or [B, 1] with B = {n_rows}")
    return value.reshape(n_rows)  # [B]


def units_of(result: Any, n_rows: int, need_entropy: bool, where: str) -> Units:
    """Reads ``(action, log_prob, entropy, ...)`` from an actor's result.

    Raises:
        TypeError / ValueError: the result is not a tuple of at least two values, shapes do not
            fit ``n_rows``, or ``need_entropy`` and the actor returns no entropy.
    """
    if not isinstance(result, (tuple, list)) or len(result) < 2:
        raise TypeError(
            f"{where}: the actor returned a {type(result).__name__}; expected a tuple "
            "(action, log_prob, entropy, ...)"
        )
    log_prob = result[1]
    entropy = result[2] if len(result) > 2 else None
    if need_entropy and entropy is None:
        raise ValueError(
            f"{where}: entropy_weight is set, but the actor returns no entropy; return "
            "(action, log_prob, entropy) or set entropy_weight=None"
        )
    if isinstance(log_prob, Mapping):
        names = list(log_prob)
        lps = _flatten(log_prob, names, f"{where}: log_prob", n_rows)
        flat = torch.cat([lp.data.reshape(-1) for lp in lps]) if lps else torch.zeros(0)  # [n_units]
        row = torch.cat([lp.batch_index for lp in lps]) if lps else torch.zeros(0, dtype=torch.int64)  # [n_units]
        ent = None
        if entropy is not None:
            if not isinstance(entropy, Mapping):
                raise TypeError(f"{where}: log_prob is per actor, but entropy is a {type(entropy).__name__}")
            ents = _flatten(entropy, names, f"{where}: entropy", n_rows)
            ent = torch.cat([e.data.reshape(-1) for e in ents]) if ents else flat.new_zeros(0)  # [n_units]
        return Units(flat, ent, row.to(flat.device), dict(zip(names, lps)))
    flat = _dense(log_prob, n_rows, f"{where}: log_prob")  # [B]
    ent = None if entropy is None else _dense(entropy, n_rows, f"{where}: entropy")  # [B]
    return Units(flat, ent, None, None)


def acting_rows(action: Any, n_rows: int) -> Optional[np.ndarray]:
    """Bool ``[n_rows]``: the rows of an entity action tree (every leaf a ``RaggedTensor`` of actors) with at
    least one actor; None where every row has one or the actions are dense (every row is a unit)."""
    leaves: List[RaggedTensor] = []
    pending = [action]
    while pending:
        node = pending.pop()
        if isinstance(node, RaggedTensor):
            leaves.append(node)
        elif isinstance(node, Mapping):
            pending.extend(node.values())
        else:
            return None
    if not leaves:
        return None
    acting = (sum(leaf.lengths for leaf in leaves) > 0).cpu().numpy()  # [N]
    return None if acting.all() else acting


def old_log_probs(eval_act: Callable[[Any, Any], Any], state: Any, action: Any, rows: np.ndarray,
                  batch_size: int, where: str) -> OldLogProbs:
    """Log-probabilities of the stored actions at ``rows`` (sorted int64), without gradients, in
    passes of at least ``batch_size`` rows through ``eval_act(state, action)``."""
    chunk = max(batch_size, OLD_LOG_PROB_ROWS)
    parts: List[Units] = []
    with torch.no_grad():
        for start in range(0, rows.shape[0], chunk):
            index = torch.from_numpy(rows[start : start + chunk])  # [chunk]
            parts.append(units_of(eval_act(state[index], action[index]), index.shape[0], False, where))
    return cat_old(parts)


def old_units(old: OldLogProbs, index: torch.Tensor) -> torch.Tensor:
    """The old log-probs of rows ``index`` flattened like :func:`units_of` flattens new ones.

    Shape:
        index: ``[B]``; returns ``[n_units]``.
    """
    if isinstance(old, torch.Tensor):
        return old[index.to(old.device)]  # [B]
    parts = [rt[index].data.reshape(-1) for rt in old.values()]
    return torch.cat(parts) if parts else torch.zeros(0)  # [n_units]


def cat_old(chunks: List[Units]) -> OldLogProbs:
    """Joins the per-chunk log-probs of a batched pass over all rows (detached)."""
    if chunks[0].per_actor is None:
        return torch.cat([c.log_prob.detach() for c in chunks])  # [N]
    names = list(chunks[0].per_actor)
    return {name: RaggedTensor.cat([c.per_actor[name].detach() for c in chunks]) for name in names}


def normalized(advantage: torch.Tensor, row: Optional[torch.Tensor]) -> torch.Tensor:
    """Normalises row advantages over the rows that have units (all rows for dense actors,
    whose ``row`` is None).

    Shape:
        advantage: ``[B]``; row: ``[n_units]`` or None; returns ``[B]``.
    """
    if row is not None:
        has_units = torch.zeros_like(advantage, dtype=torch.bool)  # [B]
        has_units[row] = True
        values = advantage[has_units]  # [n_rows_with_actors]
    else:
        values = advantage
    if values.numel() == 0:
        return advantage
    mean = values.mean()
    std = values.std(unbiased=False) if values.numel() > 1 else values.new_zeros(())
    return (advantage - mean) / (std + 1e-8)  # [B]


def mean_of(values: List[torch.Tensor]) -> float:
    """Mean of the finite values among scalar tensors (nan if none), with one host sync."""
    if not values:
        return math.nan
    stacked = torch.stack([v.reshape(()).float() for v in values]).cpu().double()  # [n]
    finite = stacked[torch.isfinite(stacked)]  # [n_finite]
    return float(finite.mean()) if finite.numel() else math.nan


def explained_variance(target: torch.Tensor, value: torch.Tensor) -> float:
    """``1 - Var(target - value) / Var(target)`` over every stored row (CleanRL's diagnostic)."""
    variance = float(target.var(unbiased=False))
    if not variance > 0:
        return math.nan
    return 1.0 - float((target - value).var(unbiased=False)) / variance
