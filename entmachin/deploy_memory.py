"""The recurrent states an exported policy with memory keeps between calls (``entmachin.deploy``), numpy only.

:class:`Carried` holds one key's states (a game of ``OnnxPolicy.act``, or the rows of ``act_batch``): the
rows' state (``model.memory``) and, with ``model.memory.per_entity``, each entity's, kept by its id in an
:class:`EntityStates`. The entities are numbered as training numbers them
(``entmachin.env.entity_ids.number_entities``, which ``EntityRows`` uses too), and an entity's state is
dropped when its row's episode ends. :func:`memory_feeds` checks and lays out the graph's recurrent inputs
(``entmachin.run.export_memory``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from entmachin.env.entity_ids import number_entities
from entmachin.env.vec_env import VecObs

__all__ = ["Carried", "EntityStates", "memory_feeds"]


class EntityStates:
    """The per-entity states of ``n_rows`` rows, keyed by the entities' ids (``VecObs.ids``): an entity's
    state is kept from one appearance to its next in the episode (across absences too); one seen the first
    time in its episode starts from zeros.

    Args:
        size: floats of state per entity (the metadata's ``entmachin.entity_memory.state_size``).
        n_rows: the rows acted on together.
        types: the observation space's entity types.
    """

    def __init__(self, size: int, n_rows: int, types: Sequence[str]) -> None:
        self.size, self.types = size, list(types)
        self.index: List[Dict[Any, Tuple[str, int]]] = [{} for _ in range(n_rows)]  # id -> (type, handle)
        self.table = [np.zeros((0, size), np.float32) for _ in range(n_rows)]  # [n_handles, size] each
        self._handles: Optional[List[Dict[str, List[int]]]] = None  # the last states' handles, per row and type

    def states(self, vec: VecObs, start: np.ndarray, where: str) -> Dict[str, np.ndarray]:
        """Each entity type's states, float32 ``[N_t, size]`` in the batch's entity order, for the entities of
        ``vec``; the rows where ``start`` (bool ``[B]``) begin an episode forget their entities first.

        Raises:
            ValueError: ``vec`` carries no ids, an entity without an id, an id given twice in one observation,
                or an id that named an entity of another type earlier in the episode (``where`` and the row named).
        """
        if vec.ids is None:
            raise ValueError(f"{where}: these observations carry no entity ids (VecObs.ids); this policy keeps a "
                             "state per entity id (model.memory.per_entity): batch them with EnvList, which passes "
                             "the ids, or set VecObs.ids")
        n = len(self.index)
        for r in np.flatnonzero(start).tolist():
            self.index[r], self.table[r] = {}, np.zeros((0, self.size), np.float32)
        counts = {t: np.asarray(vec.features[t].size1()) if t in vec.features else np.zeros(n, np.int64)
                  for t in self.types}
        handles = []
        for r in range(n):
            handles.append(number_entities(self.index[r], vec.ids[r], {t: int(c[r]) for t, c in counts.items()},
                                           self.types, f"{where}: entity memory: row {r}"))
            grown = len(self.index[r]) - self.table[r].shape[0]
            if grown > 0:
                self.table[r] = np.concatenate([self.table[r], np.zeros((grown, self.size), np.float32)])
        self._handles = handles
        return {t: np.concatenate([self.table[r][row[t]] for r, row in enumerate(handles)] +
                                  [np.zeros((0, self.size), np.float32)]) for t in self.types}  # [N_t, size]

    def keep(self, after: Mapping[str, np.ndarray]) -> None:
        """Keeps each entity's next state (type -> ``[N_t, size]``, the graph's ``entity_memory_out/<t>``) for
        the entities of the last :meth:`states`."""
        for t in self.types:
            start = 0
            for r, row in enumerate(self._handles or ()):
                self.table[r][row[t]] = after[t][start : start + len(row[t])]
                start += len(row[t])


class Carried:
    """One key's states between calls: the rows' (float32 ``[n_rows, memory_size]``) and, with per-entity memory,
    the entities' (:class:`EntityStates`). A fresh one begins every row's episode."""

    def __init__(self, n_rows: int, memory_size: int, entity_size: int, types: Sequence[str]) -> None:
        self.memory = np.zeros((n_rows, memory_size), np.float32)  # [B, memory_size]
        self.entities = EntityStates(entity_size, n_rows, types) if entity_size else None
        self.fresh = True

    @property
    def n_rows(self) -> int:
        return self.memory.shape[0]

    def inputs(self, vec: VecObs, done: Optional[np.ndarray], where: str
               ) -> Tuple[np.ndarray, np.ndarray, Optional[Dict[str, np.ndarray]]]:
        """The recurrent inputs for ``vec``: the rows' states, ``episode_start`` (bool ``[B]``: every row when
        fresh, else ``done``, the rows whose previous episode ended; None: none) and the entities' states."""
        if self.fresh or done is None:
            start = np.full(self.n_rows, self.fresh, np.bool_)
        else:
            start = np.asarray(done, np.bool_).reshape(self.n_rows)
        entity = None if self.entities is None else self.entities.states(vec, start, where)
        return self.memory, start, entity

    def keep(self, memory: np.ndarray, entity_memory: Mapping[str, np.ndarray]) -> None:
        """The next states a call left (the graph's ``memory_out`` and ``entity_memory_out/<t>``)."""
        self.memory, self.fresh = memory, False
        if self.entities is not None:
            self.entities.keep(entity_memory)


def memory_feeds(feeds: Dict[str, np.ndarray], n: int, sizes: Tuple[int, int], types: Sequence[str], where: str,
                 memory: Optional[np.ndarray], episode_start: Optional[np.ndarray],
                 entity_memory: Optional[Mapping[str, np.ndarray]]) -> None:
    """Adds the recurrent inputs to ``feeds`` (``n`` observations; ``sizes``: the rows' and each entity's state
    size): the given states, zeros where none is given, and ``episode_start`` (default: every row begins).

    Raises:
        ValueError: a state of another shape, named (the rows', or an entity type's).
    """
    memory_size, entity_size = sizes
    if memory is not None and np.shape(memory) != (n, memory_size):
        raise ValueError(f"{where}: memory has shape {np.shape(memory)}; this policy's state is "
                         f"[{n}, {memory_size}] (one row per observation)")
    feeds["memory"] = np.zeros((n, memory_size), np.float32) if memory is None else np.asarray(memory, np.float32)
    feeds["episode_start"] = (np.ones(n, np.bool_) if episode_start is None
                              else np.asarray(episode_start, np.bool_).reshape(n))
    if not entity_size:
        return
    unknown = sorted(set(entity_memory or {}) - set(types))
    if unknown:
        raise ValueError(f"{where}: entity_memory has states for {unknown}, which are not entity types of this "
                         f"policy ({list(types)})")
    for t in types:
        n_t = feeds[f"features/{t}"].shape[0]
        given = (entity_memory or {}).get(t)
        if given is not None and np.shape(given) != (n_t, entity_size):
            raise ValueError(f"{where}: entity_memory[{t!r}] has shape {np.shape(given)}; this policy's per-entity "
                             f"state is [{n_t}, {entity_size}] (one row per {t!r} entity of the batch)")
        feeds[f"entity_memory/{t}"] = (np.zeros((n_t, entity_size), np.float32) if given is None
                                       else np.asarray(given, np.float32))
