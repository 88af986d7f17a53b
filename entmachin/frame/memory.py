"""Memory in the on-policy frames: the rows' recurrent state while acting, and sequences while training.

A network with memory (``model.memory``, ``entmachin.model.memory``) takes each row's state (``memory``,
float ``[B, memory_size]``) and whether its step begins an episode (``episode_start``, bool ``[B, 1]``),
and returns the next state. While acting, :class:`MemoryRows` keeps them: it adds both to each state it is
given and, after the step, keeps the network's next state, zeroed where an episode ended. Both are stored
with every row (``state['memory']``, ``state['episode_start']``), so a rollout's rows carry the state
their step was acted with.

While training, the stored rows are cut into sequences of ``sequence_length`` steps of one environment
row (:func:`sequence_rows`); a minibatch is whole sequences laid out time-major (:func:`time_major`), the
unroll starts from the state stored at each sequence's first step and resets where ``episode_start`` says
(truncated back-propagation through time): the states are stored, not recomputed from the rollout's start,
so each sequence starts from the state its first step was acted with, and sequences can be shuffled freely.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from entmachin.frame.rollout import minibatch_schedule
from entmachin.frame.safe_call import safe_call
from entmachin.model.memory import entity_memory_size, memory_size
from entmachin.model.wrappers import unwrap
from entmachin.ragged import arrdict, trees
from entmachin.ragged.tensor import RaggedTensor

__all__ = ["MemoryRows", "EntityRows", "entity_rows", "actor_memory_size", "memory_rows", "refuse_memory",
           "refuse_entity_memory", "sequence_rows", "sequence_schedule",
           "BurnIn", "time_major", "blocks", "sequence_values"]


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

    def advance(self, result: Any, done: Any) -> torch.Tensor:
        """Keeps the next state of an acting call's ``result`` (its ``memory`` field), zeroed where ``done``
        (bool ``[B]``: the row's episode ended, so its next step begins one); returns it as it came, before
        the reset (the state a truncated row's final observation is valued with).

        Raises:
            ValueError: the result carries no state of the rows' shape.
        """
        after = getattr(result, "memory", None)
        if not isinstance(after, torch.Tensor) or tuple(after.shape) != tuple(self.memory.shape):
            got = None if after is None else tuple(getattr(after, "shape", ()))
            raise ValueError(f"memory: the network returned the next state {got}; expected "
                             f"{tuple(self.memory.shape)} (a RogueNet output's memory field)")
        ended = torch.as_tensor(np.asarray(done, dtype=np.bool_)).reshape(-1, 1)  # [B, 1]
        after = after.detach().to(self.memory.device, self.memory.dtype)
        self.memory = after.masked_fill(ended, 0.0)
        self.episode_start = ended
        return after

    def snapshot(self) -> Dict[str, torch.Tensor]:
        return {"memory": self.memory.clone(), "episode_start": self.episode_start.clone()}

    def restore(self, snapshot: Mapping[str, Any], where: str) -> None:
        memory = torch.as_tensor(snapshot["memory"])
        if tuple(memory.shape) != tuple(self.memory.shape):
            raise ValueError(f"{where}: the saved recurrent state has shape {tuple(memory.shape)}; this run's is "
                             f"{tuple(self.memory.shape)} (model.memory or the number of rows changed)")
        self.memory = memory.float()
        self.episode_start = torch.as_tensor(snapshot["episode_start"]).bool()


class EntityRows:
    """The per-entity recurrent states of ``n_rows`` rows between acting calls (``model.memory.per_entity``),
    keyed by the entities' ids: an entity's state is kept from one appearance to its next in the episode
    (also across steps where it is out of sight), and dropped when the episode ends. An entity seen the first
    time in its episode starts from zeros.

    Each row numbers its episode's entities in order of first appearance (their handles). The states given
    (``entity_memory``) and the handles (``entity_handles``) are stored with every row, both per entity type
    in the entities' layout; training links each entity's appearances in a sequence by its handle.

    Args:
        size: the network's ``entity_memory_size``.
        n_rows: the rows acted on together.
        types: the observation space's entity types.
    """

    def __init__(self, size: int, n_rows: int, types: Sequence[str]) -> None:
        self.size, self.types = size, list(types)
        self.index: List[Dict[Any, Tuple[str, int]]] = [{} for _ in range(n_rows)]  # id -> (type, handle)
        self.table: List[torch.Tensor] = [torch.zeros(0, size) for _ in range(n_rows)]  # [n_handles, size] each
        self._handles: Optional[List[Dict[str, List[int]]]] = None  # the last entries' handles, per row and type

    def entries(self, obs: Any) -> Dict[str, Any]:
        """``entity_memory`` and ``entity_handles`` for the entities of ``obs`` (a ``VecObs`` with ``ids``);
        the handles are kept for :meth:`advance`.

        Raises:
            ValueError: ``obs`` carries no ids (worker processes do not pass them yet), an entity without an
                id, an id given twice in one observation, or an id that named an entity of another type earlier
                in the episode.
        """
        self._handles = self._number(_row_ids(obs, "entity memory"), _lengths(obs), range(len(self.index)))
        return self._gather(self._handles)

    def advance(self, result: Any, obs: Any) -> Dict[str, Any]:
        """Keeps each entity's next state from an acting call's ``result`` (its ``entity_memory`` field, the
        entities of the last :meth:`entries`), then drops the states of the rows whose episode ended (``obs``,
        the step's ``VecObs``). Returns the entries of the step's next states, the states each row's next
        observation reached: the final observation's where the episode ended (a truncated row's bootstrap).

        Raises:
            ValueError: no :meth:`entries` before, or a result without per-entity states of their shape.
        """
        if self._handles is None:
            raise ValueError("entity memory: advance() before entries()")
        after = getattr(result, "entity_memory", None)
        if not isinstance(after, Mapping):
            raise ValueError("entity memory: the network returned no per-entity states (a RogueNet output's "
                             f"entity_memory field), got {type(after).__name__}")
        for etype in self.types:
            handles = [row.get(etype, []) for row in self._handles]
            n = sum(len(h) for h in handles)
            new = after.get(etype)
            if n == 0:
                continue
            if not isinstance(new, torch.Tensor) or tuple(new.shape) != (n, self.size):
                raise ValueError(f"entity memory: the network returned {etype!r} states "
                                 f"{tuple(getattr(new, 'shape', ()))}; expected ({n}, {self.size})")
            new = new.detach().to("cpu", torch.float32)
            start = 0
            for r, h in enumerate(handles):
                if h:
                    self.table[r][torch.as_tensor(h)] = new[start : start + len(h)]
                    start += len(h)
        ids, lengths = _row_ids(obs, "entity memory"), _lengths(obs)
        done = np.flatnonzero(np.asarray(obs.done, dtype=np.bool_))
        if done.size:  # a row whose episode ended: its next state is its final observation's
            final_ids = _row_ids(obs.final_obs, "entity memory (final observations)")
            final_lengths = _lengths(obs.final_obs)
            where = {int(r): k for k, r in enumerate(np.asarray(obs.final_index, dtype=np.int64))}
            ids = [final_ids[where[r]] if r in where else ids[r] for r in range(len(ids))]
            lengths = {t: np.array([final_lengths[t][where[r]] if r in where else lengths[t][r]
                                    for r in range(len(ids))], dtype=np.int64) for t in self.types}
        entries = self._gather(self._number(ids, lengths, range(len(self.index))))
        for r in done.tolist():
            self.index[r], self.table[r] = {}, torch.zeros(0, self.size)
        self._handles = None
        return entries

    def _number(self, ids: List[Mapping[str, Any]], lengths: Mapping[str, np.ndarray], rows: Any
                ) -> List[Dict[str, List[int]]]:
        """Each row's handles per type, new ids numbered after the episode's earlier ones."""
        out = []
        for r in rows:
            index, seen, handles = self.index[r], set(), {}
            for etype in self.types:
                given = list(ids[r].get(etype, ()))
                if len(given) != int(lengths[etype][r]):
                    raise ValueError(f"entity memory: row {r}: {int(lengths[etype][r])} {etype!r} entities but "
                                     f"{len(given)} ids; per-entity memory keeps states by id, so the environment "
                                     "must give every entity its id (Observation ids=...)")
                mine = []
                for eid in given:
                    if eid in seen:
                        raise ValueError(f"entity memory: row {r}: entity id {eid!r} is given twice in one "
                                         "observation")
                    seen.add(eid)
                    known = index.get(eid)
                    if known is None:
                        known = index[eid] = (etype, len(index))
                    elif known[0] != etype:
                        raise ValueError(f"entity memory: row {r}: entity id {eid!r} names a {etype!r} entity, but "
                                         f"earlier in this episode it named a {known[0]!r} one; an environment must "
                                         "not reuse an id within an episode for another entity")
                    mine.append(known[1])
                handles[etype] = mine
            if len(index) > self.table[r].shape[0]:
                grown = torch.zeros(len(index), self.size)
                grown[: self.table[r].shape[0]] = self.table[r]
                self.table[r] = grown
            out.append(handles)
        return out

    def _gather(self, handles: List[Dict[str, List[int]]]) -> Dict[str, Any]:
        memory, numbers = {}, {}
        for etype in self.types:
            per_row = [row.get(etype, []) for row in handles]
            lengths = torch.tensor([len(h) for h in per_row], dtype=torch.long)  # [B]
            states = [self.table[r][torch.as_tensor(h, dtype=torch.long)] for r, h in enumerate(per_row)]
            data = torch.cat(states) if states else torch.zeros(0, self.size)  # [n_entities, size]
            memory[etype] = RaggedTensor.from_lengths(data, lengths)
            flat = torch.tensor([k for h in per_row for k in h], dtype=torch.long).reshape(-1, 1)  # [n_entities, 1]
            numbers[etype] = RaggedTensor.from_lengths(flat, lengths)
        return {"entity_memory": memory, "entity_handles": numbers}

    def snapshot(self) -> Dict[str, Any]:
        return {"index": [dict(i) for i in self.index], "table": [t.clone() for t in self.table],
                "handles": self._handles}

    def restore(self, snapshot: Mapping[str, Any], where: str) -> None:
        tables = [torch.as_tensor(t).float() for t in snapshot["table"]]
        if len(tables) != len(self.table) or any(t.dim() != 2 or t.shape[1] != self.size for t in tables):
            raise ValueError(f"{where}: the saved per-entity states are {len(tables)} rows of width "
                             f"{tables[0].shape[1] if tables else '?'}; this run's are {len(self.table)} of "
                             f"{self.size} (model.memory or the number of rows changed)")
        self.index, self.table = [dict(i) for i in snapshot["index"]], tables
        self._handles = snapshot.get("handles")


def _row_ids(obs: Any, where: str) -> List[Mapping[str, Any]]:
    ids = getattr(obs, "ids", None)
    if ids is None:
        raise ValueError(f"{where}: these observations carry no entity ids (VecObs.ids); per-entity memory keeps "
                         "states by id, which environments stepped in this process pass (rollout.processes: 0), "
                         "worker processes not yet")
    return ids


def _lengths(obs: Any) -> Dict[str, np.ndarray]:
    return {t: np.asarray(f.size1(), dtype=np.int64) for t, f in obs.features.items()}


def actor_memory_size(frame: Any) -> int:
    """The width of the recurrent state of a frame's actor per row (0: no memory, or no actor)."""
    return memory_size(unwrap(getattr(frame, "actor", None)))


def entity_rows(frame: Any, n_rows: int) -> Optional[EntityRows]:
    """An :class:`EntityRows` for the frame's actor where it keeps a state per entity, else None."""
    actor = unwrap(getattr(frame, "actor", None))
    size = entity_memory_size(actor)
    return EntityRows(size, n_rows, list(actor.obs_space.entities)) if size else None


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


def refuse_entity_memory(frame: Any, what: str, error: type = ValueError) -> None:
    """Raises ``error`` where the frame's actor keeps a state per entity (``model.memory.per_entity``), which
    ``what`` does not carry yet (training and evaluation do)."""
    if entity_memory_size(unwrap(getattr(frame, "actor", None))):
        raise error(f"{what}: this run's network keeps a state per entity (model.memory.per_entity), not carried "
                    "here yet; training and entmachin eval carry it")


def sequence_rows(chunks: List[Tuple[int, int]], length: Optional[int], where: str, burn_in: int = 0
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """The rows of every sequence of stored rollouts, int64 ``[n_sequences, L]`` in time order, and the rows of
    the ``burn_in`` steps of the same environment before each (``[n_sequences, burn_in]``, -1 for a sequence
    with fewer earlier steps in its rollout: the first of each row).

    Args:
        chunks: ``(T, B)`` of each stored rollout, in storing order (its rows step-major after the previous ones).
        length: ``frame.sequence_length``; None: each rollout's ``T`` steps are one sequence.

    Raises:
        ValueError: ``length`` does not divide a rollout's steps, or rollouts of different lengths with None.
    """
    out, before, offset = [], [], 0
    steps = {t for t, _ in chunks}
    if length is None and len(steps) > 1:
        raise ValueError(f"{where}: the stored rollouts have {sorted(steps)} steps; with sequence_length null each "
                         "rollout is one sequence, so they must be equally long (or set frame.sequence_length)")
    for n_steps, n_envs in chunks:
        size = n_steps if length is None else length
        if n_steps % size:
            raise ValueError(f"{where}: frame.sequence_length={size} does not divide the rollout's {n_steps} steps "
                             "(rollout.n_steps); choose a divisor of it")
        steps_of = offset + np.arange(n_steps * n_envs, dtype=np.int64).reshape(n_steps, n_envs)  # [T, B]
        rows = steps_of.reshape(n_steps // size, size, n_envs)
        out.append(rows.transpose(0, 2, 1).reshape(-1, size))  # [T / L * B, L]
        prior = np.full((n_steps // size, n_envs, burn_in), -1, dtype=np.int64)  # [T / L, B, k]
        for w in range(n_steps // size):
            if w * size >= burn_in:
                prior[w] = steps_of[w * size - burn_in : w * size].T
        before.append(prior.reshape(n_steps // size * n_envs, burn_in))  # [T / L * B, k]
        offset += n_steps * n_envs
    return np.concatenate(out), np.concatenate(before)


def sequence_schedule(chunks: List[Tuple[int, int]], config: Any, n_minibatches: int, rng: np.random.Generator,
                      where: str) -> Tuple[List[np.ndarray], Dict[str, int], Optional["BurnIn"]]:
    """An update's minibatches of whole sequences (``batch_size // L`` of them, at least one), each
    time-major; the keyword that tells the networks the unroll's length (``{"sequence_length": L}``); and
    with ``config.burn_in`` the rows each minibatch replays first (None without)."""
    burn_in = getattr(config, "burn_in", 0)
    sequences, prior = sequence_rows(chunks, config.sequence_length, where, burn_in)  # [n, L], [n, k]
    size = sequences.shape[1]
    picks = minibatch_schedule(sequences.shape[0], max(1, config.batch_size // size), n_minibatches, rng)
    burn = BurnIn([prior[p] for p in picks]) if burn_in else None
    return [time_major(sequences[p]) for p in picks], {"sequence_length": size}, burn


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


def blocks(chunks: List[Tuple[int, int]], length: Optional[int], rows_per_block: int, where: str
           ) -> Tuple[np.ndarray, int]:
    """Every stored row in blocks of whole sequences, each time-major, and the block size in rows (at least
    ``rows_per_block``): what passes over all rows in chunks (old log-probabilities) take."""
    sequences = sequence_rows(chunks, length, where)[0]  # [n_sequences, L]
    length = sequences.shape[1]
    per_block = max(1, math.ceil(rows_per_block / length))
    parts = [time_major(sequences[i : i + per_block]) for i in range(0, sequences.shape[0], per_block)]
    return np.concatenate(parts), per_block * length


def sequence_values(criticize: Callable[..., torch.Tensor], steps: Any, where: str) -> Callable[[Any], torch.Tensor]:
    """A critic over the state rows of a rollout's ``steps`` (``T`` steps of each row, step-major, which is
    time-major with one sequence per row), then the next-state rows that bootstrap, each one step from the
    state stored with it; ``criticize(state, L)`` values rows in sequences of ``L`` steps.

    Raises:
        ValueError: the rollout stores only some of its rows (they would not make whole sequences).
    """
    if steps.stored is not None:
        raise ValueError(f"{where}: a network with memory trains on whole sequences of every row; this rollout "
                         "stores only some of its rows (self-play's snapshots play the others)")
    n_steps, n_rows = steps.reward.shape[0], steps.n_rows

    def values(inputs: Mapping[str, Any]) -> torch.Tensor:
        total = trees.n_rows(inputs, "the critic's inputs")
        out = [criticize(trees.row_range(inputs, 0, n_rows), n_steps)]
        if total > n_rows:
            out.append(criticize(trees.row_range(inputs, n_rows, total), 1))
        return torch.cat(out)
    return values
