"""``GymnasiumVecEnv``: gymnasium environments stepped in this process, batched from flat arrays.

``EnvList(lambda: from_gymnasium(make()), n)`` builds one ``Observation`` per environment and
step and batches them with ``batch_obs``. A gymnasium environment only ever has one row of
global features and one global actor per action, so ``GymnasiumVecEnv`` writes the
observations straight into one ``[num_envs, n_features]`` array and builds the ``VecObs``
from it; the result is the same, field by field, as ``EnvList``'s. ``entmachin.env.gymnasium_actions``
turns the actions into each environment's ``step`` argument.

Shape:
    features: ``VecObs.features["__global__"]`` float32 ``[1, n_features]`` per row.
    actions: ``{action_name: RaggedArrayI64 [1, 1] per row}``, one actor per environment; a ``Box``
    action: ``{"action": RaggedArrayF32 [1, n_values] per row}``.
"""
from __future__ import annotations

import math
import numbers
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional

import dill
import numpy as np
import numpy.typing as npt

from entmachin.env.action import ActionSpace
from entmachin.env.adapters import GymnasiumEnvironment, _numeric_info
from entmachin.env.common import GLOBAL_ENTITY, ActionName, mark_environment
from entmachin.env.environment import FeatureFilter, ObsSpace, compile_feature_filter
from entmachin.env.finite import refuse_non_finite
from entmachin.env.gymnasium_actions import GymActions
from entmachin.env.vec_env import (
    Metric,
    VecActionMask,
    VecCategoricalActionMask,
    VecContinuousActionMask,
    VecEnv,
    VecObs,
    env_seeds,
)
from entmachin.ragged.array import RaggedArray, RaggedArrayF32, RaggedArrayI64

_NO_METRICS: Mapping[str, float] = MappingProxyType({})  # an empty info's metrics, shared and read-only


class GymnasiumVecEnv(VecEnv):
    """Steps ``num_envs`` gymnasium environments one after another in this process.

    A drop-in, faster replacement for ``EnvList(lambda: from_gymnasium(create_env()), num_envs,
    seed=seed)``: spaces, seeding, auto-reset, ``final_obs`` / ``final_index``, ``truncated``,
    metrics and feature filters are those of ``EnvList`` over ``GymnasiumEnvironment`` (see its
    docstring for how spaces, rewards, ``info`` and ``seed`` map), and every ``VecObs`` field is
    equal. Differences: a bad observation filter is rejected before any environment steps, and
    errors name the environment's index.

    Args:
        create_env: builds one ``gymnasium.Env`` (a ``GymnasiumEnvironment`` is accepted too).
        num_envs: number of environments.
        seed: ``None`` leaves the environments unseeded; an int seeds environment ``i``'s first
            reset with ``env_seeds(seed, num_envs)[i]``; later resets continue its stream.
        check_finite: ``reset`` and ``act`` raise ``NonFiniteObservationError`` (naming the
            environment and the feature) when an observation, final observation or reward
            holds NaN or infinity, as ``EnvList`` does; False turns the check off.

    Raises:
        TypeError: ``num_envs`` or ``check_finite`` has the wrong type, or an environment is not
            a supported gymnasium environment (``from_gymnasium``'s messages).
        ValueError: ``num_envs < 1``, or the environments' spaces differ.

    Example:
        >>> envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), 8, seed=0)
        >>> obs = envs.reset()
        >>> obs = envs.act({"action": actions})  # RaggedArrayI64, one [1, 1] row per env
        >>> # a Box action (Pendulum-v1): RaggedArrayF32, one [1, n_values] row per env
    """

    def __init__(
        self, create_env: Callable[[], Any], num_envs: int, seed: Optional[int] = None, *, check_finite: bool = True
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
            raise TypeError(f"GymnasiumVecEnv: num_envs must be an int, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"GymnasiumVecEnv: num_envs must be >= 1, got {num_envs}")
        if not isinstance(check_finite, bool):
            raise TypeError(f"GymnasiumVecEnv: check_finite must be a bool, got {check_finite!r}")
        self.check_finite = check_finite
        n = int(num_envs)
        self.adapters: List[GymnasiumEnvironment] = [_adapt(create_env()) for _ in range(n)]
        self.envs = [a.env for a in self.adapters]  # the gymnasium environments, stepped directly
        first = self.adapters[0]
        self._obs_space = first.obs_space()
        self._action_space = first.action_space()
        for i, adapter in enumerate(self.adapters[1:], start=1):
            if adapter.obs_space() != self._obs_space or adapter.action_space() != self._action_space:
                raise ValueError(
                    f"GymnasiumVecEnv: environment {i} has observation space {adapter.env.observation_space} "
                    f"and action space {adapter.env.action_space}; environment 0 has "
                    f"{first.env.observation_space} and {first.env.action_space}"
                )
        if seed is not None:
            for adapter, s in zip(self.adapters, env_seeds(seed, n)):
                adapter.seed(s)
        self._names = list(self._action_space)
        self._box = first.spaces.box  # the Box action's GlobalContinuousActionSpace, or None
        if self._box is not None:
            # Every row's bounds, the space's (as EnvList's batches carry them): [num_envs, n_values] each.
            self._bounds = tuple(np.tile(b, (n, 1)) for b in (self._box.low, self._box.high))
        self._obs_shape = tuple(first.env.observation_space.shape)
        self._n_features = first.n_features
        self._ones = np.ones(n, dtype=np.int64)  # [num_envs], one item per row
        self._rows = np.arange(n, dtype=np.int64)  # [num_envs], the environment of each row
        self._actors = np.zeros((n, 1), dtype=np.int64)  # [num_envs, 1]: the __global__ entity, after no others
        self._buf = np.zeros((n,) + self._obs_shape, dtype=np.float32)  # [num_envs, *obs_shape]
        self._flat = self._buf.reshape(n, self._n_features)  # [num_envs, n_features], a view
        self._obs_filter = self._obs_space
        self._selector: Optional[npt.NDArray[np.int64]] = None  # [n_kept_features] columns, None keeps all
        self._started = False
        # Constant masks for check_actions: never handed out, so no caller can extend them.
        actors = RaggedArrayI64.from_flattened(self._actors, self._ones)  # [num_envs, 1]
        check_vec = VecObs(
            features={}, visible={}, action_masks={name: self._mask(actors, self._ones) for name in self._names},
            reward=np.zeros(n, dtype=np.float32), done=np.zeros(n, dtype=np.bool_), metrics={},
        )
        self._gym_actions = GymActions(first.env.action_space, self._action_space, self._box, n, check_vec)

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self, obs_config: Optional[ObsSpace] = None) -> VecObs:
        """Reset every environment; ``obs_config`` keeps and orders global features by name.

        Raises:
            ValueError: ``obs_config`` names entity types or features the environments lack.
            NonFiniteObservationError: with ``check_finite``, an observation holds NaN or infinity.
        """
        self._set_filter(obs_config or self._obs_space)
        metrics: Dict[str, Metric] = {}
        i = 0
        try:
            for i, adapter in enumerate(self.adapters):
                obs = adapter.reset()
                self._flat[i] = obs.global_features
                for key, value in obs.metrics.items():
                    metrics.setdefault(key, Metric()).push(value)
        except Exception as e:
            self._note(e, i)
            raise
        self._started = True
        n = len(self.envs)
        zeros = np.zeros(n, dtype=np.float32)  # [num_envs]
        unset = np.zeros(n, dtype=np.bool_)  # [num_envs]
        vec = self._vec(self._flat, zeros, unset, unset.copy(), metrics)
        if self.check_finite:
            refuse_non_finite(vec, self._obs_filter, self._rows, "GymnasiumVecEnv")
        return vec

    def act(self, actions: Mapping[ActionName, RaggedArray], obs_filter: Optional[ObsSpace] = None) -> VecObs:
        """Step every environment with ``actions``: one choice per row of each action (a ``Box`` action: one
        float32 vector per row); ``obs_filter`` as ``VecEnv.act`` takes it.

        Raises:
            RuntimeError: called before ``reset``.
            ValueError: an action is missing or unknown, has the wrong number of rows or actors,
                or a choice is out of range (a ``Box`` value of the wrong width, not finite or
                outside its bounds); ``obs_filter`` names what the environments lack.
            TypeError: an action is not a ``RaggedArrayI64`` (``RaggedArrayF32`` for a ``Box``
                action), or an environment breaks the gymnasium API.
            NonFiniteObservationError: with ``check_finite``, an observation, final observation
                or reward holds NaN or infinity (a ``ValueError``).
        """
        if not self._started:
            raise RuntimeError("GymnasiumVecEnv.act called before reset()")
        if obs_filter is not None:
            self._set_filter(obs_filter)
        gym_actions = self._gym_actions(actions)
        n = len(self.envs)
        reward = [0.0] * n  # [num_envs]
        done = np.zeros(n, dtype=np.bool_)  # [num_envs]
        truncated = np.zeros(n, dtype=np.bool_)  # [num_envs]
        metrics: Dict[str, Metric] = {}
        finals: Optional[_Finals] = None
        buf, flat, obs_shape = self._buf, self._flat, self._obs_shape
        i = 0
        try:
            for i, env in enumerate(self.envs):
                result = env.step(gym_actions[i])
                if type(result) is not tuple or len(result) != 5:
                    self._bad_step(i, result)
                obs, r, term, trunc, info = result
                r = reward[i] = float(r)
                if type(obs) is np.ndarray and obs.shape == obs_shape:
                    buf[i] = obs
                else:
                    flat[i] = self._checked(i, obs)
                row_metrics = _NO_METRICS
                if type(info) is not dict or info:
                    row_metrics = _numeric_info(info)
                    for key, value in row_metrics.items():
                        metrics.setdefault(key, Metric()).push(value)
                if term or trunc:
                    cut = bool(trunc) and not term
                    done[i], truncated[i] = True, cut
                    if finals is None:
                        finals = _Finals([], [], [], [], [])
                    finals.index.append(i)
                    finals.features.append(flat[i].copy())  # [n_features], before the reset overwrites it
                    finals.reward.append(r)
                    finals.truncated.append(cut)
                    finals.metrics.append(row_metrics)
                    flat[i] = self.adapters[i].reset_features()
        except Exception as e:
            self._note(e, i)
            raise
        vec = self._vec(flat, np.array(reward, dtype=np.float32), done, truncated, metrics)
        if finals is not None:
            vec.final_obs = self._final_obs(finals)
            vec.final_index = np.array(finals.index, dtype=np.int64)  # [n_final]
        if self.check_finite:
            shown = flat if self._selector is None else flat[:, self._selector]  # [num_envs, n_kept_features]
            # One test on the arrays in hand; refuse_non_finite finds and names the culprit.
            # (a sum of the Python float rewards is finite when they are, barring overflow, which only
            # sends the check down the exact path)
            if not (math.isfinite(sum(reward)) and np.isfinite(shown).all()):
                refuse_non_finite(vec, self._obs_filter, self._rows, "GymnasiumVecEnv")
            if finals is not None and not np.isfinite(vec.final_obs.features[GLOBAL_ENTITY].as_array()).all():
                # (the final rewards are those of vec.reward, checked above)
                refuse_non_finite(vec.final_obs, self._obs_filter, vec.final_index, "GymnasiumVecEnv", final=True)
        return vec

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """Every environment's frame, stacked: ``[num_envs, height, width, 3]``."""
        return np.stack([a.render(**kwargs) for a in self.adapters])

    def close(self) -> None:
        for adapter in self.adapters:
            adapter.close()

    def get_state(self) -> bytes:
        """The environments and their last observations, pickled with ``dill``: with
        :meth:`set_state` this continues the episodes in progress (a run's checkpoint holds it).
        Loading it runs code from the data: restore only your own."""
        return dill.dumps((self.adapters, self._buf, self._obs_filter, self._started))

    def set_state(self, state: bytes) -> None:
        """Restores the environments from ``state``, which :meth:`get_state` returned (the same number of them, of
        the same spaces).

        Raises:
            ValueError: the state holds another number of environments or other spaces.
        """
        adapters, buf, obs_filter, started = dill.loads(state)
        if len(adapters) != len(self.adapters) or buf.shape != self._buf.shape:
            raise ValueError(f"GymnasiumVecEnv.set_state: the state holds {len(adapters)} environments with "
                             f"observations of shape {buf.shape[1:]}; this GymnasiumVecEnv has {len(self.adapters)} "
                             f"of shape {self._buf.shape[1:]}")
        if adapters[0].obs_space() != self._obs_space or adapters[0].action_space() != self._action_space:
            raise ValueError("GymnasiumVecEnv.set_state: the state's environments have other spaces than these")
        self.close()
        self.adapters, self.envs = adapters, [a.env for a in adapters]
        self._buf[...] = buf  # _flat stays a view of _buf
        self._set_filter(obs_filter)
        self._started = started

    # ------------------------------------------------------------------ helpers

    def _set_filter(self, obs_filter: ObsSpace) -> None:
        if obs_filter is self._obs_filter:  # compiled already
            return
        compiled: Optional[FeatureFilter] = compile_feature_filter(self._obs_space, obs_filter)
        self._selector = None if compiled is None else compiled.global_features
        self._obs_filter = obs_filter

    def _vec(self, flat: npt.NDArray[np.float32], reward: npt.NDArray[np.float32], done: npt.NDArray[np.bool_],
             truncated: npt.NDArray[np.bool_], metrics: Dict[str, Metric]) -> VecObs:
        n = flat.shape[0]
        lengths = self._ones[:n]
        feats = flat if self._selector is None else flat[:, self._selector]  # [n, n_kept_features]
        actors = self._actors[:n]  # [n, 1], copied by from_flattened
        return VecObs(
            features={GLOBAL_ENTITY: RaggedArrayF32.from_flattened(feats, lengths)},
            visible={},
            action_masks={name: self._mask(RaggedArrayI64.from_flattened(actors, lengths), lengths)
                          for name in self._names},
            reward=reward,
            done=done,
            metrics=metrics,
            truncated=truncated,
        )

    def _mask(self, actors: RaggedArrayI64, lengths: npt.NDArray[np.int64]) -> VecActionMask:
        """An action's mask of the global actors ``actors`` (one per row of ``lengths``): no choice
        masked, or every actor's bounds, the space's."""
        if self._box is None:
            return VecCategoricalActionMask(actors)
        n = lengths.shape[0]
        low, high = (RaggedArrayF32.from_flattened(b[:n], lengths) for b in self._bounds)  # [n, n_values] each, copied
        return VecContinuousActionMask(actors, low, high)

    def _final_obs(self, finals: "_Finals") -> VecObs:
        metrics: Dict[str, Metric] = {}
        for row_metrics in finals.metrics:
            for key, value in row_metrics.items():
                metrics.setdefault(key, Metric()).push(value)
        return self._vec(
            np.array(finals.features, dtype=np.float32),  # [n_final, n_features]
            np.array(finals.reward, dtype=np.float32),  # [n_final]
            np.ones(len(finals.index), dtype=np.bool_),  # [n_final]
            np.array(finals.truncated, dtype=np.bool_),  # [n_final]
            metrics,
        )

    def _checked(self, i: int, obs: Any) -> npt.NDArray[np.float32]:
        flat = np.asarray(obs, dtype=np.float32).reshape(-1)  # [n_features]
        if flat.shape[0] != self._n_features:
            raise ValueError(
                f"GymnasiumVecEnv: environment {i} returned an observation of {flat.shape[0]} values; the "
                f"observation space {self.envs[i].observation_space} declares {self._n_features}"
            )
        return flat

    def _bad_step(self, i: int, result: Any) -> None:
        got = f"a {len(result)}-tuple" if isinstance(result, tuple) else type(result).__name__
        raise TypeError(
            f"GymnasiumVecEnv: environment {i} ({type(self.envs[i]).__name__}).step returned {got}; expected "
            "(observation, reward, terminated, truncated, info) as in the gymnasium API"
        )

    def _note(self, e: Exception, i: int) -> None:
        mark_environment(e, i, self.envs[i])  # as EnvList marks it


class _Finals(NamedTuple):
    """The last step of each episode that ended during one ``act``, in row order."""

    index: List[int]
    features: List[npt.NDArray[np.float32]]
    reward: List[float]
    truncated: List[bool]
    metrics: List[Mapping[str, float]]


def _adapt(env: Any) -> GymnasiumEnvironment:
    return env if isinstance(env, GymnasiumEnvironment) else GymnasiumEnvironment(env)
