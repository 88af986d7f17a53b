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

Entity environments store canonical states and ``{"action": {name: ragged [n_actors, 1]}}``
actions, with a ``RogueNet(..., q_head="plain" | "dueling")`` as Q-network: each actor has one
value per choice (``RogueNet.q_values``), a row's ``Q(s, a)`` sums (or averages,
``actor_reduction="mean"``) its actors' values of their choices, and the target's max runs over
the choices the next state's masks allow (``entmachin.frame.q_tables``). ``RolloutCollector``
drives it through :meth:`DQN.act` and ``store_rollout``.

Reading ``update()``: sample, the online values of the stored choices, the target
(``vanilla``: the online network's max; ``fixed_target``: the target network's max; ``double``:
the target network's value of the online network's best choice), one checked backward pass,
the optimizer step, then (DQNPer) the priorities and the target network's update.
"""
from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, Dict, List, Optional, Union

import numpy as np
import torch
from torch import nn

from entmachin.buffer import Buffer, PrioritizedBuffer
from entmachin.frame import q_tables as qt
from entmachin.frame import storing
from entmachin.frame.base import _make_optimizer
from entmachin.frame.config import check_callable
from entmachin.frame.dqn_config import DQNConfig, DQNPerConfig
from entmachin.frame.interrupts import InterruptGuard
from entmachin.frame.storing import tree_rows
from entmachin.frame.target_sync import ModeSwitch, TargetPairs
from entmachin.frame.safe_call import safe_call
from entmachin.frame.store_checks import check_steps, trusted_inputs
from entmachin.frame.summary import QUpdateStats, log_update, make_writer, write_graph
from entmachin.frame.update import zero_grad
from entmachin.frame.surface import FrameSurface
from entmachin.model.input_norm import InputNorm, collecting_stats_of
from entmachin.model.inputs import DeferredChecks
from entmachin.ragged import trees
from entmachin.ragged.tensor import to_ragged_tensor

__all__ = ["DQN", "DQNPer"]

logger = logging.getLogger(__name__)

_ATTRS = ["state", "action", "reward", "next_state", "terminal", "discount"]


class DQN(FrameSurface):
    """Deep Q-learning (Machin 0.4.2's ``DQN`` keywords and modes).

    Args:
        qnet: the Q-network: ``forward(**state) -> [B, n_actions]`` (dense; ``-inf`` where a
            state's ``mask`` forbids), or a network with ``q_values(**state)`` returning action
            name -> ragged ``[n_actors, width]`` (``RogueNet(..., q_head=...)``).
        qnet_target: a network of the same structure; starts as a copy of ``qnet``.
        optimizer: optimizer class (or factory) called as ``optimizer(params, lr=...)``.
        criterion: the TD loss, ``criterion(q, target)`` on ``[B, 1]`` values.
        lr_scheduler: scheduler class called as ``lr_scheduler(optim, *args, **kwargs)``.
        lr_scheduler_args: ``(args,)`` of the scheduler (Machin's one-element tuple).
        lr_scheduler_kwargs: ``(kwargs,)`` of the scheduler.
        batch_size: rows sampled per ``update()``.
        epsilon_decay: ``epsilon`` is multiplied by it after each ``act_discrete_with_noise`` call
            (Machin's rule) and, through :meth:`act` (``RolloutCollector``, the runner), once per
            environment row acted for.
        update_rate: soft target update ``target = (1 - rate) target + rate qnet`` per update.
        update_steps: hard target update every this many updates (give ``update_rate=None``).
        learning_rate: the optimizer's learning rate.
        discount: discount factor in [0, 1].
        gradient_max: maximum gradient norm (inf: no clipping).
        replay_size: rows the default buffer holds (the oldest are overwritten).
        replay_device: device of the default buffer.
        replay_buffer: a buffer to use instead.
        mode: ``"double"``, ``"fixed_target"`` or ``"vanilla"`` (see the module docstring).
        visualize: write the autograd graph of the first loss as ``qnet.dot``.
        visualize_dir: directory of that file (default: the writer's, else the current one).
        epsilon: the initial exploration rate (Machin starts at 1).
        epsilon_min: ``epsilon`` never decays below it.
        n_step: rewards summed before bootstrapping (n-step returns, from the stored episodes).
        actor_reduction: a row's value of an action over its actors: ``"sum"`` or ``"mean"``.
        writer: tensorboard ``SummaryWriter`` or log directory (see ``entmachin.frame.summary``).
        seed: seeds the exploration coins and the default replay buffer's sampling (random
            choices use torch's generator).

    Raises:
        TypeError / ValueError: a keyword of the wrong type or out of range, networks of
            different structure.
    """

    _config_cls = DQNConfig
    network_names = ("qnet", "qnet_target")
    unsaved_buffer_note = "the replay buffer is not part of a frame checkpoint; replay_buffer.save() saves it"
    _buffer_cls: type = Buffer

    def __init__(
        self, qnet: nn.Module, qnet_target: nn.Module, optimizer: Any, criterion: Any, *,
        lr_scheduler: Any = None, lr_scheduler_args: Any = None, lr_scheduler_kwargs: Any = None,
        batch_size: int = 100, epsilon_decay: float = 0.9999, update_rate: Optional[float] = 0.005,
        update_steps: Optional[int] = None, learning_rate: float = 0.001, discount: float = 0.99,
        gradient_max: float = float("inf"), replay_size: int = 500000, replay_device: Union[str, torch.device] = "cpu",
        replay_buffer: Any = None, mode: str = "double", visualize: bool = False, visualize_dir: str = "",
        epsilon: float = 1.0, epsilon_min: float = 0.0, n_step: int = 1, actor_reduction: str = "sum",
        writer: Any = None, seed: Optional[int] = None,
    ) -> None:
        settings = dict(locals())
        for key in ("self", "qnet", "qnet_target", "optimizer", "criterion", "lr_scheduler", "lr_scheduler_args",
                    "lr_scheduler_kwargs", "replay_buffer", "writer", "__class__"):
            settings.pop(key, None)
        name = type(self).__name__
        self.config = config = self._config_cls(**settings)
        for label, model in (("qnet", qnet), ("qnet_target", qnet_target)):
            if not isinstance(model, nn.Module):
                raise TypeError(f"{name}: {label} must be an nn.Module, got {type(model).__name__}")
        if qnet_target is qnet:
            raise ValueError(f"{name}: qnet_target must be a second network (e.g. copy.deepcopy(qnet)), not qnet")
        check_callable(optimizer, f"{name}: optimizer", "an optimizer class such as torch.optim.Adam")
        check_callable(criterion, f"{name}: criterion", "a loss such as nn.MSELoss()")
        try:
            qnet_target.load_state_dict(qnet.state_dict())
        except RuntimeError as e:
            raise ValueError(f"{name}: qnet_target must have qnet's structure; loading qnet's weights into it "
                             f"failed: {str(e).splitlines()[0]}") from None
        self.qnet, self.qnet_target, self.criterion = qnet, qnet_target, criterion
        qnet.eval()
        qnet_target.eval()
        self.qnet_optim = _make_optimizer(optimizer, list(qnet.parameters()), config.learning_rate)
        self._schedulers: List[Any] = []
        if lr_scheduler is not None:
            check_callable(lr_scheduler, f"{name}: lr_scheduler", "a scheduler class or None")
            args = _one(lr_scheduler_args, (), f"{name}: lr_scheduler_args")
            kwargs = _one(lr_scheduler_kwargs, {}, f"{name}: lr_scheduler_kwargs")
            self._schedulers = [lr_scheduler(self.qnet_optim, *args, **kwargs)]
        if replay_buffer is None:
            replay_buffer = self._buffer_cls(config.replay_size, config.replay_device, seed=config.seed)
        self._check_buffer(replay_buffer)
        self.replay_buffer = replay_buffer
        self.writer = make_writer(writer, name)
        self._owns_writer = self.writer is not None and self.writer is not writer
        self.epsilon = config.epsilon
        self._rng = np.random.default_rng(config.seed)
        self._n_updates = 0
        self._norms = [m for m in qnet.modules() if isinstance(m, InputNorm)]
        self._target_pairs = TargetPairs(qnet, qnet_target)
        self._params = list(qnet.parameters())  # the optimizer's list, read once as well
        self._modes = ModeSwitch(qnet)
        self._method = "q_values" if callable(getattr(qnet, "q_values", None)) else "__call__"
        self._visualized = False
        self.last_update: Optional[QUpdateStats] = None

    def _check_buffer(self, buffer: Any) -> None:
        for method in ("append", "size", "clear", "sample_batch"):
            if not callable(getattr(buffer, method, None)):
                raise TypeError(f"{type(self).__name__}: replay_buffer has no {method}() method; pass an entmachin "
                                "Buffer")

    # -------------------------------------------------------------------- Machin surface

    @property
    def optimizers(self) -> List[torch.optim.Optimizer]:
        """``[qnet_optim]``."""
        return [self.qnet_optim]

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
        out = {}
        for table, index in zip(tables, chosen):
            actors = to_ragged_tensor(masks[table.name]["actors"], index.device, where)
            out[table.name] = actors.with_data(index[:, None])  # [n_actors, 1]
        return out

    def act_discrete(self, state: Mapping[str, Any], use_target: bool = False) -> Any:
        """The greedy choice of every row (dense: int64 ``[B, 1]``) or actor (entity: action name ->
        ragged int64 ``[n_actors, 1]``); masked choices are never taken.

        Raises:
            ValueError: the Q-network's output has the wrong shape, ignores a mask, or holds NaN.
        """
        return self._choose(state, use_target, 0.0, False, f"{type(self).__name__}.act_discrete")

    def act_discrete_with_noise(self, state: Mapping[str, Any], use_target: bool = False,
                                decay_epsilon: bool = True) -> Any:
        """As :meth:`act_discrete`, but each row (or actor) takes a uniformly random allowed choice
        with probability ``epsilon``, which then decays (``epsilon_decay``, floor ``epsilon_min``).
        Input statistics of the Q-network learn from ``state``."""
        out = self._choose(state, use_target, self.epsilon, True, f"{type(self).__name__}.act_discrete_with_noise")
        if decay_epsilon:
            self.decay_epsilon()
        return out

    def act(self, state: Mapping[str, Any], deterministic: bool = False, *, collect_stats: bool = True) -> tuple:
        """``(action,)`` for ``RolloutCollector`` and ``evaluate``: greedy when ``deterministic``,
        else epsilon-greedy.

        Unlike :meth:`act_discrete_with_noise` (Machin's once per call), epsilon decays once per
        row acted for: ``B`` environments stepped together decay it ``B`` times, so a schedule
        reads in environment steps whatever the number of environments. It does not decay
        during evaluation (``collect_stats=False``).
        """
        if deterministic:
            return (self.act_discrete(state),)
        if collect_stats:
            out = self.act_discrete_with_noise(state, decay_epsilon=False)
            self.decay_epsilon(tree_rows(state, f"{type(self).__name__}.act: state"))
            return (out,)
        return (self._choose(state, False, self.epsilon, False, f"{type(self).__name__}.act"),)

    def decay_epsilon(self, n_steps: int = 1) -> float:
        """Multiplies ``epsilon`` by ``epsilon_decay ** n_steps`` (floor ``epsilon_min``); returns it."""
        cfg = self.config
        self.epsilon = max(cfg.epsilon_min, self.epsilon * cfg.epsilon_decay ** n_steps)
        return self.epsilon

    # ------------------------------------------------------------------------- storing

    def store_episode(self, episode: Sequence[Any]) -> None:
        """Stores one environment's transitions (dicts with ``state``, ``action``, ``next_state``,
        ``reward``, ``terminal`` and optionally ``truncated``), one row each, with n-step returns.

        Terminal rows do not bootstrap; truncated rows and the episode's last row (unless
        terminal) bootstrap from their ``next_state``. Checked as the actor-critic frames check
        theirs (``entmachin.frame.store_checks``): a refused episode stores nothing.
        """
        self._store(storing.read_episode(episode, f"{type(self).__name__}.store_episode"), "store_episode")

    def store_rollout(self, steps: Sequence[Any]) -> None:
        """Stores ``T`` vectorised steps of ``B`` rows each (see ``A2C.store_rollout``)."""
        self._store(storing.read_rollout(steps, f"{type(self).__name__}.store_rollout"), "store_rollout")

    def _store(self, steps: storing.Steps, method: str) -> None:
        name = f"{type(self).__name__}.{method}"
        check_steps(steps, self.qnet, self.qnet, name, next_state_masks=True)  # update() acts on next_state
        if steps.inputs is None:
            storing.value_targets(steps, lambda s: None, 0.0, 0.0, name)  # raises naming what next_state lacks
        cfg = self.config
        ret = qt.n_step_returns(steps.reward, steps.terminal, steps.truncated, steps.bootstrap, cfg.n_step,
                                cfg.discount)
        n_rows = steps.n_rows
        data = {
            "state": steps.state, "action": steps.action,
            "next_state": trees.take(steps.inputs, ret.next_index),  # gathered from the one stacked copy
            "reward": torch.from_numpy(ret.reward.astype(np.float32).reshape(n_rows, 1)),  # [N, 1]
            "terminal": torch.from_numpy(ret.terminal.reshape(n_rows, 1)),  # [N, 1]
            "discount": torch.from_numpy(ret.discount.astype(np.float32).reshape(n_rows, 1)),  # [N, 1]
        }
        trusted = getattr(self.replay_buffer, "append_trusted", None)
        if trusted is not None:
            trusted(data, ("state", "action", "next_state"))
        else:
            self.replay_buffer.append(data)

    # -------------------------------------------------------------------------- update

    def _sample(self) -> tuple:
        n, batch = self.replay_buffer.sample_batch(self.config.batch_size, sample_method="random_unique",
                                                   sample_attrs=_ATTRS)
        return n, batch, None, None

    def update(self, update_value: bool = True, update_target: bool = True, concatenate_samples: bool = True,
               *, log_step: Optional[int] = None) -> float:
        """One gradient step on ``batch_size`` sampled rows, then the target network's update.

        Raises (nothing stepped, no priority or counter changed):
            RuntimeError: fewer than ``batch_size`` rows are stored.
            ValueError: the Q-network's output has the wrong shape, ignores a mask, holds NaN or
                infinity, or the TD errors are not finite.

        Returns:
            the TD loss.
        """
        name = f"{type(self).__name__}.update"
        if concatenate_samples is not True:
            raise ValueError(f"{name}: concatenate_samples must be True, got {concatenate_samples!r}")
        cfg = self.config
        held = self.replay_buffer.size()
        if held < cfg.batch_size:
            raise RuntimeError(f"{name}: the replay buffer holds {held} rows, fewer than batch_size={cfg.batch_size}; "
                               "store more transitions before calling update()")
        n, batch, index, weight = self._sample()
        state, action, reward, next_state, terminal, discount = batch
        checks = DeferredChecks()
        with InterruptGuard() as guard, trusted_inputs(self.qnet, self.qnet_target):  # rows check_steps accepted
            try:
                self._modes.set(True)
                tables = self._q(state, False, name, checks)
                chosen = qt.stored_actions(action, tables, name, checks)
                with torch.no_grad():
                    next_tables = self._q(next_state, cfg.mode != "vanilla", name, checks)
                    choosers = self._q(next_state, False, name, checks) if cfg.mode == "double" else None
                    best = qt.best_values(next_tables, n, cfg.actor_reduction, choosers)  # [B]
                checks.raise_first()
                q = qt.taken_values(tables, chosen, n, cfg.actor_reduction)  # [B]
                reward, discount = reward.reshape(n).to(q), discount.reshape(n).to(q)  # [B], [B]
                ends = terminal.reshape(n).to(q.device, torch.bool)  # [B]
                target = reward + torch.where(ends, 0.0, discount * best)  # [B]
                td = target - q.detach()  # [B]
                loss = self._loss(q, target, weight)
                if cfg.visualize and not self._visualized:
                    self._visualized = True
                    write_graph(loss, "qnet", cfg.visualize_dir or getattr(self.writer, "log_dir", "") or "",
                                self.writer)
                zero_grad(self.qnet_optim)
                if update_value:
                    loss.backward()
                params = [p for p in self._params if p.grad is not None]
                norm = _grad_norm(params) if params else loss.new_zeros(())
                finite = torch.isfinite(torch.cat([td, loss.reshape(1).to(td.device),
                                                   norm.reshape(1).to(td.device)])).cpu().numpy()
                flags = [bool(finite[:-2].all()), bool(finite[-2]), bool(finite[-1])]  # the one host sync
                if not all(flags):
                    self.qnet_optim.zero_grad(set_to_none=True)
                    what = ("TD errors", "TD loss", "gradients")[flags.index(False)]
                    raise ValueError(f"{name}: the {what} hold NaN or infinity (the rewards' or the Q-values' scale "
                                     "may overflow); nothing was stepped and no priority changed")
                with guard.step:  # the step, the priorities and the counters together
                    if update_value:
                        if params and math.isfinite(cfg.gradient_max):
                            torch.nn.utils.clip_grads_with_norm_(params, cfg.gradient_max, norm)
                        self.qnet_optim.step()
                    self._after_step(td, index)
                    self._n_updates += 1
                    if update_target and cfg.mode != "vanilla":
                        self._update_target()
            finally:
                self._modes.set(False)
        td_loss = float(loss.detach())
        self.last_update = QUpdateStats(td_loss, float(q.detach().mean()), self.epsilon, self.replay_buffer.size(),
                                        float(np.mean(weight)) if weight is not None else math.nan,
                                        self.qnet_optim.param_groups[0]["lr"])
        if self.writer is not None:
            log_update(self.writer, self.last_update, self._n_updates if log_step is None else log_step)
        return td_loss

    def _loss(self, q: torch.Tensor, target: torch.Tensor, weight: Optional[np.ndarray]) -> torch.Tensor:
        loss = self.criterion(q[:, None], target[:, None])
        return loss.mean() if loss.dim() else loss

    def _after_step(self, td: torch.Tensor, index: Optional[np.ndarray]) -> None:
        """DQNPer feeds the TD errors back as priorities."""

    @torch.no_grad()
    def _update_target(self) -> None:
        cfg = self.config
        if cfg.update_steps is not None:
            if self._n_updates % cfg.update_steps == 0:
                self._target_pairs.copy_all()
            return
        self._target_pairs.soft_update(cfg.update_rate)

    # ------------------------------------------------------------ counters of a checkpoint

    def training_counters(self) -> Dict[str, Any]:
        """``n_updates``, ``epsilon`` and ``shuffle_rng`` (the exploration coins' generator)."""
        return {"n_updates": self._n_updates, "epsilon": self.epsilon, "shuffle_rng": self._rng.bit_generator.state}

    def set_training_counters(self, counters: Mapping[str, Any]) -> None:
        """Restores :meth:`training_counters`."""
        self._n_updates = int(counters["n_updates"])
        self.epsilon = float(counters.get("epsilon", self.epsilon))
        self._rng.bit_generator.state = counters["shuffle_rng"]


class DQNPer(DQN):
    """DQN on a :class:`~entmachin.buffer.PrioritizedBuffer`: rows are sampled by priority, the loss
    of each row is weighted by its importance weight, and ``|TD error|`` becomes its priority.

    The criterion must give one loss per row: a criterion with ``reduction`` other than
    ``"none"`` is switched to ``"none"`` (Machin's behaviour, logged). Keywords as :class:`DQN`.

    Raises:
        TypeError: ``replay_buffer`` is not a ``PrioritizedBuffer``.
    """

    _config_cls = DQNPerConfig
    _buffer_cls = PrioritizedBuffer

    def __init__(self, qnet: nn.Module, qnet_target: nn.Module, optimizer: Any, criterion: Any, **kwargs: Any
                 ) -> None:
        super().__init__(qnet, qnet_target, optimizer, criterion, **kwargs)
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
        n, batch, index, weight = self.replay_buffer.sample_batch(self.config.batch_size, sample_attrs=_ATTRS)
        return n, batch, index, weight

    def _loss(self, q: torch.Tensor, target: torch.Tensor, weight: Optional[np.ndarray]) -> torch.Tensor:
        per_row = self.criterion(q[:, None], target[:, None])  # [B, 1]
        if per_row.numel() != q.shape[0]:
            raise ValueError(f"DQNPer.update: the criterion returned {tuple(per_row.shape)}; expected one loss per "
                             f"row ([{q.shape[0]}, 1], reduction='none')")
        w = torch.from_numpy(weight).to(q)  # [B]
        return (per_row.reshape(-1) * w).mean()

    def _after_step(self, td: torch.Tensor, index: Optional[np.ndarray]) -> None:
        self.replay_buffer.update_priority(td.abs().cpu().numpy(), index)


def _grad_norm(params: List[torch.Tensor]) -> torch.Tensor:
    """The gradients' total 2-norm; ``get_total_norm``'s arithmetic without its grouping by device
    and dtype when there is one group (a small network's update spends more on the grouping)."""
    grads = [p.grad for p in params]
    first = grads[0]
    if first.device.type in ("cpu", "cuda") and all(
            g.device == first.device and g.dtype == first.dtype and type(g) is torch.Tensor and g.layout == torch.strided
            for g in grads):
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)  # []
    return torch.nn.utils.get_total_norm(grads)


def _one(value: Any, default: Any, where: str) -> Any:
    """Machin's one-element ``(args,)`` / ``(kwargs,)`` of a DQN scheduler; None or () mean defaults."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return default
    if not isinstance(value, (tuple, list)) or len(value) != 1 or not isinstance(value[0], type(default)):
        raise TypeError(f"{where} must be a one-element tuple holding a {type(default).__name__}, got {value!r}")
    return value[0]
