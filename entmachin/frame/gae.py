"""Generalised advantage estimation over ``[T, B]`` rollouts whose episodes end two ways.

Row ``t`` of column ``b`` is one environment step: ``rewards[t, b]`` was received for it,
``values[t, b]`` is the critic's value of its ``state`` and ``next_values[t, b]`` the value of
its ``next_state``. Episodes end two ways (``docs/architecture.md``):

* ``terminal``: the environment ended; nothing follows, so the row does not bootstrap
  (its next value counts as 0) and the recursion restarts above it;
* ``truncated``: the episode was cut short (time limit, end of the rollout); the row
  bootstraps from ``next_values`` (the value of the final observation) and the recursion
  restarts above it too, since the next row belongs to another episode;
* any other row chains to the next row. The last row of a rollout chains to nothing, so
  it behaves like a truncated one (as in Stable-Baselines3's ``last_values``).

A row that is both terminal and truncated counts as terminal. For every row::

    delta[t] = rewards[t] + discount * next_values[t] * (1 - terminal[t]) - values[t]
    adv[t]   = delta[t] + discount * gae_lambda * (1 - terminal[t]) * (1 - truncated[t]) * adv[t + 1]
    returns  = adv + values

For an ordinary row ``next_values[t]`` is the value of the state in row ``t + 1``; a frame that
evaluates the critic once per state may fill those entries with ``values[t + 1]``.

The recursion runs on the host in float64, vectorised over ``B`` with a loop over ``T``; the
results are detached from autograd and come back as tensors with the promoted dtype of the
inputs, on their device.
"""
from __future__ import annotations

import numbers
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np
import torch

__all__ = ["GAEResult", "gae", "gae_episode"]


class GAEResult(NamedTuple):
    """Advantages and returns (``advantages + values``), shaped like the rewards."""

    advantages: torch.Tensor
    returns: torch.Tensor


def _as_tensor(x: Any, name: str, where: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    try:
        return torch.as_tensor(np.asarray(x))
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            f"{where}: {name} must be a tensor, a numpy array or a sequence of numbers, "
            f"got {type(x).__name__}"
        ) from e


def _check_coefficient(x: Any, name: str, where: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{where}: {name} must be a real number in [0, 1], got {x!r}")
    if not 0.0 <= float(x) <= 1.0:
        raise ValueError(f"{where}: {name} must be in [0, 1], got {x!r}")
    return float(x)


def _prepare(
    where: str, rewards: Any, values: Any, next_values: Any, terminal: Any, truncated: Any,
    ndim: int, discount: Any, gae_lambda: Any,
) -> Tuple[Tuple[torch.Tensor, ...], torch.dtype, float, float]:
    """Converts and validates the inputs; returns them as tensors with the result dtype."""
    discount = _check_coefficient(discount, "discount", where)
    gae_lambda = _check_coefficient(gae_lambda, "gae_lambda", where)
    names = ("rewards", "values", "next_values", "terminal", "truncated")
    tensors = [_as_tensor(x, n, where) for x, n in zip((rewards, values, next_values, terminal), names)]
    if truncated is None:
        truncated = torch.zeros(tensors[0].shape, dtype=torch.bool, device=tensors[1].device)  # like rewards
    tensors.append(_as_tensor(truncated, "truncated", where))
    layout = "[T, B]" if ndim == 2 else "[T]"
    shape = tuple(tensors[0].shape)
    if len(shape) != ndim:
        hint = " (use gae_episode for one episode's [T] vectors)" if len(shape) == 1 else (
            " (use gae for [T, B] rollouts)" if len(shape) == 2 else "")
        raise ValueError(f"{where}: rewards has shape {shape}; expected {layout}{hint}")
    for t, name in zip(tensors[1:], names[1:]):
        if tuple(t.shape) != shape:
            raise ValueError(
                f"{where}: {name} has shape {tuple(t.shape)}, but rewards has shape {shape}; "
                f"every input must be {layout} with the same shape"
            )
    device = tensors[1].device
    for t, name in zip(tensors, names):
        if t.device != device:
            raise ValueError(f"{where}: {name} is on {t.device}, but values is on {device}")
    for t, name in zip(tensors[3:], names[3:]):
        if t.dtype != torch.bool:
            raise TypeError(
                f"{where}: {name} has dtype {t.dtype}; expected bool (for example {name} != 0)"
            )
    for t, name in zip(tensors[1:3], names[1:3]):
        if not t.is_floating_point():
            raise TypeError(f"{where}: {name} has dtype {t.dtype}; expected a floating dtype")
    if tensors[0].is_complex() or tensors[0].dtype == torch.bool:
        raise TypeError(f"{where}: rewards has dtype {tensors[0].dtype}; expected real numbers")
    dtype = torch.promote_types(tensors[1].dtype, tensors[2].dtype)
    if tensors[0].is_floating_point():
        dtype = torch.promote_types(dtype, tensors[0].dtype)
    return tuple(tensors), dtype, discount, gae_lambda


def _recursion(
    rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray,
    terminal: np.ndarray, truncated: np.ndarray, discount: float, gae_lambda: float,
) -> np.ndarray:
    """The backward recursion in float64 on ``[T, B]`` arrays; returns the advantages."""
    alive = 1.0 - terminal  # [T, B]
    delta = rewards + discount * next_values * alive - values  # [T, B]
    chain = (discount * gae_lambda) * alive * (1.0 - truncated)  # [T, B]
    n_steps, n_envs = delta.shape
    if n_envs == 1:  # one column: Python floats beat numpy's per-call overhead
        last, column = 0.0, []
        for d, c in zip(delta[::-1, 0].tolist(), chain[::-1, 0].tolist()):
            last = d + c * last
            column.append(last)
        column.reverse()
        return np.array(column, dtype=np.float64).reshape(n_steps, 1)  # [T, 1]
    advantages = np.empty_like(delta)  # [T, B]
    last_row = np.zeros(n_envs)  # [B]
    for t in range(n_steps - 1, -1, -1):
        last_row = delta[t] + chain[t] * last_row  # [B]
        advantages[t] = last_row
    return advantages


def _run(inputs: Tuple[torch.Tensor, ...], dtype: torch.dtype, discount: float,
         gae_lambda: float, squeeze: bool) -> GAEResult:
    device = inputs[1].device
    arrays = [t.detach().cpu().numpy().astype(np.float64) for t in inputs]  # [T, B] each
    if squeeze:
        arrays = [a[:, None] for a in arrays]  # [T, 1]
    advantages = _recursion(*arrays, discount, gae_lambda)  # [T, B]
    returns = advantages + arrays[1]  # [T, B]
    if squeeze:
        advantages, returns = advantages[:, 0], returns[:, 0]  # [T]
    return GAEResult(
        torch.from_numpy(advantages).to(device=device, dtype=dtype),
        torch.from_numpy(returns).to(device=device, dtype=dtype),
    )


def gae(
    rewards: Any, values: Any, next_values: Any, terminal: Any, truncated: Any = None, *,
    discount: float, gae_lambda: float,
) -> GAEResult:
    """Computes advantages and returns for ``T`` steps of ``B`` environments.

    Args:
        rewards: ``[T, B]`` rewards (floating or integer).
        values: ``[T, B]`` critic values of each row's state (floating).
        next_values: ``[T, B]`` critic values of each row's next state (floating).
        terminal: ``[T, B]`` bool: the environment ended at this row.
        truncated: ``[T, B]`` bool: the episode was cut short at this row; ``None`` means
            no row is truncated.
        discount: the discount factor, in ``[0, 1]``.
        gae_lambda: the GAE lambda, in ``[0, 1]``: 0 gives one-step TD errors, 1 discounted
            returns minus values.

    Tensors, numpy arrays and nested sequences are accepted; all tensors must be on one device.

    Returns:
        ``GAEResult(advantages, returns)``, ``[T, B]`` tensors on the inputs' device, detached.

    Raises:
        ValueError: shapes differ or are not 2-D, inputs on several devices, or a coefficient
            outside ``[0, 1]``.
        TypeError: a dtype or a coefficient of the wrong kind.

    Shape:
        every input ``[T, B]``; advantages and returns ``[T, B]``.

    Example:
        >>> out = gae(rewards, values, next_values, terminal, truncated, discount=0.99, gae_lambda=0.95)
        >>> out.advantages.shape
        torch.Size([128, 8])
    """
    inputs, dtype, discount, gae_lambda = _prepare(
        "gae", rewards, values, next_values, terminal, truncated, 2, discount, gae_lambda
    )
    return _run(inputs, dtype, discount, gae_lambda, squeeze=False)


def gae_episode(
    rewards: Any, values: Any, next_values: Any, terminal: Any, truncated: Optional[Any] = None, *,
    discount: float, gae_lambda: float,
) -> GAEResult:
    """Computes advantages and returns for one environment's ``[T]`` steps.

    The same rules as :func:`gae` for a single column: ``terminal`` and ``truncated`` are
    ``[T]`` bool vectors (usually all False but the last entry, or with resets inside when
    the steps span several episodes). Python lists of numbers and bools are accepted.

    Returns:
        ``GAEResult(advantages, returns)``, ``[T]`` tensors.

    Shape:
        every input ``[T]``; advantages and returns ``[T]``.

    Example:
        >>> gae_episode([1.0, 1.0], [0.5, 0.5], [0.5, 0.0], [False, True],
        ...             discount=1.0, gae_lambda=1.0).returns
        tensor([2., 1.], dtype=torch.float64)
    """
    inputs, dtype, discount, gae_lambda = _prepare(
        "gae_episode", rewards, values, next_values, terminal, truncated, 1, discount, gae_lambda
    )
    return _run(inputs, dtype, discount, gae_lambda, squeeze=True)
