"""The pieces the exported ONNX graph is made of (``export_graph.RogueNetGraph`` assembles them): the
layers (linear, layer norm, GELU, frozen input normalisation), rows and positions of ragged inputs,
and the action heads' outputs (discrete tables with their argmax and inverse-CDF sample, dueling
Q-values, a continuous head's distribution parameters and deterministic point)."""
from __future__ import annotations

import math
from typing import Any, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.model.continuous import LOG_STD_MAX, LOG_STD_MIN, ContinuousHead
from entmachin.model.input_norm import InputNorm

__all__ = ["choices", "continuous_head", "inverse_cdf_sample"]

_NEG_INF = np.float32(-np.inf)
# onnx.TensorProto's element types, named here: onnx is imported only when a graph is written.
_F32, _I32, _I64, _BOOL = 1, 6, 7, 9


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy()


def _linear(g: Any, x: str, layer: nn.Linear, hint: str) -> str:
    return g.linear(x, _np(layer.weight), None if layer.bias is None else _np(layer.bias), hint)


def _layer_norm(g: Any, x: str, ln: nn.LayerNorm, hint: str) -> str:
    return g.op("LayerNormalization", x, g.const(_np(ln.weight), hint=hint + ".weight"),
                g.const(_np(ln.bias), hint=hint + ".bias"), axis=-1, epsilon=float(ln.eps), hint=hint)


def _gelu(g: Any, x: str) -> str:
    """``nn.GELU()`` (the exact, erf form)."""
    erf = g.op("Erf", g.op("Mul", x, g.const(np.float32(1.0 / math.sqrt(2.0)))))
    return g.op("Mul", g.op("Mul", x, g.const(np.float32(0.5))), g.op("Add", erf, g.const(np.float32(1.0))))


def _input_norm(g: Any, x: str, norm: InputNorm, hint: str) -> str:
    """The frozen statistics, in float32 exactly as ``InputNorm.forward`` uses them."""
    mean, std = norm._shift_scale(torch.float32)
    centred = g.op("Sub", x, g.const(_np(mean), hint=hint + ".mean"))
    scaled = g.op("Div", centred, g.const(_np(std), hint=hint + ".std"))
    return g.op("Clip", scaled, g.const(np.float32(-norm.clip)), g.const(np.float32(norm.clip)))


class _Rows:
    """Row (observation) of each item of a ragged input and its position within the row.

    The row of item ``j`` is the number of rows that end at or before ``j``: a 1 added at each
    row's end (rows without items add theirs where the previous one ended), summed up. Linear in
    items and rows, where comparing every item with every row's end would be their product.
    """

    def __init__(self, g: Any, lengths: str, n: str) -> None:
        ends = g.op("CumSum", lengths, g.const(0, np.int64))  # [B]
        n_plus_one = g.vec(g.op("Add", n, g.const(1, np.int64)))
        marks = g.op("ScatterElements", g.zeros(n_plus_one, np.int64), ends,
                     g.op("Expand", g.const([1], np.int64), g.op("Shape", ends)), axis=0, reduction="add")
        rows = g.op("CumSum", marks, g.const(0, np.int64))  # [n + 1]
        self.row = g.op("Slice", rows, g.const([0], np.int64), g.vec(n))  # [n]
        self.starts = g.op("Sub", ends, lengths)  # [B]
        self.position = g.op("Sub", g.arange(n), g.op("Gather", self.starts, self.row))  # [n]


def inverse_cdf_sample(probs: torch.Tensor, allowed: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The choice an exported graph samples: the first whose cumulative probability exceeds
    ``noise * total``, never beyond the last allowed choice.

    Shape:
        probs: float32 ``[n, width]``; allowed: bool ``[n, width]``; noise: float32 ``[n]`` in
        ``[0, 1)``; returns int64 ``[n]``.
    """
    if probs.shape[0] == 0:
        return torch.zeros(0, dtype=torch.int64, device=probs.device)
    cdf = probs.cumsum(dim=1)  # [n, width]
    below = (cdf <= (noise * cdf[:, -1])[:, None]).sum(dim=1)  # [n]
    width = allowed.shape[1]
    last = width - 1 - allowed.flip(1).to(torch.int64).argmax(dim=1)  # [n]
    return torch.minimum(below, last)


def _dueling(g: Any, advantage: str, value: str, allowed: str) -> str:
    """``heads.dueling``: ``value + advantage - mean of advantage over the allowed choices``."""
    n_allowed = g.op("Max", g.op("ReduceSum", g.cast(allowed, _F32), g.const([1], np.int64), keepdims=1),
                     g.const(np.float32(1.0)))
    kept = g.op("Where", allowed, advantage, g.const(np.float32(0.0)))
    mean = g.op("Div", g.op("ReduceSum", kept, g.const([1], np.int64), keepdims=1), n_allowed)
    return g.op("Sub", g.op("Add", value, advantage), mean)


def _softplus(g: Any, x: str) -> str:
    """``F.softplus``, as ``max(x, 0) + log(1 + exp(-|x|))``: finite for any ``x`` in every runtime."""
    tail = g.op("Log", g.op("Add", g.op("Exp", g.op("Neg", g.op("Abs", x))), g.const(np.float32(1.0))))
    return g.op("Add", g.op("Relu", x), tail)


def continuous_head(g: Any, name: str, head: ContinuousHead, actor_x: str, low: str, high: str) -> None:
    """``ContinuousHead``: the distribution's parameters and ``deterministic_point`` (``V`` values).

    Shape:
        actor_x: ``[A, d]``; low, high: ``[A, V]``; outputs ``alpha/<a>``, ``beta/<a>`` (Beta) or
        ``mean/<a>``, ``log_std/<a>`` (squashed Gaussian) and ``point/<a>``, ``[A, V]`` each.
    """
    n = head.n_values
    params = _linear(g, actor_x, head.proj, f"{name}.proj")  # [A, 2V]
    halves = [g.op("Slice", params, g.const([start], np.int64), g.const([start + n], np.int64),
                   g.const([1], np.int64)) for start in (0, n)]  # [A, V] each
    one = g.const(np.float32(1.0))
    if head.distribution == "beta":
        alpha, beta = (g.op("Add", one, _softplus(g, half)) for half in halves)  # [A, V] each, > 1
        unit = g.op("Div", alpha, g.op("Add", alpha, beta))  # the Beta's mean, in (0, 1)
        parameters = {"alpha": alpha, "beta": beta}
    else:
        mean = halves[0]
        log_std = g.op("Clip", halves[1], g.const(np.float32(LOG_STD_MIN)), g.const(np.float32(LOG_STD_MAX)))
        unit = g.op("Mul", g.op("Add", g.op("Tanh", mean), one), g.const(np.float32(0.5)))  # the squashed mean
        parameters = {"mean": mean, "log_std": log_std}
    point = g.op("Add", low, g.op("Mul", unit, g.op("Sub", high, low)))  # [A, V]
    point = g.op("Min", g.op("Max", point, low), high)
    shape = [f"n_actors/{name}", n]
    for label, value in parameters.items():
        g.output(value, f"{label}/{name}", _F32, shape)
    g.output(point, f"point/{name}", _F32, shape)


def choices(g: Any, values: str, allowed: str, noise: str, q: bool) -> Tuple[str, str, str]:
    """A discrete head's outputs from its ``values`` (logits, or Q-values): the table (masked
    probabilities, or Q-values with ``-inf`` where forbidden), the argmax and the sample (a
    Q-network's is its argmax).

    Shape:
        values, allowed: ``[A, C]``; noise: ``[A]``; returns ``[A, C]``, ``[A]``, ``[A]``.
    """
    masked = g.op("Where", allowed, values, g.const(_NEG_INF))
    best = g.op("ArgMax", masked, axis=1, keepdims=0)  # [A]
    if q:
        return masked, best, best
    table = g.op("Softmax", masked, axis=-1)
    return table, best, _inverse_cdf(g, table, allowed, noise)


def _inverse_cdf(g: Any, probs: str, allowed: str, noise: str) -> str:
    """:func:`inverse_cdf_sample` in the graph."""
    cdf = g.op("CumSum", probs, g.const(1, np.int64))  # [n, width]
    total = g.op("Gather", cdf, g.const(-1, np.int64), axis=1)  # [n]
    below = g.op("LessOrEqual", cdf, g.unsqueeze(g.op("Mul", noise, total), 1))
    count = g.op("ReduceSum", g.cast(below, _I64), g.const([1], np.int64), keepdims=0)  # [n]
    last = g.op("ArgMax", g.cast(allowed, _I32), axis=1, keepdims=0, select_last_index=1)  # [n]
    return g.op("Min", count, last)
