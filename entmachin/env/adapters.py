"""Adapters that let foreign environments run through ``EnvList``.

* ``from_gymnasium`` / ``GymnasiumEnvironment``: a ``gymnasium.Env`` with a ``Box`` observation
  and a ``Discrete``, ``MultiDiscrete`` or ``Box`` action becomes an entity environment with
  global features only and one global categorical action per action component (``Box``: one
  global continuous action).
* ``EntityGymAdapter``: an environment written against the ``entity_gym`` package (which
  entmachin does not depend on) is converted by duck typing, class names and attributes, in
  both directions.
* ``ensure_environment``: returns entmachin environments unchanged and wraps entity-gym ones.
* ``BoxDiscreteSpaces``: the gymnasium space conversion ``from_gymnasium`` and
  ``from_pettingzoo`` (``entmachin.env.pettingzoo_adapter``) share.

Neither ``gymnasium`` nor ``entity_gym`` is imported at module import time.
"""
from __future__ import annotations

import logging
import math
import numbers
import sys
from typing import Any, Dict, Mapping, Optional, Set, Tuple

import numpy as np
import numpy.typing as npt

from entmachin.env import action as own_actions
from entmachin.env.multi_agent import MultiAgentEnvironment
from entmachin.env.action import (
    Action,
    ActionMask,
    ActionSpace,
    CategoricalActionMask,
    CategoricalActionSpace,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.gymnasium_spaces import BoxDiscreteSpaces  # environments pickled earlier name it here

logger = logging.getLogger(__name__)

_ENTITY_GYM_METHODS = ("obs_space", "action_space", "reset", "act")
_OBSERVATION_ATTRS = ("features", "actions", "done", "reward")
_warned_unseedable: Set[str] = set()


# --------------------------------------------------------------------------- gymnasium


def from_gymnasium(env: Any) -> "GymnasiumEnvironment":
    """Wrap ``env``, a ``gymnasium.Env``, as an entmachin ``Environment`` (see ``GymnasiumEnvironment``
    for the conversion and what it refuses).

    Example:
        >>> import gymnasium as gym
        >>> envs = EnvList(lambda: from_gymnasium(gym.make("CartPole-v1")), 8, seed=0)
    """
    return GymnasiumEnvironment(env)


class GymnasiumEnvironment(Environment):
    """A ``gymnasium.Env`` seen as an entity environment without entities.

    The flattened ``Box`` observation becomes the global features ``obs_0 … obs_{n-1}``. A
    ``Discrete(n, start)`` action becomes one global categorical action ``"action"`` with labels
    ``"0" … "n-1"`` (the environment receives ``start + index``); a ``MultiDiscrete`` action
    becomes one global categorical action per component, ``"action_0"``, ``"action_1"``, … in
    the flattened order of ``nvec`` (the environment receives the assembled array). A ``Box``
    action becomes one global continuous action ``"action"`` whose values ``"0" … "n-1"`` are the
    flattened Box with its (finite) bounds; the environment receives the float32 values
    reshaped to the Box's shape.

    Every step's ``terminated`` / ``truncated`` map to ``done = terminated or truncated`` and
    ``truncated = truncated and not terminated``. Top-level ``info`` entries holding a finite
    real number (bools excluded) are copied into ``Observation.metrics`` under their own key;
    anything else in ``info`` is ignored.

    ``seed(s)`` makes the next ``reset`` call ``env.reset(seed=s)``; later resets are unseeded and
    continue the environment's own random stream. The action space's sampling is never used.

    Args:
        env: the gymnasium environment; ``close`` closes it.

    Raises:
        TypeError: ``env`` is not a gymnasium environment, or its observation or action space is
            of an unsupported kind.
        ValueError: a ``Box`` action space with an infinite bound (naming the dimension).
    """

    def __init__(self, env: Any) -> None:
        missing = [a for a in ("observation_space", "action_space", "reset", "step") if not hasattr(env, a)]
        if missing:
            raise TypeError(
                f"from_gymnasium: expected a gymnasium.Env, got {type(env).__name__} without {missing}"
            )
        self.env = env
        self.spaces = BoxDiscreteSpaces(env.observation_space, env.action_space, "from_gymnasium", _env_name(env),
                                        box_actions=True)
        self.n_features = self.spaces.n_features
        self._obs_space = self.spaces.obs_space
        self._action_space = self.spaces.action_space
        self._pending_seed: Optional[int] = None

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def seed(self, seed: Optional[int]) -> None:
        """Seed the next ``reset`` with ``seed`` (``env.reset(seed=seed)``; ``None``: unseeded); later resets
        continue its stream. ``self.rng`` is seeded with it too."""
        super().seed(seed)
        self._pending_seed = None if seed is None else int(seed)  # gymnasium wants a Python int

    def reset(self) -> Observation:
        obs, info = self._reset()
        return self._observation(obs, 0.0, False, False, info)

    def reset_features(self) -> npt.NDArray[np.float32]:
        """``reset().global_features`` without building the ``Observation`` (for ``GymnasiumVecEnv``)."""
        return self._flat(self._reset()[0])

    def _reset(self) -> Tuple[Any, Any]:
        if self._pending_seed is not None:
            result = self.env.reset(seed=self._pending_seed)
            self._pending_seed = None
        else:
            result = self.env.reset()
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(
                f"GymnasiumEnvironment: {type(self.env).__name__}.reset returned {type(result).__name__}; "
                "expected (observation, info) as in the gymnasium API"
            )
        return result

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        gym_action = self.spaces.gym_action(actions, "GymnasiumEnvironment.act")
        result = self.env.step(gym_action)
        if not (isinstance(result, tuple) and len(result) == 5):
            got = f"a {len(result)}-tuple" if isinstance(result, tuple) else type(result).__name__
            raise TypeError(
                f"GymnasiumEnvironment: {type(self.env).__name__}.step returned {got}; expected "
                "(observation, reward, terminated, truncated, info) as in the gymnasium API"
            )
        obs, reward, terminated, truncated, info = result
        return self._observation(obs, reward, bool(terminated), bool(truncated), info)

    def _observation(self, obs: Any, reward: Any, terminated: bool, truncated: bool, info: Any) -> Observation:
        return Observation(
            global_features=self._flat(obs),
            actions=self.spaces.masks(),
            done=terminated or truncated,
            truncated=truncated and not terminated,
            reward=float(reward),
            metrics=_numeric_info(info),
        )

    def _flat(self, obs: Any) -> npt.NDArray[np.float32]:
        return self.spaces.flat(obs, "GymnasiumEnvironment")

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """The wrapped environment's ``render()`` (its ``render_mode`` is set at creation)."""
        if kwargs:
            raise TypeError(
                f"GymnasiumEnvironment.render takes no arguments (gymnasium sets render_mode in "
                f"gymnasium.make); got {sorted(kwargs)}"
            )
        frame = self.env.render()
        if frame is None:
            raise ValueError(
                f"GymnasiumEnvironment.render: {type(self.env).__name__}.render() returned None; create it "
                "with gymnasium.make(..., render_mode='rgb_array')"
            )
        return frame

    def close(self) -> None:
        self.env.close()


def _env_name(env: Any) -> str:
    """A gymnasium environment's registered id, or its class name."""
    spec = getattr(env, "spec", None)
    return str(getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__)


def _numeric_info(info: Any) -> Dict[str, float]:
    if not isinstance(info, Mapping):
        return {}
    out = {}
    for key, value in info.items():
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            continue
        value = float(value)
        if math.isfinite(value):
            out[str(key)] = value
    return out


# --------------------------------------------------------------------------- entity-gym


def ensure_environment(env: Any) -> Any:
    """Return ``env`` as an entmachin environment, wrapping entity-gym environments.

    An entmachin ``Environment`` or ``MultiAgentEnvironment`` comes back unchanged; an object with entity-gym's methods
    (``obs_space``, ``action_space``, ``reset``, ``act``) comes back in an ``EntityGymAdapter``.

    Raises:
        TypeError: ``env`` has neither shape; the message names the missing methods.
    """
    if isinstance(env, (Environment, MultiAgentEnvironment)):
        return env
    missing = [m for m in _ENTITY_GYM_METHODS if not callable(getattr(env, m, None))]
    if not missing:
        return EntityGymAdapter(env)
    hint = "derive it from entmachin.env.Environment"
    if hasattr(env, "observation_space") and hasattr(env, "step"):
        hint = "for a gymnasium environment use entmachin.env.from_gymnasium(env)"
    raise TypeError(
        f"{type(env).__name__} is neither an entmachin Environment nor an entity-gym environment: "
        f"it lacks {missing}; {hint}"
    )


class EntityGymAdapter(Environment):
    """An environment of the ``entity_gym`` package seen as an entmachin ``Environment``.

    Spaces, observations and masks are converted by class name and attributes, so the adapter
    never imports ``entity_gym``. Actions go back as the wrapped package's own classes, found in
    the module that defines the environment's action-space classes (entmachin's dataclasses,
    which have the same fields, where that module lacks them).

    ``seed`` forwards to the wrapped environment's ``seed`` when it has one; otherwise nothing is
    seeded (entity-gym environments usually draw from the global ``random`` module) and a
    warning is logged once per environment class.

    Args:
        env: an object with ``obs_space()``, ``action_space()``, ``reset()`` and ``act(actions)``.
    """

    def __init__(self, env: Any) -> None:
        missing = [m for m in _ENTITY_GYM_METHODS if not callable(getattr(env, m, None))]
        if missing:
            raise TypeError(f"EntityGymAdapter: {type(env).__name__} lacks {missing}")
        self.env = env
        self._obs_space: Optional[ObsSpace] = None
        self._action_space: Optional[Dict[ActionName, ActionSpace]] = None
        self._modules: Dict[ActionName, str] = {}  # action name -> module of its space's class

    def obs_space(self) -> ObsSpace:
        if self._obs_space is None:
            space = self.env.obs_space()
            self._obs_space = ObsSpace(
                global_features=list(getattr(space, "global_features", [])),
                entities={name: Entity(list(e.features)) for name, e in getattr(space, "entities", {}).items()},
            )
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        if self._action_space is None:
            converted: Dict[ActionName, ActionSpace] = {}
            for name, space in self.env.action_space().items():
                kind = type(space).__name__
                if kind == "CategoricalActionSpace":
                    converted[name] = CategoricalActionSpace(list(space.index_to_label))
                elif kind == "GlobalCategoricalActionSpace":
                    converted[name] = GlobalCategoricalActionSpace(list(space.index_to_label))
                elif kind == "SelectEntityActionSpace":
                    converted[name] = SelectEntityActionSpace()
                else:
                    raise TypeError(
                        f"EntityGymAdapter: action_space()['{name}'] is a {kind}; expected a "
                        "CategoricalActionSpace, GlobalCategoricalActionSpace or SelectEntityActionSpace"
                    )
                self._modules[name] = type(space).__module__
            self._action_space = converted
        return self._action_space

    def seed(self, seed: Optional[int]) -> None:
        """Forward to the wrapped environment's ``seed``; warn once per class if it has none."""
        super().seed(seed)
        if callable(getattr(self.env, "seed", None)):
            self.env.seed(seed)
            return
        cls = type(self.env)
        key = f"{cls.__module__}.{cls.__qualname__}"
        if key not in _warned_unseedable:
            _warned_unseedable.add(key)
            logger.warning(
                "%s has no seed(seed) method; it is left unseeded, so runs may not be reproducible",
                cls.__qualname__,
            )

    def reset(self) -> Observation:
        return self._observation(self.env.reset(), "reset")

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        self.action_space()  # records the wrapped classes' modules
        foreign = {name: self._foreign_action(name, a) for name, a in actions.items()}
        return self._observation(self.env.act(foreign), "act")

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        if not callable(getattr(self.env, "render", None)):
            raise NotImplementedError(f"{type(self.env).__name__} does not implement render()")
        return self.env.render(**kwargs)

    def close(self) -> None:
        if callable(getattr(self.env, "close", None)):
            self.env.close()

    def _foreign_action(self, name: ActionName, action: Action) -> Any:
        kind = type(action).__name__
        module = sys.modules.get(self._modules.get(name, ""))
        cls = getattr(module, kind, None) or getattr(own_actions, kind, None)
        if cls is None:
            raise TypeError(f"EntityGymAdapter.act: actions['{name}'] is a {kind}; expected an entmachin Action")
        if kind == "CategoricalAction":
            return cls(actors=action.actors, indices=action.indices, index_to_label=action.index_to_label,
                       probs=action.probs)
        if kind == "SelectEntityAction":
            return cls(actors=action.actors, actees=action.actees, probs=action.probs)
        if kind == "GlobalCategoricalAction":
            return cls(index=action.index, label=action.label, probs=action.probs)
        raise TypeError(f"EntityGymAdapter.act: actions['{name}'] is a {kind}; expected an entmachin Action")

    def _observation(self, obs: Any, method: str) -> Observation:
        missing = [a for a in _OBSERVATION_ATTRS if not hasattr(obs, a)]
        if missing:
            raise TypeError(
                f"EntityGymAdapter: {type(self.env).__name__}.{method}() returned a {type(obs).__name__} "
                f"without {missing}; expected an entity-gym Observation"
            )
        return Observation(
            features=dict(obs.features or {}),
            ids=dict(getattr(obs, "ids", None) or {}),
            actions={name: _own_mask(name, m) for name, m in (obs.actions or {}).items()},
            done=bool(obs.done),
            truncated=bool(getattr(obs, "truncated", False)),
            reward=float(obs.reward),
            visible=dict(getattr(obs, "visible", None) or {}),
            global_features=getattr(obs, "global_features", None),
            metrics=dict(getattr(obs, "metrics", None) or {}),
        )


def _own_mask(name: ActionName, mask: Any) -> ActionMask:
    kind = type(mask).__name__
    if kind == "CategoricalActionMask":
        return CategoricalActionMask(actor_ids=mask.actor_ids, actor_types=mask.actor_types, mask=mask.mask)
    if kind == "SelectEntityActionMask":
        return SelectEntityActionMask(
            actor_ids=mask.actor_ids,
            actor_types=mask.actor_types,
            actee_ids=mask.actee_ids,
            actee_types=mask.actee_types,
            mask=getattr(mask, "mask", None),
        )
    if kind == "GlobalCategoricalActionMask":
        return GlobalCategoricalActionMask(mask=mask.mask)
    raise TypeError(
        f"EntityGymAdapter: observation actions['{name}'] is a {kind}; expected a CategoricalActionMask, "
        "SelectEntityActionMask or GlobalCategoricalActionMask"
    )
