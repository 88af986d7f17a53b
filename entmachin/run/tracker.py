"""Entity counts and action frequencies of a rollout, gathered as the collector converts data."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

import numpy as np

from entmachin.env import CategoricalActionSpace, GlobalCategoricalActionSpace, VecObs, to_state
from entmachin.frame.collector import default_actions

__all__ = ["RolloutTracker"]


class RolloutTracker:
    """A ``state_fn`` / ``action_fn`` pair for ``RolloutCollector`` that also counts.

    ``state_fn`` counts the entities of every observation the policy acts on (not the final
    observations of ended episodes, which the collector converts as well); ``action_fn``
    counts the choices of categorical actions.
    """

    def __init__(self, action_space: Mapping[str, Any]) -> None:
        self.action_space = dict(action_space)
        self.labels = {name: list(space.index_to_label) for name, space in action_space.items()
                       if isinstance(space, (CategoricalActionSpace, GlobalCategoricalActionSpace))}
        self._skip: Any = None
        self.clear()

    def clear(self) -> None:
        self.rows = 0
        self.entities: Dict[str, int] = {}
        self.choices = {name: np.zeros(len(labels), dtype=np.int64) for name, labels in self.labels.items()}

    def state_fn(self, obs: VecObs) -> Dict[str, Any]:
        if obs is not self._skip:
            self.rows += len(obs.reward)
            for name, ragged in obs.features.items():
                self.entities[name] = self.entities.get(name, 0) + int(ragged.items())
        self._skip = obs.final_obs  # converted next, for bootstrapping: not an observation acted on
        return to_state(obs, self.action_space)

    def action_fn(self, result: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        stored, env_actions = default_actions(result)
        for name, counts in self.choices.items():
            if name in env_actions:
                flat = env_actions[name].as_array().reshape(-1)  # [n_actors]
                counts += np.bincount(flat, minlength=len(counts))[: len(counts)]
        return stored, env_actions

    def entity_means(self) -> Dict[str, float]:
        """Mean number of entities of each type per observation since :meth:`clear`."""
        return {name: count / self.rows for name, count in self.entities.items()} if self.rows else {}

    def action_shares(self) -> Dict[str, float]:
        """``"<action>/<choice>"`` -> share of the actors' choices since :meth:`clear`."""
        out: Dict[str, float] = {}
        for name, counts in self.choices.items():
            total = int(counts.sum())
            if total:
                for label, count in zip(self.labels[name], counts):
                    out[f"{name}/{label}"] = float(count) / total
        return out
