"""What A2C and PPO share: models and optimizers, acting, storing, save / load and configs.

:class:`ActorCriticFrame` holds the Machin 0.4.2 surface of an actor-critic frame except the
learning itself: building the optimizers (one when actor and critic share parameters),
``act`` / ``eval_act`` / ``criticize`` through ``safe_call``, ``store_episode`` /
``store_rollout`` (checked once, turned into a :class:`~entmachin.frame.record.Rollout` and
appended), the counters a checkpoint holds, ``save`` / ``load`` and ``generate_config`` /
``init_from_config``. ``update()`` and its losses are the algorithm's: see ``a2c.py`` and
``ppo.py`` (``docs/architecture.md`` maps the whole path).
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.buffer import RolloutBuffer
from entmachin.frame import storing
from entmachin.frame.config import A2CConfig, check_callable
from entmachin.frame.surface import FrameSurface
from entmachin.frame.record import MAJOR_ATTRS
from entmachin.frame.safe_call import safe_call
from entmachin.frame.store_checks import check_steps
from entmachin.frame.summary import UpdateStats, make_writer
from entmachin.model.input_norm import InputNorm, collecting_stats_of
from entmachin.model.wrappers import unwrap

__all__ = ["ActorCriticFrame"]


def _accepts(model: Any, parameter: str) -> bool:
    inner = unwrap(model)
    fn = inner.forward if isinstance(inner, nn.Module) else inner
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return parameter in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _pair(value: Any, default: Any, where: str, kind: type) -> Tuple[Any, Any]:
    """Machin's (actor, critic) pair of scheduler args / kwargs; None or () means defaults."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return default, default
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(isinstance(v, kind) for v in value):
        raise TypeError(
            f"{where} must be a pair (for the actor's and the critic's scheduler) of "
            f"{'tuples' if kind is not dict else 'dicts'}, got {value!r}"
        )
    return value[0], value[1]


def _make_optimizer(optimizer: Any, params: Any, lr: float) -> torch.optim.Optimizer:
    """``optimizer(params, lr=lr)``; a ``torch.optim`` class with a fused implementation gets it.

    Fused optimizers (``Adam``, ``AdamW``, ``SGD``, ``Adagrad``) update every parameter in one
    kernel instead of several per parameter, the same arithmetic in a fraction of the time on
    small networks. Factories (``functools.partial``, lambdas) are called exactly as given, and
    a class that refuses ``fused=True`` for these parameters is built without it.
    """
    if not (isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer)
            and "fused" in inspect.signature(optimizer.__init__).parameters):
        return optimizer(params, lr=lr)
    try:
        return optimizer(params, lr=lr, fused=True)
    except (RuntimeError, ValueError, TypeError):
        return optimizer(params, lr=lr)




class ActorCriticFrame(FrameSurface):
    """The shared part of :class:`~entmachin.frame.a2c.A2C` and :class:`~entmachin.frame.ppo.PPO`
    (see A2C for the keywords); subclasses call :meth:`_setup` from ``__init__`` and define
    ``update()``."""

    _config_cls: type = A2CConfig

    def _setup(self, actor: Any, critic: Any, optimizer: Any, criterion: Any, lr_scheduler: Any,
               lr_scheduler_args: Any, lr_scheduler_kwargs: Any, replay_buffer: Any, writer: Any,
               config: A2CConfig) -> None:
        name = type(self).__name__
        for label, model in (("actor", actor), ("critic", critic)):
            if not isinstance(model, nn.Module):
                raise TypeError(f"{name}: {label} must be an nn.Module, got {type(model).__name__}")
        check_callable(optimizer, f"{name}: optimizer", "an optimizer class such as torch.optim.Adam")
        check_callable(criterion, f"{name}: criterion", "a loss such as nn.MSELoss()")
        if lr_scheduler is not None:
            check_callable(lr_scheduler, f"{name}: lr_scheduler", "a scheduler class or None")
            if config.n_anneal_updates is not None:
                raise ValueError(f"{name}: give lr_scheduler or n_anneal_updates, not both")
        sched_args = _pair(lr_scheduler_args, (), f"{name}: lr_scheduler_args", (tuple, list))
        sched_kwargs = _pair(lr_scheduler_kwargs, {}, f"{name}: lr_scheduler_kwargs", dict)
        self.config = config
        self.actor, self.critic, self.criterion = actor, critic, criterion
        # Eval mode outside update() from the start, not only after the first update: acting,
        # storing and old log-probabilities never see dropout, and a resumed run acts alike.
        actor.eval()
        critic.eval()
        self._actor_params = list(actor.parameters())
        actor_ids = {id(p) for p in self._actor_params}
        critic_params = list(critic.parameters())
        self.shared_parameters = any(id(p) in actor_ids for p in critic_params)
        self._joint = getattr(critic, "shared_actor", None) is actor and callable(
            getattr(actor, "forward_with_value", None))
        if self.shared_parameters:
            critic_only = [p for p in critic_params if id(p) not in actor_ids]
            groups = [{"params": self._actor_params, "lr": config.actor_learning_rate}]
            if critic_only:
                groups.append({"params": critic_only, "lr": config.critic_learning_rate})
            self._params = self._actor_params + critic_only
            self.actor_optim = self.critic_optim = _make_optimizer(optimizer, groups, config.actor_learning_rate)
            self._critic_params = self._params
        else:
            self._critic_params = critic_params
            self.actor_optim = _make_optimizer(optimizer, self._actor_params, config.actor_learning_rate)
            self.critic_optim = _make_optimizer(optimizer, critic_params, config.critic_learning_rate)
        self._schedulers: List[Any] = []
        if lr_scheduler is not None:
            self._schedulers = [lr_scheduler(opt, *a, **k)
                                for opt, a, k in zip(self.optimizers, sched_args, sched_kwargs)]
        self._initial_lrs = [[g["lr"] for g in opt.param_groups] for opt in self.optimizers]
        if replay_buffer is None:
            replay_buffer = RolloutBuffer(config.replay_size, config.replay_device)
        for method in ("append", "size", "clear", "sample_batch"):
            if not callable(getattr(replay_buffer, method, None)):
                raise TypeError(f"{name}: replay_buffer has no {method}() method; pass an entmachin Buffer")
        self.replay_buffer = replay_buffer
        self.writer = make_writer(writer, name)
        self._owns_writer = self.writer is not None and self.writer is not writer  # made from a log dir
        self._rng = np.random.default_rng(config.seed)
        self._n_updates = 0
        self._skipped_updates: Dict[str, int] = {}  # optimizer -> updates in a row that skipped all its steps
        self._visualized: set = set()
        self._actor_norms = [m for m in actor.modules() if isinstance(m, InputNorm)]
        actor_norms = {id(m) for m in self._actor_norms}
        self._critic_only_norms = [m for m in critic.modules() if isinstance(m, InputNorm) and id(m) not in actor_norms]
        self.last_update: Optional[UpdateStats] = None

    # -------------------------------------------------------------------- Machin surface

    @property
    def optimizers(self) -> List[torch.optim.Optimizer]:
        """The optimizers: ``[actor_optim, critic_optim]``, or one when parameters are shared."""
        return [self.actor_optim] if self.shared_parameters else [self.actor_optim, self.critic_optim]

    def act(self, state: Mapping[str, Any], deterministic: bool = False, *, collect_stats: bool = True) -> Any:
        """Runs the actor on ``state`` without gradients and returns its result unchanged.

        Running input statistics of the actor learn from ``state`` (``collecting_stats``)
        unless ``collect_stats=False`` (evaluation).

        Raises:
            TypeError: ``deterministic=True`` but the actor's forward has no ``deterministic``.
        """
        extra: Dict[str, Any] = {}
        if deterministic:
            if not _accepts(self.actor, "deterministic"):
                raise TypeError(
                    f"{type(self).__name__}.act: deterministic=True, but {type(self.actor).__name__}.forward "
                    "takes no 'deterministic' parameter"
                )
            extra["deterministic"] = True
        if collect_stats and self._actor_norms:
            with torch.no_grad(), collecting_stats_of(self._actor_norms):
                return safe_call(self.actor, state, extra) if extra else safe_call(self.actor, state)
        with torch.no_grad():
            return safe_call(self.actor, state, extra) if extra else safe_call(self.actor, state)

    def eval_act(self, state: Mapping[str, Any], action: Mapping[str, Any]) -> Any:
        """Scores ``action`` in ``state`` with the actor (with gradients); returns its result."""
        return safe_call(self.actor, state, action)

    def criticize(self, state: Mapping[str, Any]) -> torch.Tensor:
        """The critic's value of ``state``, ``[B, 1]`` (the first element if it returns a tuple)."""
        return self._value_of(safe_call(self.critic, state))

    def _eval_act_and_criticize(self, state: Mapping[str, Any], action: Mapping[str, Any]) -> Tuple[Any, torch.Tensor]:
        """``(eval_act(state, action), criticize(state))``, in one pass of a shared network
        when the critic is a view of the actor (see the class docstring)."""
        if not self._joint:
            return self.eval_act(state, action), self.criticize(state)
        result, value = safe_call(self.actor, state, action, method="forward_with_value")
        return result, self._value_of(value)

    def _value_of(self, value: Any) -> torch.Tensor:
        if isinstance(value, (tuple, list)):
            value = value[0]
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{type(self).__name__}.criticize: the critic returned a {type(value).__name__}; expected "
                "a tensor [B, 1] or a tuple whose first element is one"
            )
        return value

    # ------------------------------------------------------------------------- storing

    def store_episode(self, episode: Sequence[Any]) -> None:
        """Stores one environment's transitions (dicts or ``Transition``s, one row each).

        Each transition has ``state``, ``action``, ``next_state``, ``reward``, ``terminal`` and
        optionally ``truncated``. The episode may be complete (last row terminal) or cut short:
        a last row that is not terminal, and every truncated row, bootstraps from the
        critic's value of its ``next_state``. Values come from one critic call; GAE follows
        the rules of ``docs/architecture.md``. Only ``state``, ``action``, the flags and the computed
        ``value`` (return target) and ``gae`` (advantage) are stored; the caller's
        transitions are not modified.

        Transitions that ``update()`` could not train on are refused here, with the buffer, the
        frame and the critic's input statistics left as they were: a state that lacks what the
        actor needs (an entity type or the action masks of RogueNet's spaces, the width of an
        MLP), actions that do not match the state's actors, and NaN or infinity in rewards,
        states or the critic's values.

        Raises:
            TypeError / ValueError: malformed transitions (the message names the position, key
                and, in a rollout, the row), or more rows than the buffer holds before ``update()``.
        """
        self._store(storing.read_episode(episode, f"{type(self).__name__}.store_episode"), "store_episode")

    def store_rollout(self, steps: Sequence[Any]) -> None:
        """Stores ``T`` vectorised steps, each a transition of ``B`` rows (one per environment).

        ``reward``, ``terminal`` and ``truncated`` are ``[B]`` or ``[B, 1]``; the rows of step
        ``t + 1`` continue those of step ``t`` unless terminal or truncated. Rows of the last
        step that are not terminal bootstrap from their ``next_state``, as do truncated rows.
        Rows are stored step-major; otherwise as :meth:`store_episode`.
        """
        self._store(storing.read_rollout(steps, f"{type(self).__name__}.store_rollout"), "store_rollout")

    def _store(self, steps: storing.Steps, method: str) -> None:
        name = f"{type(self).__name__}.{method}"
        check_steps(steps, self.actor, self.critic, name)  # before anything changes
        capacity = getattr(self.replay_buffer, "buffer_size", self.config.replay_size)
        held = self.replay_buffer.size()
        if held + steps.n_rows > capacity:
            raise ValueError(
                f"{name}: storing {steps.n_rows} rows on top of {held} would exceed "
                f"replay_size={capacity} and overwrite on-policy data; call update() first or raise replay_size"
            )
        # The critic's own statistics learn from this call; a call refused after the critic ran
        # (non-finite values, a buffer that refuses the rows) puts them back as they were.
        saved = [{k: v.clone() for k, v in norm.state_dict().items()} for norm in self._critic_only_norms]
        try:
            with collecting_stats_of(self._critic_only_norms):  # the actor's statistics learn in act()
                returns, advantages = storing.value_targets(
                    steps, self.criticize, self.config.discount, self.config.gae_lambda, name
                )
            rollout = storing.to_rollout(steps, returns, advantages)
            trusted = getattr(self.replay_buffer, "append_trusted", None)
            if trusted is not None:  # read_* and check_steps checked every row: no second check
                trusted(rollout.buffer_data(), MAJOR_ATTRS)
            else:
                self.replay_buffer.append(rollout.to_transition())
        except BaseException:
            for norm, state in zip(self._critic_only_norms, saved):
                norm.load_state_dict(state)
            raise

    # ------------------------------------------------------------ counters of a checkpoint

    def training_counters(self) -> Dict[str, Any]:
        """The frame's own training state besides models and optimizers, as a checkpoint holds it:
        ``n_updates``, ``skipped_updates`` (per optimizer, updates in a row whose every step was
        skipped) and ``shuffle_rng`` (the minibatch shuffling generator's state)."""
        return {"n_updates": self._n_updates, "skipped_updates": dict(self._skipped_updates),
                "shuffle_rng": self._rng.bit_generator.state}

    def set_training_counters(self, counters: Mapping[str, Any]) -> None:
        """Restores :meth:`training_counters` (``skipped_updates`` may be absent: zero)."""
        self._n_updates = int(counters["n_updates"])
        self._skipped_updates = dict(counters.get("skipped_updates", {}))
        self._rng.bit_generator.state = counters["shuffle_rng"]

    def _set_learning_rates(self, lrs: List[List[float]]) -> None:
        for opt, values in zip(self.optimizers, lrs):
            for group, lr in zip(opt.param_groups, values):
                group["lr"] = lr
