"""DQN and DQNPer: off-policy Q-learning with Machin 0.4.2's surface, over dense and entity states.

Usage loop (one environment, Machin's way)::

    dqn = DQN(qnet, qnet_target, torch.optim.Adam, nn.MSELoss(reduction="sum"))
    episode = []
    while not done:
        action = dqn.act_discrete_with_noise({"state": state})  # [1, 1]
        ...
        episode.append({"state": {"state": old}, "action": {"action": action},
                        "next_state": {"state": state}, "reward": reward, "terminal": done})
    dqn.store_episode(episode)
    dqn.update()

Entity environments store canonical states and ``{"action": {name: ragged [n_actors, 1]}}`` actions, with a
``RogueNet(..., q_head="plain" | "dueling")`` Q-network, whose per-actor values :mod:`entmachin.frame.q_tables`
reads; ``RolloutCollector`` drives it through :meth:`DQN.act` and ``store_rollout``.
"""
from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Mapping
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch import nn

from entmachin.buffer import Buffer, PrioritizedBuffer
from entmachin.frame import q_tables as qt
from entmachin.frame.base import Frame
from entmachin.frame.config import DQNConfig, DQNPerConfig
from entmachin.frame.safe_call import safe_call
from entmachin.frame.stepping import InterruptGuard, LazyOptimizers, OptimizerStep, UpdateSteps
from entmachin.frame.store_checks import check_steps, trusted_inputs
from entmachin.frame.rollout import Steps, tree_rows, value_targets
from entmachin.frame.summary import QUpdateStats
from entmachin.model.input_norm import collecting_stats_of
from entmachin.model.continuous import refuse_continuous
from entmachin.model.inputs import DeferredChecks
from entmachin.model.wrappers import unwrap
from entmachin.ragged import trees
from entmachin.ragged.tensor import to_ragged_tensor

__all__ = ["DQN", "DQNPer"]

logger = logging.getLogger(__name__)

_ATTRS = ["state", "action", "reward", "next_state", "terminal", "discount"]


class DQN(Frame):
    """Deep Q-learning (Machin 0.4.2's ``DQN`` keywords and modes).

    Args:
        qnet: the Q-network: ``forward(**state) -> [B, n_actions]`` (dense; ``-inf`` where a state's ``mask``
            forbids), or a network with ``q_values(**state)`` returning action name -> ragged ``[n_actors, width]``
            (``RogueNet(..., q_head=...)``).
        qnet_target: a network of the same structure; starts as a copy of ``qnet``.
        optimizer: optimizer class (or factory) called as ``optimizer(params, lr=...)``.
        criterion: the TD loss, ``criterion(q, target)`` on ``[B, 1]`` values.

    The scheduler arguments are Machin's one-element tuples, ``(args,)`` and ``(kwargs,)``.

    Raises:
        TypeError / ValueError: an argument of the wrong type or out of range, networks of different structure, or
            an unknown keyword.
    """

    _config_cls = DQNConfig
    network_names = ("qnet", "qnet_target")
    unsaved_buffer_note = "the replay buffer is not part of a frame checkpoint; replay_buffer.save() saves it"
    _n_scheduler_args = 1
    _trained_names = ("qnet",)  # the target network stays in eval mode
    _buffer_cls: type = Buffer  # the default replay buffer

    def _init(self, qnet: nn.Module, qnet_target: nn.Module, optimizer: Any, criterion: Any, config: DQNConfig, *,
              lr_scheduler: Any, lr_scheduler_args: Any, lr_scheduler_kwargs: Any, replay_buffer: Any, writer: Any
              ) -> None:
        name = type(self).__name__
        refuse_continuous(getattr(unwrap(qnet), "action_space", None), name,
                          "DQN learns one value per choice and a continuous action has none: use PPO or A2C")
        if qnet_target is qnet:
            raise ValueError(f"{name}: qnet_target must be a second network (e.g. copy.deepcopy(qnet)), not qnet")
        self._setup(config, criterion, optimizer, replay_buffer, writer, qnet=qnet, qnet_target=qnet_target)
        try:
            qnet_target.load_state_dict(qnet.state_dict())
        except RuntimeError as e:
            raise ValueError(f"{name}: qnet_target must have qnet's structure; loading qnet's weights into it "
                             f"failed: {str(e).splitlines()[0]}") from None
        self._params = list(qnet.parameters())
        self._optimizers = LazyOptimizers(optimizer, [(self._params, config.learning_rate)])
        self._setup_schedulers(lr_scheduler, lr_scheduler_args, lr_scheduler_kwargs)
        self.epsilon = config.epsilon
        self._norms = self._input_norms(qnet)
        self._method = "q_values" if callable(getattr(qnet, "q_values", None)) else "__call__"
        # Each qnet_target state_dict entry as (target module, qnet module, name, whether a soft update interpolates
        # it: qnet's floating parameters; others, such as input statistics, are copied). The tensors are read
        # through the modules at each update, so a .to() or an assignment that replaces one is seen.
        params = dict(qnet.named_parameters())
        self._target_pairs = []
        for key, value in qnet_target.state_dict().items():
            path, _, attr = key.rpartition(".")
            self._target_pairs.append((qnet_target.get_submodule(path), qnet.get_submodule(path), attr,
                                       key in params and value.is_floating_point()))

    def _default_buffer(self) -> Buffer:
        return self._buffer_cls(self.config.replay_size, self.config.replay_device, seed=self.config.seed)

    @property
    def qnet_optim(self) -> torch.optim.Optimizer:
        """The Q network's optimizer (``optimizers`` is ``[qnet_optim]``)."""
        return self.optimizers[0]

    def _q(self, state: Mapping[str, Any], use_target: bool, where: str, checks: DeferredChecks) -> List[qt.QTable]:
        net = self.qnet_target if use_target else self.qnet
        n_rows = tree_rows(state, f"{where}: state")
        return qt.read_q(safe_call(net, state, method=self._method), state, net, n_rows, where, checks)

    def _choose(self, state: Mapping[str, Any], use_target: bool, epsilon: float, collect: bool, where: str) -> Any:
        stats = collecting_stats_of(self._norms) if collect and self._norms else contextlib.nullcontext()
        checks = DeferredChecks()
        with torch.no_grad(), stats:
            tables = self._q(state, use_target, where, checks)
        checks.raise_first()
        chosen = qt.greedy(tables)
        if epsilon > 0:
            chosen = qt.explore(tables, chosen, epsilon, self._rng)
        if len(tables) == 1 and tables[0].name == qt.DENSE and self._method == "__call__":
            return chosen[0][:, None]  # [B, 1]
        masks = state["action_masks"]
        return {table.name: to_ragged_tensor(masks[table.name]["actors"], index.device, where).with_data(index[:, None])
                for table, index in zip(tables, chosen)}  # action name -> ragged [n_actors, 1]

    def act_discrete(self, state: Mapping[str, Any], use_target: bool = False) -> Any:
        """The greedy choice of every row (dense: int64 ``[B, 1]``) or actor (entity: action name -> ragged int64
        ``[n_actors, 1]``); masked choices are never taken.

        Args:
            state: the rows, as the Q-network's keyword arguments: ``{"state": [B, d_state]}`` (and ``"mask"``) for a
                dense network, the canonical entity state for ``RogueNet``.
            use_target: ask the target network instead of ``qnet``.

        Raises:
            ValueError: the Q-network's output has the wrong shape, ignores a mask, or holds NaN.
        """
        return self._choose(state, use_target, 0.0, False, f"{type(self).__name__}.act_discrete")

    def act_discrete_with_noise(self, state: Mapping[str, Any], use_target: bool = False,
                                decay_epsilon: bool = True) -> Any:
        """As :meth:`act_discrete`, but each row (or actor) takes a uniformly random allowed choice with probability
        ``epsilon``, which then decays (``epsilon_decay``, floor ``epsilon_min``). The Q-network's input statistics
        learn from ``state``; ``use_target`` asks the target network instead; with ``decay_epsilon`` False, epsilon
        stays as it is (:meth:`act` decays it per row instead)."""
        out = self._choose(state, use_target, self.epsilon, True, f"{type(self).__name__}.act_discrete_with_noise")
        if decay_epsilon:
            self.decay_epsilon()
        return out

    def act(self, state: Mapping[str, Any], deterministic: bool = False, *, collect_stats: bool = True) -> tuple:
        """``(action,)`` for ``RolloutCollector`` and ``evaluate``: greedy when ``deterministic``, else epsilon-greedy
        with epsilon decaying once per row acted for (:meth:`act_discrete_with_noise`: once per call, Machin's rule),
        so that a schedule reads in environment steps; it does not decay in evaluation (``collect_stats`` False,
        where the input statistics do not learn from ``state`` either)."""
        if deterministic:
            return (self.act_discrete(state),)
        if collect_stats:
            out = self.act_discrete_with_noise(state, decay_epsilon=False)
            self.decay_epsilon(tree_rows(state, f"{type(self).__name__}.act: state"))
            return (out,)
        return (self._choose(state, False, self.epsilon, False, f"{type(self).__name__}.act"),)

    def decay_epsilon(self, n_steps: int = 1) -> float:
        """Multiplies ``epsilon`` by ``epsilon_decay ** n_steps`` (floor ``epsilon_min``); returns it. ``n_steps``
        is how many decays to apply at once (``act`` passes the rows it acted for)."""
        self.epsilon = max(self.config.epsilon_min, self.epsilon * self.config.epsilon_decay ** n_steps)
        return self.epsilon

    def _store(self, steps: Steps, name: str) -> None:
        """N-step returns: terminal rows do not bootstrap; truncated rows and the last row (unless terminal)
        bootstrap from their ``next_state``, whose masks are checked too (the update acts on them)."""
        if steps.stored is not None:
            raise ValueError(f"{name}: 'stored' leaves rows out of the buffer, which the on-policy frames (PPO, A2C) "
                             "support; a DQN frame stores every row (its n-step returns read them all)")
        check_steps(steps, self.qnet, self.qnet, name, next_state_masks=True)  # update() acts on next_state
        if steps.inputs is None:
            value_targets(steps, lambda s: None, 0.0, 0.0, name)  # raises naming what next_state lacks
        ret = qt.n_step_returns(steps.reward, steps.terminal, steps.truncated, steps.bootstrap, self.config.n_step,
                                self.config.discount)
        data = {
            "state": steps.state, "action": steps.action,
            "next_state": trees.take(steps.inputs, ret.next_index),  # gathered from the one stacked copy
            "reward": torch.from_numpy(ret.reward.astype(np.float32).reshape(-1, 1)),  # [N, 1]
            "terminal": torch.from_numpy(ret.terminal.reshape(-1, 1)),  # [N, 1]
            "discount": torch.from_numpy(ret.discount.astype(np.float32).reshape(-1, 1)),  # [N, 1]
        }
        self._append(data, ("state", "action", "next_state"))

    def _sample(self) -> tuple:
        n, batch = self.replay_buffer.sample_batch(self.config.batch_size, sample_method="random_unique",
                                                   sample_attrs=_ATTRS)
        return n, batch, None, None

    def update(self, update_value: bool = True, update_target: bool = True, concatenate_samples: bool = True,
               *, log_step: Optional[int] = None) -> float:
        """One gradient step on ``batch_size`` sampled rows, then (DQNPer) their priorities and the target network's
        update; returns the TD loss. The target bootstraps from the next state's best choice: the online network's
        max (``vanilla``), the target network's (``fixed_target``), or the target network's value of the online
        network's best choice (``double``).

        The step follows the frames' one failure rule (``entmachin.frame.stepping``): when the TD errors, the loss or
        the gradients are not finite, nothing is stepped, no priority changes and the target network stays, with a
        warning; the third such update in a row raises.

        Args:
            update_value: step the Q-network (the loss is computed either way).
            update_target: then update the target network (soft or hard, by ``update_rate`` / ``update_steps``;
                ``vanilla`` mode has no target network to update).
            concatenate_samples: must be True (kept for Machin scripts).
            log_step: the step of this update's tensorboard scalars when a ``writer`` was given; default: the
                number of updates so far.

        Raises:
            RuntimeError: fewer than ``batch_size`` rows are stored.
            ValueError: the Q-network's output has the wrong shape, or ``concatenate_samples`` is not True.
            NonFiniteUpdateError: the third update in a row whose step was skipped.
        """
        name = self._update_name(concatenate_samples)
        cfg = self.config
        held = self.replay_buffer.size()
        if held < cfg.batch_size:
            raise RuntimeError(f"{name}: the replay buffer holds {held} rows, fewer than batch_size={cfg.batch_size}; "
                               "store more transitions before calling update()")
        n, batch, index, weight = self._sample()
        state, action, reward, next_state, terminal, discount = batch
        trusted = DeferredChecks(enabled=False)  # the rows were checked when stored
        with InterruptGuard() as guard, trusted_inputs(self.qnet, self.qnet_target):
            steps = UpdateSteps(name, guard, cfg.gradient_max)
            with self._training(guard):
                tables = self._q(state, False, name, trusted)
                chosen = qt.stored_actions(action, tables, name, trusted)
                with torch.no_grad():
                    next_tables = self._q(next_state, cfg.mode != "vanilla", name, trusted)
                    choosers = self._q(next_state, False, name, trusted) if cfg.mode == "double" else None
                    best = qt.best_values(next_tables, n, cfg.actor_reduction, choosers)  # [B]
                q = qt.taken_values(tables, chosen, n, cfg.actor_reduction)  # [B]
                ends = terminal.reshape(n).to(q.device, torch.bool)  # [B]
                target = reward.reshape(n).to(q) + torch.where(ends, 0.0, discount.reshape(n).to(q) * best)  # [B]
                td = target - q.detach()  # [B]
                loss = self._loss(q, target, weight)
                if cfg.visualize:
                    self._visualize(loss, "qnet")
                with guard.step:  # the step, the priorities and the counters together
                    step = [OptimizerStep(self.qnet_optim, self._params, {"TD loss": loss}, "qnet")]
                    if steps.step(step if update_value else [], require={"TD errors": td}):
                        if index is not None:  # DQNPer: |TD error| becomes each sampled row's priority
                            self.replay_buffer.update_priority(td.abs().cpu().numpy(), index)
                        if update_target and cfg.mode != "vanilla":
                            self._update_target(self._n_updates + 1)
                    self._n_updates += 1
                    failing = steps.failing(self._skipped_updates)
        td_loss = float(loss.detach())
        self.last_update = QUpdateStats(td_loss, float(q.detach().mean()), self.epsilon, self.replay_buffer.size(),
                                        float(np.mean(weight)) if weight is not None else math.nan,
                                        self.qnet_optim.param_groups[0]["lr"], steps.skipped)
        self._report(self.last_update, log_step, failing, steps.non_finite)
        return td_loss

    def _loss(self, q: torch.Tensor, target: torch.Tensor, weight: Optional[np.ndarray]) -> torch.Tensor:
        """The TD loss of ``q`` and ``target`` ``[B]``; with DQNPer's importance ``weight`` ``[B]``, weighted."""
        loss = self.criterion(q[:, None], target[:, None])
        if weight is None:
            return loss.mean() if loss.dim() else loss
        if loss.numel() != q.shape[0]:
            raise ValueError(f"DQNPer.update: the criterion returned {tuple(loss.shape)}; expected one loss per row "
                             f"([{q.shape[0]}, 1], reduction='none')")
        return (loss.reshape(-1) * torch.from_numpy(weight).to(q)).mean()

    @torch.no_grad()
    def _update_target(self, n_updates: int) -> None:
        """Soft (``update_rate``: parameters interpolated, other entries copied) or, every ``update_steps`` updates,
        hard (every entry copied)."""
        rate = self.config.update_rate
        if rate is None and n_updates % self.config.update_steps:
            return
        for target, online, attr, interpolate in self._target_pairs:
            if rate is not None and interpolate:
                getattr(target, attr).lerp_(getattr(online, attr), rate)
            else:
                getattr(target, attr).copy_(getattr(online, attr))

    def training_counters(self) -> Dict[str, Any]:
        """As every frame's, plus ``epsilon``; ``shuffle_rng`` is the exploration coins' generator."""
        return {**super().training_counters(), "epsilon": self.epsilon}

    def set_training_counters(self, counters: Mapping[str, Any]) -> None:
        """Restores ``counters``, a dict :meth:`training_counters` returned (``epsilon`` may be absent: kept)."""
        super().set_training_counters(counters)
        self.epsilon = float(counters.get("epsilon", self.epsilon))


class DQNPer(DQN):
    """DQN on a :class:`~entmachin.buffer.PrioritizedBuffer`: rows are sampled by priority, the loss of each row is
    weighted by its importance weight, and ``|TD error|`` becomes its priority. The criterion must give one loss per
    row: a ``reduction`` other than ``"none"`` is switched to ``"none"`` (Machin's behaviour, logged). Keywords as
    :class:`DQN`.

    Raises:
        TypeError: ``replay_buffer`` is not a ``PrioritizedBuffer``.
    """

    _config_cls = DQNPerConfig
    _buffer_cls = PrioritizedBuffer

    def _init(self, qnet: nn.Module, qnet_target: nn.Module, optimizer: Any, criterion: Any, config: DQNConfig,
              **objects: Any) -> None:
        super()._init(qnet, qnet_target, optimizer, criterion, config, **objects)
        reduction = getattr(criterion, "reduction", None)
        if reduction is not None and reduction != "none":
            logger.warning("DQNPer: the criterion's reduction is %r; set to 'none' (each row's loss is weighted)",
                           reduction)
            criterion.reduction = "none"

    def _check_buffer(self, buffer: Any) -> None:
        if not isinstance(buffer, PrioritizedBuffer):
            raise TypeError(f"DQNPer: replay_buffer must be a PrioritizedBuffer (it samples by priority and takes "
                            f"update_priority), got {type(buffer).__name__}; use DQN for a uniform buffer")

    def _sample(self) -> tuple:
        return self.replay_buffer.sample_batch(self.config.batch_size, sample_attrs=_ATTRS)
