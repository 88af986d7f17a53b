"""``AddMetricsWrapper``: add reward, episode and entity-count metrics to a ``VecEnv``'s output.

Metrics added to every returned ``VecObs.metrics`` (each a ``Metric`` over the rows):

* ``step``: steps taken so far in each row's current episode (0 right after it starts).
* ``entity_count/<type>``: entities of each type per row, ``__global__`` included when the
  environment has a global entity; ``entity_count``: all of them together.
* ``reward``: this step's reward per row.
* ``episodic_reward`` / ``episode_length``: total reward and number of ``act`` steps of each
  episode that ended on this step (``done`` or ``truncated``), for rows selected by ``filter``.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np
import numpy.typing as npt

from entmachin.env.action import ActionSpace
from entmachin.env.common import GLOBAL_ENTITY, ActionName
from entmachin.env.environment import ObsSpace
from entmachin.env.vec_env import RowIndex, Metric, VecEnv, VecObs
from entmachin.ragged.array import RaggedArray


def _summary(values: np.ndarray) -> Metric:
    """A ``Metric`` over ``values`` (empty -> the empty ``Metric``)."""
    if values.size == 0:
        return Metric()
    return Metric(count=int(values.size), sum=float(values.sum()), min=float(values.min()), max=float(values.max()))


class AddMetricsWrapper(VecEnv):
    """Forwards to ``env`` and adds episode, reward and entity-count metrics to each ``VecObs``.

    A row's episode ends on a step whose ``done`` or ``truncated`` flag is set; its running
    reward and length are then reported (if ``filter`` selects the row) and restarted.
    ``reset`` restarts every row.

    Args:
        env: the environments to wrap.
        filter: optional bool ``(len(env),)``; only rows where it is True report
            ``episodic_reward`` / ``episode_length`` (every row is still tracked).

    Raises:
        TypeError, ValueError: ``filter`` is not a bool array of shape ``(len(env),)``.

    Example:
        >>> envs = AddMetricsWrapper(EnvList(MineSweeper, num_envs=4, seed=0))
        >>> obs = envs.reset()
        >>> obs.metrics["entity_count"].mean
    """

    def __init__(self, env: VecEnv, filter: Optional[npt.NDArray[np.bool_]] = None) -> None:
        self.env = env
        n = len(env)
        if filter is None:
            filter = np.ones(n, dtype=np.bool_)  # [n_envs]
        filter = np.asarray(filter)
        if filter.dtype != np.bool_:
            raise TypeError(f"AddMetricsWrapper: filter must be a bool array, got dtype {filter.dtype}")
        if filter.shape != (n,):
            raise ValueError(f"AddMetricsWrapper: filter has shape {filter.shape}; expected ({n},), one flag per environment")
        self.filter = filter
        self.entity_types = list(env.obs_space().entities)
        if env.has_global_entity():
            self.entity_types.append(GLOBAL_ENTITY)
        self.total_reward = np.zeros(n, dtype=np.float64)  # [n_envs]
        self.total_steps = np.zeros(n, dtype=np.int64)  # [n_envs]

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self.env.action_space()

    def __len__(self) -> int:
        return len(self.env)

    def row_index(self) -> RowIndex:
        return self.env.row_index()

    def reset(self, obs_config: Optional[ObsSpace] = None) -> VecObs:
        obs = self.env.reset(obs_config)
        self.total_reward[:] = 0.0
        self.total_steps[:] = 0
        return self._add_metrics(obs, ended=np.zeros(len(obs), dtype=np.bool_))

    def act(self, actions: Mapping[ActionName, RaggedArray], obs_filter: Optional[ObsSpace] = None) -> VecObs:
        obs = self.env.act(actions, obs_filter)
        self.total_reward += obs.reward
        self.total_steps += 1
        ended = np.asarray(obs.done, dtype=np.bool_)  # [n_envs]
        if obs.truncated is not None:
            ended = ended | np.asarray(obs.truncated, dtype=np.bool_)
        return self._add_metrics(obs, ended)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """The wrapped ``env``'s frames."""
        return self.env.render(**kwargs)

    def close(self) -> None:
        self.env.close()

    def _add_metrics(self, obs: VecObs, ended: npt.NDArray[np.bool_]) -> VecObs:
        n = len(obs)
        if n != len(self.total_steps):
            raise ValueError(f"AddMetricsWrapper: the wrapped VecEnv returned {n} rows; expected {len(self.total_steps)}")
        reported = ended & self.filter  # [n_envs]
        obs.metrics["episodic_reward"] = _summary(self.total_reward[reported])
        obs.metrics["episode_length"] = _summary(self.total_steps[reported])
        # The ended rows already hold the next episode's first observation: restart them.
        self.total_reward[ended] = 0.0
        self.total_steps[ended] = 0
        obs.metrics["step"] = _summary(self.total_steps)
        combined = np.zeros(n, dtype=np.int64)  # [n_envs]
        for etype in self.entity_types:
            feats = obs.features.get(etype)
            counts = feats.size1() if feats is not None else np.zeros(n, dtype=np.int64)  # [n_envs]
            obs.metrics[f"entity_count/{etype}"] = _summary(counts)
        for feats in obs.features.values():
            combined += feats.size1()
        obs.metrics["entity_count"] = _summary(combined)
        obs.metrics["reward"] = _summary(np.asarray(obs.reward))
        return obs
