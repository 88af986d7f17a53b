"""Per-entity memory while acting (``model.memory.per_entity``): each entity's state kept by its id.

A network that keeps a state per entity (``EntityMemoryCore``) takes, beside the rows' state, each entity
type's states (``entity_memory``) and, over sequences, the entities' numbers in their episodes
(``entity_handles``), both laid out like ``entities``. :class:`EntityRows` keeps them between acting calls
from the ids ``EnvList`` passes (``VecObs.ids``), and both are stored with every row, so training links each
entity's appearances in a sequence by its number.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from entmachin.env.entity_ids import number_entities
from entmachin.model.memory import entity_memory_size
from entmachin.model.wrappers import unwrap
from entmachin.ragged.tensor import RaggedTensor

__all__ = ["EntityRows", "EntityIdError", "entity_rows"]


class EntityIdError(ValueError):
    """An environment that breaks the ids' contract (``number_entities``) in row ``row`` of a batch."""

    def __init__(self, message: str, row: int) -> None:
        super().__init__(message)
        self.row = row


class EntityRows:
    """The per-entity recurrent states of ``n_rows`` rows between acting calls (``model.memory.per_entity``),
    keyed by the entities' ids: an entity's state is kept from one appearance to its next in the episode
    (also across steps where it is out of sight), and dropped when the episode ends. An entity seen the first
    time in its episode starts from zeros.

    Each row numbers its episode's entities in order of first appearance (their handles). The states given
    (``entity_memory``) and the handles (``entity_handles``) are stored with every row, both per entity type
    in the entities' layout; training links each entity's appearances in a sequence by its handle.

    A player acting only some rows (self-play: the learner acts its seats) advances only those (``rows=``);
    every row's states are dropped where its episode ends. A self-play snapshot keeps its own states of the
    rows it plays by the learner's numbering (:meth:`entries_for`, :meth:`keep`, :meth:`end`).

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
        self._rows = np.arange(n_rows, dtype=np.int64)  # [n]: the rows of the last entries

    def entries(self, obs: Any) -> Dict[str, Any]:
        """``entity_memory`` and ``entity_handles`` for the entities of ``obs`` (a ``VecObs`` with ``ids``);
        the handles are kept for :meth:`advance`.

        Raises:
            ValueError: ``obs`` carries no ids (worker processes do not pass them yet), an entity without an
                id, an id given twice in one observation, or an id that named an entity of another type earlier
                in the episode.
        """
        self._handles = self._number(_row_ids(obs, "entity memory"), _lengths(obs), range(len(self.index)))
        self._rows = np.arange(len(self.index), dtype=np.int64)
        return self._gather(self._handles)

    def entries_for(self, rows: np.ndarray, handles: Mapping[str, Any]) -> Dict[str, Any]:
        """The entries of ``rows`` (int64 ``[n]``) whose entities another ``EntityRows`` numbered: ``handles``
        (type -> ragged int64 ``[n_entities, 1]`` over those rows, as its :meth:`entries` gave them). A
        self-play snapshot reads the learner's numbering this way (an episode's entities are numbered alike
        whoever plays its row) and keeps its own states by it; the handles are kept for :meth:`keep`."""
        self._rows = np.asarray(rows, dtype=np.int64)
        self._handles = [{} for _ in range(len(self._rows))]
        for etype, given in handles.items():
            flat = given.data.reshape(-1).tolist()  # [n_entities]
            start = 0
            for k, n in enumerate(given.lengths.tolist()):
                self._handles[k][etype] = flat[start : start + n]
                start += n
        for r, row in zip(self._rows.tolist(), self._handles):
            needed = 1 + max((h for hs in row.values() for h in hs), default=-1)
            self._grow(r, needed)
        return self._gather(self._handles, self._rows)

    def keep(self, result: Any, rows: Optional[np.ndarray] = None) -> None:
        """Keeps each entity's next state from an acting call's ``result`` (its ``entity_memory`` field) over
        ``rows`` of the last entries (int64 ``[n]``, ascending; None: all of them); the others keep theirs.

        Raises:
            ValueError: no entries before, or a result without per-entity states of their shape.
        """
        if self._handles is None:
            raise ValueError("entity memory: a result kept before entries() gave the states it came from")
        after = getattr(result, "entity_memory", None)
        if not isinstance(after, Mapping):
            raise ValueError("entity memory: the network returned no per-entity states (a RogueNet output's "
                             f"entity_memory field), got {type(after).__name__}")
        place = {r: k for k, r in enumerate(self._rows.tolist())}
        picked = list(place.values()) if rows is None else [place[int(r)] for r in np.asarray(rows).tolist()]
        for etype in self.types:
            handles = [self._handles[k].get(etype, []) for k in picked]
            n = sum(len(h) for h in handles)
            new = after.get(etype)
            if n == 0:
                continue
            if not isinstance(new, torch.Tensor) or tuple(new.shape) != (n, self.size):
                raise ValueError(f"entity memory: the network returned {etype!r} states "
                                 f"{tuple(getattr(new, 'shape', ()))}; expected ({n}, {self.size})")
            new = new.detach().to("cpu", torch.float32)
            start = 0
            for k, h in zip(picked, handles):
                if h:
                    self.table[int(self._rows[k])][torch.as_tensor(h)] = new[start : start + len(h)]
                    start += len(h)
        self._handles = None

    def end(self, done: Any) -> None:
        """Drops the states and the numbering of the rows whose episode ended (bool ``[n_rows]``): their next
        observation begins an episode, its entities from zeros."""
        for r in np.flatnonzero(np.asarray(done, dtype=np.bool_).reshape(-1)).tolist():
            self.index[r], self.table[r] = {}, torch.zeros(0, self.size)

    def row(self, r: int) -> Tuple[Dict[Any, Tuple[str, int]], torch.Tensor]:
        """Row ``r``'s states: its ids' ``(type, handle)`` and its table ``[n_handles, size]`` (not copies), to
        be given back to a row by :meth:`put`."""
        return self.index[r], self.table[r]

    def put(self, r: int, states: Tuple[Dict[Any, Tuple[str, int]], torch.Tensor]) -> None:
        """Gives row ``r`` the states :meth:`row` took from a row (of any ``EntityRows`` of this width)."""
        self.index[r], self.table[r] = states

    def advance(self, result: Any, obs: Any, rows: Optional[np.ndarray] = None) -> Dict[str, Any]:
        """Keeps each entity's next state from an acting call's ``result`` (:meth:`keep`; ``rows``: the rows
        it acted, None: every row of the last :meth:`entries`), then drops the states of the rows whose episode
        ended (``obs``, the step's ``VecObs``). Returns the entries of every row's next states, the states each
        row's next observation reached: the final observation's where the episode ended (a truncated row's
        bootstrap).

        Raises:
            ValueError: no :meth:`entries` before, or a result without per-entity states of their shape.
        """
        self.keep(result, rows)
        ids, lengths = _row_ids(obs, "entity memory"), _lengths(obs)
        done = np.asarray(obs.done, dtype=np.bool_)
        if done.any():  # a row whose episode ended: its next state is its final observation's
            final_ids = _row_ids(obs.final_obs, "entity memory (final observations)")
            final_lengths = _lengths(obs.final_obs)
            where = {int(r): k for k, r in enumerate(np.asarray(obs.final_index, dtype=np.int64))}
            ids = [final_ids[where[r]] if r in where else ids[r] for r in range(len(ids))]
            lengths = {t: np.array([final_lengths[t][where[r]] if r in where else lengths[t][r]
                                    for r in range(len(ids))], dtype=np.int64) for t in self.types}
        entries = self._gather(self._number(ids, lengths, range(len(self.index))))
        self.end(done)
        return entries

    def _number(self, ids: List[Mapping[str, Any]], lengths: Mapping[str, np.ndarray], rows: Any
                ) -> List[Dict[str, List[int]]]:
        """Each row's handles per type, new ids numbered after the episode's earlier ones (``number_entities``)."""
        out = []
        for r in rows:
            counts = {etype: int(lengths[etype][r]) for etype in self.types}
            try:
                out.append(number_entities(self.index[r], ids[r], counts, self.types, f"entity memory: row {r}"))
            except ValueError as e:
                raise EntityIdError(str(e), row=r) from None
            self._grow(r, len(self.index[r]))
        return out

    def _grow(self, r: int, n_handles: int) -> None:
        """Row ``r``'s table with room for ``n_handles`` entities (the new ones at zeros)."""
        if n_handles > self.table[r].shape[0]:
            grown = torch.zeros(n_handles, self.size)  # [n_handles, size]
            grown[: self.table[r].shape[0]] = self.table[r]
            self.table[r] = grown

    def _gather(self, handles: List[Dict[str, List[int]]], rows: Optional[np.ndarray] = None) -> Dict[str, Any]:
        """The entries of ``handles`` (per row of ``rows``, None: every row in order)."""
        rows = list(range(len(handles))) if rows is None else rows.tolist()
        tables = [self.table[r] for r in rows]
        every = torch.cat(tables) if tables else torch.zeros(0, self.size)  # [n_handles of the rows, size]
        first = np.cumsum([0] + [t.shape[0] for t in tables[:-1]]).tolist()  # each row's first place in it
        memory, numbers = {}, {}
        for etype in self.types:
            per_row = [row.get(etype, []) for row in handles]
            lengths = torch.tensor([len(h) for h in per_row], dtype=torch.long)  # [B]
            flat = [k for h in per_row for k in h]
            place = torch.tensor([f + k for f, h in zip(first, per_row) for k in h], dtype=torch.long)
            memory[etype] = RaggedTensor.from_lengths(every.index_select(0, place), lengths)  # [n_entities, size]
            numbers[etype] = RaggedTensor.from_lengths(torch.tensor(flat, dtype=torch.long).reshape(-1, 1), lengths)
        return {"entity_memory": memory, "entity_handles": numbers}

    def snapshot(self) -> Dict[str, Any]:
        return {"index": [dict(i) for i in self.index], "table": [t.clone() for t in self.table],
                "handles": self._handles, "rows": torch.from_numpy(self._rows.copy())}

    def restore(self, snapshot: Mapping[str, Any], where: str) -> None:
        tables = [torch.as_tensor(t).float() for t in snapshot["table"]]
        if len(tables) != len(self.table) or any(t.dim() != 2 or t.shape[1] != self.size for t in tables):
            raise ValueError(f"{where}: the saved per-entity states are {len(tables)} rows of width "
                             f"{tables[0].shape[1] if tables else '?'}; this run's are {len(self.table)} of "
                             f"{self.size} (model.memory or the number of rows changed)")
        self.index, self.table = [dict(i) for i in snapshot["index"]], tables
        self._handles = snapshot.get("handles")
        rows = snapshot.get("rows")
        self._rows = np.arange(len(tables), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)


def _row_ids(obs: Any, where: str) -> List[Mapping[str, Any]]:
    ids = getattr(obs, "ids", None)
    if ids is None:
        raise ValueError(f"{where}: these observations carry no entity ids (VecObs.ids); per-entity memory keeps "
                         "states by id, which environments stepped in this process pass (rollout.processes: 0), "
                         "worker processes not yet")
    return ids


def _lengths(obs: Any) -> Dict[str, np.ndarray]:
    return {t: np.asarray(f.size1(), dtype=np.int64) for t, f in obs.features.items()}


def entity_rows(frame: Any, n_rows: int) -> Optional[EntityRows]:
    """An :class:`EntityRows` for the frame's actor where it keeps a state per entity, else None."""
    actor = unwrap(getattr(frame, "actor", None))
    size = entity_memory_size(actor)
    return EntityRows(size, n_rows, list(actor.obs_space.entities)) if size else None
