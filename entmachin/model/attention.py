"""The ragged transformer trunk: self-attention (or pooling) among the tokens of each row.

The residual stream stays flat, ``[n_tokens, d_model]``; only queries, keys and values are
padded, per bucket of similar-length rows (``layout.py``), and only where the bucket's rows
differ in length. Visible tokens never attend to invisible ones; invisible tokens attend to
every token of their row.
"""
from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from entmachin.model import compiled
from entmachin.model.config import RogueNetConfig
from entmachin.model.layout import Bucket, RowLayout
from entmachin.model.relpos import RelativePositionEncoding, TokenPositions


# On CPUs, attention kernels pay a fixed price per (sequence, head), so many short rows cost far
# more than their few query x key pairs. Rows of a bucket narrower than this many tokens are
# packed side by side, ``group`` rows per attention sequence, with a block-diagonal mask that
# keeps every row to itself (``_group_size``; tuned on MineSweeper's minibatches, whose rows are
# about 7 tokens wide: see benchmarks/bench_frame_minesweeper.py).
GROUP_WIDTH = 28


class BucketPlan(NamedTuple):
    """What attention needs per bucket, computed once per forward and shared by the layers.

    Attributes:
        bucket: the bucket.
        mask: bool ``[n_seq, 1, L, L]`` or ``[n_rows, 1, 1, T]`` (True: may attend), or ``None``;
            ``n_seq = ceil(n_rows / group)`` sequences of ``L = group * T`` tokens.
        key_cells / value_cells: int64 ``[n_rows, T, T]`` relative-position cells, or ``None``.
        group: rows packed into one attention sequence (1: none).
    """

    bucket: Bucket
    mask: Optional[torch.Tensor]
    key_cells: Optional[torch.Tensor]
    value_cells: Optional[torch.Tensor]
    group: int = 1


def _group_size(bucket: Bucket, device: torch.device) -> int:
    """Rows per attention sequence for ``bucket``: packs narrow rows on CPUs only (GPU kernels
    run every sequence in parallel, so packing would only add work)."""
    if device.type != "cpu" or bucket.width == 0:
        return 1
    return max(1, min(bucket.n_rows, GROUP_WIDTH // bucket.width))


def _grouped_mask(mask: Optional[torch.Tensor], n_rows: int, width: int, group: int,
                  device: torch.device) -> torch.Tensor:
    """Block-diagonal ``[n_seq, 1, L, L]`` mask of ``group`` rows per sequence.

    Each row's block holds its own mask (``[n_rows, 1, T, T]``, ``[n_rows, 1, 1, T]`` or None:
    all allowed); every token may also attend to itself, so padding rows added to fill the
    last sequence never see an empty softmax.
    """
    n_seq = -(-n_rows // group)
    per_row = torch.ones(n_seq * group, width, width, dtype=torch.bool, device=device)  # [n_seq * G, T, T]
    if mask is not None:
        per_row[:n_rows] = mask[:, 0].expand(n_rows, width, width)
    same_row = torch.eye(group, dtype=torch.bool, device=device)  # [G, G]
    blocks = per_row.view(n_seq, group, width, 1, width) & same_row.view(1, group, 1, group, 1)  # [n_seq, G, T, G, T]
    length = group * width
    allowed = blocks.reshape(n_seq, length, length) | torch.eye(length, dtype=torch.bool, device=device)
    return allowed[:, None]  # [n_seq, 1, L, L]


def plan_attention(
    layout: RowLayout,
    visible: Optional[torch.Tensor],
    relpos: Optional[RelativePositionEncoding] = None,
    positions: Optional[TokenPositions] = None,
) -> List[BucketPlan]:
    """Builds the per-bucket masks (and relative-position cells) of one forward.

    Args:
        layout: the token layout.
        visible: bool ``[n_tokens]`` or ``None`` (everything visible).
        relpos / positions: the relative position encoding and the tokens' positions.
    """
    plans = []
    for b in layout.buckets:
        if b.gather is None:
            index = torch.arange(b.start, b.start + b.n_tokens, device=layout.starts.device)  # [n_rows * T]
        else:
            index = b.gather  # [n_rows * T]
        mask = None
        if b.key_valid is not None:
            mask = b.key_valid[:, None, None, :]  # [n_rows, 1, 1, T]
        if visible is not None:
            vis = F.pad(visible, (0, 1))[index].view(b.n_rows, b.width)  # [n_rows, T] (padding: invisible)
            may = ~vis[:, :, None] | vis[:, None, :]  # [n_rows, T(query), T(key)]
            mask = may[:, None] if mask is None else mask & may[:, None]  # [n_rows, 1, T, T]
        key_cells = value_cells = None
        if relpos is not None and positions is not None:
            key_cells = relpos.cells(positions, index, b.n_rows, b.width)  # [n_rows, T, T]
            value_cells = relpos.value_cells(positions, index, key_cells)  # [n_rows, T, T]
            plans.append(BucketPlan(b, mask, key_cells, value_cells))
            continue
        group = _group_size(b, index.device)
        if group > 1:
            mask = _grouped_mask(mask, b.n_rows, b.width, group, index.device)  # [n_seq, 1, L, L]
        plans.append(BucketPlan(b, mask, None, None, group))
    return plans


class RaggedSelfAttention(nn.Module):
    """Multi-head self-attention among the tokens of each row.

    Shape:
        x: ``[n_tokens, d_model]`` -> ``[n_tokens, d_model]``.
    """

    def __init__(self, config: RogueNetConfig, relpos: Optional[RelativePositionEncoding] = None) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.d_model = config.d_model
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.attn_pdrop = config.attn_pdrop
        self.resid_drop = nn.Dropout(config.resid_pdrop)
        # Shared with the other layers; not registered here so that it appears once in state_dict.
        self._relpos: Tuple[Optional[RelativePositionEncoding]] = (relpos,)

    def forward(self, x: torch.Tensor, plans: List[BucketPlan]) -> torch.Tensor:
        return _dropout(self.resid_drop, self.proj(self.attend(self.qkv(x), plans)))

    def attend(self, qkv: torch.Tensor, plans: List[BucketPlan]) -> torch.Tensor:
        """Each token's attention over its row, from the projected ``qkv`` ``[n_tokens, 3 * d_model]``;
        returns ``[n_tokens, d_model]``, before the output projection."""
        if not plans:
            return qkv.new_zeros(0, self.d_model)
        d_head = self.d_model // self.n_head
        # One split (whose backward is one cat) instead of per-bucket slices or gathers, whose
        # backward would materialise a full-size gradient per bucket.
        parts = qkv.split([p.bucket.n_tokens for p in plans])
        outs = []
        for plan, part in zip(plans, parts):
            b = plan.bucket
            n_seq = -(-b.n_rows // plan.group)
            length = plan.group * b.width
            if b.valid is not None or n_seq * length != b.n_tokens:
                valid = b.valid
                if valid is None:
                    valid = torch.arange(b.n_tokens, device=part.device)  # [n_tokens]
                grid = part.new_zeros(n_seq * length, part.shape[1])  # [n_seq * L, 3 * d_model]
                part = grid.index_copy(0, valid, part)
            else:
                valid = None
            qkv_rows = part.view(n_seq, length, 3, self.n_head, d_head)  # [n_seq, L, 3, h, d_head]
            q, k, v = qkv_rows.permute(2, 0, 3, 1, 4)  # [n_seq, h, L, d_head] each
            y = self._attend(q, k, v, plan)  # [n_seq, h, L, d_head]
            y = y.transpose(1, 2).reshape(n_seq * length, self.d_model)  # [n_seq * L, d_model]
            outs.append(y if valid is None else y.index_select(0, valid))  # [n_bucket_tokens, d_model]
        return outs[0] if len(outs) == 1 else torch.cat(outs)  # [n_tokens, d_model]

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: BucketPlan) -> torch.Tensor:
        relpos = self._relpos[0]
        dropout = self.attn_pdrop if self.training else 0.0
        explicit = relpos is not None and plan.key_cells is not None
        # On CPUs, the fused kernel's backward is several times slower than plain matmuls in
        # reduced precision (bf16 / fp16); it wins in float32 and on GPUs.
        if not explicit and not (q.device.type == "cpu" and q.dtype in (torch.bfloat16, torch.float16)):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=plan.mask, dropout_p=dropout)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # [n_rows, h, T, T]
        if explicit:
            att = att + relpos.logits(q, plan.key_cells)
        if plan.mask is not None:
            att = att.masked_fill(~plan.mask, float("-inf"))
        att = att.softmax(dim=-1, dtype=torch.float32).to(v.dtype)  # [n_rows, h, T, T]
        att = F.dropout(att, dropout, self.training)
        y = att @ v  # [n_rows, h, T, d_head]
        return y + relpos.values_out(att, plan.value_cells) if explicit else y


def _dropout(drop: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """``drop(x)``, skipped where it is the identity (one dispatched op fewer per call at act time)."""
    return drop(x) if drop.training and drop.p > 0 else x


def segment_pool(x: torch.Tensor, index: torch.Tensor, n_rows: int, op: str) -> torch.Tensor:
    """Mean or max of the rows of ``x`` grouped by ``index``; empty groups give 0.

    Shape:
        x: ``[n, d]``; index: int64 ``[n]`` in ``[0, n_rows)``; returns ``[n_rows, d]``.
    """
    out = x.new_zeros(n_rows, x.shape[1])  # [n_rows, d]
    if op == "mean":
        counts = torch.bincount(index, minlength=n_rows).clamp(min=1).to(x.dtype)  # [n_rows]
        return out.index_add(0, index, x) / counts[:, None]
    expanded = index[:, None].expand_as(x)  # [n, d]
    return out.scatter_reduce(0, expanded, x, reduce="amax", include_self=False)


class RaggedPool(nn.Module):
    """Replaces attention by a per-row mean, max or mean-and-max pool broadcast back to the tokens.

    With visibility, visible tokens get the pool over their row's visible tokens only.

    Shape:
        x: ``[n_tokens, d_model]`` -> ``[n_tokens, d_model]``.
    """

    def __init__(self, config: RogueNetConfig) -> None:
        super().__init__()
        self.ops = ["mean", "max"] if config.pooling == "meanmax" else [config.pooling]
        self.prepool = nn.Linear(config.d_model, config.d_model)
        self.proj = nn.Linear(len(self.ops) * config.d_model, config.d_model)
        self.resid_drop = nn.Dropout(config.resid_pdrop)

    def _pool(self, x: torch.Tensor, index: torch.Tensor, n_rows: int) -> torch.Tensor:
        pooled = [segment_pool(x, index, n_rows, op) for op in self.ops]  # [n_rows, d_model] each
        return self.proj(pooled[0] if len(pooled) == 1 else torch.cat(pooled, dim=1))  # [n_rows, d_model]

    def forward(self, x: torch.Tensor, layout: RowLayout, visible: Optional[torch.Tensor]) -> torch.Tensor:
        h = self.prepool(x)  # [n_tokens, d_model]
        index = layout.batch_index
        y = self._pool(h, index, layout.n_rows)[index]  # [n_tokens, d_model]
        if visible is not None:
            y_visible = self._pool(h[visible], index[visible], layout.n_rows)[index]  # [n_tokens, d_model]
            y = torch.where(visible[:, None], y_visible, y)
        return self.resid_drop(y)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``.

    With ``compiled`` (``entmachin.model.compiled``), the arithmetic before and after attention runs
    compiled (attention blocks without active dropout; the rest stays eager).
    """

    def __init__(self, config: RogueNetConfig, relpos: Optional[RelativePositionEncoding]) -> None:
        super().__init__()
        self.compiled = False
        self.ln1 = nn.LayerNorm(config.d_model)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.pooling = config.pooling is not None
        self.mix = RaggedPool(config) if self.pooling else RaggedSelfAttention(config, relpos)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, 4 * config.d_model),
            nn.GELU(),
            nn.Linear(4 * config.d_model, config.d_model),
            nn.Dropout(config.resid_pdrop),
        )

    def forward(self, x: torch.Tensor, layout: RowLayout, visible: Optional[torch.Tensor],
                plans: Optional[List[BucketPlan]]) -> torch.Tensor:
        if self.compiled and not self.pooling and not (self.training and self.mlp[3].p > 0):
            return self._compiled_forward(x, plans)
        h = self.ln1(x)
        x = x + (self.mix(h, layout, visible) if self.pooling else self.mix(h, plans))
        return x + self.mlp(self.ln2(x))

    def _compiled_forward(self, x: torch.Tensor, plans: Optional[List[BucketPlan]]) -> torch.Tensor:
        """``forward`` of an attention block, the arithmetic around attention compiled (dropout inactive)."""
        mix, ln1, ln2, fc1, fc2 = self.mix, self.ln1, self.ln2, self.mlp[0], self.mlp[2]
        qkv = compiled.BLOCK_IN(True, x, ln1.weight, ln1.bias, ln1.eps, mix.qkv.weight, mix.qkv.bias)
        y = mix.attend(qkv, plans or [])  # [n_tokens, d_model]
        return compiled.BLOCK_OUT(True, x, y, mix.proj.weight, mix.proj.bias, ln2.weight, ln2.bias, ln2.eps,
                                  fc1.weight, fc1.bias, fc2.weight, fc2.bias)


class RaggedTransformer(nn.Module):
    """``n_layer`` blocks over the flat token stream.

    Shape:
        x: ``[n_tokens, d_model]`` -> ``[n_tokens, d_model]``.
    """

    def __init__(self, config: RogueNetConfig, relpos: Optional[RelativePositionEncoding] = None) -> None:
        super().__init__()
        self.relpos = relpos
        self.drop = nn.Dropout(config.embd_pdrop)
        self.blocks = nn.ModuleList([Block(config, relpos) for _ in range(config.n_layer)])
        self.pooling = config.pooling is not None
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor, layout: RowLayout, visible: Optional[torch.Tensor] = None,
                positions: Optional[TokenPositions] = None) -> torch.Tensor:
        plans = None
        if not self.pooling and self.blocks:
            plans = plan_attention(layout, visible, self.relpos, positions)
        x = _dropout(self.drop, x)
        for block in self.blocks:
            x = block(x, layout, visible, plans)
        return x
