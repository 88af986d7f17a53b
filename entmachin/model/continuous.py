"""Bounded distributions for continuous actions, and the head that outputs them.

Each actor outputs ``n_values`` real numbers, value ``j`` within its bounds ``[low_j, high_j]``
(the space's, or narrower where the step's mask says so). Two distributions respect the bounds
exactly; ``RogueNetConfig.continuous`` picks one (``squashed_gaussian`` unless told: it learnt as
well as the Beta on ``Vehicles`` and reached ``Turrets``' 0.85 in 41k steps against the Beta's 71k,
medians of three seeds, ``benchmarks/bench_continuous_heads.py``):

* ``"beta"``: ``x_j ~ Beta(alpha_j, beta_j)`` with ``alpha, beta = 1 + softplus(.)`` (unimodal,
  never infinite at the bounds), the value ``low + x (high - low)``. Entropy in closed form
  (the Beta's plus ``log(high - low)``); the deterministic point is the mean
  ``alpha / (alpha + beta)``.
* ``"squashed_gaussian"``: ``u_j ~ N(mean_j, std_j)``, the value
  ``low + (tanh(u) + 1) (high - low) / 2`` (``log std`` clamped to ``[-5, 2]``). The entropy has no
  closed form: the head returns the one-sample estimate ``-log p(a')`` of a fresh reparameterised
  sample ``a'`` (unbiased, and its gradient is the entropy's in expectation); the deterministic
  point is the squashed mean.

Log-probabilities are those of the value (the change of variables to the bounds included) and
sum over the values of an actor. A stored value is re-scored inside its bounds: mapped to
``[0, 1]`` (Beta) or ``[-1, 1]`` (tanh) and clamped ``EPS`` away from the ends, where the
densities are 0 or infinite; a sampled value is scored the same way, so that an update's first
ratio is exactly 1. A value whose bounds are equal is fixed: it contributes 0 to the
log-probability and the entropy.

Shape:
    params: ``[n, 2 * n_values]``; low, high, action: float32 ``[n, n_values]``; returns
    ``HeadOutput`` with action ``[n, n_values]`` and log-probability and entropy ``[n, 1]``.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from entmachin.env.action import CONTINUOUS_SPACES
from entmachin.model.config import CONTINUOUS as DISTRIBUTIONS
from entmachin.model.heads import HeadOutput

#: How far a re-scored value is kept from its bounds, as a share of the bounds' width.
EPS = 1e-6
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _widths(low: torch.Tensor, high: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(width, free)``: ``high - low`` (1 where the value is fixed, to keep logs finite) and
    whether the value is free (``[n, n_values]`` each)."""
    width = high - low
    free = width > 0
    return torch.where(free, width, torch.ones_like(width)), free


def beta_parameters(params: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(alpha, beta)``, each ``1 + softplus`` of one half of ``params`` (``[n, n_values]`` each)."""
    a, b = params.float().chunk(2, dim=-1)
    return 1.0 + F.softplus(a), 1.0 + F.softplus(b)


def gaussian_parameters(params: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(mean, log_std)`` of the Gaussian before squashing (``[n, n_values]`` each)."""
    mean, log_std = params.float().chunk(2, dim=-1)
    return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)


def deterministic_point(kind: str, params: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """The value evaluation takes: the Beta's mean or the squashed Gaussian mean, in the bounds."""
    if kind == "beta":
        alpha, beta = beta_parameters(params)
        unit = alpha / (alpha + beta)  # [n, n_values] in (0, 1)
    else:
        mean, _ = gaussian_parameters(params)
        unit = (torch.tanh(mean) + 1.0) * 0.5
    return torch.minimum(torch.maximum(low + unit * (high - low), low), high)


def _log_tanh_jacobian(u: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)``, stable for large ``|u|``."""
    return 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))


def bounded(
    kind: str,
    params: torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
    action: Optional[torch.Tensor] = None,
    deterministic: bool = False,
) -> HeadOutput:
    """Samples values within ``[low, high]`` (or scores ``action``) from one actor's parameters a row.

    Args:
        kind: ``"beta"`` or ``"squashed_gaussian"``.
        params: ``[n, 2 * n_values]``, the head's output.
        low, high: ``[n, n_values]`` each actor's bounds.
        action: ``[n, n_values]`` values to score; ``None`` chooses.
        deterministic: take :func:`deterministic_point` instead of sampling.
    """
    low, high = low.float(), high.float()
    width, free = _widths(low, high)
    if action is None:
        with torch.no_grad():
            if deterministic:
                action = deterministic_point(kind, params, low, high)
            elif kind == "beta":
                alpha, beta = beta_parameters(params)
                unit = torch.distributions.Beta(alpha, beta, validate_args=False).sample()
                action = torch.minimum(torch.maximum(low + unit * (high - low), low), high)
            else:
                mean, log_std = gaussian_parameters(params)
                unit = (torch.tanh(mean + log_std.exp() * torch.randn_like(mean)) + 1.0) * 0.5
                action = torch.minimum(torch.maximum(low + unit * (high - low), low), high)
            # Non-finite parameters give NaN values, which VecEnv.act refuses by name (a Beta sampler
            # would return a plausible number for them).
            first, second = params.chunk(2, dim=-1)
            action = action.masked_fill(~(torch.isfinite(first) & torch.isfinite(second)), float("nan"))
    action = action.float()
    unit = ((action - low) / width).clamp(EPS, 1.0 - EPS)  # [n, n_values] in (0, 1)
    if kind == "beta":
        alpha, beta = beta_parameters(params)
        dist = torch.distributions.Beta(alpha, beta, validate_args=False)
        log_prob = dist.log_prob(unit) - width.log()  # [n, n_values]
        entropy = dist.entropy() + width.log()
    else:
        mean, log_std = gaussian_parameters(params)
        std = log_std.exp()
        y = unit * 2.0 - 1.0  # in (-1, 1)
        u = torch.atanh(y)
        log_prob = -0.5 * ((u - mean) / std) ** 2 - log_std - _HALF_LOG_2PI - torch.log1p(-y * y) \
            - (width * 0.5).log()
        # A fresh reparameterised sample's -log p: the entropy's one-sample estimate.
        noise = torch.randn_like(mean)
        u2 = mean + std * noise
        entropy = 0.5 * noise ** 2 + log_std + _HALF_LOG_2PI + _log_tanh_jacobian(u2) + (width * 0.5).log()
    zero = torch.zeros_like(log_prob)
    log_prob = torch.where(free, log_prob, zero).sum(dim=-1, keepdim=True)  # [n, 1]
    entropy = torch.where(free, entropy, zero).sum(dim=-1, keepdim=True)  # [n, 1]
    return HeadOutput(action, log_prob, entropy)


class ContinuousActionsUnsupported(TypeError):
    """A network or frame that needs choices (Q-values, probability tables) met a continuous action."""


def refuse_continuous(action_space: Any, owner: str, why: str) -> None:
    """Raises :class:`ContinuousActionsUnsupported` naming the first continuous action of
    ``action_space`` (a mapping of spaces; anything else passes)."""
    if not isinstance(action_space, Mapping):
        return
    names = [name for name, space in action_space.items() if isinstance(space, CONTINUOUS_SPACES)]
    if names:
        raise ContinuousActionsUnsupported(f"{owner}: action {names[0]!r} is continuous; {why}")


class ContinuousHead(nn.Module):
    """``n_values`` bounded values per actor (also a global continuous action's, actor: ``__global__``).

    Shape:
        x: ``[n_tokens, d_model]``; actors: int64 ``[n_actors]`` stream indices; low / high:
        float ``[n_actors, n_values]``; returns ``HeadOutput`` (action ``[n_actors, n_values]``,
        log-probability and entropy ``[n_actors, 1]``).
    """

    def __init__(self, d_model: int, n_values: int, distribution: str = "squashed_gaussian") -> None:
        super().__init__()
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"ContinuousHead: distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
        self.n_values = n_values
        self.distribution = distribution
        self.proj = nn.Linear(d_model, 2 * n_values)
        nn.init.orthogonal_(self.proj.weight, gain=0.01)
        nn.init.zeros_(self.proj.bias)

    def params(self, x: torch.Tensor, actors: torch.Tensor) -> torch.Tensor:
        """The distribution's raw parameters, ``[n_actors, 2 * n_values]``."""
        return self.proj(x.index_select(0, actors))

    def forward(self, x: torch.Tensor, actors: torch.Tensor, low: torch.Tensor, high: torch.Tensor,
                action: Optional[torch.Tensor] = None, deterministic: bool = False) -> HeadOutput:
        return bounded(self.distribution, self.params(x, actors), low, high, action, deterministic)
