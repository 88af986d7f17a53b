"""The memory core of a RogueNet with ``model.memory`` in the ONNX graph: one step of each observation's state.

The graph takes each observation's state and whether its step begins an episode, and gives the next
state; the caller keeps it between steps (``entmachin.deploy.OnnxPolicy`` does, per game):

* inputs: ``memory`` float32 ``[B, S]`` (``S`` the metadata's ``entmachin.memory.state_size``: an LSTM's
  ``h`` then ``c``), ``episode_start`` bool ``[B]`` (the state given is ignored: the episode begins);
* output: ``memory_out`` float32 ``[B, S]``, the state the observation's next step takes.

As in ``entmachin.model.memory``: the trunk's output is averaged over each observation's tokens, the
GRU or LSTM cell steps the state with it, and the projection of the new state is added to every token
before the heads read them.

Per-entity memory (``model.memory.per_entity``, ``EntityMemoryCore``) adds, per entity type ``t``:

* input ``entity_memory/<t>`` float32 ``[N_t, E]`` (``E`` the metadata's ``entmachin.entity_memory.state_size``),
  laid out like ``features/<t>``: the state each entity reached at its previous appearance in the episode,
  zeros for one seen the first time (``episode_start`` zeroes its row's states too);
* output ``entity_memory_out/<t>`` float32 ``[N_t, E]``, each entity's next state in the same layout.

Each entity's token of the trunk's output steps its own cell (the row core's, op by op), and the
projection of its new state is added to that token after the row's projection.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np
from torch import nn

from entmachin.model.memory import EntityMemoryCore, MemoryCore
from entmachin.run.export_ops import _BOOL, _F32, _linear, _np

__all__ = ["entity_memory_step", "memory_step"]


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
    hidden, new_state = _cell_step(g, core, pooled, g.op("Mul", memory, keep), "memory")  # [B, H], [B, S]
    g.output(new_state, "memory_out", _F32, ["n_obs", core.state_size])
    added = _linear(g, hidden, core.out, "memory.out")  # [B, d]
    return g.op("Add", x, g.unsqueeze(added, 1))


def entity_memory_step(g: Any, core: EntityMemoryCore, trunk: str, x: str, tokens: Dict[str, Tuple[str, str]]) -> str:
    """``x`` ``[B, T, d]`` (the trunk's output ``trunk`` with the row memory's projection) with each entity's
    projection added to its token; declares the per-entity inputs and outputs of the module docstring.

    Args:
        tokens: entity type -> (its entities' slots in the flat ``[B * T]`` token layout, their rows), int64
            ``[N_t]`` each, in ``features/<t>``'s order.
    """
    types = list(tokens)
    if not types:
        return x
    flat = g.op("Reshape", trunk, g.const([-1, core.cell.input_size], np.int64))  # [B * T, d]
    keep = g.op("Sub", g.const(np.float32(1.0)), g.cast(g.unsqueeze("episode_start", 1), _F32))  # [B, 1]
    states, inputs, sizes = [], [], []
    for t in types:
        slots, rows = tokens[t]
        given = g.input(f"entity_memory/{t}", _F32, [f"n_entities/{t}", core.state_size])
        states.append(g.op("Mul", given, g.op("Gather", keep, rows)))  # [N_t, E]
        inputs.append(g.op("Gather", flat, slots))  # [N_t, d]
        sizes.append(g.op("Shape", slots))  # [1]
    # One cell over every type's entities (its weights written once), split back per type below.
    hidden, new_state = _cell_step(g, core, g.op("Concat", *inputs, axis=0), g.op("Concat", *states, axis=0),
                                   "entity_memory")  # [N, H], [N, E]
    ends = g.op("CumSum", g.op("Concat", *sizes, axis=0), g.const(0, np.int64))  # [n_types]
    for k, t in enumerate(types):
        start = g.const([0], np.int64) if k == 0 else g.op("Slice", ends, g.const([k - 1], np.int64),
                                                               g.const([k], np.int64))
        end = g.op("Slice", ends, g.const([k], np.int64), g.const([k + 1], np.int64))
        g.output(g.op("Slice", new_state, start, end, g.const([0], np.int64)), f"entity_memory_out/{t}", _F32,
                 [f"n_entities/{t}", core.state_size])
    added = _linear(g, hidden, core.out, "entity_memory.out")  # [N, d]
    slots = g.unsqueeze(g.op("Concat", *[tokens[t][0] for t in types], axis=0), 1)  # [N, 1]
    scattered = g.op("ScatterND", g.zeros(g.op("Shape", flat)), slots, added)  # [B * T, d]
    return g.op("Add", x, g.op("Reshape", scattered, g.op("Shape", x)))


def _cell_step(g: Any, core: Any, x: str, state: str, hint: str) -> Tuple[str, str]:
    """One step of a core's GRU / LSTM cell from ``state`` ``[n, S]``: the new hidden state ``[n, H]`` (what the
    core projects) and the new state ``[n, S]`` (an LSTM's ``h`` then ``c``)."""
    if core.kind == "gru":
        hidden = _gru(g, core.cell, x, state, core.size, hint)
        return hidden, hidden
    hidden, cell = _lstm(g, core.cell, x, state, core.size, hint)
    return hidden, g.op("Concat", hidden, cell, axis=1)  # [n, 2 H]


def _columns(g: Any, value: str, start: int, stop: int) -> str:
    return g.op("Gather", value, g.const(list(range(start, stop)), np.int64), axis=1)


def _gates(g: Any, cell: nn.Module, x: str, h: str, hint: str) -> Tuple[str, str]:
    """``x W_ih^T + b_ih`` and ``h W_hh^T + b_hh`` (each ``[B, k H]``, the gates side by side)."""
    return (g.linear(x, _np(cell.weight_ih), _np(cell.bias_ih), hint + ".ih"),
            g.linear(h, _np(cell.weight_hh), _np(cell.bias_hh), hint + ".hh"))


def _gru(g: Any, cell: nn.GRUCell, x: str, h: str, size: int, hint: str) -> str:
    """``nn.GRUCell``: gates r, z, n; ``h' = (1 - z) n + z h`` with ``n = tanh(x_n + r h_n)``."""
    gi, gh = _gates(g, cell, x, h, hint + ".gru")
    r, z = (g.op("Sigmoid", g.op("Add", _columns(g, gi, k * size, (k + 1) * size),
                                 _columns(g, gh, k * size, (k + 1) * size))) for k in (0, 1))
    n = g.op("Tanh", g.op("Add", _columns(g, gi, 2 * size, 3 * size),
                          g.op("Mul", r, _columns(g, gh, 2 * size, 3 * size))))
    return g.op("Add", g.op("Mul", g.op("Sub", g.const(np.float32(1.0)), z), n), g.op("Mul", z, h))


def _lstm(g: Any, cell: nn.LSTMCell, x: str, state: str, size: int, hint: str) -> Tuple[str, str]:
    """``nn.LSTMCell`` on ``state`` = ``h`` then ``c``: gates i, f, g, o; ``c' = f c + i g``, ``h' = o tanh(c')``."""
    h, c = _columns(g, state, 0, size), _columns(g, state, size, 2 * size)
    gi, gh = _gates(g, cell, x, h, hint + ".lstm")
    gates = g.op("Add", gi, gh)  # [B, 4 H]
    i, f, o = (g.op("Sigmoid", _columns(g, gates, k * size, (k + 1) * size)) for k in (0, 1, 3))
    candidate = g.op("Tanh", _columns(g, gates, 2 * size, 3 * size))
    c_new = g.op("Add", g.op("Mul", f, c), g.op("Mul", i, candidate))
    return g.op("Mul", o, g.op("Tanh", c_new)), c_new
