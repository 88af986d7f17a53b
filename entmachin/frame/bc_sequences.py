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

With per-entity memory (``model.memory.per_entity``) each held row carries its entities' numbers in their
episode (``state['entity_handles']``, :func:`entity_handles`, numbered from the recorded ids as
``EntityRows`` numbers them while acting). The replay of the earlier steps links each entity's appearances
by its number, from zeros; every entity of a sequence then starts from the state its last appearance before
the sequence reached (zeros for one that first appears in the sequence), and the sequence's unroll links
its later appearances: the states a step-by-step replay of the episode gives.

Cost: the replay runs the network over up to ``P`` earlier steps per minibatch, so long episodes with a
short ``sequence_length`` pay for their prefixes; ``sequence_length: null`` (whole episodes) replays nothing.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch

from entmachin.env.entity_ids import number_entities
from entmachin.frame.memory import time_major
from entmachin.ragged.arrays import ragged_from_arrays
from entmachin.ragged.tensor import RaggedTensor, to_ragged_tensor
from entmachin.ragged.trees import take as take_rows

__all__ = ["Windows", "SequenceBatch", "episode_bounds", "check_episodes", "windows", "sequence_batch",
           "recurrent_inputs", "fresh_states", "entity_handles"]


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


def entity_handles(ids: Mapping[str, Sequence[Optional[Sequence[Any]]]], counts: Mapping[str, np.ndarray],
                   episodes: np.ndarray, where: str) -> Dict[str, Any]:
    """Each entity's number in its episode, in order of first appearance (types in ``counts``' order, then the
    ids' order), as ``EntityRows`` numbers them while acting: entity type -> int64 ragged ``[n_entities, 1]``.

    Args:
        ids: entity type -> per row, the entities' ids (None: not recorded), as a dataset's rows keep them.
        counts: entity type -> int ``[n]``: each row's entities of the type.
        episodes: int64 ``[n]``: each row's episode, each episode's rows together in step order.

    Raises:
        ValueError: a row whose entities of a type have no recorded ids (per-entity memory keeps states by
            id), an id given twice in one row, or an id that named an entity of another type earlier in its
            episode.
    """
    types = list(counts)
    for t in types:
        if t not in ids and np.asarray(counts[t]).any():
            raise ValueError(f"{where}: the rows keep no ids of {t!r} entities (ids/{t}); per-entity memory "
                             "(model.memory.per_entity) keeps states by id: record an environment that gives every "
                             "entity an int or string id")
    numbers: Dict[str, List[int]] = {t: [] for t in types}
    index: Dict[Any, Tuple[str, int]] = {}
    for r in range(len(episodes)):
        if r == 0 or episodes[r] != episodes[r - 1]:
            index = {}
        n_of = {t: int(counts[t][r]) for t in types}
        given = {t: ids[t][r] if t in ids else None for t in types}
        for t in types:
            if n_of[t] and (given[t] is None or len(given[t]) != n_of[t]):
                raise ValueError(f"{where}: row {r} has {n_of[t]} {t!r} entities but "
                                 f"{0 if given[t] is None else len(given[t])} recorded ids; per-entity memory "
                                 "(model.memory.per_entity) keeps states by id: record an environment that gives every "
                                 "entity an int or string id")
        row = number_entities(index, {t: list(given[t] or ()) for t in types}, n_of, types, f"{where}: row {r}")
        for t in types:
            numbers[t].extend(row[t])
    return {t: ragged_from_arrays(np.array(numbers[t], np.int64).reshape(-1, 1), np.asarray(counts[t], np.int64),
                                  np.int64) for t in types}


def _zero_states(handles: Mapping[str, Any], size: int) -> Dict[str, RaggedTensor]:
    """Zeros laid out like ``handles`` (type -> ragged ``[n_entities, 1]``): type -> ``[n_entities, size]``."""
    out = {}
    for t, h in handles.items():
        h = to_ragged_tensor(h, None, "entity_handles")
        out[t] = RaggedTensor.from_lengths(torch.zeros(h.data.shape[0], size), h.lengths)  # [n_entities, size]
    return out


def _keys(handles: Mapping[str, Any], n_seq: int, n_keys: int) -> Dict[str, torch.Tensor]:
    """Per type, each entity's (sequence, number) as one int64 key ``[n_entities]`` (rows time-major)."""
    out = {}
    for t, h in handles.items():
        h = to_ragged_tensor(h, None, "entity_handles")
        out[t] = (h.batch_index % n_seq) * n_keys + h.data.reshape(-1)
    return out


def _entity_start(handles: Mapping[str, Any], prior_handles: Optional[Mapping[str, Any]],
                  reached: Optional[Mapping[str, torch.Tensor]], n_seq: int, size: int) -> Dict[str, RaggedTensor]:
    """Each entity of a minibatch's sequences (``handles``) with the state its last appearance in the replayed
    steps before its sequence reached (``prior_handles``, ``reached``: the replay's next states), zeros where it
    has none: type -> ragged ``[n_entities, size]``. Only its first appearance in the sequence reads it."""
    out = _zero_states(handles, size)
    if prior_handles is None:
        return out
    tensors = [to_ragged_tensor(h, None, "entity_handles").data for h in (*handles.values(), *prior_handles.values())]
    n_keys = 1 + int(max((int(d.max()) for d in tensors if d.numel()), default=0))
    table = torch.zeros(n_seq * n_keys, size)  # [S * n_keys, size]: the state each (sequence, number) reached
    for t, key in _keys(prior_handles, n_seq, n_keys).items():  # rows in time order: the last write is the latest
        if key.numel() == 0:
            continue
        keys = key.numpy()[::-1]
        unique, last = np.unique(keys, return_index=True)
        table[torch.from_numpy(unique)] = reached[t].detach().cpu().float()[torch.from_numpy(len(keys) - 1 - last)]
    for t, key in _keys(handles, n_seq, n_keys).items():
        out[t] = RaggedTensor.from_lengths(table[key], out[t].lengths)  # [n_entities, size]
    return out


def fresh_states(n_rows: int, size: int, handles: Optional[Mapping[str, Any]] = None, entity_size: int = 0
                 ) -> Dict[str, Any]:
    """The recurrent keywords of ``n_rows`` rows that each begin an episode, one step each (with per-entity
    memory, ``entity_size`` wide, every entity of ``handles`` from zeros)."""
    out = {"memory": torch.zeros(n_rows, size),  # [B, size]
           "episode_start": torch.ones(n_rows, 1, dtype=torch.bool),  # [B, 1]
           "sequence_length": 1}
    if entity_size:
        out["entity_memory"] = _zero_states(handles, entity_size)
    return out


def recurrent_inputs(net: Any, held: Any, batch: SequenceBatch) -> Dict[str, Any]:
    """The recurrent keywords of a minibatch's rows (``memory``, ``episode_start``, ``sequence_length``; with
    per-entity memory ``entity_memory`` and ``entity_handles``), the state of each sequence recomputed by
    ``net`` (a ``RogueNet``) over its episode's earlier steps of ``held``, without gradient."""
    n_seq = batch.rows.shape[0] // batch.length
    size = net.entity_memory_size
    memory = torch.zeros(n_seq, net.memory_size)  # [S, memory_size]: a sequence that begins its episode
    prior_handles = reached = None
    if batch.prior is not None:
        part = held.take(batch.prior)
        entity = {}
        if size:
            prior_handles = part.state["entity_handles"]
            entity = {"entity_memory": _zero_states(prior_handles, size), "entity_handles": prior_handles}
        with torch.no_grad():
            out = net(part.state["entities"], part.state["action_masks"], part.state.get("visible"), part.action,
                      torch.zeros(batch.prior.shape[0], net.memory_size),  # [P * S, memory_size]: reset at step 0
                      torch.from_numpy(batch.prior_start[:, None].copy()), sequence_length=batch.n_prior, **entity)
        memory, reached = out.memory, out.entity_memory  # [S, memory_size]; type -> [n_prior_entities, size]
    out = {"memory": memory, "episode_start": torch.from_numpy(batch.episode_start[:, None].copy()),  # [L * S, 1]
           "sequence_length": batch.length}
    if size:
        handles = take_rows(held.state["entity_handles"], batch.rows)
        out.update(entity_memory=_entity_start(handles, prior_handles, reached, n_seq, size), entity_handles=handles)
    return out
