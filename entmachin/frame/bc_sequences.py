"""Behaviour cloning with memory: recorded episodes cut into sequences, each started from a recomputed state.

The rows held for a network with memory come in episode order: the rows of one episode (of one seat)
together, in step order, named by ``episodes`` (int64 ``[n]``, one id per episode). :func:`windows` cuts
each episode into sequences of ``frame.sequence_length`` steps (None: the whole episode), the last one
shorter where the length does not divide the episode. A minibatch (:func:`sequence_batch`) is ``S`` of them
laid out time-major as the memory core takes them (row ``t * S + s`` is step ``t`` of sequence ``s``), each
padded at its end to ``L`` steps with copies of its last row. The padding comes after every real step of
its sequence, so no real step's output depends on it, and its rows' losses are masked out (``valid``).

A sequence that starts inside its episode starts from the state the *current* network reaches over the
episode's earlier steps, replayed without gradient from the episode's start (:func:`recurrent_inputs`):
a recording stores no states, and a demonstrator's (a person, a script, another network) would not be the
learner's anyway. The earlier steps are ``S`` sequences of ``P`` steps (``P``: the most steps before any
of the minibatch's sequences), each padded at its front with copies of its episode's first row. That row
begins the episode, so ``episode_start`` resets the state there and the padding before it is never read.
The loss of a minibatch is thus the loss that a step-by-step replay of each episode from its start gives
the same steps; the gradient flows within each sequence (truncated back-propagation through time).

Cost: the replay runs the network over up to ``P`` earlier steps per minibatch, so long episodes with a
short ``sequence_length`` pay for their prefixes; ``sequence_length: null`` (whole episodes) replays nothing.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

import numpy as np
import torch

from entmachin.frame.memory import time_major

__all__ = ["Windows", "SequenceBatch", "episode_bounds", "check_episodes", "windows", "sequence_batch",
           "recurrent_inputs", "fresh_states"]


class Windows(NamedTuple):
    """The sequences of held rows: each one's first row, the steps of its episode before it, and its steps.

    Attributes:
        first: int64 ``[n_sequences]``: the held row of each sequence's first step.
        offset: int64 ``[n_sequences]``: the steps of its episode before it.
        size: int64 ``[n_sequences]``: its steps (``1 <= size <= length``).
        length: ``L``, the steps every sequence is padded to.
    """

    first: np.ndarray
    offset: np.ndarray
    size: np.ndarray
    length: int


class SequenceBatch(NamedTuple):
    """One minibatch of sequences, time-major.

    Attributes:
        rows: int64 ``[L * S]``: the held row at each place (padding: its sequence's last row).
        valid: bool ``[L * S]``: a real step (False: padding, whose loss is masked out).
        episode_start: bool ``[L * S]``: the step begins its episode.
        prior: int64 ``[P * S]``: the held rows replayed before the sequences (None: every sequence begins
            its episode, and starts from zeros).
        prior_start: bool ``[P * S]``: the replayed step begins its episode (or pads before that step).
        length: ``L``; n_prior: ``P``.
    """

    rows: np.ndarray
    valid: np.ndarray
    episode_start: np.ndarray
    prior: Optional[np.ndarray]
    prior_start: Optional[np.ndarray]
    length: int
    n_prior: int


def episode_bounds(episodes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The first row and the number of rows of each run of equal ids in ``episodes`` (int64 ``[n]``)."""
    n = len(episodes)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, episodes[1:] != episodes[:-1]]).astype(np.int64)  # [n_episodes]
    return starts, np.diff(np.r_[starts, n]).astype(np.int64)


def check_episodes(episodes: Any, n_rows: int, where: str) -> np.ndarray:
    """``episodes`` as int64 ``[n_rows]``, checked: one id per row, each episode's rows together.

    Raises:
        ValueError: another number of ids than rows, or an episode whose rows are not together.
    """
    episodes = np.asarray(episodes).reshape(-1)
    if episodes.shape[0] != n_rows or not np.issubdtype(episodes.dtype, np.integer):
        raise ValueError(f"{where}: episodes must be int [{n_rows}] (one episode id per row), got "
                         f"{episodes.dtype} {tuple(episodes.shape)}")
    episodes = episodes.astype(np.int64)
    starts, _ = episode_bounds(episodes)
    ids, first_seen = np.unique(episodes[starts], return_counts=True)
    if (first_seen > 1).any():
        raise ValueError(f"{where}: the rows of episode {int(ids[first_seen > 1][0])} are not together; a network "
                         "with memory trains on each episode's rows in step order, one episode after another")
    return episodes


def windows(episodes: np.ndarray, length: Optional[int]) -> Windows:
    """Every episode of ``episodes`` (checked by :func:`check_episodes`) cut into sequences of ``length`` steps
    (None: each episode whole, ``L`` its longest), its last one shorter where ``length`` does not divide it."""
    starts, sizes = episode_bounds(episodes)  # [n_episodes] each
    size = int(sizes.max(initial=1)) if length is None else int(length)
    counts = -(-sizes // size)  # [n_episodes]: sequences of each episode
    episode = np.repeat(np.arange(len(starts)), counts)  # [n_sequences]
    k = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)  # [n_sequences]: its place
    offset = (k * size).astype(np.int64)
    return Windows(starts[episode] + offset, offset, np.minimum(size, sizes[episode] - offset), size)


def sequence_batch(w: Windows, picks: np.ndarray) -> SequenceBatch:
    """The sequences ``picks`` (indices into ``w``) as one time-major minibatch (see the module docstring)."""
    first, offset, size = w.first[picks], w.offset[picks], w.size[picks]  # [S] each
    t = np.arange(w.length)
    steps = np.minimum(t[None, :], size[:, None] - 1)  # [S, L]: padding repeats the last step
    valid = t[None, :] < size[:, None]  # [S, L]
    start = (offset[:, None] + t[None, :]) == 0  # [S, L]
    n_prior = int(offset.max(initial=0))
    prior = prior_start = None
    if n_prior:
        before = np.arange(n_prior)[None, :] - (n_prior - offset)[:, None]  # [S, P]: its step in the episode (<0: pad)
        prior = time_major((first - offset)[:, None] + np.maximum(before, 0))  # [P * S]
        prior_start = time_major(before <= 0)  # [P * S]
    return SequenceBatch(time_major(first[:, None] + steps), time_major(valid), time_major(start), prior, prior_start,
                         w.length, n_prior)


def fresh_states(n_rows: int, size: int) -> Dict[str, Any]:
    """The recurrent keywords of ``n_rows`` rows that each begin an episode, one step each."""
    return {"memory": torch.zeros(n_rows, size),  # [B, size]
            "episode_start": torch.ones(n_rows, 1, dtype=torch.bool),  # [B, 1]
            "sequence_length": 1}


def recurrent_inputs(net: Any, held: Any, batch: SequenceBatch) -> Dict[str, Any]:
    """The recurrent keywords of a minibatch's rows (``memory``, ``episode_start``, ``sequence_length``), the
    state of each sequence recomputed by ``net`` (a ``RogueNet``) over its episode's earlier steps of ``held``,
    without gradient."""
    n_seq = batch.rows.shape[0] // batch.length
    memory = torch.zeros(n_seq, net.memory_size)  # [S, memory_size]: a sequence that begins its episode
    if batch.prior is not None:
        part = held.take(batch.prior)
        with torch.no_grad():
            out = net(part.state["entities"], part.state["action_masks"], part.state.get("visible"), part.action,
                      torch.zeros(batch.prior.shape[0], net.memory_size),  # [P * S, memory_size]: reset at step 0
                      torch.from_numpy(batch.prior_start[:, None].copy()), sequence_length=batch.n_prior)
        memory = out.memory  # [S, memory_size]
    return {"memory": memory, "episode_start": torch.from_numpy(batch.episode_start[:, None].copy()),  # [L * S, 1]
            "sequence_length": batch.length}
