"""A2C: advantage actor-critic with Machin 0.4.2's surface over dense and ragged transitions.

Usage loop (one environment, Machin's way)::

    a2c = A2C(actor, critic, torch.optim.Adam, nn.MSELoss(reduction="sum"))
    episode = []
    while not done:
        action = a2c.act({"state": state})[0]
        ...
        episode.append({"state": {"state": old}, "action": {"action": action},
                        "next_state": {"state": state}, "reward": reward, "terminal": done})
    a2c.store_episode(episode)
    a2c.update()

Entity environments store canonical states (``docs/architecture.md``) and RogueNet's actions
instead; vectorised collection goes through ``store_rollout`` (``entmachin.frame.collector``).

Reading ``update()`` top to bottom: :meth:`A2C.update` anneals the learning rates and commits the
update; :meth:`A2C._train` computes the old log-probabilities and walks the minibatches of the
stored :class:`~entmachin.frame.rollout.Rollout`; :meth:`A2C._minibatch` is one minibatch's
policy, entropy and value terms (over the units of ``entmachin.frame.gae``), with
:meth:`A2C._policy_objective` the one piece PPO overrides;
:class:`~entmachin.frame.stepping.UpdateSteps` takes the optimizer steps.

An actor's result is Machin's ``(action, log_prob, entropy, ...)``: dense actors (MLPs) give
``log_prob`` ``[B]`` or ``[B, 1]``, entity actors (RogueNet) ``{action_name: RaggedTensor
[n_actors, 1]}``. Both are flattened to *units* (rows for dense actors, actors for ragged ones,
each with its row): ratios are taken per unit, each unit gets its row's advantage, and rows
without actors contribute nothing.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.buffer import RolloutBuffer
from entmachin.frame.base import Frame
from entmachin.frame import memory
from entmachin.frame.config import A2CConfig
from entmachin.frame.gae import (REPORTED, Losses, acting_rows, explained_variance, mean_of,
                                 normalized, old_log_probs, old_units, units_of)
from entmachin.frame.rollout import MAJOR_ATTRS, Rollout, Steps, minibatch_schedule, to_rollout, value_targets
from entmachin.frame.safe_call import ActorCriticCalls, accepts
from entmachin.frame.stepping import InterruptGuard, LazyOptimizers, OptimizerStep, UpdateSteps
from entmachin.frame.store_checks import check_steps, trusted_inputs
from entmachin.frame.summary import UpdateStats
from entmachin.model.input_norm import collecting_stats_of
from entmachin.model.wrappers import unwrap

__all__ = ["A2C"]


class A2C(ActorCriticCalls, Frame):
    """Advantage actor-critic (Machin 0.4.2's ``A2C`` keywords and meanings).

    The actor is called as ``actor(**state, **action)`` through ``safe_call`` and returns ``(action, log_prob,
    entropy, ...)`` (see the module docstring); the critic returns ``[B, 1]`` (or a tuple whose first element it
    is). Actor and critic may share parameters (``net`` and ``net.critic()``): then one optimizer steps once per
    minibatch on the summed loss, the critic-only parameters (if any) in a second group at the critic's rate. When
    the critic is a view of the actor's network (its ``shared_actor`` is the actor, as for ``RogueNet.critic()``)
    and the actor has ``forward_with_value``, a minibatch that trains both runs the shared trunk once. Both models
    are in eval mode except during ``update()``'s minibatches: dropout, if any, acts only where gradients are taken.

    Args:
        actor: the policy module.
        critic: the value module.
        optimizer: optimizer class (or factory) called as ``optimizer(params, lr=...)``; a ``torch.optim`` class
            with a fused implementation (``Adam``, ``SGD``, ...) is asked for it; pass
            ``functools.partial(cls, fused=False)`` to opt out.
        criterion: value loss, called as ``criterion(target_value, value)``.

    Raises:
        TypeError / ValueError: an argument of the wrong type or out of range, or an unknown keyword (the message
            names it and the closest known one).
    """

    _config_cls = A2CConfig

    #: Data-parallel extension point: None (one process: nothing changes), or an object with
    #: ``normalized(advantage, row)``, ``weigh(losses, n_units, n_rows, criterion)`` and
    #: ``average_gradients(params, terms)`` that makes this rank's update the update of every
    #: rank's rows together (``entmachin.distributed.data_parallel.DataParallel``).
    data_parallel: Optional[Any] = None

    def _init(self, actor: nn.Module, critic: nn.Module, optimizer: Any, criterion: Any, config: A2CConfig, *,
              lr_scheduler: Any, lr_scheduler_args: Any, lr_scheduler_kwargs: Any, replay_buffer: Any, writer: Any
              ) -> None:
        self._setup(config, criterion, optimizer, replay_buffer, writer, actor=actor, critic=critic)
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
            self._params = self._critic_params = self._actor_params + critic_only
            specs = [(groups, config.actor_learning_rate)]
        else:
            self._critic_params = critic_params
            specs = [(self._actor_params, config.actor_learning_rate), (critic_params, config.critic_learning_rate)]
        self._optimizers = LazyOptimizers(optimizer, specs, on_built=self._read_initial_lrs)
        self._setup_schedulers(lr_scheduler, lr_scheduler_args, lr_scheduler_kwargs)
        self._actor_norms = self._input_norms(actor)
        self._critic_only_norms = self._input_norms(critic, but=tuple(self._actor_norms))
        self._takes_deterministic = accepts(actor, "deterministic")
        self._memory = memory.memory_size(unwrap(actor))
        if self._memory and not self._joint:
            raise ValueError(f"{type(self).__name__}: the actor has memory, so the critic must be its own value path "
                             "(net.critic(); model.critic: shared): the stored states are the actor's")
        self._chunks: List[memory.Chunk] = []  # each stored rollout's (T, B) or stored flags, for memory
        self._sequence: Dict[str, int] = {}  # while an update trains over sequences: {"sequence_length": L}
        self._plan: Optional[memory.SequencePlan] = None  # while it does: each minibatch's length, burn-in

    def _default_buffer(self) -> RolloutBuffer:
        return RolloutBuffer(self.config.replay_size, self.config.replay_device)

    # -------------------------------------------------------------------- Machin surface

    @property
    def actor_optim(self) -> torch.optim.Optimizer:
        """The actor's optimizer (of both networks when they share parameters); ``optimizers`` is
        ``[actor_optim, critic_optim]``, or ``[actor_optim]`` when parameters are shared."""
        return self.optimizers[0]

    @property
    def critic_optim(self) -> torch.optim.Optimizer:
        """The critic's optimizer (``actor_optim`` when parameters are shared)."""
        return self.optimizers[-1]

    # ------------------------------------------------------------------------- storing

    def _store(self, steps: Steps, name: str) -> None:
        """Values of every state from one critic call, then GAE (``docs/architecture.md``); only ``state``,
        ``action``, the flags, the value target (buffer key ``value``) and the advantage (``gae``) are stored.
        The critic's own input statistics are as before when the call is refused."""
        check_steps(steps, self.actor, self.critic, name)  # before anything changes
        capacity = getattr(self.replay_buffer, "buffer_size", self.config.replay_size)
        held = self.replay_buffer.size()
        if held + steps.n_stored > capacity:
            raise ValueError(
                f"{name}: storing {steps.n_stored} rows on top of {held} would exceed "
                f"replay_size={capacity} and overwrite on-policy data; call update() first or raise replay_size"
            )
        if steps.n_stored == 0:  # every row was someone else's (self-play's frozen snapshots)
            return
        criticize = memory.sequence_values(self._criticize_sequences, steps, name) if self._memory else self.criticize
        # The critic's own statistics learn from this call; a call refused after the critic ran
        # (non-finite values, a buffer that refuses the rows) puts them back as they were.
        saved = [{k: v.clone() for k, v in norm.state_dict().items()} for norm in self._critic_only_norms]
        try:
            with collecting_stats_of(self._critic_only_norms):  # the actor's statistics learn in act()
                returns, advantages = value_targets(
                    steps, criticize, self.config.discount, self.config.gae_lambda, name
                )
            self._append(to_rollout(steps, returns, advantages).buffer_data(), MAJOR_ATTRS)
            if self._memory:
                self._chunks.append(steps.reward.shape if steps.stored is None else steps.stored)
        except BaseException:
            for norm, state in zip(self._critic_only_norms, saved):
                norm.load_state_dict(state)
            raise

    # -------------------------------------------------------------------------- update

    def _needs_old_log_probs(self) -> bool:
        """A2C needs the old log-probabilities only for ``target_kl`` and the logged KL."""
        return self.config.target_kl is not None or self.writer is not None

    def update(self, update_value: bool = True, update_policy: bool = True, concatenate_samples: bool = True,
               *, log_step: Optional[int] = None) -> Tuple[float, float]:
        """Trains on every stored row, then lets them go (clears the buffer; BC forgets its held rows).

        Minibatch ``i`` of shuffled epochs over the stored rows trains the policy while ``i < actor_update_times``
        and the value while ``i < critic_update_times``. An update that raises (``KeyboardInterrupt`` included)
        leaves the frame usable: each minibatch's steps were made entirely or not at all
        (``entmachin.frame.stepping``), and the buffer, ``n_updates`` and the annealed learning rates are as
        before the call, so ``update()`` can simply be called again.

        Args:
            update_value: step the critic (value losses are computed either way).
            update_policy: step the actor.
            concatenate_samples: must be True (kept for Machin scripts).
            log_step: the step of this update's tensorboard scalars when a ``writer`` was given (e.g. environment
                steps, as the runner logs); default: the number of updates so far.

        Returns:
            ``(mean surrogate objective, mean value loss)`` over the minibatches that ran (nan where none did);
            the objective is the negated policy loss, entropy term included.

        Raises:
            RuntimeError: the buffer is empty.
            ValueError: ``concatenate_samples`` is False.
            NonFiniteUpdateError: the failure rule of ``entmachin.frame.stepping``; the update itself completed.
        """
        name = self._update_name(concatenate_samples)
        rows = self._rows_to_train(name)
        with InterruptGuard() as guard, self._inputs_checked_when_stored():
            lrs = [[group["lr"] for group in opt.param_groups] for opt in self.optimizers]
            committed = False
            try:
                frac = 1.0
                if self.config.n_anneal_updates is not None:
                    with guard.step:
                        frac = max(0.0, 1.0 - self._n_updates / self.config.n_anneal_updates)
                        self._set_learning_rates([[lr * frac for lr in initial] for initial in self._initial_lrs])
                steps = UpdateSteps(name, guard, self.config.gradient_max, self.data_parallel)
                stats = self._train(rows, steps, update_value, update_policy,
                                    frac if self.config.anneal_entropy else 1.0)
                with guard.step:  # the update counts: rows consumed and counters moved together
                    self._let_go_of_rows()
                    self._n_updates += 1
                    self.last_update = stats
                    failing = steps.failing(self._skipped_updates)
                    committed = True
            finally:
                if not committed:  # the schedule stays where it was, as n_updates does
                    with guard.step:
                        self._set_learning_rates(lrs)
        self._report(stats, log_step, failing, stats.non_finite)
        return -stats.policy_loss, stats.value_loss

    def _rows_to_train(self, name: str) -> Rollout:
        """The rows the next update trains on (the stored rollout). Subclasses that hold rows elsewhere (BC)
        override this, :meth:`_let_go_of_rows`, :meth:`_inputs_checked_when_stored` and :meth:`_train`."""
        if self.replay_buffer.size() == 0:
            raise RuntimeError(f"{name}: the replay buffer is empty; store transitions with store_episode or "
                               "store_rollout before calling update()")
        return Rollout.read(self.replay_buffer)

    def _let_go_of_rows(self) -> None:
        """Forgets the rows an update has trained on (inside the update's commit)."""
        self.replay_buffer.clear()
        self._chunks.clear()

    def _inputs_checked_when_stored(self) -> Any:
        """The networks' value checks are skipped during the update: ``store_*`` checked the rows."""
        return trusted_inputs(self.actor, self.critic)

    def _train(self, rollout: Rollout, steps: UpdateSteps, update_value: bool, update_policy: bool,
               entropy_scale: float) -> UpdateStats:
        """The minibatches of one update over ``rollout``, in train mode; what they measured."""
        cfg, name = self.config, steps.where
        n_policy, n_value = cfg.actor_update_times, cfg.critic_update_times
        if self._memory:  # whole sequences, time-major, with the unroll's length passed to the networks
            schedule, self._plan = memory.sequence_schedule(self._chunks, cfg, max(n_policy, n_value), self._rng, name)
        else:
            schedule = minibatch_schedule(rollout.n_rows, cfg.batch_size, max(n_policy, n_value), self._rng)
        try:
            return self._train_on(rollout, schedule, steps, update_value, update_policy, entropy_scale)
        finally:
            self._sequence, self._plan = {}, None

    def _train_on(self, rollout: Rollout, schedule: List[np.ndarray], steps: UpdateSteps, update_value: bool,
                  update_policy: bool, entropy_scale: float) -> UpdateStats:
        cfg, name = self.config, steps.where
        n_policy, n_value = cfg.actor_update_times, cfg.critic_update_times
        # Rows without actors (a seat waiting for its turn) add nothing to the policy's terms: the actor skips them.
        acting = None if self._joint else acting_rows(rollout.action, rollout.n_rows)  # [N] bool, or None: every row
        old = position = None
        if n_policy and self._needs_old_log_probs():
            visited = np.unique(np.concatenate(schedule[:n_policy]))  # [n_visited]
            if self._memory:  # every row, in blocks of whole sequences of one length
                visited, old = memory.sequence_log_probs(self, rollout, self._chunks, cfg, name)
            else:
                visited = visited if acting is None else visited[acting[visited]]
                old = old_log_probs(self.eval_act, rollout.state, rollout.action, visited, cfg.batch_size, name)
            position = np.full(rollout.n_rows, -1, dtype=np.int64)  # [N]: row -> place in `visited`
            position[visited] = np.arange(visited.shape[0])
        seen: Dict[str, List[torch.Tensor]] = {k: [] for k in REPORTED}
        stopped, ran = False, 0
        with self._training(steps.guard):
            for i, rows in enumerate(schedule):
                actors = None if acting is None else np.flatnonzero(acting[rows])  # [b_acting] places in `rows`
                old_rows = None
                if old is not None and i < n_policy:
                    old_rows = old_units(old, torch.from_numpy(position[rows if actors is None else rows[actors]]))
                batch = rollout.minibatch(torch.from_numpy(rows))
                batch = batch if self._plan is None else self._plan.prepare(self, rollout, i, batch)
                losses = self._minibatch(batch, old_rows, i < n_policy, i < n_value, entropy_scale,
                                         None if actors is None else torch.from_numpy(actors))
                kl = losses.approx_kl
                if cfg.target_kl is not None and kl is not None and float(kl) > cfg.target_kl:
                    stopped = True
                    break
                ran += 1
                if cfg.visualize:
                    self._visualize(losses.policy, "actor")
                    self._visualize(losses.value, "critic")
                for key in seen:
                    if getattr(losses, key) is not None:
                        seen[key].append(getattr(losses, key).detach())
                steps.step(self._optimizer_steps(losses.policy if update_policy else None,
                                                 losses.value if update_value else None), losses.policy_parts)
        return UpdateStats(
            *(mean_of(seen[k]) for k in seen), explained_variance(rollout.value_target, rollout.old_value),
            float(self.optimizers[0].param_groups[0]["lr"]), steps.skipped, ran, stopped,
            {what: (c[0], c[1]) for what, c in steps.tally.items()}, tuple(steps.non_finite),
        )

    def _minibatch(self, batch: Rollout, old: Optional[torch.Tensor], policy: bool, value: bool,
                   entropy_scale: float, actors: Optional[torch.Tensor] = None) -> Losses:
        """One minibatch's losses and diagnostics, each None where not computed.

        The policy loss (when ``policy``) is ``-objective + entropy_weight * entropy``; each actor
        of a row (RogueNet) or each row (dense actors) is one *unit*, which gets its row's
        advantage, normalised over the rows that have units; rows without actors add nothing.
        The value loss (when ``value``) is ``criterion(target, value) * value_weight``, with
        predictions kept within ``value_clip`` of the stored values when it is set.

        With ``actors`` (the places of the rows that have actors), the actor sees only those rows;
        the others would add nothing to the policy's terms.

        Shape:
            batch: ``b`` rows; old: ``[n_units]`` old log-probabilities, or None; actors: int64 ``[b_acting]`` or None.
        """
        cfg = self.config
        if actors is not None and actors.numel() == 0:
            actors = None  # no actor here: one pass over every row gives the differentiable zero
        if policy and value and actors is None:
            result, predicted = self._eval_act_and_criticize(batch.state, batch.action)
        else:
            if policy:
                result = self.eval_act(*((batch.state, batch.action) if actors is None else
                                         (batch.state[actors], batch.action[actors])))
            if value:
                predicted = self.criticize(batch.state)  # [b, 1]
        policy_loss = value_loss = entropy = approx_kl = clip_fraction = None
        parts: Dict[str, torch.Tensor] = {}
        n_units = 0
        if policy:
            units = units_of(result, batch.n_rows if actors is None else actors.shape[0],
                             cfg.entropy_weight is not None, f"{type(self).__name__}.update")
            if actors is not None:  # each unit's row in the minibatch
                units = units._replace(row=actors.to(units.row.device)[units.row])
            log_prob = units.log_prob  # [n_units]
            n_units = log_prob.shape[0]
            advantage = batch.advantage.reshape(-1).to(log_prob.device)  # [b]
            if cfg.normalize_advantage:
                normalize = normalized if self.data_parallel is None else self.data_parallel.normalized
                advantage = normalize(advantage, units.row)  # [b]
            advantage = advantage.to(log_prob.dtype)
            if units.row is not None:
                advantage = advantage[units.row]  # [n_units]: each actor gets its row's advantage
            if n_units == 0:  # no actor in the minibatch: a differentiable zero
                objective = log_prob.sum() * 0.0
                approx_kl = clip_fraction = None if old is None else objective.detach()
            else:
                ratio = None
                if old is not None:
                    log_ratio = log_prob - old.to(log_prob.device)  # [n_units]
                    ratio = log_ratio.exp()  # [n_units]: r = exp(log_prob - old_log_prob)
                    with torch.no_grad():
                        approx_kl = ((ratio - 1.0) - log_ratio).mean()
                objective, clip_fraction = self._policy_objective(log_prob, ratio, advantage)
                if units.entropy is not None:
                    entropy = units.entropy.mean()
            policy_loss = parts["policy loss"] = -objective
            if cfg.entropy_weight is not None and entropy is not None:
                policy_loss = policy_loss + cfg.entropy_weight * entropy_scale * entropy
                parts["entropy"] = entropy
        if value:
            goal = batch.value_target.to(predicted.device, predicted.dtype)  # [b, 1]
            if cfg.value_clip is not None:
                before = batch.old_value.to(predicted.device, predicted.dtype)  # [b, 1]
                predicted = before + (predicted - before).clamp(-cfg.value_clip, cfg.value_clip)  # [b, 1]
            value_loss = self.criterion(goal, predicted.reshape(goal.shape)) * cfg.value_weight
        losses = Losses(policy_loss, value_loss, parts, entropy, approx_kl, clip_fraction)
        if self.data_parallel is None:
            return losses
        return self.data_parallel.weigh(losses, n_units, batch.n_rows, self.criterion)

    def _policy_objective(self, log_prob: torch.Tensor, ratio: Optional[torch.Tensor], advantage: torch.Tensor
                          ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """A2C's policy-gradient objective ``mean(log_prob * A)`` over units (maximised), and no
        clip fraction.

        Shape:
            log_prob, advantage: ``[n_units]``; ratio: ``[n_units]`` (unused here) or None.
        """
        return (log_prob * advantage).mean(), None

    def _optimizer_steps(self, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor]
                         ) -> List[OptimizerStep]:
        policy = {} if policy_loss is None else {"policy loss": policy_loss}
        value = {} if value_loss is None else {"value loss": value_loss}
        if self.shared_parameters:
            both = {**policy, **value}
            return [OptimizerStep(self.actor_optim, self._params, both, "shared")] if both else []
        return ([OptimizerStep(self.actor_optim, self._actor_params, policy, "actor")] if policy else []) + \
            ([OptimizerStep(self.critic_optim, self._critic_params, value, "critic")] if value else [])

