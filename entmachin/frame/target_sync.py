"""The target network's update and the train / eval switch of the DQN frames, without per-update walks.

``DQN.update()`` used to build two ``state_dict``s per update for the soft target update and to
walk the module tree twice for ``train()`` / ``eval()``; on a small Q-network these walks cost
more than the arithmetic. Both are resolved once, at the frame's construction, into flat lists
(the optimizer holds the parameter list from then on as well):

* :class:`TargetPairs` resolves every ``state_dict`` key of the target network to its module and
  attribute name, on both networks; each update reads the tensors again through those modules'
  ``_parameters`` / ``_buffers`` dicts (so a ``.to()`` or an assignment that replaces a tensor is
  seen) and updates them with one ``torch._foreach_*`` call per kind. The keys and their kinds are
  those the ``state_dict`` way used: floating parameters of the online network are interpolated,
  every other entry (persistent buffers such as input statistics) is copied.
* :class:`ModeSwitch` sets ``training`` on the cached module list, unless a module overrides
  ``nn.Module.train`` (then it calls ``train()`` as before).
"""
from __future__ import annotations

from typing import List, Tuple

import torch
from torch import nn

__all__ = ["TargetPairs", "ModeSwitch"]

_Slot = Tuple[dict, dict, str]  # (target module's dict, online module's dict, attribute name)


def _slot(target: nn.Module, online: nn.Module, key: str) -> _Slot:
    path, _, name = key.rpartition(".")
    t_mod = target.get_submodule(path) if path else target
    o_mod = online.get_submodule(path) if path else online
    kind = "_parameters" if name in t_mod._parameters else "_buffers"
    return getattr(t_mod, kind), getattr(o_mod, kind), name


class TargetPairs:
    """The (target, online) tensors of the target update, resolved once.

    Args:
        online: the Q-network.
        target: the target network (same structure; its ``state_dict`` keys are the ones updated).
    """

    def __init__(self, online: nn.Module, target: nn.Module) -> None:
        params = dict(online.named_parameters())  # deduplicated, as the state_dict way read them
        lerp: List[_Slot] = []
        copy: List[_Slot] = []
        every: List[_Slot] = []
        for key, value in target.state_dict().items():
            slot = _slot(target, online, key)
            every.append(slot)
            (lerp if key in params and value.is_floating_point() else copy).append(slot)
        self._lerp, self._copy, self._every = lerp, copy, every

    @staticmethod
    def _read(slots: List[_Slot]) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
        return [t[name] for t, _, name in slots], [o[name] for _, o, name in slots]  # in place under no_grad

    @torch.no_grad()
    def soft_update(self, rate: float) -> None:
        """``target = lerp(target, online, rate)`` for parameters; the rest is copied."""
        if self._lerp:
            targets, onlines = self._read(self._lerp)
            torch._foreach_lerp_(targets, onlines, rate)
        if self._copy:
            targets, onlines = self._read(self._copy)
            torch._foreach_copy_(targets, onlines)

    @torch.no_grad()
    def copy_all(self) -> None:
        """``target = online`` for every entry (``load_state_dict(online.state_dict())``)."""
        if self._every:
            targets, onlines = self._read(self._every)
            torch._foreach_copy_(targets, onlines)


class ModeSwitch:
    """``net.train(mode)`` on a module list read once.

    Args:
        net: the network whose modules switch together.
    """

    def __init__(self, net: nn.Module) -> None:
        self._net = net
        self._modules = list(net.modules())
        self._plain = all(type(m).train is nn.Module.train for m in self._modules)

    def set(self, mode: bool) -> None:
        """Sets every module's ``training`` flag to ``mode``."""
        if not self._plain:
            self._net.train(mode)
            return
        for module in self._modules:
            module.__dict__["training"] = mode
