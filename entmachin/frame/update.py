"""Pure helpers of ``update()``: the minibatch schedule, finiteness flags, means, diagnostics.

The update itself is the frame's (``A2C.update`` and the methods it calls, in ``a2c.py``). The
schedule walks shuffled epochs: each epoch is a fresh permutation of the rows cut into
``ceil(N / batch_size)`` near-equal minibatches (so none is much smaller than the others), and
minibatch ``i`` of the update serves both the policy step (while ``i < actor_update_times``) and
the value step (while ``i < critic_update_times``).
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import numpy as np
import torch

__all__ = ["minibatch_schedule", "finite_flags", "total_norms", "clip_grads", "zero_grad", "mean_of",
           "explained_variance"]


def minibatch_schedule(n_rows: int, batch_size: int, n_minibatches: int, rng: np.random.Generator) -> List[np.ndarray]:
    """``n_minibatches`` int64 index arrays walking shuffled epochs over ``n_rows`` rows.

    Within an epoch no row repeats; every epoch is a new permutation cut into
    ``ceil(n_rows / batch_size)`` near-equal parts.
    """
    per_epoch = max(1, math.ceil(n_rows / batch_size))
    out: List[np.ndarray] = []
    while len(out) < n_minibatches:
        permutation = rng.permutation(n_rows).astype(np.int64)  # [N]
        out.extend(np.array_split(permutation, per_epoch))
    return out[:n_minibatches]


def finite_flags(values: List[torch.Tensor]) -> List[bool]:
    """Whether each scalar tensor is finite, with one host sync for all of them."""
    if not values:
        return []
    first = values[0]
    if all(v.dtype == first.dtype and v.device == first.device for v in values):
        return torch.isfinite(torch.stack([v.detach().reshape(()) for v in values])).tolist()
    return torch.stack([torch.isfinite(v.detach()).all().cpu() for v in values]).tolist()


def total_norms(groups: List[List[torch.Tensor]]) -> List[Optional[torch.Tensor]]:
    """``torch.nn.utils.get_total_norm`` (2-norm) of each group of gradients (None for an empty
    group), bit-identical to it.

    When every gradient is a plain tensor of one dtype on one CPU or CUDA device (the usual
    case), one ``_foreach_norm`` over all the groups' gradients replaces one per group: the
    per-tensor norms do not depend on the list they come in, and each total is then reduced
    exactly as ``get_total_norm`` reduces it. Anything else goes through ``get_total_norm``.
    """
    flat = [g for group in groups for g in group]
    if not flat:
        return [None for _ in groups]
    first = flat[0]
    device, dtype = first.device, first.dtype
    if len(groups) == 1 or device.type not in ("cpu", "cuda") or not all(
            type(g) is torch.Tensor and g.device == device and g.dtype == dtype for g in flat):
        return [torch.nn.utils.get_total_norm(group) if group else None for group in groups]
    with torch.no_grad():
        per_tensor = torch._foreach_norm(flat, 2.0)  # one norm per gradient
        out: List[Optional[torch.Tensor]] = []
        start = 0
        for group in groups:
            end = start + len(group)
            out.append(torch.linalg.vector_norm(torch.stack(per_tensor[start:end]), 2.0) if group else None)
            start = end
    return out


def clip_grads(groups: List[Tuple[List[torch.Tensor], torch.Tensor]], max_norm: float) -> None:
    """``torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm)`` for each ``(params, norm)``
    group (parameters that have gradients), bit-identical to it.

    When every gradient and norm is a plain tensor on one CPU or CUDA device (the usual case),
    the groups' clip coefficients come from one stacked computation, the same arithmetic per
    element; anything else goes through ``clip_grads_with_norm_`` group by group.
    """
    norms = [norm for _, norm in groups]
    grads = [[p.grad for p in params] for params, _ in groups]
    device, dtype = norms[0].device, norms[0].dtype
    if len(groups) == 1 or device.type not in ("cpu", "cuda") or not all(
            type(t) is torch.Tensor and t.device == device and t.dtype == dtype
            for group, norm in zip(grads, norms) for t in (norm, *group)):
        for params, norm in groups:
            torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm)
        return
    with torch.no_grad():
        coefs = torch.clamp(max_norm / (torch.stack(norms) + 1e-6), max=1.0)  # [n_groups]
        for group, coef in zip(grads, coefs):
            torch._foreach_mul_(group, coef)


def zero_grad(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.zero_grad(set_to_none=True)``; for optimizers that keep ``Optimizer``'s own
    ``zero_grad``, the same assignments without its per-call profiling scaffolding."""
    if type(optimizer).zero_grad is not torch.optim.Optimizer.zero_grad:
        optimizer.zero_grad(set_to_none=True)
        return
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None


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
