"""The single-environment API: observation space, observations and ``Environment``.

Names and keywords follow entity-gym 0.1.10 so that an entity-gym environment ports by changing
its imports. Differences: ``Observation`` also carries ``truncated``; ``reset_filter`` /
``act_filter`` really select and reorder features; ``Environment.seed`` gives each environment
its own random stream.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    Action,
    ActionSpace,
    GLOBAL_MASKS,
    SelectEntityActionMask,
    ActionMask,
)
from entmachin.env.common import GLOBAL_ENTITY, ActionName, EntityID, EntityName, Features
from entmachin.env.symmetry import Symmetry


@dataclass
class Entity:
    """The features of one entity type, in order.

    Attributes:
        features: the features' names; an observation's feature columns follow this order.
    """

    features: List[str]


@dataclass
class ObsSpace:
    """What an environment can show: global features and the entity types with their features.

    The insertion order of ``entities`` fixes entity indices within a step: all entities of the
    first type, then the second, and so on, then the ``__global__`` pseudo-entity.

    Attributes:
        global_features: the names of the features of the whole step, in order.
        entities: entity type -> its ``Entity`` (the names of its features).
    """

    global_features: List[str] = field(default_factory=list)
    entities: Dict[EntityName, Entity] = field(default_factory=dict)


class Observation:
    """What an environment returns on one step. Every argument is keyword-only.

    Args:
        features: entity type -> float32 ``(n_entities, n_features)`` (or nested lists).
        entities: alternative to ``features`` + ``ids``: entity type -> features, or a
            ``(features, ids)`` tuple, or ``None`` for absent.
        ids: entity type -> ids of that type's entities (any hashable values).
        actions: action name -> the ``ActionMask`` of this step.
        done: the episode ended (terminal or truncated).
        reward: reward received on this step.
        visible: entity type -> bool ``(n_entities,)``; invisible entities are hidden from the
            policy but not from the value function.
        global_features: float ``(n_global_features,)``.
        metrics: name -> value, aggregated into ``VecObs.metrics``.
        truncated: the episode was cut short (time limit) rather than ended by the
            environment; implies nothing unless ``done`` is set too.
        result: a seat's result at the end of a game of several players: ``"win"``,
            ``"draw"`` or ``"loss"`` (``None``: not stated; see ``entmachin.env.multi_agent``).
    """

    def __init__(
        self,
        *,
        done: bool,
        reward: float,
        visible: Optional[Mapping[EntityName, Union[npt.NDArray[np.bool_], Sequence[bool]]]] = None,
        entities: Optional[
            Mapping[EntityName, Union[Features, Tuple[Features, Sequence[EntityID]], None]]
        ] = None,
        features: Optional[Mapping[EntityName, Features]] = None,
        ids: Optional[Mapping[EntityName, Sequence[EntityID]]] = None,
        global_features: Union[npt.NDArray[np.float32], Sequence[float], None] = None,
        actions: Optional[Mapping[ActionName, ActionMask]] = None,
        metrics: Optional[Dict[str, float]] = None,
        truncated: bool = False,
        result: Optional[str] = None,
    ) -> None:
        self.global_features = global_features if global_features is not None else []
        self.actions = actions or {}
        self.done = done
        self.truncated = truncated
        self.result = result
        self.reward = reward
        if features is not None:
            if entities is not None:
                raise ValueError("Observation: give `features` (with `ids`) or `entities`, not both")
            self.features = features
            self.ids = ids or {}
        else:
            entities = entities or {}
            self.features = {
                etype: e[0] if isinstance(e, tuple) else e
                for etype, e in entities.items()
                if e is not None
            }
            self.ids = {
                etype: e[1] for etype, e in entities.items() if isinstance(e, tuple)
            }
            if ids:
                self.ids = {**self.ids, **ids}
        self.metrics = metrics or {}
        self.visible = visible or {}
        self._id_to_index: Optional[Dict[EntityID, int]] = None
        self._index_to_id: Optional[List[EntityID]] = None
        # (kind, action name) -> (mask, obs_space, indices); batching and action conversion
        # both need the same indices, and the mask identity guards against later mutation.
        self._index_cache: Dict[Tuple[str, str], Tuple[Any, ObsSpace, npt.NDArray[np.int64]]] = {}

    @classmethod
    def empty(cls) -> "Observation":
        """An observation of no entities and no actions: not done, reward 0."""
        return Observation(actions={}, done=False, reward=0.0)

    def __repr__(self) -> str:
        counts = {etype: self.num_entities(etype) for etype in self.features}
        return (
            f"Observation(entities={counts}, actions={list(self.actions)}, reward={self.reward}, "
            f"done={self.done}, truncated={self.truncated})"
        )

    def num_entities(self, entity: EntityName) -> int:
        """Number of entities of type ``entity`` (0 if the type is absent)."""
        feats = self.features.get(entity)
        if feats is None:
            return 0
        return feats.shape[0] if isinstance(feats, np.ndarray) else len(feats)

    def _type_ranges(self, obs_space: ObsSpace) -> Dict[EntityName, Tuple[int, int]]:
        ranges, offset = {}, 0
        for etype in obs_space.entities:
            n = self.num_entities(etype)
            ranges[etype] = (offset, offset + n)
            offset += n
        ranges[GLOBAL_ENTITY] = (offset, offset + 1)
        return ranges

    def _indices(
        self,
        obs_space: ObsSpace,
        ids: Optional[Sequence[EntityID]],
        types: Optional[Sequence[EntityName]],
        atype: ActionName,
    ) -> npt.NDArray[np.int64]:
        if ids is not None:
            id_to_index = self.id_to_index(obs_space)
            try:
                return np.array([id_to_index[i] for i in ids], dtype=np.int64)
            except KeyError:
                missing = [i for i in ids if i not in id_to_index]
                raise ValueError(
                    f"action '{atype}' refers to entity ids {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
                    f"which this observation lacks (or the observation filter dropped); observed entity types "
                    f"{list(obs_space.entities)}"
                ) from None
        ranges = self._type_ranges(obs_space)
        if types is None:
            return np.arange(ranges[GLOBAL_ENTITY][0], dtype=np.int64)
        if not types:
            return np.zeros(0, dtype=np.int64)
        unknown = [t for t in types if t not in ranges]
        if unknown:
            raise ValueError(
                f"an action mask refers to entity types {unknown}, which the observation space "
                f"(or observation filter) lacks; it has {list(obs_space.entities)}"
            )
        return np.concatenate([np.arange(*ranges[t], dtype=np.int64) for t in types])

    def _actor_indices(self, atype: ActionName, obs_space: ObsSpace) -> npt.NDArray[np.int64]:
        """Entity indices (in ``obs_space`` order) of the actors of action ``atype``."""
        return self._cached_indices("actor", atype, obs_space)

    def _actee_indices(self, atype: ActionName, obs_space: ObsSpace) -> npt.NDArray[np.int64]:
        """Entity indices of the entities that actors of ``atype`` may select."""
        return self._cached_indices("actee", atype, obs_space)

    def _cached_indices(self, kind: str, atype: ActionName, obs_space: ObsSpace) -> npt.NDArray[np.int64]:
        mask = self.actions[atype]
        hit = self._index_cache.get((kind, atype))
        if hit is not None and hit[0] is mask and hit[1] is obs_space:
            return hit[2]
        if kind == "actee":
            if not isinstance(mask, SelectEntityActionMask):
                raise TypeError(f"action '{atype}' has a {type(mask).__name__}; actees need a SelectEntityActionMask")
            indices = self._indices(obs_space, mask.actee_ids, mask.actee_types, atype)
        elif isinstance(mask, GLOBAL_MASKS):
            indices = np.array([self._type_ranges(obs_space)[GLOBAL_ENTITY][0]], dtype=np.int64)
        else:
            indices = self._indices(obs_space, mask.actor_ids, mask.actor_types, atype)
        self._index_cache[(kind, atype)] = (mask, obs_space, indices)
        return indices

    def entity_ids(self, obs_space: ObsSpace, ids: Optional[Sequence[EntityID]],
                   index: npt.NDArray[np.int64]) -> List[EntityID]:
        """The ids of the entities at ``index``, entity indices in ``obs_space`` order (``ids`` itself where a
        mask names its entities by id)."""
        if ids is not None:
            return list(ids)
        index_to_id = self.index_to_id(obs_space)
        return [index_to_id[k] for k in index]

    def id_to_index(self, obs_space: ObsSpace) -> Dict[EntityID, int]:
        """Map from entity id to entity index within this step, indices in ``obs_space`` order (computed once)."""
        if self._id_to_index is None:
            self._id_to_index = {
                eid: index for index, eid in enumerate(self.index_to_id(obs_space)) if eid is not None
            }
        return self._id_to_index

    def index_to_id(self, obs_space: ObsSpace) -> List[EntityID]:
        """Entity id of every entity index, in ``obs_space`` order (``None`` where the type has no ids; computed
        once)."""
        if self._index_to_id is None:
            self._index_to_id = []
            for etype in obs_space.entities:
                ids = self.ids.get(etype)
                self._index_to_id.extend(ids if ids is not None else [None] * self.num_entities(etype))
        return self._index_to_id


class Environment(ABC):
    """Base class of all environments.

    Subclasses implement ``obs_space``, ``action_space``, ``reset`` and ``act``. Randomness
    should come from ``self.rng`` (a ``numpy.random.Generator``): ``seed`` replaces it, which is
    how ``EnvList(..., seed=...)`` makes runs reproducible.

    Example:
        >>> env = SomeEnvironment()
        >>> env.seed(0)
        >>> obs = env.reset()
        >>> while not obs.done:
        ...     obs = env.act(choose(obs))
    """

    rng: np.random.Generator

    @abstractmethod
    def obs_space(self) -> ObsSpace:
        """The shape of the observations this environment returns."""

    @abstractmethod
    def action_space(self) -> Dict[ActionName, ActionSpace]:
        """The actions this environment accepts, by name."""

    @abstractmethod
    def reset(self) -> Observation:
        """Start a new episode and return its first observation."""

    @abstractmethod
    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        """Apply ``actions`` (action name -> action) and return the next observation."""

    def seed(self, seed: Optional[int]) -> None:
        """Give this environment its own random stream (``self.rng``), drawn from ``seed`` (``None``: fresh
        entropy)."""
        self.rng = np.random.default_rng(seed)

    def reset_filter(self, obs_filter: ObsSpace) -> Observation:
        """``reset``, keeping only the entity types and features named in ``obs_filter``."""
        return self._filter_obs(self.reset(), obs_filter)

    def act_filter(self, actions: Mapping[ActionName, Action], obs_filter: ObsSpace) -> Observation:
        """``act`` with ``actions``, keeping only the entity types and features named in ``obs_filter``."""
        return self._filter_obs(self.act(actions), obs_filter)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """An RGB image of the current state."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render()")

    def symmetries(self) -> Dict[str, Symmetry]:
        """The game's symmetries by name (``entmachin.env.symmetry``): transformations of its observations
        that leave its rules unchanged, which ``rollout.symmetries`` trains on; none unless overridden."""
        return {}

    def close(self) -> None:
        """Release resources held by the environment."""

    def _filter_obs(self, obs: Observation, obs_filter: ObsSpace) -> Observation:
        return filter_observation(self, obs, obs_filter)


def filter_observation(env: Any, obs: Observation, obs_filter: ObsSpace) -> Observation:
    """``obs`` of ``env`` with only the entity types and features ``obs_filter`` names (``obs``
    itself where the filter keeps everything)."""
    # Compiled once per filter object: obs_space() may build a new ObsSpace on every call.
    cached = env.__dict__.get("_entmachin_filter")
    if cached is None or cached[0] is not obs_filter:
        cached = (obs_filter, compile_feature_filter(env.obs_space(), obs_filter))
        env.__dict__["_entmachin_filter"] = cached
    selectors = cached[1]
    if selectors is None:
        return obs
    features: Dict[EntityName, Features] = {}
    for etype, selector in selectors.entities.items():
        feats = obs.features.get(etype)
        if feats is None:
            continue
        if not isinstance(feats, np.ndarray):
            feats = np.asarray(feats, dtype=np.float32)
        if feats.ndim != 2:
            if len(feats) == 0:  # an empty list or array has no width to reshape by
                features[etype] = np.zeros((0, len(selector)), np.float32)
                continue
            feats = feats.reshape(len(feats), -1)
        features[etype] = feats[:, selector]
    global_features = obs.global_features
    if selectors.global_features is not None:
        global_features = np.asarray(global_features, dtype=np.float32)[selectors.global_features]
    kept = set(selectors.entities)
    filtered = Observation(
        global_features=global_features,
        features=features,
        ids={k: v for k, v in obs.ids.items() if k in kept},
        actions=obs.actions,
        done=obs.done,
        reward=obs.reward,
        metrics=obs.metrics,
        visible={k: v for k, v in obs.visible.items() if k in kept},
        truncated=obs.truncated,
        result=obs.result,
    )
    return filtered


@dataclass(frozen=True)
class FeatureFilter:
    """Column selectors that turn an environment's observations into a filter's layout."""

    entities: Dict[EntityName, npt.NDArray[np.int64]]
    global_features: Optional[npt.NDArray[np.int64]]


def compile_feature_filter(space: ObsSpace, obs_filter: ObsSpace) -> Optional[FeatureFilter]:
    """Selectors mapping ``space``'s features to ``obs_filter``'s, or ``None`` if they agree.

    Raises:
        ValueError: the filter names an entity type or feature that ``space`` lacks.
    """
    if obs_filter is space or obs_filter == space:
        return None
    entities = {}
    for etype, entity in obs_filter.entities.items():
        if etype not in space.entities:
            raise ValueError(
                f"observation filter names entity type '{etype}'; the environment has "
                f"{list(space.entities)}"
            )
        entities[etype] = _select(space.entities[etype].features, entity.features, f"entities['{etype}']")
    global_features = None
    if obs_filter.global_features != space.global_features:
        global_features = _select(space.global_features, obs_filter.global_features, "global_features")
    return FeatureFilter(entities, global_features)


def _select(have: List[str], want: List[str], where: str) -> npt.NDArray[np.int64]:
    missing = [f for f in want if f not in have]
    if missing:
        raise ValueError(
            f"observation filter {where} asks for features {missing}; the environment has {have}"
        )
    return np.array([have.index(f) for f in want], dtype=np.int64)
