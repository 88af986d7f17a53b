"""Generalised advantage estimation over ``[T, B]`` rollouts whose episodes end two ways.

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
"""
from __future__ import annotations

import numbers
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np
import torch

__all__ = ["GAEResult", "gae", "gae_episode"]

_NAMES = ("rewards", "values", "next_values", "terminal", "truncated")


class GAEResult(NamedTuple):
    """Advantages and returns (``advantages + values``), shaped like the rewards."""

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

    Example:
        >>> gae_episode([1.0, 1.0], [0.5, 0.5], [0.5, 0.0], [False, True], discount=1.0, gae_lambda=1.0).returns
        tensor([2., 1.], dtype=torch.float64)
    """
    return _gae("gae_episode", 1, (rewards, values, next_values, terminal, truncated), discount, gae_lambda)
