"""Translation (and rotation) of position features into each row's reference-entity frame."""
from __future__ import annotations

from typing import Dict, List, Optional

import torch
from torch import nn

from entmachin.env.environment import ObsSpace
from entmachin.model.config import TranslationConfig
from entmachin.ragged.tensor import RaggedTensor


def _feature_index(features: List[str], name: str, where: str) -> int:
    if name not in features:
        raise ValueError(f"{where}: feature '{name}' is not one of {features}")
    return features.index(name)


class TranslatePositions(nn.Module):
    """Moves position features so that each row's reference entity sits at the origin.

    The reference is the first entity of ``config.reference_entity`` in the row; rows without
    one are left as they are. Entity types other than the reference type that have every
    position feature are moved (and rotated, if configured, so that the reference faces
    ``+x``); with ``add_dist_feature`` they get their distance to the reference as an extra,
    last feature.

    Args:
        config: the translation settings.
        obs_space: the observation space (feature names are resolved once, here).

    Raises:
        ValueError: the reference type or a named feature does not exist.
    """

    def __init__(self, config: TranslationConfig, obs_space: ObsSpace) -> None:
        super().__init__()
        self.config = config
        where = "TranslationConfig"
        if config.reference_entity not in obs_space.entities:
            raise ValueError(
                f"{where}.reference_entity: '{config.reference_entity}' is not an entity type; "
                f"expected one of {list(obs_space.entities)}"
            )
        ref_features = obs_space.entities[config.reference_entity].features
        self.reference_indices = [
            _feature_index(ref_features, f, f"{where}.position_features of '{config.reference_entity}'")
            for f in config.position_features
        ]
        self.rotation_indices: Optional[List[int]] = None
        if config.rotation_vec_features is not None:
            self.rotation_indices = [
                _feature_index(ref_features, f, f"{where}.rotation_vec_features") for f in config.rotation_vec_features
            ]
        elif config.rotation_angle_feature is not None:
            self.rotation_indices = [
                _feature_index(ref_features, config.rotation_angle_feature, f"{where}.rotation_angle_feature")
            ]
        self.moved: Dict[str, List[int]] = {
            name: [entity.features.index(f) for f in config.position_features]
            for name, entity in obs_space.entities.items()
            if name != config.reference_entity and all(f in entity.features for f in config.position_features)
        }

    def n_extra_features(self, entity_type: str) -> int:
        """Features this transform appends to ``entity_type`` (1 for a distance, else 0)."""
        return int(self.config.add_dist_feature and entity_type in self.moved)

    def forward(self, features: Dict[str, RaggedTensor], n_rows: int) -> Dict[str, torch.Tensor]:
        """Returns the transformed flat features of every entity type.

        Shape:
            features[t]: ragged ``[n_entities, n_features]``; returns ``{t: [n_entities, n_features (+1)]}``.
        """
        ref = features[self.config.reference_entity]
        has_ref = ref.lengths > 0  # [B]
        first = ref.starts.clamp(max=max(ref.n_items - 1, 0))  # [B] first reference entity of each row
        p = len(self.reference_indices)
        origin = ref.data.new_zeros(n_rows, p)  # [B, p]
        cos_sin = None
        if ref.n_items:
            origin = torch.where(has_ref[:, None], ref.data[first][:, self.reference_indices], origin)
            if self.rotation_indices is not None:
                heading = ref.data[first][:, self.rotation_indices]  # [B, 1 or 2]
                if heading.shape[1] == 1:
                    heading = torch.cat([heading.cos(), heading.sin()], dim=1)  # [B, 2]
                identity = torch.tensor([1.0, 0.0], dtype=heading.dtype, device=heading.device)
                cos_sin = torch.where(has_ref[:, None], heading, identity)  # [B, 2]
        out: Dict[str, torch.Tensor] = {}
        for name, rt in features.items():
            indices = self.moved.get(name)
            if indices is None:
                out[name] = rt.data
                continue
            data = rt.data.clone()  # [n_entities, n_features]
            rel = data[:, indices] - origin[rt.batch_index]  # [n_entities, p]
            if cos_sin is not None:
                c, s = cos_sin[rt.batch_index].unbind(1)  # [n_entities] each
                x, y = rel.unbind(1)
                rel = torch.stack([c * x + s * y, c * y - s * x], dim=1)  # [n_entities, 2]
            data[:, indices] = rel
            if self.config.add_dist_feature:
                data = torch.cat([data, rel.norm(dim=1, keepdim=True)], dim=1)  # [n_entities, n_features + 1]
            out[name] = data
        return out
