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
instead; vectorised collection goes through ``store_rollout`` (see ``entmachin.frame.rollout``).

Reading ``update()`` top to bottom: :meth:`A2C.update` anneals and guards the whole update,
:meth:`A2C._train` walks the minibatches of the stored :class:`~entmachin.frame.record.Rollout`,
:meth:`A2C._losses` computes one minibatch's policy and value losses, :meth:`A2C._objective`
is the policy objective (PPO overrides it with the clipped surrogate) and :meth:`A2C._step`
steps the optimizers. What acting, storing and saving share with PPO is in ``base.py``.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
from torch import nn

from entmachin.frame.base import ActorCriticFrame
from entmachin.frame.config import A2CConfig
from entmachin.frame.health import count_skipped_updates, non_finite_error
from entmachin.frame.interrupts import InterruptGuard
from entmachin.frame.losses import OldLogProbs, Units, old_log_probs, old_units, normalized, units_of
from entmachin.frame.record import Rollout
from entmachin.frame.store_checks import trusted_inputs
from entmachin.frame.summary import UpdateStats, log_update, write_graph
from entmachin.frame.update import (clip_grads, explained_variance, finite_flags, mean_of, minibatch_schedule,
                                   total_norms, zero_grad)

__all__ = ["A2C"]


class Losses(NamedTuple):
    """One minibatch's losses (None: not trained on this minibatch) and diagnostics.

    ``policy_parts`` names the terms of the policy loss (``"policy loss"``, ``"entropy"``) so a
    non-finite step can say which one went wrong.
    """

    policy: Optional[torch.Tensor]
    value: Optional[torch.Tensor]
    policy_parts: Dict[str, torch.Tensor]
    entropy: Optional[torch.Tensor]
    approx_kl: Optional[torch.Tensor]
    clip_fraction: Optional[torch.Tensor]


class _Step(NamedTuple):
    """One optimizer's share of a minibatch: the loss terms it trains on and its parameters."""

    optimizer: Any
    params: List[nn.Parameter]
    terms: Dict[str, torch.Tensor]
    what: str


class A2C(ActorCriticFrame):
    """Advantage actor-critic (Machin 0.4.2's ``A2C`` keywords and meanings).

    The actor is called as ``actor(**state, **action)`` through ``safe_call`` and returns
    ``(action, log_prob, entropy, ...)``: dense ``log_prob`` ``[B]`` / ``[B, 1]``, or per actor
    ``{action_name: RaggedTensor [n_actors, 1]}`` (RogueNet), in which case each actor gets
    its row's advantage and rows without actors contribute nothing. The critic returns
    ``[B, 1]`` (or a tuple whose first element it is). Actor and critic may share parameters
    (``net`` and ``net.critic()``): then one optimizer steps once per minibatch on the summed
    loss, with the critic-only parameters (if any) in a second group at the critic's rate.
    When the critic is a view of the actor's network (its ``shared_actor`` attribute is the
    actor, as for ``RogueNet.critic()``) and the actor has ``forward_with_value``, minibatches
    that train both call that once instead of the actor and the critic separately, so the
    shared trunk runs once forward and once backward. The frame puts both models in eval mode
    when it is built and keeps them there except during ``update()``'s minibatches (train
    mode): dropout, if any, acts only where gradients are taken.

    Args:
        actor: the policy module.
        critic: the value module.
        optimizer: optimizer class (or factory) called as ``optimizer(params, lr=...)``; a
            ``torch.optim`` class that has a fused implementation (``Adam``, ``SGD``, ...) is
            asked for it (``fused=True``); pass ``functools.partial(cls, fused=False)`` to opt out.
        criterion: value loss, called as ``criterion(target_value, value)``.
        lr_scheduler: scheduler class called as ``lr_scheduler(optim, *args, **kwargs)`` per
            optimizer; stepped by ``update_lr_scheduler()``.
        lr_scheduler_args: ``(actor_args, critic_args)``.
        lr_scheduler_kwargs: ``(actor_kwargs, critic_kwargs)``.
        batch_size: rows per minibatch.
        actor_update_times: policy gradient steps (minibatches) per ``update()``.
        critic_update_times: value gradient steps (minibatches) per ``update()``.
        actor_learning_rate: learning rate of the actor's optimizer.
        critic_learning_rate: learning rate of the critic's optimizer.
        entropy_weight: weight of the mean entropy in the policy loss, Machin's sign: negative
            values reward entropy (exploration); None leaves entropy out.
        value_weight: factor of the value loss.
        gradient_max: maximum total gradient norm of each step (inf: no clipping).
        gae_lambda: GAE lambda in [0, 1]; 1 gives discounted returns minus values.
        discount: discount factor in [0, 1].
        normalize_advantage: normalise advantages per minibatch (over rows that have actors).
        replay_size: rows the on-policy buffer holds; storing more raises.
        replay_device: device of the buffer.
        replay_buffer: a buffer to use instead (``replay_size`` and ``replay_device`` unused).
        visualize: write the autograd graphs of the first actor and critic losses as
            ``actor.dot`` / ``critic.dot`` (and to tensorboard when there is a writer).
        visualize_dir: directory of those files (default: the writer's, else the current one).
        value_clip: clip each value prediction to within this distance of the value it had
            when the row was stored (Stable-Baselines3's form); None: no clipping.
        target_kl: stop the update before a minibatch whose approximate KL divergence from
            the policy at the start of the update exceeds this; None: never stop.
        n_anneal_updates: learning rates fall linearly from their initial values to 0 over
            this many ``update()`` calls; None: constant. Not combinable with ``lr_scheduler``.
        anneal_entropy: ``entropy_weight`` falls linearly to 0 over ``n_anneal_updates`` too
            (entity-gym's trainer anneals a strong early exploration bonus this way).
        writer: tensorboard ``SummaryWriter`` or log directory; each ``update()`` logs there
            (see ``entmachin.frame.summary``).
        seed: seeds the frame's minibatch shuffling (None: fresh entropy).

    Raises:
        TypeError / ValueError: a keyword of the wrong type or out of range (unknown keywords
            raise ``TypeError`` as for any function).
    """

    _config_cls = A2CConfig

    #: Data-parallel extension point: None (one process: nothing changes), or an object with
    #: ``normalized(advantage, row)``, ``weigh(losses, n_units, n_rows, criterion)`` and
    #: ``average_gradients(params, terms)`` that makes this rank's update the update of every
    #: rank's rows together (``entmachin.frame.data_parallel.DataParallel``).
    data_parallel: Optional[Any] = None

    def __init__(
        self, actor: nn.Module, critic: nn.Module, optimizer: Any, criterion: Any, *,
        lr_scheduler: Any = None, lr_scheduler_args: Any = None, lr_scheduler_kwargs: Any = None,
        batch_size: int = 100, actor_update_times: int = 5, critic_update_times: int = 10,
        actor_learning_rate: float = 0.001, critic_learning_rate: float = 0.001,
        entropy_weight: Optional[float] = None, value_weight: float = 0.5, gradient_max: float = float("inf"),
        gae_lambda: float = 1.0, discount: float = 0.99, normalize_advantage: bool = True,
        replay_size: int = 500000, replay_device: Union[str, torch.device] = "cpu", replay_buffer: Any = None,
        visualize: bool = False, visualize_dir: str = "", value_clip: Optional[float] = None,
        target_kl: Optional[float] = None, n_anneal_updates: Optional[int] = None, anneal_entropy: bool = False,
        writer: Any = None, seed: Optional[int] = None,
    ) -> None:
        settings = dict(locals())
        for key in ("self", "actor", "critic", "optimizer", "criterion", "lr_scheduler", "lr_scheduler_args",
                    "lr_scheduler_kwargs", "replay_buffer", "writer", "__class__"):
            settings.pop(key, None)
        self._setup(actor, critic, optimizer, criterion, lr_scheduler, lr_scheduler_args, lr_scheduler_kwargs,
                    replay_buffer, writer, A2CConfig(**settings))

    # -------------------------------------------------------------------------- update

    def _needs_old_log_probs(self) -> bool:
        """A2C needs the old log-probabilities only for ``target_kl`` and the logged KL."""
        return self.config.target_kl is not None or self.writer is not None

    def update(self, update_value: bool = True, update_policy: bool = True, concatenate_samples: bool = True,
               *, log_step: Optional[int] = None) -> Tuple[float, float]:
        """Trains on every stored row, then clears the buffer.

        An update that raises (a ``KeyboardInterrupt`` included) leaves the frame usable: each
        minibatch's optimizer steps, actor's and critic's, were made entirely or not at all
        (Ctrl-C during the steps is raised right after them, see ``entmachin.frame.interrupts``),
        the buffer keeps its rows, and ``n_updates`` and the annealed learning rates are as
        before the call, so ``update()`` can simply be called again.

        Args:
            update_value: step the critic (value losses are computed either way).
            update_policy: step the actor.
            concatenate_samples: must be True (kept for Machin scripts).
            log_step: the step of this update's tensorboard scalars when a ``writer`` was given
                (e.g. environment steps, as the ``entmachin`` runner logs); default: the number
                of updates so far.

        Returns:
            ``(mean surrogate objective, mean value loss)``: the negated mean policy loss
            (entropy term included) and the mean value loss over the minibatches that ran
            (nan where none did).

        Raises:
            RuntimeError: the buffer is empty.
            ValueError: ``concatenate_samples`` is False.
            NonFiniteUpdateError: this update is the third in a row in which every step of the
                actor's (or critic's) optimizer was skipped for non-finite values; the update
                itself completed (see ``entmachin.frame.health``).
        """
        if concatenate_samples is not True:
            raise ValueError(f"{type(self).__name__}.update: concatenate_samples must be True, got {concatenate_samples!r}")
        if self.replay_buffer.size() == 0:
            raise RuntimeError(
                f"{type(self).__name__}.update: the replay buffer is empty; store transitions with store_episode or "
                "store_rollout before calling update()"
            )
        with InterruptGuard() as guard, trusted_inputs(self.actor, self.critic):  # rows check_steps accepted
            lrs = [[group["lr"] for group in opt.param_groups] for opt in self.optimizers]
            committed = False
            try:
                frac = 1.0
                if self.config.n_anneal_updates is not None:
                    with guard.step:
                        frac = max(0.0, 1.0 - self._n_updates / self.config.n_anneal_updates)
                        self._set_learning_rates([[lr * frac for lr in initial] for initial in self._initial_lrs])
                entropy_scale = frac if self.config.anneal_entropy else 1.0
                stats = self._train(Rollout.read(self.replay_buffer), update_value, update_policy, guard, entropy_scale)
                with guard.step:  # the update counts: rows consumed and counters moved together
                    self.replay_buffer.clear()
                    self._n_updates += 1
                    self.last_update = stats
                    failing = count_skipped_updates(self._skipped_updates, stats)
                    committed = True
            finally:
                if not committed:  # the schedule stays where it was, as n_updates does
                    with guard.step:
                        self._set_learning_rates(lrs)
        if self.writer is not None:
            log_update(self.writer, stats, self._n_updates if log_step is None else log_step)
        if failing:
            raise non_finite_error(self, stats, failing)
        return -stats.policy_loss, stats.value_loss

    def _train(self, rollout: Rollout, update_value: bool, update_policy: bool, guard: InterruptGuard,
               entropy_scale: float) -> UpdateStats:
        """Minibatch ``i`` of shuffled epochs over ``rollout`` trains the policy while ``i <
        actor_update_times`` and the value while ``i < critic_update_times``.

        Old log-probabilities, where needed, come first, in batched passes of the actor as it
        is over the rows the schedule visits. Changes only parameters, optimizer states and the
        shuffling generator; actor and critic are back in eval mode when it returns or raises.
        """
        cfg = self.config
        n_policy, n_value = cfg.actor_update_times, cfg.critic_update_times
        schedule = minibatch_schedule(rollout.n_rows, cfg.batch_size, max(n_policy, n_value), self._rng)
        old: Optional[OldLogProbs] = None
        position = None
        if n_policy and self._needs_old_log_probs():
            visited = np.unique(np.concatenate(schedule[:n_policy]))  # [n_visited]
            old = old_log_probs(self.eval_act, rollout.state, rollout.action, visited, cfg.batch_size,
                                f"{type(self).__name__}.update")
            position = np.full(rollout.n_rows, -1, dtype=np.int64)  # [N]: row -> place in `visited`
            position[visited] = np.arange(visited.shape[0])
        seen: Dict[str, List[torch.Tensor]] = {"policy": [], "value": [], "entropy": [], "kl": [], "clip": []}
        stopped, ran = False, 0
        non_finite: Dict[str, None] = {}  # an ordered set
        tally: Dict[str, List[int]] = {}
        try:
            with guard.step:  # modes switch whole (Module.train recurses in Python)
                self.actor.train()
                self.critic.train()
            for i, rows in enumerate(schedule):
                index = torch.from_numpy(rows)  # [b]
                old_mb = None if old is None or i >= n_policy else old_units(old, torch.from_numpy(position[rows]))
                losses = self._losses(rollout.minibatch(index), old_mb, i < n_policy, i < n_value, entropy_scale)
                if (cfg.target_kl is not None and losses.approx_kl is not None
                        and float(losses.approx_kl) > cfg.target_kl):
                    stopped = True
                    break
                ran += 1
                if cfg.visualize:
                    self._visualize(losses)
                for key, term in (("policy", losses.policy), ("value", losses.value), ("entropy", losses.entropy),
                                  ("kl", losses.approx_kl), ("clip", losses.clip_fraction)):
                    if term is not None:
                        seen[key].append(term.detach())
                self._step(losses.policy if update_policy else None, losses.value if update_value else None,
                           losses.policy_parts, guard, non_finite, tally)
        finally:
            with guard.step:
                self.actor.eval()
                self.critic.eval()
        return UpdateStats(
            mean_of(seen["policy"]), mean_of(seen["value"]), mean_of(seen["entropy"]), mean_of(seen["kl"]),
            mean_of(seen["clip"]), explained_variance(rollout.value_target, rollout.old_value),
            float(self.optimizers[0].param_groups[0]["lr"]), sum(c[1] for c in tally.values()), ran, stopped,
            {what: (c[0], c[1]) for what, c in tally.items()}, tuple(non_finite),
        )

    def _losses(self, batch: Rollout, old: Optional[torch.Tensor], policy: bool, value: bool,
                entropy_scale: float) -> Losses:
        """The policy loss ``-objective + entropy_weight * entropy`` (when ``policy``) and the value
        loss ``criterion(target, value) * value_weight`` (when ``value``) of one minibatch.

        Each actor of a row (RogueNet) or each row (dense actors) is one *unit*: it gets its
        row's advantage, normalised over the rows that have units; rows without actors add
        nothing. With ``value_clip``, predictions stay within it of the stored values.
        """
        cfg = self.config
        if policy and value:
            result, predicted = self._eval_act_and_criticize(batch.state, batch.action)
        elif policy:
            result = self.eval_act(batch.state, batch.action)
        else:
            predicted = self.criticize(batch.state)  # [b, 1]
        policy_loss = value_loss = entropy = approx_kl = clip_fraction = None
        parts: Dict[str, torch.Tensor] = {}
        if policy:
            units = units_of(result, batch.n_rows, cfg.entropy_weight is not None, f"{type(self).__name__}.update")
            advantage = batch.advantage.reshape(-1)  # [b]
            if cfg.normalize_advantage:
                normalize = normalized if self.data_parallel is None else self.data_parallel.normalized
                advantage = normalize(advantage.to(units.log_prob.device), units.row)
            objective, entropy, approx_kl, clip_fraction = self._policy_terms(units, old, advantage)
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
        n_units = units.log_prob.shape[0] if policy else 0
        return self.data_parallel.weigh(losses, n_units, batch.n_rows, self.criterion)

    def _policy_terms(self, units: Units, old: Optional[torch.Tensor], advantage: torch.Tensor
                      ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor], Optional[torch.Tensor]]:
        """``(objective, mean entropy, approx KL, clip fraction)`` over the units of a minibatch.

        With no unit at all the objective is a differentiable zero (and the diagnostics zero).

        Shape:
            advantage: ``[B]`` row advantages; ``old``: ``[n_units]`` or None.
        """
        log_prob = units.log_prob  # [n_units]
        advantage = advantage.to(log_prob.device, log_prob.dtype)  # [B]
        if units.row is not None:
            advantage = advantage[units.row]  # [n_units]: each actor gets its row's advantage
        n_units = log_prob.shape[0]
        entropy = None if units.entropy is None or n_units == 0 else units.entropy.mean()
        if n_units == 0:
            zero = log_prob.sum() * 0.0
            diagnostic = None if old is None else zero.detach()
            return zero, entropy, diagnostic, diagnostic
        ratio = approx_kl = None
        if old is not None:
            log_ratio = log_prob - old.to(log_prob.device)  # [n_units]
            ratio = log_ratio.exp()  # [n_units]: r = exp(log_prob - old_log_prob)
            with torch.no_grad():
                approx_kl = ((ratio - 1.0) - log_ratio).mean()
        objective, clip_fraction = self._objective(log_prob, ratio, advantage)
        return objective, entropy, approx_kl, clip_fraction

    def _objective(self, log_prob: torch.Tensor, ratio: Optional[torch.Tensor], advantage: torch.Tensor
                   ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """A2C's policy-gradient objective ``mean(log_prob * A)`` over units (maximised), and no
        clip fraction.

        Shape:
            log_prob, advantage: ``[n_units]``; ratio: ``[n_units]`` (unused here) or None when
            there are no old log-probabilities.
        """
        return (log_prob * advantage).mean(), None

    def _step(self, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor],
              policy_parts: Dict[str, torch.Tensor], guard: InterruptGuard, non_finite: Dict[str, None],
              tally: Dict[str, List[int]]) -> None:
        """Steps the optimizer(s) on one minibatch's losses, counting steps in ``tally``.

        One backward pass over the sum of the losses serves every optimizer: separate actor and
        critic have disjoint parameters, so each gets exactly the gradients of its own loss. One
        host sync then decides, per optimizer, whether its loss and gradients are finite; a step
        that is not is skipped with a warning naming the term (its parameters and optimizer state
        stay untouched), and the term is added to ``non_finite``. ``tally[step.what]`` counts
        ``[attempted, skipped]`` steps per optimizer (``"actor"``, ``"critic"`` or ``"shared"``).
        The steps of the minibatch run inside ``guard.step``: a Ctrl-C arriving meanwhile is
        raised once all of them are done.
        """
        steps = self._optimizer_steps(policy_loss, value_loss)
        if not steps:
            return
        for step in steps:
            zero_grad(step.optimizer)
        terms = [t for step in steps for t in step.terms.values()]
        total = terms[0]
        for term in terms[1:]:  # not sum(terms): its 0 + first term is one more node to run both ways
            total = total + term
        total.backward()
        if self.data_parallel is not None:
            self.data_parallel.average_gradients([p for step in steps for p in step.params], terms)
        with_grad = [[p for p in step.params if p.grad is not None] for step in steps]
        norms = total_norms([[p.grad for p in ps] for ps in with_grad])
        flags = iter(finite_flags(terms + [n for n in norms if n is not None]))
        term_ok = [[next(flags) for _ in step.terms] for step in steps]
        norm_ok = [norm is None or next(flags) for norm in norms]
        clipped: List[Tuple[List[nn.Parameter], torch.Tensor]] = []  # (parameters, gradient norm) of the steps taken
        taken: List[_Step] = []
        with guard.step:  # every step of the minibatch, or none
            for step, ok, ps, norm, grads_ok in zip(steps, term_ok, with_grad, norms, norm_ok):
                counts = tally.setdefault(step.what, [0, 0])
                counts[0] += 1
                if all(ok) and grads_ok:
                    taken.append(step)
                    if norm is not None:
                        clipped.append((ps, norm))
                    continue
                zero_grad(step.optimizer)
                counts[1] += 1
                names = _non_finite_terms(step, ok, policy_parts) if not all(ok) else \
                    [f"gradients of {' + '.join(step.terms)}"]
                non_finite.update(dict.fromkeys(names))
                warnings.warn(
                    f"{type(self).__name__}.update: non-finite {', '.join(names)}; skipped this {step.what} step "
                    "(parameters and optimizer state unchanged)", RuntimeWarning, stacklevel=4,
                )
            if clipped and math.isfinite(self.config.gradient_max):
                clip_grads(clipped, self.config.gradient_max)
            for step in taken:
                step.optimizer.step()

    def _optimizer_steps(self, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor]
                         ) -> List[_Step]:
        policy = {} if policy_loss is None else {"policy loss": policy_loss}
        value = {} if value_loss is None else {"value loss": value_loss}
        if self.shared_parameters:
            return [_Step(self.actor_optim, self._params, {**policy, **value}, "shared")] if policy or value else []
        return ([_Step(self.actor_optim, self._actor_params, policy, "actor")] if policy else []) + \
            ([_Step(self.critic_optim, self._critic_params, value, "critic")] if value else [])

    def _visualize(self, losses: Losses) -> None:
        directory = self.config.visualize_dir or getattr(self.writer, "log_dir", "") or ""
        for loss, graph in ((losses.policy, "actor"), (losses.value, "critic")):
            if loss is not None and graph not in self._visualized:
                self._visualized.add(graph)
                write_graph(loss, graph, directory, self.writer)


def _non_finite_terms(step: _Step, ok: List[bool], policy_parts: Dict[str, torch.Tensor]) -> List[str]:
    """Names of the step's non-finite terms; a policy loss is traced to its surrogate or entropy."""
    bad = [n for n, good in zip(step.terms, ok) if not good]
    if "policy loss" in bad:  # a rare path: extra host syncs are fine
        parts = [n for n, t in policy_parts.items() if not bool(torch.isfinite(t.detach()).all())]
        bad = [*(parts or ["policy loss"]), *(n for n in bad if n != "policy loss")]
    return bad
