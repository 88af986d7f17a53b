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
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

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


def _finite(values: Dict[str, torch.Tensor]) -> Tuple[bool, List[str]]:
    """Checks several scalar tensors with one host sync; returns (all finite, bad names)."""
    names = list(values)
    flags = torch.stack([torch.isfinite(values[n].detach()).all().cpu() for n in names]).tolist()
    bad = [n for n, ok in zip(names, flags) if not ok]
    return not bad, bad


def _step(frame: Any, optimizer: Any, params: Sequence[torch.nn.Parameter], terms: Dict[str, torch.Tensor],
          what: str) -> bool:
    """Backward + clip + step on the sum of ``terms``; returns False (and warns) if skipped."""
    ok, bad = _finite(terms)
    name = type(frame).__name__
    if not ok:
        warnings.warn(
            f"{name}.update: non-finite {', '.join(bad)}; skipped this {what} step (parameters and "
            "optimizer state unchanged)", RuntimeWarning, stacklevel=4,
        )
        return False
    optimizer.zero_grad(set_to_none=True)
    sum(terms.values()).backward()
    grads = [p.grad for p in params if p.grad is not None]
    if grads:
        norm = torch.nn.utils.get_total_norm(grads)
        if not bool(torch.isfinite(norm)):
            optimizer.zero_grad(set_to_none=True)
            warnings.warn(
                f"{name}.update: non-finite gradients of {' + '.join(terms)}; skipped this {what} step "
                "(parameters and optimizer state unchanged)", RuntimeWarning, stacklevel=4,
            )
            return False
        if math.isfinite(frame.config.gradient_max):
            torch.nn.utils.clip_grads_with_norm_([p for p in params if p.grad is not None],
                                                 frame.config.gradient_max, norm)
    optimizer.step()
    return True


def _mean(values: List[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def run_update(frame: Any, update_value: bool, update_policy: bool) -> UpdateStats:
    """Runs one update of ``frame`` over its buffer; see the module docstring."""
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
    frame.actor.train()
    frame.critic.train()
    policy_losses, value_losses, entropies, kls, clips = [], [], [], [], []
    skipped, stopped = 0, False
    ran = 0
    for i, rows in enumerate(schedule):
        index = torch.from_numpy(rows)  # [b]
        mb_state = state[index]
        policy_loss = value_loss = None
        if i < n_policy:
            units = units_of(frame.eval_act(mb_state, action[index]), rows.shape[0],
                             cfg.entropy_weight is not None, f"{name}.update")
            adv = advantage[index.to(advantage.device)].reshape(-1)  # [b]
            if cfg.normalize_advantage:
                adv = normalized(adv.to(units.log_prob.device), units.row, units.per_actor is not None)
            old_mb = None if old is None else old_units(old, torch.from_numpy(position[rows]))
            terms = policy_terms(units, old_mb, adv, clip)
            if cfg.target_kl is not None and terms.approx_kl is not None and float(terms.approx_kl) > cfg.target_kl:
                stopped = True
                break
            policy_loss = -terms.surrogate
            if cfg.entropy_weight is not None and terms.entropy is not None:
                policy_loss = policy_loss + cfg.entropy_weight * terms.entropy
            for values, term in ((entropies, terms.entropy), (kls, terms.approx_kl), (clips, terms.clip_fraction)):
                if term is not None:
                    values.append(float(term.detach()))
        if i < n_value:
            value = frame.criticize(mb_state)  # [b, 1]
            goal = target[index.to(target.device)].to(value.device, value.dtype)  # [b, 1]
            if cfg.value_clip is not None:
                before = old_value[index.to(old_value.device)].to(value.device, value.dtype)  # [b, 1]
                value = before + (value - before).clamp(-cfg.value_clip, cfg.value_clip)  # [b, 1]
            value_loss = frame.criterion(goal, value.reshape(goal.shape)) * cfg.value_weight
        ran += 1
        if cfg.visualize:
            _visualize(frame, policy_loss, value_loss)
        for loss, losses in ((policy_loss, policy_losses), (value_loss, value_losses)):
            if loss is not None and math.isfinite(float(loss.detach())):
                losses.append(float(loss.detach()))
        skipped += _apply(frame, policy_loss if update_policy else None, value_loss if update_value else None)
    frame.actor.eval()
    frame.critic.eval()
    lr = frame.optimizers[0].param_groups[0]["lr"]
    return UpdateStats(_mean(policy_losses), _mean(value_losses), _mean(entropies), _mean(kls), _mean(clips),
                       float(lr), skipped, ran, stopped)


def _apply(frame: Any, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor]) -> int:
    """Steps the optimizer(s); returns the number of steps skipped."""
    if frame.shared_parameters:
        terms = {}
        if policy_loss is not None:
            terms["policy loss"] = policy_loss
        if value_loss is not None:
            terms["value loss"] = value_loss
        if not terms:
            return 0
        return 0 if _step(frame, frame.actor_optim, frame._params, terms, "shared") else 1
    skipped = 0
    if policy_loss is not None:
        skipped += not _step(frame, frame.actor_optim, frame._actor_params, {"policy loss": policy_loss}, "actor")
    if value_loss is not None:
        skipped += not _step(frame, frame.critic_optim, frame._critic_params, {"value loss": value_loss}, "critic")
    return skipped


def _visualize(frame: Any, policy_loss: Optional[torch.Tensor], value_loss: Optional[torch.Tensor]) -> None:
    directory = frame.config.visualize_dir or getattr(frame.writer, "log_dir", "") or ""
    for loss, graph in ((policy_loss, "actor"), (value_loss, "critic")):
        if loss is not None and graph not in frame._visualized:
            frame._visualized.add(graph)
            write_graph(loss, graph, directory, frame.writer)
