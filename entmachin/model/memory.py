"""Memory: a recurrent core after RogueNet's trunk, one state per game row carried from step to step.

Each row's tokens are pooled (mean over the trunk's output), a GRU or LSTM cell steps the row's state
with that summary, and a linear projection of the new state (zero-initialised, so a fresh network acts
as the feed-forward one) is added to every token of the row before the heads and the value read them.

The state of each row is a float ``[B, state_size]`` tensor (an LSTM's ``h`` and ``c`` side by side) given
as ``memory`` with ``episode_start`` (bool ``[B, 1]``: the row's step begins an episode, so the state
given is ignored and starts from zeros). Acting passes one step per row (``sequence_length=1``) and gets
the next state back; training passes ``S`` whole sequences of ``L`` steps laid out time-major (row
``t * S + s`` is step ``t`` of sequence ``s``): the state given at the first step of each sequence starts
the unroll, the states given at later steps are not read, and ``episode_start`` resets the state inside a
sequence where an episode ended (truncated back-propagation through time over each sequence).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import torch
from torch import nn

from entmachin.model.config import MemoryConfig

__all__ = ["MemoryCore", "Recurrence", "memory_size"]


class Recurrence(NamedTuple):
    """One call's recurrent inputs, checked.

    Attributes:
        memory: float ``[S, state_size]``: each sequence's state before its first step.
        episode_start: bool ``[L * S]``: the row's step begins an episode (time-major).
        length: ``L``, the steps of each sequence.
    """

    memory: torch.Tensor
    episode_start: torch.Tensor
    length: int


def memory_size(model: Any) -> int:
    """The width of a model's recurrent state per row (0: the model has no memory)."""
    return int(getattr(model, "memory_size", 0) or 0)


class MemoryCore(nn.Module):
    """The recurrent core: pooled row summary -> GRU / LSTM cell -> projection added to the row's tokens.

    Args:
        d_model: the trunk's width.
        config: the kind and the width of the state.

    Shape:
        pooled: ``[L * S, d_model]`` (time-major) -> ``([L * S, d_model], [S, state_size])``.
    """

    def __init__(self, d_model: int, config: MemoryConfig) -> None:
        super().__init__()
        self.kind, self.size = config.kind, config.size
        self.cell = nn.GRUCell(d_model, config.size) if config.kind == "gru" else nn.LSTMCell(d_model, config.size)
        self.out = nn.Linear(config.size, d_model)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    @property
    def state_size(self) -> int:
        """Floats of state per row: ``size`` for a GRU, ``2 * size`` for an LSTM (``h`` then ``c``)."""
        return self.size if self.kind == "gru" else 2 * self.size

    def recurrence(self, memory: Any, episode_start: Any, n_rows: int, length: int, device: torch.device,
                   where: str) -> Recurrence:
        """Checks one call's recurrent inputs against ``n_rows`` rows in sequences of ``length`` steps.

        Raises:
            ValueError / TypeError: a missing input, a state of another width (a checkpoint's, say), or
                rows that do not make whole sequences.
        """
        if memory is None or episode_start is None:
            missing = "memory" if memory is None else "episode_start"
            raise ValueError(f"{where}: this network has memory (model.memory), but no {missing!r} was given; pass "
                             f"the rows' state (float [B, {self.state_size}]) and episode_start (bool [B, 1]), as "
                             "the frames' collectors and evaluation do")
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(f"{where}: sequence_length must be an int >= 1, got {length!r}")
        if n_rows % length:
            raise ValueError(f"{where}: {n_rows} rows are not whole sequences of sequence_length={length}")
        memory = torch.as_tensor(memory).to(device)
        start = torch.as_tensor(episode_start).to(device)
        n_seq = n_rows // length
        if memory.dim() != 2 or memory.shape[1] != self.state_size:
            raise ValueError(f"{where}: memory has shape {tuple(memory.shape)}; this network's state is "
                             f"[B, {self.state_size}] (model.memory: {self.kind}, size {self.size})")
        if memory.shape[0] not in (n_rows, n_seq):
            raise ValueError(f"{where}: memory has {memory.shape[0]} rows; expected {n_rows} (one per row)")
        if start.dtype != torch.bool or start.numel() != n_rows:
            raise TypeError(f"{where}: episode_start must be bool [B, 1] with B = {n_rows}, got "
                            f"{start.dtype} {tuple(start.shape)}")
        return Recurrence(memory[:n_seq].float(), start.reshape(n_rows), length)

    def forward(self, pooled: torch.Tensor, recurrence: Recurrence) -> Tuple[torch.Tensor, torch.Tensor]:
        length = recurrence.length
        n_seq = pooled.shape[0] // length
        steps = pooled.float().reshape(length, n_seq, -1)  # [L, S, d_model]
        keep = (~recurrence.episode_start).reshape(length, n_seq, 1).float()  # [L, S, 1]
        state: Optional[Any] = recurrence.memory  # [S, state_size]
        outputs = []
        for t in range(length):
            if self.kind == "gru":
                state = self.cell(steps[t], state * keep[t])  # [S, size]
                outputs.append(state)
            else:
                h, c = (state * keep[t]).split(self.size, dim=1)  # [S, size] each
                h, c = self.cell(steps[t], (h, c))
                state = torch.cat([h, c], dim=1)  # [S, 2 * size]
                outputs.append(h)
        hidden = torch.stack(outputs).reshape(length * n_seq, self.size)  # [L * S, size]
        return self.out(hidden).to(pooled.dtype), state
