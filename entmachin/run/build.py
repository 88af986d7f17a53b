"""What a run config builds: the environment factory, the environments, the networks and the frame."""
from __future__ import annotations

import difflib
import logging
import math
from typing import Any, Callable, Dict, Tuple

import torch
from torch import nn

from entmachin.env import EnvList, Environment, ParallelEnvList, TimeLimit, VecEnv
from entmachin.env.multi_agent import is_multi_agent
from entmachin.env.examples import ENV_REGISTRY
from entmachin.frame import A2C, BC, DQN, PPO, DQNPer
from entmachin.frame.config import resolve
from entmachin.model import RogueNet
from entmachin.run.config import Q_FRAMES, ConfigError, EnvSection, RunConfig, update_times

__all__ = ["EnvFactory", "check_device", "env_class", "make_envs", "make_frame", "seeds"]

logger = logging.getLogger(__name__)


def env_class(name: str) -> Callable[..., Environment]:
    """The environment class a config names: a registry name or ``package.module:Class``.

    Raises:
        ConfigError: the name is neither (the message lists close registry names).
    """
    if name in ENV_REGISTRY:
        return ENV_REGISTRY[name]
    if ":" in name:
        try:
            cls = resolve(name, None, "env.name")
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if not callable(cls):
            raise ConfigError(f"env.name: {name!r} is not a class or callable")
        return cls
    close = difflib.get_close_matches(name, list(ENV_REGISTRY), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(f"env.name: unknown environment {name!r}{hint} (registered: {sorted(ENV_REGISTRY)}; "
                      "or give 'package.module:Class')")


class EnvFactory:
    """Builds one environment of an ``env`` section; picklable, so worker processes can use it."""

    def __init__(self, section: EnvSection) -> None:
        self.name, self.kwargs, self.max_episode_steps = section.name, dict(section.kwargs), section.max_episode_steps
        env_class(self.name)  # fail here, not in a worker

    def __call__(self) -> Environment:
        try:
            env = env_class(self.name)(**self.kwargs)
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.name} does not accept {self.kwargs!r} ({e})") from None
        return TimeLimit(env, self.max_episode_steps) if self.max_episode_steps is not None else env

    def spaces(self) -> Tuple[Any, Any]:
        """``(obs_space, action_space)`` of the environment, read from one built and closed here."""
        return self.layout()[:2]

    def layout(self) -> Tuple[Any, Any, int]:
        """``(obs_space, action_space, rows per environment)`` (its number of seats for a game of
        several players, else 1), read from one environment built and closed here."""
        env = self()
        try:
            return env.obs_space(), env.action_space(), len(env.seats()) if is_multi_agent(env) else 1
        finally:
            env.close()


def check_device(name: str) -> None:
    """Raises ``ConfigError`` naming ``train.device`` when this machine cannot put a tensor there."""
    device = torch.device(name)
    if device.type == "cpu":
        return
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, AttributeError) as e:  # torch says "not compiled with CUDA" by assert
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(f"train.device: {name!r} cannot be used on this machine ({reason}); set train.device: cpu "
                          "or run where that device exists") from None


def seeds(config: RunConfig) -> Dict[str, int]:
    """Every seed of a run, derived from ``train.seed``: torch, the frame, the environments, evaluation,
    self-play's draws."""
    base = config.train.seed
    return {"torch": base, "frame": base, "envs": base, "eval": base + 1_000_003, "selfplay": base + 2_000_003}


def make_envs(config: RunConfig, seed: int) -> VecEnv:
    """The environments of a rollout section: ``EnvList``, ``ParallelEnvList``, or with ``workers``
    set, a ``RayEnvList`` of ``max(1, processes)`` Ray actors (``auto``: the Ray this process is
    connected to, or a new local one; ``ray://ADDRESS``: that cluster)."""
    factory = EnvFactory(config.env)
    workers = config.rollout.workers
    if workers is not None:
        from entmachin.env.ray_env_list import RayEnvList  # Ray only where asked for

        return RayEnvList(factory, config.rollout.num_envs, max(1, config.rollout.processes), seed=seed,
                          address=None if workers == "auto" else workers, check_finite=config.env.check_finite)
    if config.rollout.processes == 0:
        return EnvList(factory, config.rollout.num_envs, seed=seed, check_finite=config.env.check_finite)
    return ParallelEnvList(factory, config.rollout.num_envs, config.rollout.processes, seed=seed,
                           check_finite=config.env.check_finite)


def make_frame(config: RunConfig, obs_space: Any, action_space: Any, writer: Any = None, *,
               rank: int = 0, rows_per_env: int = 1) -> Tuple[Any, str]:
    """Builds RogueNet, its critic and the frame; returns ``(frame, what n_epochs became)``.

    ``rank``: a data-parallel rank other than 0 shuffles its minibatches with a seed of its own.
    ``rows_per_env``: rows each environment stores per step (its seats, for a game of several
    players): a rollout stores ``rollout.num_envs x rollout.n_steps x rows_per_env`` rows.
    """
    net_config = config.model.net_config()
    if config.frame.name in Q_FRAMES:
        return _make_q_frame(config, obs_space, action_space, writer), ""
    net = RogueNet(obs_space, action_space, net_config)
    # A separate critic is a RogueNet of its own (its action heads stay unused), so that spaces
    # with only global features, which need the global token of a global action, work too.
    critic = net.critic() if config.model.critic == "shared" else RogueNet(obs_space, action_space, net_config).critic()
    device = torch.device(config.train.device)
    net.to(device)
    critic.to(device)
    rows = config.rows_per_update * (1 if config.frame.name == "BC" else rows_per_env)
    actor_times, critic_times = update_times(config, rows)
    settings = dict(vars(config.frame.settings))
    settings.update(actor_update_times=actor_times, critic_update_times=critic_times,
                    replay_size=rows,
                    seed=seeds(config)["frame"] if rank == 0 else seeds(config)["frame"] + rank)
    cls = {"PPO": PPO, "A2C": A2C, "BC": BC}[config.frame.name]
    optimizer = resolve(config.frame.optimizer, "torch.optim", "frame.optimizer")
    frame = cls(net, critic, optimizer, nn.MSELoss(), writer=writer, **settings)
    note = ""
    if config.frame.n_epochs is not None:
        per_epoch = math.ceil(rows / config.frame.settings.batch_size)
        note = (f"frame.n_epochs={config.frame.n_epochs}: actor_update_times = critic_update_times = "
                f"{config.frame.n_epochs} x ceil({rows} rows / batch_size "
                f"{config.frame.settings.batch_size}) = {config.frame.n_epochs * per_epoch} minibatch steps per update")
    return frame, note


def _make_q_frame(config: RunConfig, obs_space: Any, action_space: Any, writer: Any) -> Any:
    """RogueNet with Q-heads, its target copy and a DQN / DQNPer frame."""
    net = RogueNet(obs_space, action_space, config.model.net_config(), q_head=config.model.q_head)
    target = RogueNet(obs_space, action_space, config.model.net_config(), q_head=config.model.q_head)
    device = torch.device(config.train.device)
    net.to(device)
    target.to(device)
    cls = {"DQN": DQN, "DQNPer": DQNPer}[config.frame.name]
    optimizer = resolve(config.frame.optimizer, "torch.optim", "frame.optimizer")
    criterion = nn.MSELoss(reduction="none" if cls is DQNPer else "mean")
    settings = dict(vars(config.frame.settings))
    settings.update(seed=seeds(config)["frame"])
    return cls(net, target, optimizer, criterion, writer=writer, **settings)
