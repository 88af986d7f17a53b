"""The error that ends a frame's updates once they keep skipping their steps for non-finite values.

``update()`` skips an optimizer step whose losses or gradients are not finite, with a warning
(:mod:`entmachin.frame.stepping`). A frame whose every step of an optimizer is skipped update after update has
stopped learning (usually its parameters or input statistics went non-finite, or the rewards' scale overflows a
loss), so after ``MAX_SKIPPED_UPDATES`` such updates in a row ``update()`` raises :class:`NonFiniteUpdateError`
saying which term went non-finite and whether parameters or input statistics already are.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import torch

from entmachin.model.input_norm import InputNorm

__all__ = ["MAX_SKIPPED_UPDATES", "NonFiniteUpdateError", "non_finite_error"]

MAX_SKIPPED_UPDATES = 3
_LISTED = 5  # names listed in the message before "..."


class NonFiniteUpdateError(RuntimeError):
    """``MAX_SKIPPED_UPDATES`` updates in a row skipped every step of an optimizer."""


def _finiteness(what: str, named: List[Tuple[str, torch.Tensor]]) -> str:
    """``'<what> are finite'``, or ``'<what> already are non-finite (<names>)'`` naming the floating-point
    tensors that hold a nan or inf (found with one host sync)."""
    named = [(name, t) for name, t in named if t.is_floating_point() and t.numel()]
    flags = torch.stack([torch.isfinite(t.detach()).all().cpu() for _, t in named]).tolist() if named else []
    bad = [name for (name, _), ok in zip(named, flags) if not ok]
    listed = ", ".join(bad[:_LISTED]) + (f", ... ({len(bad)} in all)" if len(bad) > _LISTED else "")
    return f"{what} already are non-finite ({listed})" if bad else f"{what} are finite"


def non_finite_error(frame: Any, non_finite: Sequence[str], failing: List[str]) -> NonFiniteUpdateError:
    """The error for ``failing`` optimizers, with what went non-finite and what already is."""
    params, norms, seen = [], [], set()  # named <network>.<name>; what networks share is listed under the first
    for label in frame.network_names:
        model = getattr(frame, label)
        for name, p in model.named_parameters(prefix=label):
            if id(p) not in seen:
                seen.add(id(p))
                params.append((name, p))
        for name, module in model.named_modules(prefix=label):  # the input statistics: InputNorm buffers
            if isinstance(module, InputNorm) and id(module) not in seen:
                seen.add(id(module))
                norms.extend((f"{name}.{b}", t) for b, t in module.named_buffers(recurse=False))
    what = ", ".join(non_finite) or "nothing (the steps were skipped for another reason)"
    stats_text = _finiteness("input statistics", norms) if norms else "there are no input statistics"
    steps = " and ".join(f"every {w} step" for w in failing)
    return NonFiniteUpdateError(
        f"{type(frame).__name__}.update: {MAX_SKIPPED_UPDATES} updates in a row skipped {steps} for non-finite "
        f"values; in the last one: {what}. Now {_finiteness('the parameters', params)}; {stats_text}. The frame "
        "is as that update left it (its rows consumed, skipped steps not applied): restore a checkpoint with "
        "load(), lower the learning rates, or check the scale of the rewards and inputs"
    )
