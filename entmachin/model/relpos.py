"""Relative positional encoding on a grid, without ``[B, T, T, d_head]`` tensors.

Attention adds ``q_s . K[cell(s, t)] / sqrt(d_head)`` to its logits and
``sum_t att[s, t] * V[cell(s, t)]`` to its outputs, with ``K`` and ``V`` small learned tables
indexed by the grid cell of the relative position ``pos[t] - pos[s]``. Both terms go through the
tables: ``q @ K.T`` is ``[B, n_head, T, n_cells]`` and gathered by cell; the weights ``att`` are
summed per cell (``scatter_add``) and multiplied by ``V``. When the table is wider than
``T * d_head / n_head`` the direct gather is cheaper, and is used instead.
"""
from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional

import torch
from torch import nn

from entmachin.model.config import RelposEncodingConfig


class TokenPositions(NamedTuple):
    """Per-token positions of one forward, in stream order.

    Attributes:
        positions: float ``[n_tokens + 1, n_position_features]`` (last row: padding).
        has_position: bool ``[n_tokens + 1]``.
        value_offset: int64 ``[n_tokens + 1]`` offset of the attended token's value table.
    """

    positions: torch.Tensor
    has_position: torch.Tensor
    value_offset: torch.Tensor


class RelativePositionEncoding(nn.Module):
    """Learned key and value tables over relative-position grid cells, shared by all layers.

    Args:
        config: grid settings.
        entity_features: token type -> feature names (``[]`` for the ``__global__`` token), in
            token-type order.
        d_head: width of one attention head.
    """

    def __init__(self, config: RelposEncodingConfig, entity_features: Dict[str, List[str]], d_head: int) -> None:
        super().__init__()
        self.config = config
        self.n_cells = config.n_cells + 1  # the last cell: "no position"
        self.position_indices: Dict[str, Optional[List[int]]] = {
            name: [features.index(f) for f in config.position_features]
            if all(f in features for f in config.position_features) else None
            for name, features in entity_features.items()
        }
        if not any(v is not None for v in self.position_indices.values()):
            raise ValueError(
                f"RelposEncodingConfig.position_features: no entity type has all of "
                f"{list(config.position_features)}; types and features: {entity_features}"
            )
        strides, n = [], 1
        for e in config.extent:
            strides.append(n)
            n *= 2 * e + 1
        self.register_buffer("strides", torch.tensor(strides, dtype=torch.int64), persistent=False)
        self.register_buffer("extent", torch.tensor(config.extent, dtype=torch.float32), persistent=False)
        n_tables = len(entity_features) if config.per_entity_values else 1
        self.keys = nn.Parameter(torch.randn(self.n_cells, d_head) * 0.05)  # [n_cells, d_head]
        self.values = nn.Parameter(torch.randn(self.n_cells * n_tables, d_head) * 0.2)  # [n_cells * n_tables, d_head]

    def token_positions(self, features: Dict[str, torch.Tensor], dest: Dict[str, torch.Tensor],
                        token_type: torch.Tensor) -> TokenPositions:
        """Gathers each token's position features into stream order (plus one padding row)."""
        n_tokens = token_type.shape[0]
        p = len(self.config.position_features)
        positions = torch.zeros(n_tokens + 1, p, device=token_type.device)  # [n_tokens + 1, p]
        has_position = torch.zeros(n_tokens + 1, dtype=torch.bool, device=token_type.device)  # [n_tokens + 1]
        for name, indices in self.position_indices.items():
            if indices is not None and name in features:
                positions[dest[name]] = features[name][:, indices].detach().float()
                has_position[dest[name]] = True
        value_offset = torch.zeros(n_tokens + 1, dtype=torch.int64, device=token_type.device)  # [n_tokens + 1]
        if self.config.per_entity_values:
            value_offset[:n_tokens] = token_type * self.n_cells
        return TokenPositions(positions, has_position, value_offset)

    def cells(self, tokens: TokenPositions, index: torch.Tensor, n_rows: int, width: int) -> torch.Tensor:
        """Grid cell of every query x key pair of a bucket.

        Args:
            index: ``[n_rows * width]`` stream index of each padded position (``n_tokens`` = pad).

        Returns:
            int64 ``[n_rows, width, width]`` cell of ``(query s, key t)`` (without value offsets).
        """
        pos = tokens.positions[index].view(n_rows, width, -1)  # [n_rows, T, p]
        has = tokens.has_position[index].view(n_rows, width)  # [n_rows, T]
        rel = pos[:, None, :, :] - pos[:, :, None, :]  # [n_rows, T(query), T(key), p]: pos[t] - pos[s]
        rel = torch.maximum(torch.minimum(rel / self.config.scale, self.extent), -self.extent).round()
        cell = ((rel + self.extent).long() * self.strides).sum(dim=-1)  # [n_rows, T, T]
        both = has[:, :, None] & has[:, None, :]  # [n_rows, T, T]
        return torch.where(both, cell, torch.full_like(cell, self.n_cells - 1))

    def value_cells(self, tokens: TokenPositions, index: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        """Adds the attended token's value-table offset to ``cells`` ``[n_rows, T, T]``."""
        n_rows, width, _ = cells.shape
        return cells + tokens.value_offset[index].view(n_rows, 1, width)

    def logits(self, q: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        """Relative-key logits ``[n_rows, n_head, T, T]`` for queries ``q`` ``[n_rows, n_head, T, d_head]``."""
        n_rows, n_head, width, d_head = q.shape
        scale = 1.0 / math.sqrt(d_head)
        if n_head * self.n_cells <= width * d_head:
            table = (q @ self.keys.to(q.dtype).t()) * scale  # [n_rows, n_head, T, n_cells]
            index = cells[:, None].expand(n_rows, n_head, width, width)  # [n_rows, n_head, T, T]
            return table.gather(-1, index)
        keys = self.keys.to(q.dtype)[cells]  # [n_rows, T, T, d_head]
        return torch.einsum("bhsd,bstd->bhst", q, keys) * scale

    def values_out(self, att: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        """Relative-value outputs ``[n_rows, n_head, T, d_head]`` for weights ``att`` ``[n_rows, n_head, T, T]``."""
        n_rows, n_head, width, _ = att.shape
        values = self.values.to(att.dtype)
        d_head = values.shape[1]
        if n_head * values.shape[0] <= width * d_head:
            index = cells[:, None].expand(n_rows, n_head, width, width)  # [n_rows, n_head, T, T]
            per_cell = att.new_zeros(n_rows, n_head, width, values.shape[0]).scatter_add(-1, index, att)
            return per_cell @ values  # [n_rows, n_head, T, d_head]
        return torch.einsum("bhst,bstd->bhsd", att, values[cells])
