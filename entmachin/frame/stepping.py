"""Optimizer steps that never apply a non-finite value, and the one failure rule of every frame.

A frame's ``update()`` hands each minibatch's losses to :meth:`UpdateSteps.step`, which keeps
everything that is not the algorithm's mathematics out of it:

* one backward pass over the sum of the losses serves every optimizer (separate actor and critic
  have disjoint parameters, so each gets exactly the gradients of its own loss), then the
  data-parallel hook averages gradients over the ranks;
* one host sync decides, per optimizer, whether its losses and its gradients' norm (and any tensor
  the frame requires, such as DQN's TD errors) are finite;
* a step that is not is skipped with a warning naming the term, its parameters and optimizer state
  untouched; the others are clipped to ``gradient_max`` and taken, all inside the interrupt guard's
  critical section (below): every step of the minibatch, or none.

**The failure rule** (A2C, PPO and DQN alike): an update in which every step an optimizer attempted
was skipped counts against that optimizer; an update in which it made one step resets its count.
After :data:`MAX_SKIPPED_UPDATES` such updates in a row, ``update()`` raises :class:`NonFiniteUpdateError`,
saying which term went non-finite and whether parameters or input statistics already are (the frame stopped
learning: usually its parameters or input statistics went non-finite, or the rewards' scale overflows a loss).
One overflowing minibatch costs one step; a frame that has diverged stops with an error.

**The interrupt guard**: Ctrl-C (SIGINT) never lands in the middle of an optimizer step. A
``KeyboardInterrupt`` between two bytecodes of ``optimizer.step()`` (non-fused optimizers update parameter
after parameter in Python) or between the actor's and the critic's step would leave a frame half-stepped, so
``update()`` installs the guard once and marks each minibatch's steps as one critical section::

    with InterruptGuard() as guard:      # installs the SIGINT handler, restores the previous one
        loss.backward()                  # Ctrl-C here raises at once, as usual
        with guard.step:                 # Ctrl-C here is held ...
            actor_optim.step()
            critic_optim.step()
        # ... and raised here, right after the steps

The handler is installed only in the main thread and only when the current SIGINT handler is a Python
callable (Python's default or a user's own); deferred or not, that handler is what finally runs. With
``SIG_IGN``, ``SIG_DFL`` or a handler installed outside Python nothing is installed, and other threads are left
alone.

**The optimizers are built when first used** (:class:`LazyOptimizers`). Building a ``torch.optim`` optimizer
imports ``torch._dynamo`` (torch wraps the optimizer's methods in a decorator that imports it on the first call):
about a second, as long as importing torch. A frame built to act, evaluate, play or export never steps an
optimizer, and a training run reaches its first environment step that much sooner. A checkpoint loaded before
they exist is checked against the parameter groups they will have and kept until they are built.
"""
from __future__ import annotations

import copy
import functools
import inspect
import math
import signal
import threading
import warnings
from types import FrameType
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from entmachin.model.input_norm import InputNorm

__all__ = ["InterruptGuard", "OptimizerStep", "UpdateSteps", "MAX_SKIPPED_UPDATES", "NonFiniteUpdateError",
           "non_finite_error", "LazyOptimizers", "make_optimizer"]

MAX_SKIPPED_UPDATES = 3
_LISTED = 5  # names listed in the message before "..."


class NonFiniteUpdateError(RuntimeError):
    """``MAX_SKIPPED_UPDATES`` updates in a row skipped every step of an optimizer."""


def _finiteness(what: str, named: List[Tuple[str, torch.Tensor]]) -> str:
    """``'<what> are finite'``, or ``'<what> already are non-finite (<names>)'`` naming the floating-point
    tensors that hold a nan or inf (found with one host sync)."""
    named = [(name, t) for name, t in named if t.is_floating_point() and t.numel()]
    flags = _finite_flags([t for _, t in named])
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


class OptimizerStep(NamedTuple):
    """One optimizer's share of a minibatch: the named loss terms it trains on and its parameters.

    ``what`` names the optimizer in warnings and counts: ``"actor"``, ``"critic"``, ``"shared"``
    (one optimizer for both) or ``"qnet"``.
    """

    optimizer: torch.optim.Optimizer
    params: List[nn.Parameter]
    terms: Dict[str, torch.Tensor]
    what: str


class UpdateSteps:
    """The optimizer steps of one ``update()`` and what was skipped (see the module docstring).

    Args:
        where: the update in warnings, e.g. ``"PPO.update"``.
        guard: the update's interrupt guard.
        gradient_max: the total gradient norm each step is clipped to (inf: no clipping).
        data_parallel: None, or the frame's data-parallel hooks (``average_gradients``).

    Attributes:
        tally: per optimizer, ``[attempted, skipped]`` steps.
        non_finite: what made steps skip, in order ("policy loss", "entropy", "gradients of ...").
    """

    def __init__(self, where: str, guard: InterruptGuard, gradient_max: float, data_parallel: Any = None) -> None:
        self.where, self.guard, self.data_parallel = where, guard, data_parallel
        self.gradient_max = gradient_max
        self.tally: Dict[str, List[int]] = {}
        self.non_finite: Dict[str, None] = {}  # an ordered set

    def step(self, steps: Sequence[OptimizerStep], parts: Mapping[str, torch.Tensor] = {},
             require: Mapping[str, torch.Tensor] = {}) -> bool:
        """Steps each optimizer on its terms unless a term, its gradients or a ``require``d tensor is
        not finite; returns whether every step was taken.

        ``parts`` names the pieces of a term (a policy loss's surrogate and entropy) so that a
        non-finite term is traced to the piece that made it so.
        """
        if not steps:
            return all(_finite_flags(list(require.values())))
        for step in steps:
            _zero_grad(step)
        terms = [term for step in steps for term in step.terms.values()]
        total = terms[0]
        for term in terms[1:]:  # not sum(terms): its 0 + first term is one more node to run both ways
            total = total + term
        total.backward()
        if self.data_parallel is not None:
            self.data_parallel.average_gradients([p for step in steps for p in step.params], terms)
        with_grad = [[p for p in step.params if p.grad is not None] for step in steps]
        norms = [torch.nn.utils.get_total_norm([p.grad for p in ps]) if ps else None for ps in with_grad]
        flags = iter(_finite_flags(terms + [n for n in norms if n is not None] + list(require.values())))
        term_ok = [[next(flags) for _ in step.terms] for step in steps]
        norm_ok = [norm is None or next(flags) for norm in norms]
        required_ok = [next(flags) for _ in require]
        taken = True
        with self.guard.step:  # every step of the minibatch, or none
            for step, ok, params, norm, grads_ok in zip(steps, term_ok, with_grad, norms, norm_ok):
                counts = self.tally.setdefault(step.what, [0, 0])
                counts[0] += 1
                if all(ok) and grads_ok and all(required_ok):
                    if norm is not None and math.isfinite(self.gradient_max):
                        torch.nn.utils.clip_grads_with_norm_(params, self.gradient_max, norm)
                    step.optimizer.step()
                    continue
                _zero_grad(step)
                counts[1] += 1
                taken = False
                names = [n for n, good in zip(require, required_ok) if not good]
                if not all(ok):
                    names += _non_finite_terms(step, ok, parts)
                elif not grads_ok:
                    names.append(f"gradients of {' + '.join(step.terms)}")
                self.non_finite.update(dict.fromkeys(names))
                warnings.warn(f"{self.where}: non-finite {', '.join(names)}; skipped this {step.what} step "
                              "(parameters and optimizer state unchanged)", RuntimeWarning, stacklevel=4)
        return taken

    @property
    def skipped(self) -> int:
        """Steps skipped in this update."""
        return sum(skipped for _, skipped in self.tally.values())

    def failing(self, counts: Dict[str, int]) -> List[str]:
        """Moves the frame's per-optimizer ``counts`` of updates in a row whose every step was
        skipped by this update; returns the optimizers at the limit."""
        for what, (attempted, skipped) in self.tally.items():
            if attempted:
                counts[what] = counts.get(what, 0) + 1 if skipped == attempted else 0
        return [what for what, n in counts.items() if n >= MAX_SKIPPED_UPDATES]


def _zero_grad(step: OptimizerStep) -> None:
    """``optimizer.zero_grad(set_to_none=True)``: for an optimizer that keeps ``Optimizer``'s own, the same
    assignments on the step's parameters (all of its optimizer's) without its per-call profiler scaffolding."""
    if type(step.optimizer).zero_grad is not torch.optim.Optimizer.zero_grad:
        step.optimizer.zero_grad(set_to_none=True)
        return
    for p in step.params:
        p.grad = None


def _finite_flags(tensors: List[torch.Tensor]) -> List[bool]:
    """Whether each tensor is finite everywhere, with one host sync; scalars of one dtype and device (losses and
    norms, the usual case) in one stacked check."""
    if not tensors:
        return []
    first = tensors[0]
    if all(t.dim() == 0 and t.dtype == first.dtype and t.device == first.device for t in tensors):
        return torch.isfinite(torch.stack([t.detach() for t in tensors])).tolist()
    return torch.stack([torch.isfinite(t.detach()).all().to(first.device) for t in tensors]).tolist()


def _non_finite_terms(step: OptimizerStep, ok: List[bool], parts: Mapping[str, torch.Tensor]) -> List[str]:
    """Names of the step's non-finite terms; a term with ``parts`` is traced to the bad ones."""
    bad = [n for n, good in zip(step.terms, ok) if not good]
    if "policy loss" in bad and parts:  # a rare path: extra host syncs are fine
        traced = [n for n, t in parts.items() if not bool(torch.isfinite(t.detach()).all())]
        bad = [*(traced or ["policy loss"]), *(n for n in bad if n != "policy loss")]
    return bad


class _CriticalSection:
    """``with guard.step:``: a SIGINT arriving inside is delivered when the block ends."""

    __slots__ = ("_guard",)

    def __init__(self, guard: "InterruptGuard") -> None:
        self._guard = guard

    def __enter__(self) -> None:
        self._guard._depth += 1

    def __exit__(self, *exc: Any) -> None:
        guard = self._guard
        guard._depth -= 1
        if guard._depth == 0 and guard._pending is not None:
            pending, guard._pending = guard._pending, None
            guard._previous(*pending)  # Python's default handler raises KeyboardInterrupt here


class InterruptGuard:
    """Defers SIGINT across critical sections for the duration of a ``with`` block.

    Attributes:
        step: the critical-section context manager (reusable, nestable, cheap to enter).
        installed: whether the handler was installed by the current ``with`` block.
    """

    def __init__(self) -> None:
        self.step = _CriticalSection(self)
        self.installed = False
        self._depth = 0
        self._pending: Optional[Tuple[int, Optional[FrameType]]] = None
        self._previous: Callable[[int, Optional[FrameType]], Any] = signal.default_int_handler

    def __enter__(self) -> "InterruptGuard":
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):  # SIG_IGN, SIG_DFL, or a handler set outside Python (None)
            return self
        self._previous = previous
        signal.signal(signal.SIGINT, self._handle)
        self.installed = True
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self.installed:
            signal.signal(signal.SIGINT, self._previous)
            self.installed = False
        pending, self._pending = self._pending, None
        if pending is not None and exc_type is None:
            self._previous(*pending)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self._depth:
            self._pending = (signum, frame)
            return
        self._previous(signum, frame)


# ------------------------------------------------------------------ the optimizers, built when first used

def make_optimizer(optimizer: Any, params: Any, lr: float) -> torch.optim.Optimizer:
    """``optimizer(params, lr=lr)``; a ``torch.optim`` class with a fused implementation (``Adam``, ``AdamW``,
    ``SGD``, ``Adagrad``: one kernel for every parameter, the same arithmetic) gets it unless it refuses
    ``fused=True`` for these parameters. Factories (``functools.partial``, lambdas) are called as given."""
    if not (isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer)
            and "fused" in inspect.signature(optimizer.__init__).parameters):
        return optimizer(params, lr=lr)
    try:
        return optimizer(params, lr=lr, fused=True)
    except (RuntimeError, ValueError, TypeError):
        return optimizer(params, lr=lr)


class LazyOptimizers:
    """The optimizers of a frame: ``optimizer(groups, lr=lr)`` for each ``(groups, lr)`` of ``specs``, built by
    :meth:`get` the first time it is called.

    Args:
        optimizer: an optimizer class or factory, as the frames take it.
        specs: per optimizer, its parameters (a list of tensors, or of param-group dicts with ``"params"``) and
            its learning rate.
        on_built: called once with the optimizers right after they are built (before a pending checkpoint's
            states are loaded into them), e.g. to read their initial learning rates.
    """

    def __init__(self, optimizer: Any, specs: Sequence[Any], on_built: Optional[Callable[[List[Any]], None]] = None
                 ) -> None:
        self._optimizer, self._specs, self._on_built = optimizer, list(specs), on_built
        self._built: Optional[List[Any]] = None
        self._pending: Optional[List[Dict[str, Any]]] = None  # a checkpoint's states, for when they are built

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def built(self) -> bool:
        return self._built is not None

    def get(self) -> List[Any]:
        """The optimizers, built (and given a pending checkpoint's states) on the first call."""
        if self._built is None:
            built = [make_optimizer(self._optimizer, params, lr) for params, lr in self._specs]
            if self._on_built is not None:
                self._on_built(built)
            if self._pending is not None:
                for opt, state in zip(built, self._pending):
                    opt.load_state_dict(state)
            self._built, self._pending = built, None
        return self._built

    def class_name(self, i: int) -> str:
        """The class name optimizer ``i`` has or will have (building them only for a factory that names no class)."""
        if self._built is None:
            target = self._optimizer.func if isinstance(self._optimizer, functools.partial) else self._optimizer
            if isinstance(target, type):
                return target.__name__
        return type(self.get()[i]).__name__

    def param_groups(self, i: int) -> List[List[torch.Tensor]]:
        """The parameters of each group of optimizer ``i``, as it has or will have them."""
        if self._built is not None:
            return [list(group["params"]) for group in self._built[i].param_groups]
        params = list(self._specs[i][0])
        if params and isinstance(params[0], dict):
            return [list(group["params"]) for group in params]
        return [params]

    def state_dicts(self) -> List[Dict[str, Any]]:
        """Each optimizer's ``state_dict`` (a pending checkpoint's, not yet loaded, as it will be)."""
        if self._built is None and self._pending is not None:
            return copy.deepcopy(self._pending)
        return [opt.state_dict() for opt in self.get()]

    def load_state_dicts(self, states: Sequence[Dict[str, Any]]) -> None:
        """Loads ``states`` (checked by the caller) into the optimizers, or keeps them until they are built."""
        if self._built is None:
            self._pending = copy.deepcopy(list(states))
            return
        for opt, state in zip(self._built, states):
            opt.load_state_dict(state)

    def snapshot(self) -> Any:
        """What :meth:`restore` needs to put the optimizers' states back as they are now (builds nothing)."""
        if self._built is None:
            return False, copy.deepcopy(self._pending)
        return True, copy.deepcopy([opt.state_dict() for opt in self._built])

    def restore(self, snapshot: Any) -> None:
        """The optimizers' states as :meth:`snapshot` saw them (unbuilt then: unbuilt again, with what was pending)."""
        built, states = snapshot
        if built:
            self.load_state_dicts(states)
        else:
            self._built, self._pending = None, states
