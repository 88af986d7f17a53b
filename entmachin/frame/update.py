"""One ``update()`` of A2C / PPO: minibatches over the stored rows, losses, guarded steps.

The rows are read once (``sample_method="all"``). The minibatch schedule walks shuffled
epochs: each epoch is a fresh permutation of the rows cut into ``ceil(N / batch_size)``
near-equal minibatches (so none is much smaller than the others), and minibatch ``i`` of the
update serves both the policy step (while ``i < actor_update_times``) and the value step
(while ``i < critic_update_times``). Old log-probabilities, where needed, are computed before
the first step in batched passes over the rows the schedule visits, with the actor as it is.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import torch

from entmachin.frame.interrupts import InterruptGuard
from entmachin.frame.losses import OldLogProbs, Units, cat_old, normalized, old_units, policy_terms, units_of
from entmachin.frame.summary import UpdateStats, write_graph

__all__ = ["minibatch_schedule", "run_update"]

# Rows per no-grad pass when computing old log-probabilities (at least batch_size).
_OLD_LOG_PROB_ROWS = 4096


def minibatch_schedule(n_rows: int, batch_size: int, n_minibatches: int, rng: np.random.Generator) -> List[np.ndarray]:
    """``n_minibatches`` int64 index arrays walking shuffled epochs over ``n_rows`` rows.

    Within an epoch no row repeats; every epoch is a new permutation cut into
    ``ceil(n_rows / batch_size)`` near-equal parts.
    """
    per_epoch = max(1, math.ceil(n_rows / batch_size))
    out: List[np.ndarray] = []
    while len(out) < n_minibatches:
        permutation = rng.permutation(n_rows).astype(np.int64)  # [N]
        out.extend(np.array_split(permutation, per_epoch))
    return out[:n_minibatches]


def _old_log_probs(frame: Any, state: Any, action: Any, rows: np.ndarray) -> OldLogProbs:
    """Log-probabilities of the stored actions at ``rows`` (sorted), without gradients."""
    chunk = max(frame.config.batch_size, _OLD_LOG_PROB_ROWS)
    parts: List[Units] = []
    with torch.no_grad():
        for start in range(0, rows.shape[0], chunk):
            index = torch.from_numpy(rows[start : start + chunk])  # [chunk]
            result = frame.eval_act(state[index], action[index])
            parts.append(units_of(result, index.shape[0], False, f"{type(frame).__name__}.update"))
    return cat_old(parts)


def _flags(values: List[torch.Tensor]) -> List[bool]:
    """Whether each scalar tensor is finite, with one host sync for all of them."""
    if not values:
        return []
    first = values[0]
    if all(v.dtype == first.dtype and v.device == first.device for v in values):
        return torch.isfinite(torch.stack([v.detach().reshape(()) for v in values])).tolist()
    return torch.stack([torch.isfinite(v.detach()).all().cpu() for v in values]).tolist()


class _Step(NamedTuple):
    """One optimizer's share of a minibatch: the loss terms it trains on and its parameters."""

    optimizer: Any
    params: Sequence[torch.nn.Parameter]
    terms: Dict[str, torch.Tensor]
    what: str


def _steps(frame: Any, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor]) -> List[_Step]:
    policy = {} if policy_loss is None else {"policy loss": policy_loss}
    value = {} if value_loss is None else {"value loss": value_loss}
    if frame.shared_parameters:
        return [_Step(frame.actor_optim, frame._params, {**policy, **value}, "shared")] if policy or value else []
    return ([_Step(frame.actor_optim, frame._actor_params, policy, "actor")] if policy else []) + \
        ([_Step(frame.critic_optim, frame._critic_params, value, "critic")] if value else [])


def _non_finite_terms(step: _Step, ok: List[bool], policy_parts: Dict[str, Optional[torch.Tensor]]) -> List[str]:
    """Names of the step's non-finite terms; a policy loss is traced to its surrogate or entropy."""
    bad = [n for n, good in zip(step.terms, ok) if not good]
    if "policy loss" in bad:  # a rare path: extra host syncs are fine
        parts = [n for n, t in policy_parts.items() if t is not None and not bool(torch.isfinite(t.detach()).all())]
        bad = [*(parts or ["policy loss"]), *(n for n in bad if n != "policy loss")]
    return bad


def _apply(frame: Any, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor],
           policy_parts: Dict[str, Optional[torch.Tensor]], guard: InterruptGuard, non_finite: Dict[str, None],
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
    steps = _steps(frame, policy_loss, value_loss)
    if not steps:
        return
    for step in steps:
        step.optimizer.zero_grad(set_to_none=True)
    terms = [t for step in steps for t in step.terms.values()]
    sum(terms).backward()
    with_grad = [[p for p in step.params if p.grad is not None] for step in steps]
    norms = [torch.nn.utils.get_total_norm([p.grad for p in ps]) if ps else None for ps in with_grad]
    flags = iter(_flags(terms + [n for n in norms if n is not None]))
    term_ok = [[next(flags) for _ in step.terms] for step in steps]
    norm_ok = [norm is None or next(flags) for norm in norms]
    with guard.step:  # every step of the minibatch, or none
        for step, ok, ps, norm, grads_ok in zip(steps, term_ok, with_grad, norms, norm_ok):
            counts = tally.setdefault(step.what, [0, 0])
            counts[0] += 1
            if all(ok) and grads_ok:
                if norm is not None and math.isfinite(frame.config.gradient_max):
                    torch.nn.utils.clip_grads_with_norm_(ps, frame.config.gradient_max, norm)
                step.optimizer.step()
                continue
            step.optimizer.zero_grad(set_to_none=True)
            counts[1] += 1
            names = _non_finite_terms(step, ok, policy_parts) if not all(ok) else \
                [f"gradients of {' + '.join(step.terms)}"]
            non_finite.update(dict.fromkeys(names))
            warnings.warn(
                f"{type(frame).__name__}.update: non-finite {', '.join(names)}; skipped this {step.what} step "
                "(parameters and optimizer state unchanged)", RuntimeWarning, stacklevel=4,
            )


def _mean(values: List[torch.Tensor]) -> float:
    """Mean of the finite values among scalar tensors (nan if none), with one host sync."""
    if not values:
        return math.nan
    stacked = torch.stack([v.reshape(()).float() for v in values]).cpu().double()  # [n]
    finite = stacked[torch.isfinite(stacked)]  # [n_finite]
    return float(finite.mean()) if finite.numel() else math.nan


def run_update(frame: Any, update_value: bool, update_policy: bool, guard: Optional[InterruptGuard] = None,
               *, entropy_scale: float = 1.0) -> UpdateStats:
    """Runs one update of ``frame`` over its buffer; see the module docstring.

    ``entropy_scale`` multiplies ``entropy_weight`` (the annealing of ``anneal_entropy``).

    Changes only the models' parameters and the optimizers' states, minibatch by minibatch
    (each minibatch's steps inside ``guard.step``), and the frame's shuffling generator; the
    buffer and the frame's counters are the caller's to update. Actor and critic are back in
    eval mode when it returns or raises.
    """
    guard = InterruptGuard() if guard is None else guard  # not entered: steps are not deferred
    cfg = frame.config
    name = type(frame).__name__
    n_rows = frame.replay_buffer.size()
    if n_rows == 0:
        raise RuntimeError(
            f"{name}.update: the replay buffer is empty; store transitions with store_episode or "
            "store_rollout before calling update()"
        )
    _, (state, action, target, advantage) = frame.replay_buffer.sample_batch(
        n_rows, sample_method="all", sample_attrs=["state", "action", "value", "gae"]
    )
    old_value = target - advantage  # [N, 1]: the critic's values when the rows were stored
    n_policy, n_value = cfg.actor_update_times, cfg.critic_update_times
    schedule = minibatch_schedule(n_rows, cfg.batch_size, max(n_policy, n_value), frame._rng)
    clip = getattr(cfg, "surrogate_loss_clip", None)
    old: Optional[OldLogProbs] = None
    position = None
    if n_policy and frame._needs_old_log_probs():
        visited = np.unique(np.concatenate(schedule[:n_policy]))  # [n_visited]
        old = _old_log_probs(frame, state, action, visited)
        position = np.full(n_rows, -1, dtype=np.int64)  # [N]: row -> place in `visited`
        position[visited] = np.arange(visited.shape[0])
    policy_losses, value_losses, entropies, kls, clips = [], [], [], [], []
    stopped, ran = False, 0
    non_finite: Dict[str, None] = {}  # an ordered set
    tally: Dict[str, List[int]] = {}
    try:
        with guard.step:  # modes switch whole (Module.train recurses in Python)
            frame.actor.train()
            frame.critic.train()
        for i, rows in enumerate(schedule):
            index = torch.from_numpy(rows)  # [b]
            mb_state = state[index]
            policy_loss = value_loss = None
            policy_parts: Dict[str, Optional[torch.Tensor]] = {}
            if i < n_policy and i < n_value:
                result, value = frame._eval_act_and_criticize(mb_state, action[index])
            elif i < n_policy:
                result = frame.eval_act(mb_state, action[index])
            else:
                value = frame.criticize(mb_state)  # [b, 1]
            if i < n_policy:
                units = units_of(result, rows.shape[0], cfg.entropy_weight is not None, f"{name}.update")
                adv = advantage[index.to(advantage.device)].reshape(-1)  # [b]
                if cfg.normalize_advantage:
                    adv = normalized(adv.to(units.log_prob.device), units.row)
                old_mb = None if old is None else old_units(old, torch.from_numpy(position[rows]))
                terms = policy_terms(units, old_mb, adv, clip)
                if cfg.target_kl is not None and terms.approx_kl is not None and float(terms.approx_kl) > cfg.target_kl:
                    stopped = True
                    break
                policy_loss = -terms.surrogate
                policy_parts["policy loss"] = policy_loss
                if cfg.entropy_weight is not None and terms.entropy is not None:
                    policy_loss = policy_loss + cfg.entropy_weight * entropy_scale * terms.entropy
                    policy_parts["entropy"] = terms.entropy
                for values, term in ((entropies, terms.entropy), (kls, terms.approx_kl), (clips, terms.clip_fraction)):
                    if term is not None:
                        values.append(term.detach())
            if i < n_value:
                goal = target[index.to(target.device)].to(value.device, value.dtype)  # [b, 1]
                if cfg.value_clip is not None:
                    before = old_value[index.to(old_value.device)].to(value.device, value.dtype)  # [b, 1]
                    value = before + (value - before).clamp(-cfg.value_clip, cfg.value_clip)  # [b, 1]
                value_loss = frame.criterion(goal, value.reshape(goal.shape)) * cfg.value_weight
            ran += 1
            if cfg.visualize:
                _visualize(frame, policy_loss, value_loss)
            for loss, losses in ((policy_loss, policy_losses), (value_loss, value_losses)):
                if loss is not None:
                    losses.append(loss.detach())
            _apply(frame, policy_loss if update_policy else None, value_loss if update_value else None,
                   policy_parts, guard, non_finite, tally)
    finally:
        with guard.step:
            frame.actor.eval()
            frame.critic.eval()
    lr = frame.optimizers[0].param_groups[0]["lr"]
    return UpdateStats(_mean(policy_losses), _mean(value_losses), _mean(entropies), _mean(kls), _mean(clips),
                       _explained_variance(target, old_value), float(lr), sum(c[1] for c in tally.values()), ran, stopped,
                       {what: (c[0], c[1]) for what, c in tally.items()}, tuple(non_finite))


def _explained_variance(target: torch.Tensor, value: torch.Tensor) -> float:
    """``1 - Var(target - value) / Var(target)`` over every stored row (CleanRL's diagnostic)."""
    variance = float(target.var(unbiased=False))
    if not variance > 0:
        return math.nan
    return 1.0 - float((target - value).var(unbiased=False)) / variance


def _visualize(frame: Any, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor]) -> None:
    directory = frame.config.visualize_dir or getattr(frame.writer, "log_dir", "") or ""
    for loss, graph in ((policy_loss, "actor"), (value_loss, "critic")):
        if loss is not None and graph not in frame._visualized:
            frame._visualized.add(graph)
            write_graph(loss, graph, directory, frame.writer)
