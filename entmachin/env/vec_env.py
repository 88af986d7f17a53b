"""Vectorised observations (``VecObs``), metrics and the ``VecEnv`` API. The action masks of a ``VecObs`` are
declared in :mod:`entmachin.env.vec_masks`; this module exports them too.

A ``VecObs`` holds one row per environment. Every per-entity value is a ragged array with one
sequence per row; entity indices within a row follow ``ObsSpace.entities`` order with the
``__global__`` pseudo-entity last.
"""
from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayF32

from entmachin.env.action import GLOBAL_SPACES, ActionSpace
from entmachin.env.common import ActionName, EntityName
from entmachin.env.environment import ObsSpace
from entmachin.env.vec_masks import (
    _ours,
    VecActionMask,
    VecCategoricalActionMask,
    VecContinuousActionMask,
    VecSelectEntityActionMask,
)
from entmachin.ragged.array import RaggedArray
from entmachin.ragged.arrays import empty_ragged, ragged_full
from entmachin.ragged.interop import as_ragged_array, is_foreign_ragged

__all__ = ["ragged_actions", "VecCategoricalActionMask", "VecSelectEntityActionMask", "VecContinuousActionMask",
           "VecActionMask", "Metric", "VecObs", "has_global_entity", "RowIndex", "VecEnv", "env_seeds", "split_envs",
           "merge_vec_obs"]


def ragged_actions(actions: Mapping[ActionName, Any]) -> Mapping[ActionName, Any]:
    """``actions`` with any ragged-buffer values converted (the same mapping if there are none)."""
    if not any(is_foreign_ragged(a) for a in actions.values()):
        return actions
    return {name: as_ragged_array(a) if is_foreign_ragged(a) else a for name, a in actions.items()}


@dataclass
class Metric:
    """Running count / sum / min / max of a scalar; ``+`` and ``+=`` combine two.

    Attributes:
        count: how many values were pushed.
        sum: their sum.
        min: the least of them (``inf`` before the first).
        max: the greatest of them (``-inf`` before the first).
    """

    count: int = 0
    sum: float = 0.0
    min: float = float("inf")
    max: float = float("-inf")

    def push(self, value: float) -> None:
        """Count ``value`` in."""
        self.count += 1
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    def __iadd__(self, m: "Metric") -> "Metric":
        self.count += m.count
        self.sum += m.sum
        self.min = min(self.min, m.min)
        self.max = max(self.max, m.max)
        return self

    def __add__(self, m: "Metric") -> "Metric":
        out = copy.copy(self)
        out += m
        return out

    @property
    def mean(self) -> float:
        """``sum / count`` (0.0 before the first value)."""
        return self.sum / self.count if self.count else 0.0


@dataclass
class VecObs:
    """A batch of observations, one row per environment.

    Attributes:
        features: entity type -> float32 ``[n_entities, n_features]`` per row (includes
            ``__global__`` when the environment has global features or global actions).
        visible: entity type -> bool ``[n_entities, 1]`` per row, for types that report
            visibility; absent types are fully visible.
        action_masks: action name -> mask.
        reward: float32 ``[n_rows]``.
        done: bool ``[n_rows]``; the row's episode ended on this step and the row already holds
            the first observation of the next episode (auto-reset).
        metrics: name -> aggregated ``Metric``.
        truncated: bool ``[n_rows]``; among ``done`` rows, those cut short (time limit).
        final_obs: the last observation of the episodes that ended, one row per ``done`` row.
        final_index: int64 ``[n_final]``, the row of each ``final_obs`` row.
        result: float32 ``[n_rows]``; among ``done`` rows, the seat's score in the game that
            ended (1 win, 0.5 draw, 0 loss; see ``entmachin.env.multi_agent``), NaN where no
            game ended or none was stated.
        ids: each row's entity ids, entity type -> the ids in the row's order, as the environment gave them
            (``batch_obs`` keeps them; None where a list does not pass them, e.g. across worker processes).
            Per-entity memory keeps its states by them.
    """

    features: Dict[EntityName, RaggedArrayF32]
    visible: Dict[EntityName, RaggedArrayBool]
    action_masks: Dict[ActionName, VecActionMask]
    reward: npt.NDArray[np.float32]
    done: npt.NDArray[np.bool_]
    metrics: Dict[str, Metric]
    truncated: Optional[npt.NDArray[np.bool_]] = None
    final_obs: Optional["VecObs"] = None
    final_index: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    result: Optional[npt.NDArray[np.float32]] = None
    ids: Optional[List[Mapping[EntityName, Sequence[Any]]]] = None

    def __post_init__(self) -> None:
        for name, values in (("features", self.features), ("visible", self.visible)):
            for key, value in values.items():
                if not isinstance(value, RaggedArray):
                    values[key] = _ours(value, f"VecObs.{name}['{key}']")
        if self.truncated is None:
            self.truncated = np.zeros_like(self.done, dtype=np.bool_)
        if self.result is None:
            self.result = np.full(len(self.done), np.nan, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.reward)

    def extend(self, b: "VecObs") -> None:
        """Append the rows of ``b`` (entity types and masks missing on one side are filled)."""
        n_self = len(self)
        for etype, feats in b.features.items():
            if etype not in self.features:
                self.features[etype] = empty_ragged(np.float32, feats.size2(), n_self)
        for etype in set(self.visible) | set(b.visible):
            mine, theirs = self.visible.get(etype), b.visible.get(etype)
            if mine is None:
                mine = ragged_full(self.features[etype].size1(), 1, True, np.bool_)
            if theirs is None:
                theirs = ragged_full(_lengths(b.features, etype, len(b)), 1, True, np.bool_)
            mine.extend(theirs)
            self.visible[etype] = mine
        for etype, feats in self.features.items():
            theirs = b.features.get(etype)
            feats.extend(theirs if theirs is not None else empty_ragged(np.float32, feats.size2(), len(b)))
        for atype, amask in b.action_masks.items():
            if atype not in self.action_masks:
                if n_self:
                    raise ValueError(f"VecObs.extend: action '{atype}' is missing from the first batch")
                self.action_masks[atype] = copy.deepcopy(amask)
            else:
                self.action_masks[atype].extend(amask)
        if b.final_obs is not None:
            if self.final_obs is None:
                self.final_obs = b.final_obs
            else:
                self.final_obs.extend(b.final_obs)
            self.final_index = np.concatenate([self.final_index, b.final_index + n_self])
        self.reward = np.concatenate([self.reward, b.reward])
        self.done = np.concatenate([self.done, b.done])
        self.truncated = np.concatenate([self.truncated, b.truncated])
        self.result = np.concatenate([self.result, b.result])
        self.ids = None if self.ids is None or b.ids is None else [*self.ids, *b.ids]
        for name, stats in b.metrics.items():
            if name in self.metrics:
                self.metrics[name] += stats
            else:
                self.metrics[name] = copy.copy(stats)


def _lengths(features: Mapping[EntityName, RaggedArrayF32], etype: str, n: int) -> npt.NDArray[np.int64]:
    feats = features.get(etype)
    return feats.size1() if feats is not None else np.zeros(n, dtype=np.int64)


def has_global_entity(obs_space: ObsSpace, action_space: Mapping[ActionName, ActionSpace]) -> bool:
    """Whether rows carry a ``__global__`` pseudo-entity (global features or global actions)."""
    return len(obs_space.global_features) > 0 or any(
        isinstance(space, GLOBAL_SPACES) for space in action_space.values()
    )


@dataclass(frozen=True)
class RowIndex:
    """Which environment and which seat each row of a ``VecObs`` is.

    Environments with one player give one row each (seat ``None``); an environment with several
    players gives one row per seat, in seat order (``entmachin.env.multi_agent``).

    Attributes:
        env: int64 ``[n_rows]``, the environment of each row.
        seat: the seat of each row (``None`` for one-player environments).
        seats: each environment's seats (``None`` for a one-player environment).
    """

    env: npt.NDArray[np.int64]
    seat: Tuple[Optional[str], ...]
    seats: Tuple[Optional[Tuple[str, ...]], ...]

    @classmethod
    def of(cls, seats: Sequence[Optional[Sequence[str]]]) -> "RowIndex":
        """The rows of environments with these ``seats``, one entry per environment (``None``: one player)."""
        per_env = [None if s is None else tuple(s) for s in seats]
        counts = [1 if s is None else len(s) for s in per_env]
        env = np.repeat(np.arange(len(per_env), dtype=np.int64), counts)
        return cls(env, tuple(seat for s in per_env for seat in (s or (None,))), tuple(per_env))

    @property
    def num_envs(self) -> int:
        """Number of environments (``len`` counts rows)."""
        return len(self.seats)

    @property
    def multi_agent(self) -> bool:
        """Whether any environment has several players (seats)."""
        return any(s is not None for s in self.seats)

    def rows_of(self, start: int, stop: int) -> Tuple[int, int]:
        """The rows ``(first, one past the last)`` of the environments from ``start`` to ``stop`` (one past the
        last environment)."""
        return int(np.searchsorted(self.env, start)), int(np.searchsorted(self.env, stop))

    def __len__(self) -> int:
        return len(self.env)


class VecEnv(ABC):
    """A batch of environments stepped together; finished environments reset themselves.

    Example:
        >>> envs = EnvList(MineSweeper, num_envs=8, seed=0)
        >>> obs = envs.reset()
        >>> for _ in range(100):
        ...     obs = envs.act(policy(obs))
    """

    @abstractmethod
    def obs_space(self) -> ObsSpace:
        """The observation space of the environments."""

    @abstractmethod
    def action_space(self) -> Dict[ActionName, ActionSpace]:
        """The action spaces of the environments, by name."""

    @abstractmethod
    def reset(self, obs_config: Optional[ObsSpace] = None) -> VecObs:
        """Reset every environment; ``obs_config`` filters features (default: all)."""

    @abstractmethod
    def act(
        self, actions: Mapping[ActionName, RaggedArray], obs_filter: Optional[ObsSpace] = None
    ) -> VecObs:
        """Step every environment with ``actions``, one ragged array per action name: int64 ``[n_actors, 1]``
        (a choice or an actee position) or, for continuous actions, float32 ``[n_actors, n_values]``, one
        sequence per row. ``obs_filter`` filters features from now on (default: keep the filter in use).

        Raises:
            ValueError, TypeError: actions that do not fit the last observations' masks, named (nothing is
                stepped).
        """

    def parts(self, n_parts: int) -> List[Tuple[int, int]]:
        """Row ranges ``(start, stop)``, at most ``n_parts``, in row order, that :meth:`act_async`
        steps on their own while the caller works on another. Environments stepped in the
        caller's process give one part, every row (they cannot step meanwhile);
        ``ParallelEnvList`` gives groups of whole workers."""
        return [(0, len(self))]

    def act_async(self, actions: Mapping[ActionName, RaggedArray], rows: Tuple[int, int],
                  obs_filter: Optional[ObsSpace] = None) -> None:
        """Sends ``actions`` (as :meth:`act` takes them, rows counted within the part) of the part ``rows``
        (one of :meth:`parts`) and returns at once; :meth:`receive` waits for its observations (optional).
        ``obs_filter`` is :meth:`act`'s."""
        raise NotImplementedError(f"{type(self).__name__} does not implement act_async()")

    def receive(self, rows: Tuple[int, int]) -> VecObs:
        """The observations of the part ``rows`` that :meth:`act_async` sent (optional)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement receive()")

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """Every environment's frame (optional)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render()")

    def get_state(self) -> bytes:
        """The environments' state, to continue their episodes with :meth:`set_state` (optional)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_state()")

    def set_state(self, state: bytes) -> None:
        """Restores the environments from ``state``, which :meth:`get_state` returned (optional)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement set_state()")

    @abstractmethod
    def __len__(self) -> int:
        """Number of rows: one per environment, or one per (environment, seat) for environments
        with several players (``row_index``)."""

    def row_index(self) -> RowIndex:
        """Which environment and seat each row is (one row per environment unless overridden)."""
        return RowIndex.of([None] * len(self))

    @property
    def num_envs(self) -> int:
        """Number of environments (``len`` counts rows)."""
        return self.row_index().num_envs

    def close(self) -> None:
        """Release the environments."""

    def has_global_entity(self) -> bool:
        """Whether rows carry a ``__global__`` pseudo-entity (global features or global actions)."""
        return has_global_entity(self.obs_space(), self.action_space())

    def __enter__(self) -> "VecEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def env_seeds(seed: Optional[int], num_envs: int) -> Sequence[Optional[int]]:
    """``num_envs`` independent per-environment seeds derived from ``seed`` (``None`` -> unseeded: ``None``
    for each)."""
    if seed is None:
        return [None] * num_envs
    states = np.random.SeedSequence(seed).generate_state(num_envs, dtype=np.uint64)
    return [int(s) for s in states]


def split_envs(num_envs: int, n_workers: int) -> List[Tuple[int, int]]:
    """Contiguous ``(start, stop)`` slices of the environments, one per worker; the first
    ``num_envs % n_workers`` are one longer."""
    base, extra = divmod(num_envs, n_workers)
    bounds, start = [], 0
    for k in range(n_workers):
        stop = start + base + (1 if k < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def merge_vec_obs(batches: List[VecObs]) -> VecObs:
    """The workers' observations in environment order, extending the first batch in place
    (``extend`` offsets ``final_index`` by the rows before)."""
    merged = batches[0]
    for batch in batches[1:]:
        merged.extend(batch)
    return merged
