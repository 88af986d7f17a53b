"""Updates that keep skipping their steps for non-finite values end in an error, not warnings.

``update()`` skips an optimizer step whose losses or gradients are not finite, with a warning.
A frame whose every step of an optimizer is skipped update after update has stopped learning
(usually its parameters or input statistics went non-finite, or the rewards' scale overflows
a loss), so after ``MAX_SKIPPED_UPDATES`` such updates in a row ``update()`` raises
:class:`NonFiniteUpdateError` saying which term went non-finite and whether parameters or
input statistics already are. Counts are per optimizer (``"actor"``, ``"critic"``, or
``"shared"`` when one optimizer trains both): an update in which the optimizer made at least
one step resets its count; one in which it attempted none leaves the count alone.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

import torch

from entmachin.frame.summary import UpdateStats
from entmachin.model.input_norm import InputNorm

__all__ = ["MAX_SKIPPED_UPDATES", "NonFiniteUpdateError", "count_skipped_updates", "non_finite_error"]

MAX_SKIPPED_UPDATES = 3
_LISTED = 5  # names listed in the message before "..."


class NonFiniteUpdateError(RuntimeError):
    """``MAX_SKIPPED_UPDATES`` updates in a row skipped every step of an optimizer."""


def count_skipped_updates(counts: Dict[str, int], stats: UpdateStats) -> List[str]:
    """Moves the per-optimizer counts of ``counts`` by one update; returns those at the limit."""
    for what, (attempted, skipped) in stats.optimizer_steps.items():
        if attempted:
            counts[what] = counts.get(what, 0) + 1 if skipped == attempted else 0
    return [what for what, n in counts.items() if n >= MAX_SKIPPED_UPDATES]


def _non_finite(named: Iterable[Tuple[str, torch.Tensor]]) -> List[str]:
    """Names of the floating-point tensors that hold a nan or inf (one host sync)."""
    named = [(name, t) for name, t in named if t.is_floating_point() and t.numel()]
    if not named:
        return []
    flags = torch.stack([torch.isfinite(t.detach()).all().cpu() for _, t in named]).tolist()
    return [name for (name, _), ok in zip(named, flags) if not ok]


def _parameters(frame: Any) -> List[Tuple[str, torch.Tensor]]:
    """``actor.<name>``, then ``critic.<name>`` for the parameters the actor lacks."""
    out, seen = [], set()
    for label, model in (("actor", frame.actor), ("critic", frame.critic)):
        for name, p in model.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append((f"{label}.{name}", p))
    return out


def _input_statistics(frame: Any) -> List[Tuple[str, torch.Tensor]]:
    """The buffers of the actor's and critic's ``InputNorm`` modules, named as above."""
    out, seen = [], set()
    for label, model in (("actor", frame.actor), ("critic", frame.critic)):
        for module_name, module in model.named_modules():
            if isinstance(module, InputNorm) and id(module) not in seen:
                seen.add(id(module))
                prefix = f"{label}.{module_name}." if module_name else f"{label}."
                out.extend((prefix + name, b) for name, b in module.named_buffers(recurse=False))
    return out


def _listing(names: List[str]) -> str:
    return ", ".join(names[:_LISTED]) + (f", ... ({len(names)} in all)" if len(names) > _LISTED else "")


def non_finite_error(frame: Any, stats: UpdateStats, failing: List[str]) -> NonFiniteUpdateError:
    """The error for ``failing`` optimizers, with what went non-finite and what already is."""
    params = _non_finite(_parameters(frame))
    norms = _input_statistics(frame)
    statistics = _non_finite(norms)
    what = ", ".join(stats.non_finite) or "nothing (the steps were skipped for another reason)"
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

