"""``BoxDiscreteSpaces``: how gymnasium's spaces look to entmachin, for the gymnasium adapters.

``from_gymnasium`` (:mod:`entmachin.env.adapters`) and ``from_pettingzoo``
(:mod:`entmachin.env.pettingzoo_adapter`) share it: a ``Box`` or ``Discrete`` observation becomes
global features, a ``Discrete`` or ``MultiDiscrete`` action global categorical actions and a
``Box`` action (``from_gymnasium``'s only) one global continuous action with the Box's finite
bounds; the chosen actions go back as gymnasium actions. ``gymnasium`` is imported only when a
space is converted.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    Action,
    ActionMask,
    ActionSpace,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import ObsSpace

__all__ = ["BoxDiscreteSpaces"]


class BoxDiscreteSpaces:
    """How a gymnasium ``Box`` observation space and ``Discrete`` / ``MultiDiscrete`` / ``Box`` action
    space look to entmachin; shared by ``GymnasiumEnvironment`` and ``PettingZooEnvironment``.

    The flattened ``Box`` becomes the global features ``obs_0 … obs_{n-1}``; a ``Discrete(n, start)``
    observation becomes ``n`` one-hot global features (value ``start + k`` sets ``obs_k``). ``Discrete(n, start)``
    becomes one global categorical action ``"action"`` with labels ``"0" … "n-1"`` (the environment
    receives ``start + index``); ``MultiDiscrete`` becomes ``"action_0"``, ``"action_1"``, … in the
    flattened order of ``nvec`` (the environment receives the assembled array, ``nvec``'s shape). A
    ``Box`` action becomes one ``GlobalContinuousActionSpace`` ``"action"`` with values ``"0" … "n-1"``,
    the flattened Box and its bounds (the environment receives float32 values of the Box's shape).

    Args:
        observation_space: the gymnasium observation space.
        action_space: the gymnasium action space.
        where: prefix of the errors raised here (e.g. ``"from_gymnasium"``).
        env_name: the environment, as errors about its spaces name it (e.g. ``"Pendulum-v1"``).
        box_actions: whether a ``Box`` action is taken (``from_gymnasium``'s); False refuses it as
            unsupported (``from_pettingzoo``'s games have discrete actions).

    Raises:
        TypeError: a space of an unsupported kind (named, with the space).
        ValueError: a ``Box`` action with an infinite bound: entmachin's continuous distributions
            (Beta, squashed Gaussian) live between finite bounds.
    """

    def __init__(self, observation_space: Any, action_space: Any, where: str, env_name: str = "the environment", *,
                 box_actions: bool = False) -> None:
        from gymnasium import spaces  # gymnasium is optional: import only when it is used

        if not isinstance(observation_space, (spaces.Box, spaces.Discrete)):
            raise TypeError(
                f"{where}: {type(observation_space).__name__} observation spaces are not supported yet; "
                f"only Box observations (flattened into global features) and Discrete ones (one-hot) are. "
                f"Got {observation_space}"
            )
        # Discrete observations: (n, start), read as a one-hot vector of n features.
        self.one_hot = (int(observation_space.n), int(observation_space.start)) \
            if isinstance(observation_space, spaces.Discrete) else None
        self.box: Optional[GlobalContinuousActionSpace] = None  # a Box action's space
        if isinstance(action_space, spaces.Discrete):
            self.names = ["action"]
            self.n_choices = [int(action_space.n)]
        elif isinstance(action_space, spaces.MultiDiscrete):
            self.n_choices = [int(n) for n in np.asarray(action_space.nvec).reshape(-1)]
            self.names = [f"action_{i}" for i in range(len(self.n_choices))]
        elif box_actions and isinstance(action_space, spaces.Box):
            self.names, self.n_choices = ["action"], []
            self.box = _box_space(action_space, where, env_name)
        else:
            raise TypeError(
                f"{where}: {type(action_space).__name__} action spaces are not supported yet; "
                f"only Discrete{', MultiDiscrete and Box' if box_actions else ' and MultiDiscrete'} actions are. "
                f"Got {action_space}"
            )
        self.gym_observation_space = observation_space
        self.gym_action_space = action_space
        self.discrete = isinstance(action_space, spaces.Discrete)
        self.n_features = self.one_hot[0] if self.one_hot else int(np.prod(observation_space.shape, dtype=np.int64))
        self.obs_space = ObsSpace(global_features=[f"obs_{i}" for i in range(self.n_features)])
        self.action_space: Dict[ActionName, ActionSpace] = {"action": self.box} if self.box is not None else {
            name: GlobalCategoricalActionSpace([str(i) for i in range(n)])
            for name, n in zip(self.names, self.n_choices)
        }

    def masks(self) -> Dict[ActionName, ActionMask]:
        """Every action's mask for a step on which the global entity acts (no choice masked, the
        space's bounds)."""
        if self.box is not None:
            return {"action": GlobalContinuousActionMask()}
        return {name: GlobalCategoricalActionMask() for name in self.names}

    def flat(self, obs: Any, where: str) -> npt.NDArray[np.float32]:
        """``obs`` as float32 ``[n_features]``, a copy (environments may reuse their array).

        Raises:
            ValueError: ``obs`` has the wrong number of values (or is not one of a ``Discrete`` space's).
        """
        if self.one_hot is not None:
            n, start = self.one_hot
            value = np.asarray(obs).reshape(-1)
            if value.shape != (1,) or not start <= value[0] < start + n or value[0] != int(value[0]):
                raise ValueError(f"{where}: observation {obs!r} is not a value of {self.gym_observation_space}")
            flat = np.zeros(n, dtype=np.float32)  # [n_features], one-hot
            flat[int(value[0]) - start] = 1.0
            return flat
        flat = np.array(obs, dtype=np.float32).reshape(-1)  # [n_features]
        if flat.shape[0] != self.n_features:
            raise ValueError(
                f"{where}: observation has {flat.shape[0]} values; the observation space "
                f"{self.gym_observation_space} declares {self.n_features}"
            )
        return flat

    def gym_action(self, actions: Mapping[ActionName, Action], where: str) -> Any:
        """The gymnasium action for ``actions`` (one ``GlobalCategoricalAction`` per action name, or
        one ``GlobalContinuousAction`` for a ``Box``).

        Raises:
            ValueError: an action is missing, its index is out of range, or (``Box``) its values
                are not one per dimension, not finite or outside the bounds (naming the dimension).
            TypeError: an action is not of its space's kind.
        """
        missing = [name for name in self.names if name not in actions]
        if missing:
            raise ValueError(f"{where}: actions {missing} are missing; got {list(actions)}")
        if self.box is not None:
            return self._box_action(actions["action"], where)
        indices = []
        for name, n in zip(self.names, self.n_choices):
            chosen = actions[name]
            if not isinstance(chosen, GlobalCategoricalAction):
                raise TypeError(
                    f"{where}: actions['{name}'] must be a GlobalCategoricalAction, got {type(chosen).__name__}"
                )
            if not 0 <= chosen.index < n:
                raise ValueError(f"{where}: actions['{name}'].index is {chosen.index}; expected [0, {n})")
            indices.append(int(chosen.index))
        space = self.gym_action_space
        if self.discrete:
            return int(space.start) + indices[0]
        choice = np.asarray(indices, dtype=space.dtype).reshape(space.nvec.shape)  # nvec's shape
        return choice + np.asarray(getattr(space, "start", 0), dtype=space.dtype)

    def _box_action(self, chosen: Action, where: str) -> npt.NDArray[np.float32]:
        """A ``GlobalContinuousAction``'s values as float32 of the Box's shape, after checking them."""
        box = self.box
        if not isinstance(chosen, GlobalContinuousAction):
            raise TypeError(
                f"{where}: actions['action'] must be a GlobalContinuousAction, got {type(chosen).__name__}"
            )
        values = np.array(chosen.values, dtype=np.float32)  # [n_values], a copy the environment may keep
        if values.shape != (len(box),):
            raise ValueError(f"{where}: actions['action'].values has shape {values.shape}; the Box action "
                             f"{self.gym_action_space} takes ({len(box)},) (flattened)")
        bad = ~((values >= box.low) & (values <= box.high))  # [n_values]; NaN is bad too
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{where}: actions['action'] value '{box.names[i]}' (dimension {i}) is {values[i]}; "
                             f"expected a finite value in [{box.low[i]}, {box.high[i]}]")
        return values.reshape(self.gym_action_space.shape)  # the Box's shape


def _box_space(space: Any, where: str, env_name: str) -> GlobalContinuousActionSpace:
    """The ``GlobalContinuousActionSpace`` of a gymnasium ``Box`` action space (flattened).

    Raises:
        ValueError: a bound is infinite or NaN, naming the environment and the dimension.
    """
    low = np.asarray(space.low, dtype=np.float64).reshape(-1)  # [n_values]
    high = np.asarray(space.high, dtype=np.float64).reshape(-1)  # [n_values]
    for i in range(low.shape[0]):
        if not (np.isfinite(low[i]) and np.isfinite(high[i])):
            raise ValueError(
                f"{where}: {env_name}'s Box action space has bounds [{low[i]}, {high[i]}] in dimension {i} "
                f"(flattened, of shape {tuple(space.shape)}); entmachin's continuous actions need finite bounds on "
                "every dimension (its distributions, Beta and squashed Gaussian, live between them): wrap the "
                "environment so that its action space is a bounded Box (an ActionWrapper that maps [-1, 1] "
                "onto the range the environment takes, say)"
            )
    return GlobalContinuousActionSpace(low=low, high=high, names=[str(i) for i in range(low.shape[0])])
