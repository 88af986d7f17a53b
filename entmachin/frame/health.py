"""The error that ends a frame's updates once they keep skipping their steps for non-finite values.

``update()`` skips an optimizer step whose losses or gradients are not finite, with a warning
(:mod:`entmachin.frame.stepping`). A frame whose every step of an optimizer is skipped update
after update has stopped learning (usually its parameters or input statistics went non-finite,
or the rewards' scale overflows a loss), so after ``MAX_SKIPPED_UPDATES`` such updates in a row
``update()`` raises :class:`NonFiniteUpdateError` saying which term went non-finite and whether
parameters or input statistics already are.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Sequence, Tuple

import torch

from entmachin.model.input_norm import InputNorm

__all__ = ["MAX_SKIPPED_UPDATES", "NonFiniteUpdateError", "non_finite_error"]

MAX_SKIPPED_UPDATES = 3
_LISTED = 5  # names listed in the message before "..."


class NonFiniteUpdateError(RuntimeError):
    """``MAX_SKIPPED_UPDATES`` updates in a row skipped every step of an optimizer."""


def _non_finite(named: Iterable[Tuple[str, torch.Tensor]]) -> List[str]:
    """Names of the floating-point tensors that hold a nan or inf (one host sync)."""
    named = [(name, t) for name, t in named if t.is_floating_point() and t.numel()]
    if not named:
        return []
    flags = torch.stack([torch.isfinite(t.detach()).all().cpu() for _, t in named]).tolist()
    return [name for (name, _), ok in zip(named, flags) if not ok]


def _networks(frame: Any) -> List[Tuple[str, Any]]:
    return [(label, getattr(frame, label)) for label in frame.network_names]


def _parameters(frame: Any) -> List[Tuple[str, torch.Tensor]]:
    """``<first network>.<name>``, then the second network's parameters the first lacks."""
    out, seen = [], set()
    for label, model in _networks(frame):
        for name, p in model.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append((f"{label}.{name}", p))
    return out


def _input_statistics(frame: Any) -> List[Tuple[str, torch.Tensor]]:
    """The buffers of the networks' ``InputNorm`` modules, named as above."""
    out, seen = [], set()
    for label, model in _networks(frame):
        for module_name, module in model.named_modules():
            if isinstance(module, InputNorm) and id(module) not in seen:
                seen.add(id(module))
                prefix = f"{label}.{module_name}." if module_name else f"{label}."
                out.extend((prefix + name, b) for name, b in module.named_buffers(recurse=False))
    return out


def _listing(names: List[str]) -> str:
    return ", ".join(names[:_LISTED]) + (f", ... ({len(names)} in all)" if len(names) > _LISTED else "")


def non_finite_error(frame: Any, non_finite: Sequence[str], failing: List[str]) -> NonFiniteUpdateError:
    """The error for ``failing`` optimizers, with what went non-finite and what already is."""
    params = _non_finite(_parameters(frame))
    norms = _input_statistics(frame)
    statistics = _non_finite(norms)
    what = ", ".join(non_finite) or "nothing (the steps were skipped for another reason)"
    if params:
        params_text = f"the parameters already are non-finite ({_listing(params)})"
    else:
        params_text = "the parameters are finite"
    if not norms:
        stats_text = "there are no input statistics"
    elif statistics:
        stats_text = f"input statistics already are non-finite ({_listing(statistics)})"
    else:
        stats_text = "input statistics are finite"
    steps = " and ".join(f"every {w} step" for w in failing)
    return NonFiniteUpdateError(
        f"{type(frame).__name__}.update: {MAX_SKIPPED_UPDATES} updates in a row skipped {steps} for non-finite "
        f"values; in the last one: {what}. Now {params_text}; {stats_text}. The frame is as that update left it "
        "(its rows consumed, skipped steps not applied): restore a checkpoint with load(), lower the learning "
        "rates, or check the scale of the rewards and inputs"
    )

