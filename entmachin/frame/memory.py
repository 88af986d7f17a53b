"""Memory in the on-policy frames: the rows' recurrent state while acting, and sequences while training.

A network with memory (``model.memory``, ``entmachin.model.memory``) takes each row's state (``memory``,
float ``[B, memory_size]``) and whether its step begins an episode (``episode_start``, bool ``[B, 1]``),
and returns the next state. While acting, :class:`MemoryRows` keeps them: it adds both to each state it is
given and, after the step, keeps the network's next state, zeroed where an episode ended. Both are stored
with every row (``state['memory']``, ``state['episode_start']``), so a rollout's rows carry the state
their step was acted with.

While training, the stored rows are cut into sequences of ``sequence_length`` steps of one environment
row (:func:`sequence_groups`); a minibatch is whole sequences laid out time-major (:func:`time_major`), the
unroll starts from the state stored at each sequence's first step and resets where ``episode_start`` says
(truncated back-propagation through time): the states are stored, not recomputed from the rollout's start,
so each sequence starts from the state its first step was acted with, and sequences can be shuffled freely.

A rollout that stores only some of its rows (``stored``: self-play, where snapshots play the other seats)
is cut per environment row into *runs*, the maximal spans of consecutive steps it stored, and each run into
sequences of ``sequence_length`` from its first step, the last one shorter where the length does not divide
the run: every sequence is one row's consecutive steps acted by the learner. Sequences of one length make a
group; a minibatch holds sequences of one group (:class:`SequencePlan` tells the networks its length).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch

from entmachin.frame.gae import OLD_LOG_PROB_ROWS, OldLogProbs, old_log_probs
from entmachin.frame.rollout import minibatch_schedule
from entmachin.frame.safe_call import safe_call
from entmachin.model.memory import memory_size
from entmachin.model.wrappers import unwrap
from entmachin.ragged import arrdict, trees
from entmachin.ragged.tensor import RaggedTensor

__all__ = ["MemoryRows", "actor_memory_size", "memory_rows", "refuse_memory", "SequenceGroup", "sequence_groups", "sequence_schedule", "SequencePlan", "BurnIn",
           "time_major", "sequence_log_probs", "sequence_values"]

Chunk = Union[Tuple[int, int], np.ndarray]  # a stored rollout: (T, B) when it stored every row, else bool [T, B]


class MemoryRows:
    """The recurrent state of ``n_rows`` rows between acting calls; all rows begin an episode.

    Args:
        size: the network's ``memory_size``.
        n_rows: the rows acted on together.
    """

    def __init__(self, size: int, n_rows: int) -> None:
        self.memory = torch.zeros(n_rows, size)  # [B, size]
        self.episode_start = torch.ones(n_rows, 1, dtype=torch.bool)  # [B, 1]

    def state(self, state: Mapping[str, Any]) -> Dict[str, Any]:
        """``state`` with the rows' recurrent entries added."""
        return {**state, "memory": self.memory, "episode_start": self.episode_start}

    def advance(self, result: Any, done: Any, rows: Optional[np.ndarray] = None) -> torch.Tensor:
        """Keeps the next state of an acting call's ``result`` (its ``memory`` field), zeroed where ``done``
        (bool ``[B]``: the row's episode ended, so its next step begins one); returns it as it came, before
        the reset (the state a truncated row's final observation is valued with).

        Args:
            result: the acting call's output, over every row or over ``rows``.
            done: bool ``[B]``, every row's (a row that ended restarts from zeros whoever acted it).
            rows: int64 ``[n]``, the rows ``result`` acted (None: all); the others keep their states (zeroed
                where ``done``) and are returned as they are.

        Raises:
            ValueError: the result carries no state of the rows' shape.
        """
        target = self.memory if rows is None else self.memory[torch.from_numpy(np.asarray(rows, dtype=np.int64))]
        after = getattr(result, "memory", None)
        if not isinstance(after, torch.Tensor) or tuple(after.shape) != tuple(target.shape):
            got = None if after is None else tuple(getattr(after, "shape", ()))
            raise ValueError(f"memory: the network returned the next state {got}; expected "
                             f"{tuple(target.shape)} (a RogueNet output's memory field)")
        after = after.detach().to(self.memory.device, self.memory.dtype)  # [n, size]
        if rows is not None:
            every = self.memory.clone()  # [B, size]
            every[torch.from_numpy(np.asarray(rows, dtype=np.int64))] = after
            after = every
        self.end(done, after)
        return after

    def end(self, done: Any, memory: Optional[torch.Tensor] = None) -> None:
        """The rows' states after a step: ``memory`` (default: as they are), zeroed where ``done`` (bool
        ``[B]``), whose next step begins an episode."""
        ended = torch.as_tensor(np.asarray(done, dtype=np.bool_)).reshape(-1, 1)  # [B, 1]
        self.memory = (self.memory if memory is None else memory).masked_fill(ended, 0.0)  # [B, size]
        self.episode_start = ended

    def snapshot(self) -> Dict[str, torch.Tensor]:
        return {"memory": self.memory.clone(), "episode_start": self.episode_start.clone()}

    def restore(self, snapshot: Mapping[str, Any], where: str) -> None:
        memory = torch.as_tensor(snapshot["memory"])
        if tuple(memory.shape) != tuple(self.memory.shape):
            raise ValueError(f"{where}: the saved recurrent state has shape {tuple(memory.shape)}; this run's is "
                             f"{tuple(self.memory.shape)} (model.memory or the number of rows changed)")
        self.memory = memory.float()
        self.episode_start = torch.as_tensor(snapshot["episode_start"]).bool()


def actor_memory_size(frame: Any) -> int:
    """The width of the recurrent state of a frame's actor per row (0: no memory, or no actor)."""
    return memory_size(unwrap(getattr(frame, "actor", None)))


def memory_rows(frame: Any, n_rows: int) -> Optional[MemoryRows]:
    """A :class:`MemoryRows` for the frame's actor where it has memory, else None."""
    size = actor_memory_size(frame)
    return MemoryRows(size, n_rows) if size else None


def refuse_memory(frame: Any, what: str, error: type = ValueError) -> None:
    """Raises ``error`` where the frame's actor has memory, which ``what`` (a command or a feature that
    acts without carrying the rows' states) does not carry yet."""
    if actor_memory_size(frame):
        raise error(f"{what}: this run's network has memory (model.memory), which {what} does not carry yet; "
                    "entmachin eval and training do")


class SequenceGroup(NamedTuple):
    """The stored sequences of one length ``L`` (rows numbered in storing order).

    Attributes:
        rows: int64 ``[n, L]``: each sequence's rows in time order.
        prior: int64 ``[n, k]``: the ``burn_in`` rows of its run just before it (-1: the run has fewer).
    """

    rows: np.ndarray
    prior: np.ndarray


def sequence_groups(chunks: List[Chunk], length: Optional[int], where: str, burn_in: int = 0
                    ) -> List[SequenceGroup]:
    """The sequences of stored rollouts, grouped by length (longest first), each in order of its first step's
    time, then environment row. A rollout's runs (each row's maximal spans of consecutive stored steps; a
    rollout that stored every row has one run per row) are cut into sequences of ``length`` from their first
    step, the last one of a run shorter where ``length`` does not divide it.

    Args:
        chunks: each stored rollout, in storing order (its stored rows step-major after the previous ones):
            ``(T, B)`` when it stored every row, else its ``stored`` flags, bool ``[T, B]``.
        length: ``frame.sequence_length``; None: each run is one sequence.
        burn_in: the earlier steps of its run each sequence records in ``prior``.

    Raises:
        ValueError: ``length`` does not divide the steps of a rollout that stored every row, or such rollouts
            of different lengths with None (their sequences would not have one length).
    """
    steps = {c[0] for c in chunks if isinstance(c, tuple)}
    if length is None and len(steps) > 1:
        raise ValueError(f"{where}: the stored rollouts have {sorted(steps)} steps; with sequence_length null each "
                         "rollout is one sequence, so they must be equally long (or set frame.sequence_length)")
    groups: Dict[int, Tuple[List[np.ndarray], List[np.ndarray]]] = {}
    offset = 0
    for chunk in chunks:
        if isinstance(chunk, tuple):
            n_steps, n_envs = chunk
            if length is not None and n_steps % length:
                raise ValueError(f"{where}: frame.sequence_length={length} does not divide the rollout's {n_steps} "
                                 "steps (rollout.n_steps); choose a divisor of it")
            stored = np.ones((n_steps, n_envs), dtype=np.bool_)  # [T, B]
        else:
            stored = np.asarray(chunk, dtype=np.bool_)  # [T, B]
        flat = stored.reshape(-1)
        index = np.where(flat, offset + np.cumsum(flat) - 1, -1).reshape(stored.shape)  # [T, B]: stored row, or -1
        pieces = []  # (first step, row, rows, prior) of each sequence
        for b in range(stored.shape[1]):
            edges = np.diff(np.concatenate([[0], stored[:, b].astype(np.int8), [0]]))
            for start, stop in zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()):
                size = stop - start if length is None else length
                for first in range(start, stop, size):
                    prior = index[first - burn_in : first, b] if first - start >= burn_in else np.full(burn_in, -1)
                    pieces.append((first, b, index[first : min(first + size, stop), b], prior))
        for _, _, rows, prior in sorted(pieces, key=lambda p: (p[0], p[1])):
            group = groups.setdefault(rows.shape[0], ([], []))
            group[0].append(rows)
            group[1].append(prior)
        offset += int(flat.sum())
    return [SequenceGroup(np.stack(rows).astype(np.int64), np.stack(prior).reshape(len(prior), burn_in).astype(np.int64))
            for _, (rows, prior) in sorted(groups.items(), reverse=True)]


def sequence_schedule(chunks: List[Chunk], config: Any, n_minibatches: int, rng: np.random.Generator,
                      where: str) -> Tuple[List[np.ndarray], "SequencePlan"]:
    """An update's minibatches of whole sequences of one length ``L`` each (``batch_size // L`` of them, at
    least one), each time-major, and the plan that tells the networks each one's length (and, with
    ``config.burn_in``, replays the steps before its sequences).

    Each epoch shuffles the sequences of every length group, cuts each group into near-equal minibatches of
    about ``batch_size`` rows, and shuffles the order of all of them (one group: the minibatches of one
    shuffled epoch, as :func:`~entmachin.frame.rollout.minibatch_schedule` cuts them)."""
    burn_in = getattr(config, "burn_in", 0)
    groups = sequence_groups(chunks, config.sequence_length, where, burn_in)
    picks: List[Tuple[int, np.ndarray]] = []  # (group, the sequences of a minibatch)
    if len(groups) == 1:
        size = groups[0].rows.shape[1]
        picks = [(0, p) for p in minibatch_schedule(groups[0].rows.shape[0], max(1, config.batch_size // size),
                                                    n_minibatches, rng)]
    while len(picks) < n_minibatches:
        epoch = []
        for g, group in enumerate(groups):
            n, size = group.rows.shape
            per_epoch = max(1, math.ceil(n / max(1, config.batch_size // size)))
            epoch += [(g, part) for part in np.array_split(rng.permutation(n).astype(np.int64), per_epoch)]
        picks += [epoch[i] for i in rng.permutation(len(epoch)).tolist()]
    picks = picks[:n_minibatches]
    schedule = [time_major(groups[g].rows[p]) for g, p in picks]
    burn = BurnIn([groups[g].prior[p] for g, p in picks]) if burn_in else None
    return schedule, SequencePlan([groups[g].rows.shape[1] for g, _ in picks], burn)


class SequencePlan:
    """How each minibatch of an update over sequences is trained: its unroll's length, and ``frame.burn_in``.

    Args:
        lengths: each minibatch's sequence length ``L``.
        burn: the steps replayed before each minibatch's sequences (None: no burn-in).
    """

    def __init__(self, lengths: List[int], burn: Optional["BurnIn"]) -> None:
        self.lengths, self.burn = lengths, burn

    def prepare(self, frame: Any, rollout: Any, i: int, batch: Any) -> Any:
        """Tells ``frame``'s networks minibatch ``i``'s length (its ``_sequence`` keywords) and returns the
        minibatch, its first states recomputed by :class:`BurnIn` where the plan has one."""
        frame._sequence = {"sequence_length": self.lengths[i]}
        return batch if self.burn is None else self.burn.apply(frame, rollout, i, batch)


class BurnIn:
    """``frame.burn_in``: before a minibatch trains, the ``k`` steps before each of its sequences (where its
    rollout has them) are replayed without gradient from the state stored with their first row, and the state
    they end in replaces the one stored with the sequence's first row: the sequence starts from a state the
    current parameters (and input statistics) computed rather than the acting ones. The old log-probabilities
    PPO's ratio divides by stay those of the stored states, the states the rows were acted with.

    Args:
        prior: per minibatch, ``[S, k]`` rows before each of its sequences (-1: none; the sequence keeps the
            state stored with it).
    """

    def __init__(self, prior: List[np.ndarray]) -> None:
        self.prior = prior

    def apply(self, frame: Any, rollout: Any, i: int, batch: Any) -> Any:
        """Minibatch ``i`` (``batch``, time-major, its first ``S`` rows the sequences' first steps) with the
        states of its sequences' first rows recomputed by ``frame``'s actor."""
        prior = self.prior[i]  # [S, k]
        slots = np.flatnonzero(prior[:, 0] >= 0)  # the sequences with k earlier steps
        if slots.size == 0:
            return batch
        rows = torch.from_numpy(time_major(prior[slots]))  # [k * S_b]
        with torch.no_grad():
            out = safe_call(frame.actor, rollout.state[rows], {"action": rollout.action[rows]},
                            {"sequence_length": prior.shape[1]})
        memory = batch.state["memory"].clone()  # [L * S, memory_size]
        memory[torch.from_numpy(slots)] = out.memory.to(memory.device, memory.dtype)  # [S_b, memory_size]
        return batch._replace(state=arrdict({**batch.state, "memory": memory}))


def time_major(sequences: np.ndarray) -> np.ndarray:
    """The rows of ``[S, L]`` sequences laid out time-major: row ``t * S + s`` (int64 ``[L * S]``)."""
    return np.ascontiguousarray(sequences.T).reshape(-1)


def sequence_log_probs(frame: Any, rollout: Any, chunks: List[Chunk], config: Any, where: str
                       ) -> Tuple[np.ndarray, OldLogProbs]:
    """The log-probabilities of every stored row's action under ``frame``'s actor, without gradients, in
    passes over blocks of whole sequences of one length (at least ``batch_size`` rows each): the rows in
    the order visited (int64 ``[N]``) and their log-probabilities (as ``old_log_probs`` gives them)."""
    visited, parts = [], []
    try:
        for group in sequence_groups(chunks, config.sequence_length, where):
            n, size = group.rows.shape
            per_block = max(1, math.ceil(max(config.batch_size, OLD_LOG_PROB_ROWS) / size))
            rows = np.concatenate([time_major(group.rows[i : i + per_block]) for i in range(0, n, per_block)])
            frame._sequence = {"sequence_length": size}
            parts.append(old_log_probs(frame.eval_act, rollout.state, rollout.action, rows, per_block * size, where))
            visited.append(rows)
    finally:
        frame._sequence = {}
    if isinstance(parts[0], torch.Tensor):
        return np.concatenate(visited), torch.cat(parts)
    return np.concatenate(visited), {name: RaggedTensor.cat([p[name] for p in parts]) for name in parts[0]}


def sequence_values(criticize: Callable[..., torch.Tensor], steps: Any, where: str) -> Callable[[Any], torch.Tensor]:
    """A critic over the state rows of a rollout's ``steps`` (``T`` steps of each row, step-major, which is
    time-major with one sequence per row), then the next-state rows that bootstrap, each one step from the
    state stored with it; ``criticize(state, L)`` values rows in sequences of ``L`` steps.

    A rollout that stores only some rows (``steps.stored``) values each run of a row's stored steps as one
    sequence from the state stored with its first step; the rows it does not store are valued 0 (their
    advantages are not stored, and a row changes hands only where its episode ends, so that no stored row's
    advantage reads them).
    """
    n_steps, n_rows = steps.reward.shape[0], steps.n_rows
    groups = None
    if steps.stored is not None:
        groups = sequence_groups([steps.stored], None, where)
        every = np.arange(n_rows, dtype=np.int64).reshape(steps.stored.shape)[steps.stored]  # [n_stored]
        groups = [g._replace(rows=every[g.rows]) for g in groups]  # stored places -> rows of the rollout

    def values(inputs: Mapping[str, Any]) -> torch.Tensor:
        total = trees.n_rows(inputs, "the critic's inputs")
        if groups is None:
            out = [criticize(trees.row_range(inputs, 0, n_rows), n_steps)]
            if total > n_rows:
                out.append(criticize(trees.row_range(inputs, n_rows, total), 1))
            return torch.cat(out)
        places = [time_major(g.rows) for g in groups] + [np.arange(n_rows, total, dtype=np.int64)]
        parts = [criticize(trees.take(inputs, rows), g.rows.shape[1]).reshape(-1, 1)  # [n_g * L_g, 1]
                 for rows, g in zip(places, groups)]
        if total > n_rows:
            parts.append(criticize(trees.row_range(inputs, n_rows, total), 1).reshape(-1, 1))  # [k, 1]
        out = parts[0].new_zeros(total, 1)  # [N + k, 1]: the rows not stored stay 0
        out[torch.from_numpy(np.concatenate(places[: len(parts)])).to(out.device)] = torch.cat(parts)
        return out
    return values
