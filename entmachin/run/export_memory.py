"""The memory core of a RogueNet with ``model.memory`` in the ONNX graph: one step of each observation's state.

The graph takes each observation's state and whether its step begins an episode, and gives the next
state; the caller keeps it between steps (``entmachin.deploy.OnnxPolicy`` does, per game):

* inputs: ``memory`` float32 ``[B, S]`` (``S`` the metadata's ``entmachin.memory.state_size``: an LSTM's
  ``h`` then ``c``), ``episode_start`` bool ``[B]`` (the state given is ignored: the episode begins);
* output: ``memory_out`` float32 ``[B, S]``, the state the observation's next step takes.

As in ``entmachin.model.memory``: the trunk's output is averaged over each observation's tokens, the
GRU or LSTM cell steps the state with it, and the projection of the new state is added to every token
before the heads read them.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np
from torch import nn

from entmachin.model.memory import MemoryCore
from entmachin.run.export_ops import _BOOL, _F32, _linear, _np

__all__ = ["memory_step"]


def memory_step(g: Any, core: MemoryCore, x: str, valid: str) -> str:
    """``x`` ``[B, T, d]`` (the trunk's output, ``valid`` bool ``[B, T]`` its real tokens) with the memory's
    projection added to every token; declares the inputs and the output of the module docstring."""
    memory = g.input("memory", _F32, ["n_obs", core.state_size])
    start = g.input("episode_start", _BOOL, ["n_obs"])
    weight = g.cast(g.unsqueeze(valid, 2), _F32)  # [B, T, 1]
    axis = g.const([1], np.int64)
    summed = g.op("ReduceSum", g.op("Mul", x, weight), axis, keepdims=0)  # [B, d]
    count = g.op("Max", g.op("ReduceSum", weight, axis, keepdims=0), g.const(np.float32(1.0)))  # [B, 1]
    pooled = g.op("Div", summed, count)  # [B, d]
    keep = g.op("Sub", g.const(np.float32(1.0)), g.cast(g.unsqueeze(start, 1), _F32))  # [B, 1]
    state = g.op("Mul", memory, keep)  # [B, S]
    if core.kind == "gru":
        hidden = new_state = _gru(g, core.cell, pooled, state, core.size)
    else:
        hidden, cell = _lstm(g, core.cell, pooled, state, core.size)
        new_state = g.op("Concat", hidden, cell, axis=1)  # [B, 2 H]
    g.output(new_state, "memory_out", _F32, ["n_obs", core.state_size])
    added = _linear(g, hidden, core.out, "memory.out")  # [B, d]
    return g.op("Add", x, g.unsqueeze(added, 1))


def _columns(g: Any, value: str, start: int, stop: int) -> str:
    return g.op("Gather", value, g.const(list(range(start, stop)), np.int64), axis=1)


def _gates(g: Any, cell: nn.Module, x: str, h: str, hint: str) -> Tuple[str, str]:
    """``x W_ih^T + b_ih`` and ``h W_hh^T + b_hh`` (each ``[B, k H]``, the gates side by side)."""
    return (g.linear(x, _np(cell.weight_ih), _np(cell.bias_ih), hint + ".ih"),
            g.linear(h, _np(cell.weight_hh), _np(cell.bias_hh), hint + ".hh"))


def _gru(g: Any, cell: nn.GRUCell, x: str, h: str, size: int) -> str:
    """``nn.GRUCell``: gates r, z, n; ``h' = (1 - z) n + z h`` with ``n = tanh(x_n + r h_n)``."""
    gi, gh = _gates(g, cell, x, h, "memory.gru")
    r, z = (g.op("Sigmoid", g.op("Add", _columns(g, gi, k * size, (k + 1) * size),
                                 _columns(g, gh, k * size, (k + 1) * size))) for k in (0, 1))
    n = g.op("Tanh", g.op("Add", _columns(g, gi, 2 * size, 3 * size),
                          g.op("Mul", r, _columns(g, gh, 2 * size, 3 * size))))
    return g.op("Add", g.op("Mul", g.op("Sub", g.const(np.float32(1.0)), z), n), g.op("Mul", z, h))


def _lstm(g: Any, cell: nn.LSTMCell, x: str, state: str, size: int) -> Tuple[str, str]:
    """``nn.LSTMCell`` on ``state`` = ``h`` then ``c``: gates i, f, g, o; ``c' = f c + i g``, ``h' = o tanh(c')``."""
    h, c = _columns(g, state, 0, size), _columns(g, state, size, 2 * size)
    gi, gh = _gates(g, cell, x, h, "memory.lstm")
    gates = g.op("Add", gi, gh)  # [B, 4 H]
    i, f, o = (g.op("Sigmoid", _columns(g, gates, k * size, (k + 1) * size)) for k in (0, 1, 3))
    candidate = g.op("Tanh", _columns(g, gates, 2 * size, 3 * size))
    c_new = g.op("Add", g.op("Mul", f, c), g.op("Mul", i, candidate))
    return g.op("Mul", o, g.op("Tanh", c_new)), c_new
