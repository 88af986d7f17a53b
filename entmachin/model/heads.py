"""Action heads: categorical (incl. global categorical) and select-entity, with masks.

Each head turns actor embeddings into logits, sets forbidden choices to ``-inf`` (never sampled,
probability exactly 0) and samples, takes the most likely allowed choice, or re-evaluates given
choices. Log-probabilities and entropies are computed in float32 even under autocast.

The Q-heads (:class:`CategoricalQHead`, :class:`SelectEntityQHead`) give one action value per
choice per actor instead, ``-inf`` where the mask forbids a choice, in a plain or a dueling form
(``V(actor) + A(actor, choice) - mean of A over the allowed choices``).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch
from torch import nn

from entmachin.model import compiled
from entmachin.ragged.tensor import RaggedTensor


# Smallest positive normal float32: the race's floor (p is float32, see masked_categorical).
_TINY = torch.finfo(torch.float32).tiny


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
    keepdim: bool = False,
    compile: bool = False,
) -> HeadOutput:
    """Samples (or scores given) choices from rows of logits restricted to ``allowed``.

    Every row must allow at least one choice (callers check this at the model boundary).

    Args:
        logits: ``[n, n_choices]``.
        allowed: bool ``[n, n_choices]`` or ``None`` (all allowed).
        action: int64 ``[n]`` choices to score; ``None`` chooses.
        deterministic: choose the most likely allowed choice instead of sampling.
        keepdim: return ``[n, 1]`` action, log-probability and entropy instead of ``[n]``.
        compile: the log-softmax and entropy run compiled (``entmachin.model.compiled``); sampling
            stays eager.
    """
    if logits.dtype != torch.float32:
        logits = logits.float()  # [n, n_choices]
    forbidden = None if allowed is None else ~allowed  # [n, n_choices]
    n, n_choices = logits.shape
    # [n, n_choices] twice and [n, 1]; forbidden choices: log_p -inf, p 0
    log_p, p, entropy = compiled.MASKED_LOG_SOFTMAX(compile, logits, forbidden)
    if action is None:
        if n == 0 or n_choices == 0:
            action = torch.zeros(n, 1, dtype=torch.int64, device=logits.device)  # [n, 1]
        elif deterministic:
            action = log_p.argmax(dim=-1, keepdim=True)  # [n, 1] (forbidden: -inf)
        else:
            with torch.no_grad():
                # Exponential race: argmax p_i / E_i with E_i ~ Exp(1) i.i.d. is choice i with
                # probability p_i (several times cheaper than multinomial on small batches).
                # E is kept above 0 so that forbidden choices (p = 0) score 0, never nan.
                race = torch.empty_like(p).exponential_().clamp_min_(_TINY)  # [n, n_choices]
                action = (p / race).argmax(dim=-1, keepdim=True)  # [n, 1]
    else:
        action = action[:, None]  # [n, 1]
    log_prob = log_p.gather(1, action) if n_choices else entropy  # [n, 1] (no choices: 0)
    if keepdim:
        return HeadOutput(action, log_prob, entropy)
    return HeadOutput(action[:, 0], log_prob[:, 0], entropy[:, 0])


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
        self.compiled = False  # masked_categorical's log-softmax compiled (entmachin.model.compiled)

    def forward(
        self,
        x: torch.Tensor,
        actors: torch.Tensor,
        mask: Optional[torch.Tensor],
        action: Optional[torch.Tensor] = None,
        deterministic: bool = False,
        keepdim: bool = False,
    ) -> HeadOutput:
        logits = self.proj(x.index_select(0, actors))  # [n_actors, n_choices]
        return masked_categorical(logits, mask, action, deterministic, keepdim, self.compiled)


class SelectEntityHead(nn.Module):
    """Each actor selects one of its row's actees by query-key attention.

    Logits are ``q_actor . k_actee / sqrt(d_qk)`` for every actor x actee pair of a row, laid
    out per actor up to the longest actee list; pairs the ``actee_mask`` forbids get ``-inf``.
    They come from one batched product of per-row padded queries and keys, or, when padding
    would cost more than ``PAIR_FALLBACK`` times the real pairs, from the pairs one by one.

    Shape:
        x: ``[n_tokens, d_model]``; actors / actees: ragged int64 ``[n, 1]`` stream indices, one
        sequence per row; actee_mask: bool ``[n_pairs]`` (row-major actor x actee per row) or
        ``None``.
    """

    PAIR_FALLBACK = 8

    def __init__(self, d_model: int, d_qk: int) -> None:
        super().__init__()
        self.d_qk = d_qk
        self.query = nn.Linear(d_model, d_qk)
        self.key = nn.Linear(d_model, d_qk)
        self.compiled = False  # masked_categorical's log-softmax compiled (entmachin.model.compiled)

    def forward(
        self,
        x: torch.Tensor,
        actors: RaggedTensor,
        actees: RaggedTensor,
        actee_mask: Optional[torch.Tensor],
        action: Optional[torch.Tensor] = None,
        deterministic: bool = False,
        keepdim: bool = False,
    ) -> HeadOutput:
        logits, allowed = self.scores(x, actors, actees, actee_mask)  # [n_actors, width] each
        return masked_categorical(logits, allowed, action, deterministic, keepdim, self.compiled)

    def scores(self, x: torch.Tensor, actors: RaggedTensor, actees: RaggedTensor,
               actee_mask: Optional[torch.Tensor]) -> "tuple[torch.Tensor, torch.Tensor]":
        """``(logits, allowed)``, both ``[n_actors, width]`` (``width``: the longest actee list);
        ``allowed`` is False beyond a row's actees and where ``actee_mask`` forbids a pair."""
        n_rows, n_actors = len(actors), actors.n_items
        rows = actors.batch_index  # [n_actors]
        choices = actees.lengths[rows]  # [n_actors] actees each actor chooses from
        a_max, width = actors.max_length, actees.max_length
        q = self.query(x.index_select(0, actors.data[:, 0]))  # [n_actors, d_qk]
        k = self.key(x.index_select(0, actees.data[:, 0]))  # [n_actees, d_qk]
        scale = 1.0 / math.sqrt(self.d_qk)
        n_pairs = int(choices.sum()) if n_actors else 0
        if n_rows * a_max * width <= self.PAIR_FALLBACK * n_pairs:
            slot = rows * a_max + actors.positions  # [n_actors] slot in the per-row padded queries
            q_pad = q.new_zeros(n_rows * a_max, self.d_qk).index_copy(0, slot, q)  # [B * a_max, d_qk]
            k_slot = actees.batch_index * width + actees.positions  # [n_actees]
            k_pad = k.new_zeros(n_rows * width, self.d_qk).index_copy(0, k_slot, k)  # [B * width, d_qk]
            q_rows = q_pad.view(n_rows, a_max, self.d_qk)  # [B, a_max, d_qk]
            k_rows = k_pad.view(n_rows, width, self.d_qk)  # [B, width, d_qk]
            grid = torch.bmm(q_rows, k_rows.transpose(1, 2))  # [B, a_max, width]
            logits = grid.view(n_rows * a_max, width).index_select(0, slot) * scale  # [n_actors, width]
        else:
            actor_ids = torch.arange(n_actors, device=q.device)  # [n_actors]
            pair_actor = torch.repeat_interleave(actor_ids, choices, output_size=n_pairs)  # [n_pairs]
            pair_start = torch.cumsum(choices, 0) - choices  # [n_actors]
            pair_pos = torch.arange(n_pairs, device=q.device) - pair_start[pair_actor]  # [n_pairs]
            pair_actee = actees.starts[rows][pair_actor] + pair_pos  # [n_pairs] index into actees
            pair_logits = (q[pair_actor] * k[pair_actee]).sum(dim=-1) * scale  # [n_pairs]
            logits = pair_logits.new_zeros(n_actors * width).index_put((pair_actor * width + pair_pos,), pair_logits)
            logits = logits.view(n_actors, width)  # [n_actors, width]
        return logits, select_entity_allowed(actors, actees, actee_mask, width)


def select_entity_allowed(actors: RaggedTensor, actees: RaggedTensor, actee_mask: Optional[torch.Tensor],
                          width: Optional[int] = None) -> torch.Tensor:
    """Which actee each actor may select, laid out per actor up to the longest actee list.

    Shape:
        actors / actees: ragged ``[n, 1]``, one sequence per row; actee_mask: bool ``[n_pairs]``
        (row-major actor x actee per row) or ``None``; returns bool ``[n_actors, width]``;
        ``width``, the longest actee list, where the caller knows it already (a host sync).
    """
    rows = actors.batch_index  # [n_actors]
    choices = actees.lengths[rows]  # [n_actors]
    width = actees.max_length if width is None else width
    column = torch.arange(width, device=choices.device)  # [width]
    allowed = column[None, :] < choices[:, None]  # [n_actors, width]
    if actee_mask is not None and actee_mask.numel():
        # Row b's mask is [n_actors_b, n_actees_b] row-major: actor i's entries start at
        # mask_start[b] + i * n_actees_b.
        mask_start = torch.cumsum(actors.lengths * actees.lengths, 0) - actors.lengths * actees.lengths  # [B]
        first = mask_start[rows] + actors.positions * choices  # [n_actors]
        index = (first[:, None] + column[None, :]).clamp(max=actee_mask.shape[0] - 1)  # [n_actors, width]
        allowed = allowed & actee_mask[index]
    return allowed


def dueling(advantage: torch.Tensor, value: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``value + advantage - mean of advantage over the allowed choices`` (Wang et al., 2016).

    Shape:
        advantage, allowed: ``[n_actors, width]``; value: ``[n_actors, 1]``; returns ``[n_actors, width]``.
    """
    n_allowed = allowed.sum(dim=1, keepdim=True).clamp_min(1)  # [n_actors, 1]
    mean = advantage.masked_fill(~allowed, 0.0).sum(dim=1, keepdim=True) / n_allowed  # [n_actors, 1]
    return value + advantage - mean  # [n_actors, width]


class CategoricalQHead(nn.Module):
    """One action value per choice per actor (``-inf`` where ``mask`` forbids the choice).

    Shape:
        x: ``[n_tokens, d_model]``; actors: int64 ``[n_actors]`` stream indices; mask: bool
        ``[n_actors, n_choices]`` or ``None``; returns float32 ``[n_actors, n_choices]``.
    """

    def __init__(self, d_model: int, n_choices: int, dueling: bool = False) -> None:
        super().__init__()
        self.n_choices = n_choices
        self.proj = nn.Linear(d_model, n_choices)
        self.value = nn.Linear(d_model, 1) if dueling else None

    def forward(self, x: torch.Tensor, actors: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        h = x.index_select(0, actors)  # [n_actors, d_model]
        q = self.proj(h).float()  # [n_actors, n_choices]
        allowed = mask if mask is not None else torch.ones_like(q, dtype=torch.bool)  # [n_actors, n_choices]
        if self.value is not None:
            q = dueling(q, self.value(h).float(), allowed)
        return q.masked_fill(~allowed, float("-inf"))


class SelectEntityQHead(SelectEntityHead):
    """One action value per actee per actor: the scaled query-key product of :class:`SelectEntityHead`
    (plus a value stream when dueling), ``-inf`` beyond the row's actees and where forbidden.

    Shape:
        as :class:`SelectEntityHead`; returns float32 ``[n_actors, width]``.
    """

    def __init__(self, d_model: int, d_qk: int, dueling: bool = False) -> None:
        super().__init__(d_model, d_qk)
        self.value = nn.Linear(d_model, 1) if dueling else None

    def forward(self, x: torch.Tensor, actors: RaggedTensor, actees: RaggedTensor,  # type: ignore[override]
                actee_mask: Optional[torch.Tensor]) -> torch.Tensor:
        q, allowed = self.scores(x, actors, actees, actee_mask)  # [n_actors, width] each
        q = q.float()
        if self.value is not None:
            q = dueling(q, self.value(x.index_select(0, actors.data[:, 0])).float(), allowed)
        return q.masked_fill(~allowed, float("-inf"))
