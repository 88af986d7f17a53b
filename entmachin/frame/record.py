"""The rollout record: what an on-policy frame stores and what its ``update()`` reads.

``store_episode`` / ``store_rollout`` build one :class:`Rollout` per call (checked once, with
value targets and advantages computed), append it to the frame's buffer as a transition and
``update()`` reads the buffer back as one ``Rollout`` of every stored row, then takes
minibatches of it with :meth:`Rollout.minibatch`. Fields are read by name everywhere; the buffer
keys stay Machin-like (``value`` for the return target, ``gae`` for the advantage), so a user
sampling the buffer directly sees the same columns as before.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple

import torch

from entmachin.buffer import RolloutBuffer, TransitionBase
from entmachin.ragged import arrdict

__all__ = ["Rollout", "BUFFER_KEYS", "MAJOR_ATTRS"]

# Rollout field -> the buffer's attribute name.
BUFFER_KEYS: Dict[str, str] = {
    "state": "state", "action": "action", "reward": "reward", "terminal": "terminal", "truncated": "truncated",
    "value_target": "value", "advantage": "gae",
}
MAJOR_ATTRS = ("state", "action")  # the buffer's dicts of values; the other fields are columns


class Rollout(NamedTuple):
    """``N`` stored rows (step-major when they came from a rollout).

    Attributes:
        state: tree of ``N`` rows (a canonical entity state or Machin's ``{"state": tensor}``).
        action: tree of ``N`` rows, as the actor's ``action`` keywords take them.
        reward: float32 ``[N, 1]``.
        terminal: bool ``[N, 1]``.
        truncated: bool ``[N, 1]``.
        value_target: float32 ``[N, 1]``, the return the critic learns (buffer key ``value``).
        advantage: float32 ``[N, 1]``, GAE's advantage (buffer key ``gae``).
    """

    state: Any
    action: Any
    reward: torch.Tensor
    terminal: torch.Tensor
    truncated: torch.Tensor
    value_target: torch.Tensor
    advantage: torch.Tensor

    @property
    def n_rows(self) -> int:
        return int(self.advantage.shape[0])

    @property
    def old_value(self) -> torch.Tensor:
        """The critic's values when the rows were stored, ``[N, 1]`` (target minus advantage)."""
        return self.value_target - self.advantage

    def rows(self, index: torch.Tensor) -> "Rollout":
        """The rows ``index`` (int64 ``[b]``), every field gathered on its own device."""
        return Rollout(*(_take(value, index) for value in self))

    def minibatch(self, index: torch.Tensor) -> "Rollout":
        """The rows ``index`` (int64 ``[b]``) of the fields ``update()`` reads: ``state``,
        ``action``, ``value_target`` and ``advantage`` (and so ``old_value``); ``reward``,
        ``terminal`` and ``truncated`` are None."""
        return Rollout(_take(self.state, index), _take(self.action, index), None, None, None,
                       _take(self.value_target, index), _take(self.advantage, index))

    def buffer_data(self) -> Dict[str, Any]:
        """The fields under the buffer's attribute names (``Buffer.append_trusted``'s input)."""
        return {BUFFER_KEYS[f]: value for f, value in zip(self._fields, self)}

    def to_transition(self) -> TransitionBase:
        """The record as one multi-row transition: ``state`` and ``action`` major, the rest sub."""
        return TransitionBase.from_data(self.buffer_data(), MAJOR_ATTRS)

    @classmethod
    def read(cls, buffer: Any) -> "Rollout":
        """Every row of an on-policy ``buffer`` as one record: the rows a ``RolloutBuffer``
        holds by reference, else ``sample_batch(..., "all")``'s copy."""
        held = buffer.held() if isinstance(buffer, RolloutBuffer) else None
        if held is not None:
            return cls(*(arrdict(held[BUFFER_KEYS[f]]) if f in MAJOR_ATTRS else held[BUFFER_KEYS[f]]
                         for f in cls._fields))
        _, values = buffer.sample_batch(buffer.size(), sample_method="all",
                                        sample_attrs=[BUFFER_KEYS[f] for f in cls._fields])
        return cls(*values)


def _take(value: Any, index: torch.Tensor) -> Any:
    """Rows ``index`` of a field: a tensor gathered on its own device, a tree by its ``[]``."""
    return value[index.to(value.device)] if isinstance(value, torch.Tensor) else value[index]
