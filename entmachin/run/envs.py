"""Which environment a run config names (a registry name, ``gymnasium:ID``, ``package.module:Class``)
and :class:`EnvFactory`, the picklable maker of one environment of an ``env`` section that the
runner, its worker processes, evaluation, matches, recording and play all build from."""
from __future__ import annotations

import difflib
from typing import Any, Callable, Dict, Optional, Tuple

from entmachin.env import Environment, TimeLimit
from entmachin.env.adapters import GymnasiumEnvironment
from entmachin.env.examples import ENV_REGISTRY
from entmachin.env.multi_agent import is_multi_agent
from entmachin.frame.config import resolve
from entmachin.run.config import ConfigError, EnvSection

__all__ = ["EnvFactory", "GymnasiumMaker", "GYMNASIUM", "env_class", "env_layout"]

#: ``env.name: gymnasium:ID`` is the registered gymnasium environment ``ID`` (``gymnasium.make(ID, **env.kwargs)``).
GYMNASIUM = "gymnasium:"


def env_class(name: str) -> Callable[..., Environment]:
    """The environment class a config names: a registry name, ``gymnasium:ID`` (or a bare ``ID``
    that gymnasium registers and entmachin's registry lacks, such as ``Pendulum-v1``), or
    ``package.module:Class``.

    Raises:
        ConfigError: the name is none of these (the message lists close registry names, and close
            gymnasium ids where gymnasium is installed), or gymnasium is needed and missing.
    """
    if name in ENV_REGISTRY:
        return ENV_REGISTRY[name]
    if name.startswith(GYMNASIUM):
        return _gymnasium_maker(name[len(GYMNASIUM):], name)
    if ":" in name:
        try:
            cls = resolve(name, None, "env.name")
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if not callable(cls):
            raise ConfigError(f"env.name: {name!r} is not a class or callable")
        return cls
    gym = _gymnasium()
    if gym is not None and name in gym.registry:
        return _gymnasium_maker(name, name)
    close = difflib.get_close_matches(name, list(ENV_REGISTRY), n=3, cutoff=0.5)
    if gym is not None:
        close += [GYMNASIUM + c for c in difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.6)]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(f"env.name: unknown environment {name!r}{hint} (registered: {sorted(ENV_REGISTRY)}; "
                      "or give 'gymnasium:ID' for a registered gymnasium environment, or 'package.module:Class')")


class GymnasiumMaker:
    """A registered gymnasium environment as an entmachin environment class:
    ``GymnasiumMaker(env_id)(**kwargs)`` is ``from_gymnasium(gymnasium.make(env_id, **kwargs))``.

    Its ``max_episode_steps`` attribute, where the registration declares a step limit, is that limit
    (``entmachin init`` writes it as ``env.max_episode_steps``); gymnasium's own ``TimeLimit`` cuts
    the episodes there, reported as truncated (bootstrapped), not terminal.
    """

    def __init__(self, env_id: str, max_episode_steps: Optional[int]) -> None:
        self.env_id = env_id
        if max_episode_steps is not None:
            self.max_episode_steps = int(max_episode_steps)

    def make(self, **kwargs: Any) -> Any:
        """``gymnasium.make(env_id, **kwargs)``: the gymnasium environment itself."""
        import gymnasium

        return gymnasium.make(self.env_id, **kwargs)

    def __call__(self, **kwargs: Any) -> GymnasiumEnvironment:
        return GymnasiumEnvironment(self.make(**kwargs))

    def __repr__(self) -> str:
        return f"GymnasiumMaker({self.env_id!r})"


def _gymnasium() -> Any:
    """The gymnasium module, or None where it is not installed."""
    try:
        import gymnasium
    except ImportError:
        return None
    return gymnasium


def _gymnasium_maker(env_id: str, name: str) -> GymnasiumMaker:
    """The maker of gymnasium's ``env_id`` (``name``: as the config gives it, for messages); one per
    id, as callers compare environment classes by identity."""
    if env_id in _MAKERS:
        return _MAKERS[env_id]
    gym = _gymnasium()
    if gym is None:
        raise ConfigError(f"env.name: {name!r} is a gymnasium environment, and gymnasium is not installed: "
                          "pip install entmachin[gymnasium]")
    try:
        spec = gym.spec(env_id)
    except gym.error.Error as e:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.5)
        hint = f"; close registered ids: {', '.join(close)}" if close else ""
        raise ConfigError(f"env.name: {env_id!r} is not a registered gymnasium environment ({e}){hint}") from None
    return _MAKERS.setdefault(env_id, GymnasiumMaker(env_id, spec.max_episode_steps))


_MAKERS: Dict[str, GymnasiumMaker] = {}


class EnvFactory:
    """Builds one environment of an ``env`` section; picklable, so worker processes can use it.

    A gymnasium environment (``env.name: gymnasium:ID``) is made with ``env.kwargs`` and, where
    set, ``max_episode_steps=env.max_episode_steps`` (gymnasium's ``TimeLimit`` then cuts there
    instead of at the registered limit); others are wrapped in entmachin's ``TimeLimit``.
    """

    def __init__(self, section: EnvSection) -> None:
        self.name, self.kwargs, self.max_episode_steps = section.name, dict(section.kwargs), section.max_episode_steps
        env_class(self.name)  # fail here, not in a worker
        if self.gymnasium is not None and self.max_episode_steps is not None and "max_episode_steps" in self.kwargs:
            raise ConfigError("env.kwargs.max_episode_steps: give the step limit once, as env.max_episode_steps")

    @property
    def gymnasium(self) -> Optional[GymnasiumMaker]:
        """The maker of a gymnasium environment, or None for entmachin's own."""
        cls = env_class(self.name)
        return cls if isinstance(cls, GymnasiumMaker) else None

    def __call__(self) -> Environment:
        if self.gymnasium is not None:
            return GymnasiumEnvironment(self.gymnasium_env())
        try:
            env = env_class(self.name)(**self.kwargs)
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.name} does not accept {self.kwargs!r} ({e})") from None
        return TimeLimit(env, self.max_episode_steps) if self.max_episode_steps is not None else env

    def gymnasium_env(self) -> Any:
        """The ``gymnasium.Env`` of a gymnasium environment (``GymnasiumVecEnv`` steps it directly)."""
        kwargs = dict(self.kwargs)
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        try:
            return self.gymnasium.make(**kwargs)
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.name} does not accept {self.kwargs!r} ({e})") from None

    def spaces(self) -> Tuple[Any, Any]:
        """``(obs_space, action_space)`` of the environment, read from one built and closed here."""
        return self.layout()[:2]

    def layout(self) -> Tuple[Any, Any, int]:
        """``(obs_space, action_space, rows per environment)``: :func:`env_layout` of this factory."""
        return env_layout(self)


def env_layout(make_env: Callable[[], Environment]) -> Tuple[Any, Any, int]:
    """``(obs_space, action_space, rows per environment)`` (its number of seats for a game of several
    players, else 1), read from one environment that ``make_env`` (an ``EnvFactory``, an environment class,
    any callable) builds, closed here."""
    env = make_env()
    try:
        return env.obs_space(), env.action_space(), len(env.seats()) if is_multi_agent(env) else 1
    finally:
        env.close()
