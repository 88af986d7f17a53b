"""A frame's optimizers, built when first used.

Building a ``torch.optim`` optimizer imports ``torch._dynamo`` (torch's optimizers wrap their methods
in a decorator that imports it on the first call): about a second, as long as importing torch. A
frame built to act, evaluate, play or export never steps an optimizer, so :class:`LazyOptimizers`
builds them when ``update()`` (or anything else that needs the objects) first asks, and a training
run reaches its first environment step that much sooner. A checkpoint loaded before then is checked
against the parameter groups the optimizers will have and kept until they are built.
"""
from __future__ import annotations

import copy
import functools
import inspect
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

__all__ = ["LazyOptimizers", "make_optimizer"]


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
            return ("pending", copy.deepcopy(self._pending))
        return ("built", copy.deepcopy([opt.state_dict() for opt in self._built]))

    def restore(self, snapshot: Any) -> None:
        kind, states = snapshot
        if kind == "built":
            self.load_state_dicts(states)
        elif self._built is None:
            self._pending = states
        else:  # built since the snapshot was taken from fresh optimizers: nothing was loaded then
            self._built, self._pending = None, states
