"""A rollout's rows and their images under a game's symmetries (``entmachin.env.symmetry``).

``augment(steps, symmetries, obs_space)`` adds each symmetry's image of a rollout's rows as further rows
of every step (rows ``B..2B-1`` the first image of rows ``0..B-1``, and so on), so that the images form
trajectories of their own: GAE runs along each as along the originals, with the critic's own values of
the transformed states. ``RolloutCollector(symmetries=...)`` calls it before ``store_rollout``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np
import torch

from entmachin.env.symmetry import Symmetry
from entmachin.ragged import trees
from entmachin.ragged.tensor import RaggedTensor, tree_to_torch

__all__ = ["augment"]


class _Compiled:
    """A symmetry as tensors, for one observation space: per entity type the scale and offset rows, per
    action the permutation and its inverse."""

    def __init__(self, sym: Symmetry, obs_space: Any) -> None:
        self.features: Dict[str, Tuple[torch.Tensor, torch.Tensor]] = {}
        for entity, maps in sym.features.items():
            names = list(obs_space.entities[entity].features)
            scale, offset = torch.ones(len(names)), torch.zeros(len(names))  # [n_features] each
            for feature, (s, o) in maps.items():
                scale[names.index(feature)], offset[names.index(feature)] = float(s), float(o)
            self.features[entity] = (scale, offset)
        self.choices = {a: torch.as_tensor([int(c) for c in perm], dtype=torch.int64)
                        for a, perm in sym.choices.items()}
        self.inverse = {a: torch.argsort(p) for a, p in self.choices.items()}

    def state(self, state: Mapping[str, Any]) -> Dict[str, Any]:
        """The transformed canonical state (new leaves where something changes; the rest shared)."""
        out = dict(state)
        entities = dict(state["entities"])
        for entity, (scale, offset) in self.features.items():
            rt = entities.get(entity)
            if rt is not None:
                entities[entity] = rt.with_data(rt.data * scale.to(rt.data.device) + offset.to(rt.data.device))
        out["entities"] = entities
        if self.inverse and "action_masks" in state:
            masks = dict(state["action_masks"])
            for action, inverse in self.inverse.items():
                if action in masks and "mask" in masks[action]:  # choice perm[i] is allowed where i was
                    mask = masks[action]["mask"]
                    masks[action] = {**masks[action], "mask": mask.with_data(mask.data[:, inverse.to(mask.device)])}
            out["action_masks"] = masks
        return out

    def action(self, action: Mapping[str, Any]) -> Dict[str, Any]:
        """The transformed stored action (``{"action": {name: ragged [n_actors, 1]}}`` or ``{name: ...}``)."""
        if "action" in action and isinstance(action["action"], Mapping):
            return {**action, "action": self.action(action["action"])}
        out = dict(action)
        for name, perm in self.choices.items():
            value = out.get(name)
            if isinstance(value, RaggedTensor):
                out[name] = value.with_data(perm.to(value.device)[value.data])
        return out


def augment(steps: Sequence[Mapping[str, Any]], symmetries: Sequence[Symmetry], obs_space: Any) -> List[Dict[str, Any]]:
    """A rollout's steps with each symmetry's image of every row added as further rows.

    Each step's ``B`` rows become ``B * (1 + len(symmetries))``: the originals, then each image of them in
    the order of ``symmetries``. ``state``, ``next_state`` and ``action`` are transformed; ``reward``,
    ``terminal``, ``truncated`` and ``stored`` are repeated (the images are the same games).
    """
    compiled = [_Compiled(sym, obs_space) for sym in symmetries]
    # A step's next_state is usually the next step's state, the same object (the collector's): both get
    # one stacked tree, transformed and copied once, as before they shared one (``steps`` keeps every tree
    # alive for the call, so an id names one tree).
    stacked: Dict[int, Dict[str, Any]] = {}

    def with_images(tree: Mapping[str, Any], where: str) -> Dict[str, Any]:
        if id(tree) not in stacked:
            torch_tree = tree_to_torch(tree)
            stacked[id(tree)] = trees.stack([torch_tree, *(c.state(torch_tree) for c in compiled)],
                                            lambda i: f"{where} image {i}")
        return stacked[id(tree)]

    out = []
    for t, step in enumerate(steps):
        action = tree_to_torch(step["action"])
        new = {
            "state": with_images(step["state"], f"augment: step {t} state"),
            "next_state": with_images(step["next_state"], f"augment: step {t} next_state"),
            "action": trees.stack([action, *(c.action(action) for c in compiled)],
                                  lambda i: f"augment: step {t} action image {i}"),
        }
        for key in ("reward", "terminal", "truncated", "stored"):
            if key in step:
                new[key] = np.tile(np.asarray(step[key]).reshape(-1), 1 + len(compiled))
        out.append(new)
    return out
