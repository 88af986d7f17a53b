"""The ONNX graphs of the dense networks, for ``entmachin export``.

``dense_net_graph`` writes a ``DenseNet`` (what ``model.kind: mlp`` trains) with the interface of
RogueNet's graph (``export_graph``'s docstring) for a space of global features and global actions:
inputs ``global_features`` float32 ``[B, G]`` and per action ``actor_lengths/<a>`` int64 ``[B]`` (0
or 1) with ``mask/<a>`` and ``noise/<a>`` (categorical) or ``low/<a>`` and ``high/<a>``
(continuous); the same outputs. ``OnnxPolicy`` runs it as it runs a RogueNet's.

``dense_graph`` writes an ``MLPActor`` or ``MLPQNet``, which know no spaces: ``state`` float32
``[B, d_state]``, ``mask`` bool ``[B, n]``, ``noise`` float32 ``[B]``; outputs ``probs`` (or ``q``),
``argmax`` and ``sample``.
"""
from __future__ import annotations

from typing import Any, Dict

from torch import nn

from entmachin.model.continuous import ContinuousHead
from entmachin.model.dense import DenseNet
from entmachin.model.q_mlp import MLPQNet
from entmachin.run.export_ops import (
    _BOOL, _F32, _I64, _Rows, _dueling, _gelu, _input_norm, _linear, choices, continuous_head,
)

__all__ = ["dense_graph", "dense_net_graph"]


def _trunk(g: Any, x: str, trunk: nn.Module) -> str:
    """``_DenseTrunk``: the frozen input normalisation, then the hidden layers; ``[B, d_hidden[-1]]``."""
    h = x if trunk.norm is None else _input_norm(g, x, trunk.norm, "norm")
    for i, layer in enumerate(trunk.hidden):
        if isinstance(layer, nn.Linear):
            h = _linear(g, h, layer, f"hidden.{i}")
        elif isinstance(layer, nn.Tanh):
            h = g.op("Tanh", h)
        elif isinstance(layer, nn.ReLU):
            h = g.op("Relu", h)
        else:
            h = _gelu(g, h)
    return h


def dense_net_graph(g: Any, net: DenseNet) -> None:
    """A ``DenseNet``'s policy heads (see the module docstring for the interface)."""
    features = g.input("global_features", _F32, ["n_obs", len(net.obs_space.global_features)])
    h = _trunk(g, features, net.trunk)  # [B, d_hidden[-1]]
    for name, head in zip(net.action_names, net.heads):
        n = f"n_actors/{name}"
        actor_lengths = g.input(f"actor_lengths/{name}", _I64, ["n_obs"])
        if isinstance(head, ContinuousHead):
            low = g.input(f"low/{name}", _F32, [n, head.n_values])
            high = g.input(f"high/{name}", _F32, [n, head.n_values])
            actor_x = g.op("Gather", h, _Rows(g, actor_lengths, g.dim(low, 0)).row)  # [A, d]
            continuous_head(g, name, head, actor_x, low, high)
            continue
        allowed = g.input(f"mask/{name}", _BOOL, [n, head.n_choices])
        noise = g.input(f"noise/{name}", _F32, [n])
        actor_x = g.op("Gather", h, _Rows(g, actor_lengths, g.dim(noise, 0)).row)  # [A, d]
        table, best, sample = choices(g, _linear(g, actor_x, head.proj, f"{name}.proj"), allowed, noise, q=False)
        g.output(table, f"probs/{name}", _F32, [n, head.n_choices])
        g.output(best, f"argmax/{name}", _I64, [n])
        g.output(sample, f"sample/{name}", _I64, [n])


def dense_graph(g: Any, model: nn.Module) -> Dict[str, Any]:
    """An ``MLPActor`` (policy) or ``MLPQNet`` (see the module docstring for the interface)."""
    q = isinstance(model, MLPQNet)
    n = model.n_actions
    state = g.input("state", _F32, ["n_obs", model.d_state])
    allowed = g.input("mask", _BOOL, ["n_obs", n])
    noise = g.input("noise", _F32, ["n_obs"])
    h = _trunk(g, state, model)
    values = _linear(g, h, model.q if q else model.logits, "head")  # [B, n]
    if q and model.v is not None:
        values = _dueling(g, values, _linear(g, h, model.v, "value"), allowed)
    table, best, sample = choices(g, values, allowed, noise, q)
    g.output(table, "q" if q else "probs", _F32, ["n_obs", n])
    g.output(best, "argmax", _I64, ["n_obs"])
    g.output(sample, "sample", _I64, ["n_obs"])
    return {"d_state": model.d_state, "n_actions": n}
