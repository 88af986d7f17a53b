"""Action heads: categorical (incl. global categorical) and select-entity, with masks.

Each head turns actor embeddings into logits, sets forbidden choices to ``-inf`` (never sampled,
probability exactly 0) and samples, takes the most likely allowed choice, or re-evaluates given
choices. Log-probabilities and entropies are computed in float32 even under autocast.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn


class HeadOutput(NamedTuple):
    """Per-actor results of one head.

    Attributes:
        action: int64 ``[n_actors]`` chosen choice (categorical) or actee position (select-entity).
        log_prob: float32 ``[n_actors]`` log-probability of ``action``.
        entropy: float32 ``[n_actors]`` entropy of each actor's distribution.
    """

    action: torch.Tensor
    log_prob: torch.Tensor
    entropy: torch.Tensor


def masked_categorical(
    logits: torch.Tensor,
    allowed: Optional[torch.Tensor],
    action: Optional[torch.Tensor] = None,
    deterministic: bool = False,
) -> HeadOutput:
    """Samples (or scores given) choices from rows of logits restricted to ``allowed``.

    Every row must allow at least one choice (callers check this at the model boundary).

    Args:
        logits: ``[n, n_choices]``.
        allowed: bool ``[n, n_choices]`` or ``None`` (all allowed).
        action: int64 ``[n]`` choices to score; ``None`` chooses.
        deterministic: choose the most likely allowed choice instead of sampling.
    """
    logits = logits.float()  # [n, n_choices]
    if allowed is not None:
        logits = logits.masked_fill(~allowed, float("-inf"))
    log_p = F.log_softmax(logits, dim=-1)  # [n, n_choices]
    if action is None:
        if logits.shape[0] == 0 or logits.shape[1] == 0:
            action = torch.zeros(logits.shape[0], dtype=torch.int64, device=logits.device)  # [n]
        elif deterministic:
            action = logits.argmax(dim=-1)  # [n]
        else:
            with torch.no_grad():
                action = torch.multinomial(log_p.exp(), 1)[:, 0]  # [n]
    if logits.shape[1] == 0:
        zeros = logits.new_zeros(logits.shape[0])  # [n]
        return HeadOutput(action, zeros, zeros)
    log_prob = log_p.gather(1, action[:, None])[:, 0]  # [n]
    # Zero out forbidden entries before the product: 0 * -inf would poison values and gradients.
    finite = log_p if allowed is None else log_p.masked_fill(~allowed, 0.0)  # [n, n_choices]
    entropy = -(log_p.exp() * finite).sum(dim=-1)  # [n]
    return HeadOutput(action, log_prob, entropy)


class CategoricalHead(nn.Module):
    """One of ``n_choices`` per actor; also serves global categorical actions (actor: ``__global__``).

    Shape:
        x: ``[n_tokens, d_model]``; actors: int64 ``[n_actors]`` stream indices;
        mask: bool ``[n_actors, n_choices]`` or ``None``.
    """

    def __init__(self, d_model: int, n_choices: int) -> None:
        super().__init__()
        self.n_choices = n_choices
        self.proj = nn.Linear(d_model, n_choices)
        nn.init.orthogonal_(self.proj.weight, gain=0.01)
        nn.init.zeros_(self.proj.bias)

    def forward(
        self,
        x: torch.Tensor,
        actors: torch.Tensor,
        mask: Optional[torch.Tensor],
        action: Optional[torch.Tensor] = None,
        deterministic: bool = False,
    ) -> HeadOutput:
        logits = self.proj(x[actors])  # [n_actors, n_choices]
        return masked_categorical(logits, mask, action, deterministic)


class SelectEntityHead(nn.Module):
    """Each actor selects one of its row's actees by query-key attention.

    Logits are ``q_actor . k_actee / sqrt(d_qk)`` for every actor x actee pair of a row,
    computed pair by pair (no padding across rows), then laid out per actor up to the longest
    actee list; pairs the ``actee_mask`` forbids get ``-inf``.

    Shape:
        x: ``[n_tokens, d_model]``; actors: ``[n_actors]`` stream indices; actor_rows: ``[n_actors]``;
        actees: ``[n_actees]`` stream indices; actee_lengths / actee_starts: ``[B]``;
        actee_mask: bool ``[n_pairs]`` (row-major actor x actee per row) or ``None``.
    """

    def __init__(self, d_model: int, d_qk: int) -> None:
        super().__init__()
        self.d_qk = d_qk
        self.query = nn.Linear(d_model, d_qk)
        self.key = nn.Linear(d_model, d_qk)

    def forward(
        self,
        x: torch.Tensor,
        actors: torch.Tensor,
        actor_rows: torch.Tensor,
        actees: torch.Tensor,
        actee_lengths: torch.Tensor,
        actee_starts: torch.Tensor,
        actee_mask: Optional[torch.Tensor],
        action: Optional[torch.Tensor] = None,
        deterministic: bool = False,
    ) -> HeadOutput:
        n_actors = actors.shape[0]
        choices = actee_lengths[actor_rows]  # [n_actors] actees each actor chooses from
        width = int(choices.max()) if n_actors else 0
        pair_actor = torch.repeat_interleave(torch.arange(n_actors, device=actors.device), choices)  # [n_pairs]
        n_pairs = pair_actor.shape[0]
        pair_starts = torch.cumsum(choices, 0) - choices  # [n_actors]
        pair_pos = torch.arange(n_pairs, device=actors.device) - pair_starts[pair_actor]  # [n_pairs]
        pair_actee = actee_starts[actor_rows][pair_actor] + pair_pos  # [n_pairs] index into actees

        q = self.query(x[actors])  # [n_actors, d_qk]
        k = self.key(x[actees])  # [n_actees, d_qk]
        pair_logits = (q[pair_actor] * k[pair_actee]).sum(dim=-1).float() / math.sqrt(self.d_qk)  # [n_pairs]
        flat = pair_actor * width + pair_pos  # [n_pairs] position in the [n_actors, width] grid
        logits = pair_logits.new_zeros(n_actors * width).index_put((flat,), pair_logits)  # [n_actors * width]
        allowed = torch.zeros(n_actors * width, dtype=torch.bool, device=actors.device)  # [n_actors * width]
        allowed[flat] = True if actee_mask is None else actee_mask
        return masked_categorical(
            logits.view(n_actors, width), allowed.view(n_actors, width), action, deterministic
        )
