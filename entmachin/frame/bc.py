"""Behaviour cloning: a RogueNet actor (and its critic) trained on recorded rows.

``store_rows(state, action, returns, probs=None)`` holds rows; ``update()`` is A2C's (the same
guard, optimizer steps and commit) over them: ``actor_update_times`` / ``critic_update_times``
minibatches of ``batch_size`` rows, shuffled epochs, then the rows are let go. Each minibatch's policy loss is the mean,
over every actor of every action (the units of PPO and A2C), of the negative log-likelihood of
what it did: for a discrete action the negative log-probability of the recorded choice under its
mask, plus ``distill_weight`` times the cross-entropy from the recorded probabilities where the
rows carry them; for a continuous action the negative log-density of the recorded values within
the actor's bounds (no distillation: it has no table). One pass of the trunk scores both kinds
(``RogueNet.log_probabilities(..., continuous=...)``). The value loss fits the critic to the
recorded discounted returns. The class is an ``A2C`` for everything else (checkpoints, ``act``,
evaluation, the optimizers and their steps).

A network with memory (``model.memory``) trains on whole episodes: ``store_rows(..., episodes=ids)`` holds
each episode's rows together in step order, an update's minibatches are ``batch_size // L`` sequences of
``frame.sequence_length`` steps (``L``; null: whole episodes), each started from the state the current
network reaches over its episode's earlier steps, and padded rows weigh nothing
(``entmachin.frame.bc_sequences``).
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

import numpy as np
import torch

from entmachin.env.action import CONTINUOUS_SPACES
from entmachin.frame import bc_sequences as seq
from entmachin.frame.a2c import A2C
from entmachin.frame.config import BCConfig
from entmachin.frame.gae import explained_variance, mean_of
from entmachin.frame.rollout import minibatch_schedule
from entmachin.frame.stepping import UpdateSteps
from entmachin.frame.summary import UpdateStats
from entmachin.model.input_norm import collecting_stats_of
from entmachin.model.rogue_net import RogueNet
from entmachin.model.wrappers import unwrap
from entmachin.ragged.arrays import take_nested
from entmachin.ragged.trees import take as take_rows
from entmachin.ragged.tensor import RaggedTensor

__all__ = ["BC", "Held"]


class Held:
    """Rows held for training: a canonical state, the recorded actions (int64 ragged
    ``[n_actors, 1]`` choices, float32 ragged ``[n_actors, n_values]`` continuous values), the
    value targets, where recorded each actor's probabilities of a discrete action (numpy and
    entmachin's ragged arrays) and, for a network with memory, each row's episode (int64 ``[n]``,
    each episode's rows together in step order)."""

    def __init__(self, state: Mapping[str, Any], action: Mapping[str, Any], returns: np.ndarray,
                 probs: Optional[Mapping[str, Any]], episodes: Optional[np.ndarray] = None) -> None:
        self.state, self.action, self.returns, self.probs = state, dict(action), returns, dict(probs or {})
        self.episodes = episodes
        self.n_rows = len(returns)

    def take(self, index: np.ndarray) -> "Held":
        probs = {name: take_nested(per_actor, self.action[name], index) for name, per_actor in self.probs.items()}
        return Held(take_rows(self.state, index), take_rows(self.action, index), self.returns[index], probs,
                    None if self.episodes is None else self.episodes[index])


class BC(A2C):
    """Behaviour cloning (see the module docstring); ``actor`` must be a ``RogueNet``.

    Args:
        actor: the policy (a ``RogueNet``).
        critic: its value function (``net.critic()`` or another module).
        optimizer: optimizer class, as A2C's.
        criterion: value loss, as A2C's.

    Raises:
        TypeError: the actor is not a RogueNet (behaviour cloning needs its probability tables).
    """

    _config_cls = BCConfig

    def _init(self, actor: Any, critic: Any, optimizer: Any, criterion: Any, config: BCConfig, **rest: Any) -> None:
        if not isinstance(unwrap(actor), RogueNet):
            raise TypeError(f"BC: the actor is a {type(unwrap(actor)).__name__}; behaviour cloning trains a RogueNet "
                            "(its probability tables)")
        super()._init(actor, critic, optimizer, criterion, config, **rest)
        self._held: Optional[Held] = None

    # -------------------------------------------------------------------------- rows

    def store_rows(self, state: Mapping[str, Any], action: Mapping[str, Any], returns: Any,
                   probs: Optional[Mapping[str, Any]] = None, episodes: Any = None) -> None:
        """Holds rows for the next ``update()`` (replacing rows not trained on yet).

        Args:
            state: the canonical state of ``n`` rows (ragged arrays).
            action: action name -> int64 ragged ``[n_actors, 1]``: each actor's recorded choice;
                float ragged ``[n_actors, n_values]`` for a continuous action: its recorded values.
            returns: float ``[n]``: the discounted return that followed each row.
            probs: discrete action name -> float32 ragged ``[n_choices, 1]``, one sequence per
                actor: the recorded policy's probabilities (optional).
            episodes: int ``[n]``: each row's episode, the rows of each together in step order (required
                with memory, which trains on sequences of them; ignored without). With per-entity memory
                ``state['entity_handles']`` numbers each row's entities in their episode
                (``bc_sequences.entity_handles`` of the recorded ids).

        Raises:
            ValueError: the network has memory and ``episodes`` is missing or keeps an episode's rows apart, or
                keeps a state per entity and ``state`` has no ``entity_handles``.
        """
        returns = np.asarray(returns, dtype=np.float32).reshape(-1)
        if self._memory:
            if episodes is None:
                raise ValueError("BC.store_rows: this network has memory (model.memory), which trains on sequences "
                                 "of episodes; pass episodes=ids (int [n]: each row's episode, in step order)")
            episodes = seq.check_episodes(episodes, len(returns), "BC.store_rows")
            if unwrap(self.actor).entity_memory_size and "entity_handles" not in state:
                raise ValueError("BC.store_rows: this network keeps a state per entity (model.memory.per_entity); "
                                 "pass state['entity_handles'] (bc_sequences.entity_handles of the recorded ids)")
        self._held = Held(state, action, returns, probs, episodes if self._memory else None)

    def learn_input_statistics(self, held: Held, rows_per_pass: int = 4096) -> None:
        """The running input statistics of the actor (and of a separate critic) learn from ``held``'s
        rows, once, before training: the network then trains on inputs normalised as PPO started
        from it (``train.init_from``) will normalise them, and acting rows are on the data's scale. The rows
        go through the networks ``rows_per_pass`` at a time, without gradients."""
        net = unwrap(self.actor)
        norms = self._actor_norms + self._critic_only_norms
        with torch.no_grad(), collecting_stats_of(norms):
            for start in range(0, held.n_rows, rows_per_pass):
                part = held.take(np.arange(start, min(start + rows_per_pass, held.n_rows)))
                # the inputs' statistics do not depend on the state: each row from a fresh one
                fresh = seq.fresh_states(part.n_rows, self._memory, part.state.get("entity_handles"),
                                         net.entity_memory_size) if self._memory else {}
                net.log_probabilities(part.state["entities"], part.state["action_masks"], part.state.get("visible"),
                                      continuous=self._continuous(part), **fresh)
                if self._critic_only_norms:
                    self.criticize(part.state)

    def _continuous(self, held: Held) -> Dict[str, Any]:
        """The recorded values of the continuous actions of ``held``'s masks, as
        ``log_probabilities`` scores them (action name -> float ragged ``[n_actors, n_values]``)."""
        space = unwrap(self.actor).action_space
        return {name: held.action[name] for name in held.state["action_masks"]
                if isinstance(space[name], CONTINUOUS_SPACES)}

    # -------------------------------------------------------------------------- update

    def _rows_to_train(self, name: str) -> Held:
        held = self._held
        if held is None or held.n_rows == 0:
            raise RuntimeError(f"{name}: no rows; store_rows(...) first")
        return held

    def _let_go_of_rows(self) -> None:
        self._held = None

    def _inputs_checked_when_stored(self) -> Any:
        return contextlib.nullcontext()  # store_rows does not check values: the networks do

    def _train(self, held: Held, steps: UpdateSteps, update_value: bool, update_policy: bool,
               entropy_scale: float) -> UpdateStats:
        """The minibatches of one update over the held rows (``A2C.update`` commits it): minibatch ``i`` of
        shuffled epochs trains the policy while ``i < actor_update_times`` and the value while
        ``i < critic_update_times``; what they measured. With memory a minibatch is whole sequences
        (``entmachin.frame.bc_sequences``)."""
        cfg = self.config
        n_policy = cfg.actor_update_times if update_policy else 0
        n_value = cfg.critic_update_times if update_value else 0
        n_minibatches = max(n_policy, n_value, 1)
        w = seq.windows(held.episodes, cfg.sequence_length) if self._memory else None
        if w is not None:  # batch_size // L whole sequences a minibatch
            schedule = minibatch_schedule(len(w.first), max(1, cfg.batch_size // w.length), n_minibatches, self._rng)
        else:
            schedule = minibatch_schedule(held.n_rows, cfg.batch_size, n_minibatches, self._rng)
        seen: Dict[str, list] = {"policy": [], "value": [], "entropy": []}
        targets, values = [], []
        with self._training(steps.guard):
            for i, picks in enumerate(schedule):
                batch, recurrent, valid = self._minibatch_of(held, w, picks) if w is not None else \
                    (held.take(picks), {}, None)
                policy, value, predicted, entropy = self._losses(batch, i < n_policy, i < n_value, recurrent, valid)
                for key, loss in (("policy", policy), ("value", value), ("entropy", entropy)):
                    if loss is not None:
                        seen[key].append(loss.detach())
                if predicted is not None:
                    targets.append(torch.from_numpy(batch.returns if valid is None else batch.returns[valid.numpy()]))
                    values.append(predicted.detach().reshape(-1).cpu())
                steps.step(self._optimizer_steps(policy, value), {} if policy is None else {"policy loss": policy})
        variance = explained_variance(torch.cat(targets), torch.cat(values)) if targets else float("nan")
        return UpdateStats(mean_of(seen["policy"]), mean_of(seen["value"]), mean_of(seen["entropy"]),
                           float("nan"), float("nan"), variance, float(self.optimizers[0].param_groups[0]["lr"]),
                           steps.skipped, len(schedule), False, {what: (c[0], c[1]) for what, c in steps.tally.items()},
                           tuple(steps.non_finite))

    def _minibatch_of(self, held: Held, w: seq.Windows, picks: np.ndarray
                      ) -> Tuple[Held, Dict[str, Any], torch.Tensor]:
        """The rows of sequences ``picks`` of ``w``, time-major; their recurrent keywords (each sequence's
        state recomputed); and bool ``[L * S]``: the real steps (the others pad)."""
        batch = seq.sequence_batch(w, picks)
        recurrent = seq.recurrent_inputs(unwrap(self.actor), held, batch)
        return held.take(batch.rows), recurrent, torch.from_numpy(batch.valid)

    def _losses(self, batch: Held, policy: bool, value: bool, recurrent: Optional[Mapping[str, Any]] = None,
                valid: Optional[torch.Tensor] = None) -> Tuple[Optional[torch.Tensor], ...]:
        """``(policy loss, value loss, predicted values, entropy)`` of a minibatch (None where not computed);
        ``recurrent``: the memory's keywords; ``valid``: bool ``[B]``, the rows the losses count (None: all)."""
        net = unwrap(self.actor)
        state, recurrent = batch.state, recurrent or {}
        joint = value and self._joint
        tables, predicted = net.log_probabilities(state["entities"], state["action_masks"], state.get("visible"),
                                                  value=joint, continuous=self._continuous(batch), **recurrent) \
            if policy else ({}, None)
        if value and predicted is None:
            predicted = net.value(state["entities"], None, **recurrent) if recurrent else self.criticize(state)
        policy_loss = entropy = None
        if policy:
            policy_loss, entropy = self._cloning_loss(tables, batch, valid)
        value_loss = None
        if value:
            returns = batch.returns if valid is None else batch.returns[valid.numpy()]
            predicted = predicted if valid is None else predicted[valid.to(predicted.device)]
            goal = torch.from_numpy(returns).to(predicted.device, predicted.dtype).reshape(-1, 1)  # [b, 1]
            value_loss = self.criterion(goal, predicted.reshape(goal.shape)) * self.config.value_weight
        return policy_loss, value_loss, predicted, entropy

    def _cloning_loss(self, tables: Mapping[str, RaggedTensor], batch: Held, valid: Optional[torch.Tensor] = None,
                      ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Per actor: ``-log p(recorded choice) + distill_weight * H(recorded probs, p)`` (discrete),
        ``-log p(recorded values)`` (continuous); the mean over every actor of every action (of the
        ``valid`` rows, bool ``[B]``, where given), and the mean entropy of the discrete actors' tables
        (None without any: a continuous head's entropy is not part of the loss and is not estimated here)."""
        space = unwrap(self.actor).action_space
        nll, cross, entropies = [], [], []
        for name, table in tables.items():
            log_p = table.data  # [n_actors, width]; continuous: [n_actors, 1], the recorded values' log-density
            keep = None if valid is None else valid.to(log_p.device)[table.batch_index]  # [n_actors]
            if keep is not None:
                log_p = log_p[keep]  # [n_kept, width]
            if log_p.shape[0] == 0:
                continue
            if isinstance(space[name], CONTINUOUS_SPACES):
                nll.append(-log_p[:, 0])  # [n_actors]
                continue
            chosen = torch.from_numpy(batch.action[name].as_array()[:, 0].copy()).to(log_p.device)  # [n_actors]
            chosen = chosen if keep is None else chosen[keep]
            nll.append(-log_p.gather(1, chosen[:, None])[:, 0])
            finite = log_p.masked_fill(~torch.isfinite(log_p), 0.0)
            entropies.append(-(log_p.exp() * finite).sum(dim=1))
            recorded = batch.probs.get(name)
            if recorded is not None and self.config.distill_weight > 0:
                target = _padded(recorded, table.data.shape[1]).to(log_p.device)  # [n_actors, width]
                target = target if keep is None else target[keep]
                cross.append(-(target * finite).sum(dim=1))
        if not nll:  # no actor in the minibatch: a differentiable zero
            zero = next(iter(tables.values())).data.sum() * 0.0
            return zero, zero.detach()
        loss = torch.cat(nll).mean()
        if cross:
            loss = loss + self.config.distill_weight * torch.cat(cross).mean()
        return loss, torch.cat(entropies).mean() if entropies else None

    def accuracy(self, held: Held, rows_per_pass: int = 4096) -> Tuple[float, float]:
        """``(mean negative log-likelihood, share of discrete actors whose most likely choice is
        the recorded one)`` of ``held``'s rows, without gradients (the validation figures). The mean covers
        every actor of every action (a continuous actor's term is the negative log-density of its
        recorded values); the share counts discrete actors only (NaN without any: continuous
        values have no most likely choice to hit). Without memory, all rows go in one pass; with memory, each
        episode is unrolled whole from its start (``held.episodes``), about ``rows_per_pass`` rows a pass."""
        net = unwrap(self.actor)
        nll, hits, n, n_discrete = 0.0, 0, 0, 0
        for part, recurrent, valid in self._passes(held, rows_per_pass):
            with torch.no_grad():
                tables, _ = net.log_probabilities(part.state["entities"], part.state["action_masks"],
                                                  part.state.get("visible"), continuous=self._continuous(part),
                                                  **recurrent)
            for name, table in tables.items():
                log_p = table.data  # [n_actors, width]; continuous: [n_actors, 1]
                keep = None if valid is None else valid[table.batch_index.cpu()]  # [n_actors]
                log_p = log_p if keep is None else log_p[keep.to(log_p.device)]
                if log_p.shape[0] == 0:
                    continue
                n += log_p.shape[0]
                if isinstance(net.action_space[name], CONTINUOUS_SPACES):
                    nll += float(-log_p.sum())
                    continue
                chosen = torch.from_numpy(part.action[name].as_array()[:, 0].copy())  # [n_actors]
                chosen = (chosen if keep is None else chosen[keep]).to(log_p.device)
                nll += float(-log_p.gather(1, chosen[:, None]).sum())
                hits += int((log_p.argmax(dim=1) == chosen).sum())
                n_discrete += log_p.shape[0]
        return (nll / n if n else float("nan")), (hits / n_discrete if n_discrete else float("nan"))

    def _passes(self, held: Held, rows_per_pass: int) -> Iterator[Tuple[Held, Dict[str, Any], Optional[torch.Tensor]]]:
        """``held`` in passes: all its rows at once without memory; with memory, whole episodes (longest
        first, so each pass pads little), about ``rows_per_pass`` rows each."""
        if not self._memory:
            yield held, {}, None
            return
        w = seq.windows(held.episodes, None)
        order = np.argsort(-w.size, kind="stable")  # [n_episodes]
        start = 0
        while start < len(order):
            per_pass = max(1, rows_per_pass // int(w.size[order[start]]))
            picks = order[start:start + per_pass]
            start += per_pass
            longest = seq.Windows(w.first, w.offset, w.size, int(w.size[picks].max()))
            yield self._minibatch_of(held, longest, picks)


def _padded(per_actor: Any, width: int) -> torch.Tensor:
    """Per-actor probabilities (ragged ``[n_values, 1]``, one sequence per actor) as ``[n_actors, width]``."""
    lengths = per_actor.size1()
    out = np.zeros((len(lengths), width), np.float32)
    inside = np.arange(width)[None, :] < lengths[:, None]
    out[inside] = per_actor.as_array()[:, 0]
    return torch.from_numpy(out)
