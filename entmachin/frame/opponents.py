"""Who plays the rows of a game that the frame does not: the :class:`Opponents` protocol of
``RolloutCollector`` (self-play's snapshots, ``entmachin.run.selfplay``), how their actions join the frame's,
and the recurrent states an opponent with memory keeps of the rows it plays (:class:`OpponentStates`)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np
import torch

from entmachin.env import VecObs
from entmachin.frame.entity_memory import EntityRows
from entmachin.frame.memory import MemoryRows
from entmachin.model.memory import entity_memory_size, memory_size
from entmachin.model.wrappers import unwrap
from entmachin.ragged.array import RaggedArrayI64
from entmachin.ragged.arrays import concat

__all__ = ["Opponents", "OpponentStates", "merge_rows"]


class Opponents(Protocol):
    """Who plays the rows of a game that the frame does not (self-play: ``entmachin.run.selfplay``).

    Each step the collector acts with its frame on ``current_rows()`` (one forward pass), asks ``act``
    for the actions of the other rows, steps the environments with both, and shows ``observe`` what
    the step returned. Every row is stored, flagged ``stored`` where the frame acted it, so that GAE
    runs along every row and only the frame's rows reach the losses. The episode statistics are those
    of ``learner_rows()``, which has the same length at every step (one entry per learner slot); a
    slot may move to another row only after its game ended, and so may ``current_rows()``.

    With a network with memory the frame's rows carry the frame's recurrent states (the collector's,
    stored with them) and ``act`` is given the rows' states without them: an opponent with memory keeps
    its own per row (:class:`OpponentStates`), zeroed where ``observe`` sees a row's episode end. With
    per-entity memory the state given to ``act`` holds the frame's ``entity_handles`` of every row (each
    episode's entities numbered in order of first appearance, alike whoever plays the row), by which an
    opponent keeps its own entities' states, and the frame's ``entity_memory``, which it replaces.
    """

    def learner_rows(self) -> np.ndarray:
        """int64 ``[n_slots]``: the row each learner slot plays this step."""

    def current_rows(self) -> np.ndarray:
        """int64 ``[n]``, ascending: every row the frame plays this step (``learner_rows()`` among them)."""

    def act(self, state: Mapping[str, Any]) -> List[Tuple[np.ndarray, Dict[str, RaggedArrayI64]]]:
        """``(rows, actions of those rows)`` for every row the frame does not play, from the state of all rows."""

    def observe(self, obs: VecObs) -> None:
        """Sees a step's result (games that ended, their results) before the next step."""


def merge_rows(n_rows: int,
               pieces: Sequence[Tuple[np.ndarray, Mapping[str, RaggedArrayI64]]]) -> Dict[str, RaggedArrayI64]:
    """The actions of ``n_rows`` rows from pieces ``(rows, {name: ragged [len(rows)]})`` that partition them."""
    pieces = [(rows, actions) for rows, actions in pieces if len(rows)]
    order = np.concatenate([rows for rows, _ in pieces])  # [n_rows]: the row of each piece's entry, in turn
    if order.shape[0] != n_rows or np.bincount(order, minlength=n_rows).max(initial=0) != 1:
        raise ValueError(f"merge_rows: the pieces' rows do not partition {n_rows} rows")
    place = np.empty(n_rows, dtype=np.int64)
    place[order] = np.arange(n_rows, dtype=np.int64)  # [n_rows]: where each row is in the concatenation
    return {name: concat([actions[name] for _, actions in pieces]).take(place) for name in pieces[0][1]}


class OpponentStates:
    """The recurrent states an opponent (a self-play snapshot) keeps of every row, read and written only where
    it acts: its :class:`~entmachin.frame.memory.MemoryRows` (``model.memory``) and, with per-entity memory,
    its :class:`~entmachin.frame.entity_memory.EntityRows` over the frame's numbering of the entities. A row's
    states are dropped where its episode ends, whoever played it.

    Args:
        actor: the opponent's network (its memory's widths).
        n_rows: the rows of the games.
    """

    def __init__(self, actor: Any, n_rows: int) -> None:
        actor = unwrap(actor)
        self.memory = MemoryRows(memory_size(actor), n_rows)
        size = entity_memory_size(actor)
        self.entities = EntityRows(size, n_rows, list(actor.obs_space.entities)) if size else None

    def given(self, state: Mapping[str, Any], rows: np.ndarray) -> Dict[str, Any]:
        """``state`` (of ``rows``, int64 ``[n]``, taken from every row's) with this opponent's states of them."""
        index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        out = {**state, "memory": self.memory.memory[index], "episode_start": self.memory.episode_start[index]}
        if self.entities is not None:
            out.update(self.entities.entries_for(rows, state["entity_handles"]))
        return out

    def advance(self, result: Optional[Any], done: np.ndarray, rows: Optional[np.ndarray]) -> None:
        """Keeps the next states of ``result`` (its call on :meth:`given`'s ``rows``; None: it did not act this
        step), then drops those of the rows whose episode ended (``done``, bool ``[B]``)."""
        if result is None:
            self.memory.end(done)
        else:
            self.memory.advance(result, done, rows)
            if self.entities is not None:
                self.entities.keep(result)
        if self.entities is not None:
            self.entities.end(done)

    def snapshot(self) -> Tuple[Dict[str, torch.Tensor], Optional[Dict[str, Any]]]:
        """The rows' states and the entities' (None without per-entity memory), as the pool file keeps them."""
        return self.memory.snapshot(), None if self.entities is None else self.entities.snapshot()

    def restore(self, memory: Mapping[str, Any], entities: Optional[Mapping[str, Any]], where: str) -> None:
        """Goes on from :meth:`snapshot`'s parts (``entities`` None: their states start over).

        Raises:
            ValueError: states of another width or number of rows, naming ``where``.
        """
        self.memory.restore(memory, where)
        if self.entities is not None and entities is not None:
            self.entities.restore(entities, where)
