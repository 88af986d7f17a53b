"""Who plays the rows of a game that the frame does not: the :class:`Opponents` protocol of
``RolloutCollector`` (self-play's snapshots, ``entmachin.run.selfplay``) and how their actions join the frame's."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Protocol, Sequence, Tuple

import numpy as np

from entmachin.env import VecObs
from entmachin.ragged.array import RaggedArrayI64
from entmachin.ragged.arrays import concat

__all__ = ["Opponents", "merge_rows"]


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
    its own per row (``entmachin.run.selfplay``), zeroed where ``observe`` sees a row's episode end.
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
