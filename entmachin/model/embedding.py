"""Per-type entity embedding and the assembly of the flat token stream."""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import numpy as np
import torch
from torch import nn

from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.model import compiled
from entmachin.model.config import TranslationConfig
from entmachin.model.input_norm import InputNorm
from entmachin.model.inputs import ParsedEntities
from entmachin.model.layout import RowLayout, build_layout, on_device, row_starts
from entmachin.model.norm_pack import NormPack
from entmachin.model.translate import TranslatePositions


class TokenBatch(NamedTuple):
    """The embedded tokens of one forward, in stream order (see ``layout``).

    Attributes:
        x: ``[n_tokens, d_model]`` embeddings.
        layout: where each row's tokens are.
        n_entities: ``[B]`` real entities per row (the ``__global__`` token, if any, follows them).
        visible: bool ``[n_tokens]`` or ``None`` when no visibility was given.
        token_type: int64 ``[n_tokens]`` index into ``EntityEmbedding.token_types``.
        features: token type -> the (translated) raw features, ``[n_entities_of_type, n]``.
        dest: token type -> ``[n_entities_of_type]`` stream index of each entity.
    """

    x: torch.Tensor
    layout: RowLayout
    n_entities: torch.Tensor
    visible: Optional[torch.Tensor]
    token_type: torch.Tensor
    features: Dict[str, torch.Tensor]
    dest: Dict[str, torch.Tensor]


class FeaturelessEmbedding(nn.Module):
    """A learned vector shared by every entity of a type without features.

    Shape:
        input: ``[n, 0]``; output: ``[n, d_model]``.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.vector = nn.Parameter(torch.randn(d_model))  # [d_model]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vector.expand(x.shape[0], -1)  # [n, d_model]


def feature_embedding(
    n_features: int, d_model: int, clip: float, name: str = "InputNorm", feature_names: Optional[List[str]] = None
) -> nn.Module:
    """Running normalisation -> Linear -> ReLU -> LayerNorm (a learned vector without features).

    ``name`` and ``feature_names`` name the input in the normalisation's error messages.
    """
    if n_features == 0:
        return FeaturelessEmbedding(d_model)
    norm = InputNorm(n_features, clip, name=name, feature_names=feature_names)
    return nn.Sequential(norm, nn.Linear(n_features, d_model), nn.ReLU(), nn.LayerNorm(d_model))


class EntityEmbedding(nn.Module):
    """Embeds every entity type into ``d_model`` and lays the tokens out row by row.

    Global features are appended to every entity's features; a ``__global__`` token (embedded
    from the global features alone) follows each row's entities when ``global_token`` is set.

    Args:
        obs_space: the observation space.
        d_model: embedding width.
        global_token: add one ``__global__`` token per row (for global categorical actions).
        translation: optional translation of positions to a reference entity.
        clip: clip value of the running input normalisation.
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        d_model: int,
        global_token: bool,
        translation: Optional[TranslationConfig] = None,
        clip: float = 5.0,
    ) -> None:
        super().__init__()
        self.translate = TranslatePositions(translation, obs_space) if translation is not None else None
        self.token_types: List[str] = list(obs_space.entities) + ([GLOBAL_ENTITY] if global_token else [])
        self.global_token = global_token
        names: Dict[str, List[str]] = {}  # the features each type's embedding sees, in order
        for name, entity in obs_space.entities.items():
            extra = self.translate.n_extra_features(name) if self.translate is not None else 0
            names[name] = list(entity.features) + ["distance to the reference"] * extra + list(obs_space.global_features)
        if global_token:
            names[GLOBAL_ENTITY] = list(obs_space.global_features)
        self.widths = {name: len(features) for name, features in names.items()}
        # A list, not a ModuleDict: entity type names may contain dots.
        self.embeddings = nn.ModuleList([
            feature_embedding(self.widths[name], d_model, clip, f"RogueNet input norm of entities['{name}']", names[name])
            for name in self.token_types
        ])
        self._norm_pack = NormPack([])
        self.compiled = False  # the embeddings' ReLU -> LayerNorm compiled (entmachin.model.compiled)

    def _pack(self) -> NormPack:
        """The ``NormPack`` of the embeddings' ``InputNorm``s (again when an embedding was replaced)."""
        norms = [e[0] for e in self.embeddings if isinstance(e, nn.Sequential) and isinstance(e[0], InputNorm)]
        pack = self._norm_pack
        if len(norms) != len(pack.norms) or any(a is not b for a, b in zip(norms, pack.norms)):
            pack = self._norm_pack = NormPack(norms)
        return pack

    def forward(self, parsed: ParsedEntities) -> TokenBatch:
        n_rows = parsed.n_rows
        device = parsed.global_features.device if parsed.global_features is not None else None
        real = parsed.features
        feats = self.translate(real, n_rows) if self.translate is not None else {k: v.data for k, v in real.items()}
        device = next(iter(real.values())).lengths.device if real else (device or next(self.parameters()).device)
        # The one device-to-host copy of the forward: every type's row lengths. The stream layout
        # and the destination of every token are planned from them on the host.
        if real:
            counts = torch.stack([rt.lengths for rt in real.values()], dim=1).cpu().numpy()  # [B, n_types]
        else:
            counts = np.zeros((n_rows, 0), dtype=np.int64)  # [B, 0]
        where, token_type, n_entities = _stream_plan(counts, self.global_token, self.token_types, len(real))
        layout = build_layout(n_entities + int(self.global_token), device)
        sizes = [int(n) for n in counts.sum(axis=0)] + ([n_rows] if self.global_token else [])
        n_tokens = where.shape[0]
        plan = on_device(np.concatenate([where, token_type, n_entities]), device)  # one upload
        where_t, token_type_t, n_entities_t = plan.split([n_tokens, n_tokens, n_rows])
        # Stream index of each entity: its row's start + the entities of earlier types + its position.
        dest: Dict[str, torch.Tensor] = dict(zip(self.token_types, where_t.split(sizes)))
        if self.global_token:
            feats = {**feats, GLOBAL_ENTITY: _global_inputs(parsed, n_rows, device)}

        glob = parsed.global_features
        inputs: List[torch.Tensor] = []
        for name in self.token_types:
            x = feats[name]
            if glob is not None and name != GLOBAL_ENTITY:
                x = torch.cat([x, glob[real[name].batch_index]], dim=1)  # [n, n_features + n_global]
            inputs.append(x)
        # Every InputNorm first normalises with the statistics as they were, then all of them
        # update together (one pass over the packed statistics instead of one per type).
        pack = self._pack()
        normed_types = [k for k, e in enumerate(self.embeddings)
                        if isinstance(e, nn.Sequential) and isinstance(e[0], InputNorm)]
        normed_inputs = [inputs[k] for k in normed_types]
        normalised = dict(zip(normed_types, pack.normalise(normed_inputs)))
        embedded = []
        for k, name in enumerate(self.token_types):
            module = self.embeddings[k]
            if k in normalised:
                linear, norm = module[1], module[3]  # feature_embedding's Linear -> ReLU -> LayerNorm
                embedded.append(compiled.EMBED(self.compiled, linear(normalised[k]), norm.weight, norm.bias,
                                               norm.eps))  # [n, d_model]
            else:
                embedded.append(module(inputs[k]))  # [n, d_model]
        pack.update(normed_inputs)
        dtype = embedded[0].dtype
        for e in embedded[1:]:
            dtype = torch.promote_types(dtype, e.dtype)
        source = torch.cat([e.to(dtype) for e in embedded])  # [n_tokens, d_model] in type order
        x = torch.empty_like(source).index_copy(0, where_t, source)  # [n_tokens, d_model] stream order

        visible = None
        if parsed.visible:
            visible = torch.ones(layout.n_tokens, dtype=torch.bool, device=device)  # [n_tokens]
            for name, vis in parsed.visible.items():
                visible[dest[name]] = vis
        return TokenBatch(x, layout, n_entities_t, visible, token_type_t, feats, dest)


def _stream_plan(counts: np.ndarray, global_token: bool, token_types: List[str], n_real: int
                 ) -> "tuple[np.ndarray, np.ndarray, np.ndarray]":
    """Where each token goes in the stream, on the host.

    Args:
        counts: int64 ``[B, n_real]`` entities of each real type per row.

    Returns:
        ``where`` int64 ``[n_tokens]``: stream index of each token, in type order (every entity of
        the first type row by row, then the next type, then one ``__global__`` token per row);
        ``token_type`` int64 ``[n_tokens]``: each stream position's index into ``token_types``;
        ``n_entities`` int64 ``[B]``: real entities per row.
    """
    n_rows = counts.shape[0]
    n_entities = counts.sum(axis=1)  # [B]
    type_start = row_starts(n_entities + int(global_token))  # [B]
    rows = np.arange(n_rows)
    where, kinds = [], []
    for k in range(n_real):
        lengths = counts[:, k]  # [B]
        first = np.cumsum(lengths) - lengths  # [B] offset of each row's first entity of the type
        n = int(first[-1] + lengths[-1]) if n_rows else 0
        where.append((type_start - first)[np.repeat(rows, lengths)] + np.arange(n))  # [n]
        kinds.append(np.full(n, k, dtype=np.int64))
        type_start = type_start + lengths
    if global_token:
        where.append(type_start)  # [B]: the global token follows the row's entities
        kinds.append(np.full(n_rows, len(token_types) - 1, dtype=np.int64))
    where_all = np.concatenate(where) if where else np.zeros(0, dtype=np.int64)  # [n_tokens]
    token_type = np.empty_like(where_all)  # [n_tokens]
    token_type[where_all] = np.concatenate(kinds) if kinds else where_all
    return where_all.astype(np.int64), token_type, n_entities.astype(np.int64)


def _global_inputs(parsed: ParsedEntities, n_rows: int, device: torch.device) -> torch.Tensor:
    if parsed.global_features is not None:
        return parsed.global_features  # [B, n_global]
    return torch.zeros((n_rows, 0), device=device)  # [B, 0]
