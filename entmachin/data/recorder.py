"""Turning a vectorised environment's steps into whole episodes of dataset rows.

``Recorder.step(obs, actions, next_obs)`` keeps each step's batch as it is (columnar, no copy
per row); every ``flush_every`` steps, or at ``close()``, the rows of the episodes that ended are
gathered (one vectorised take per column), ordered by episode and step, and handed to the
writer; the rows of episodes still running wait for the next flush.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from entmachin.data.dataset import DatasetWriter
from entmachin.data.rows import Rows, action_dtype, action_width, concat_rows
from entmachin.env.action import CONTINUOUS_SPACES, ActionSpace
from entmachin.env.canonical import to_state
from entmachin.env.multi_agent import RESULTS
from entmachin.env.vec_env import VecObs
from entmachin.ragged.array import RaggedArray
from entmachin.ragged.arrays import empty_ragged, ragged_full

__all__ = ["Recorder"]

_RESULT_NAMES = {score: name for name, score in RESULTS.items()}


def _visible(state: Mapping[str, Any], obs_space_types: Sequence[str]) -> Dict[str, RaggedArray]:
    visible = dict(state.get("visible", {}))
    for t in obs_space_types:
        if t not in visible:
            visible[t] = ragged_full(state["entities"][t].size1(), 1, True, np.bool_)
    return {t: visible[t] for t in obs_space_types}


class Recorder:
    """Records the rows of a ``VecEnv``'s episodes into a ``DatasetWriter``.

    Args:
        writer: where whole episodes go.
        seats: the seat of each row of the vectorised environment (None: one player).
        episodes: stop recording rows of episodes that start after this many were started
            (None: no limit); :attr:`done` says when that many have ended.
        flush_every: steps between gathering the ended episodes.
    """

    def __init__(self, writer: DatasetWriter, n_rows: int, seats: Optional[Sequence[Optional[str]]] = None,
                 episodes: Optional[int] = None, flush_every: int = 64) -> None:
        self.writer = writer
        self.n_rows = n_rows
        self.seats = list(seats) if seats is not None else [None] * n_rows
        self.limit = episodes
        self.flush_every = flush_every
        self.action_space: Dict[str, ActionSpace] = writer.action_space
        self._types = list(writer.obs_space.entities)
        # A game of several players has one episode per game: its rows share the game's id.
        games = np.arange(n_rows, dtype=np.int64)
        if seats is not None:
            first_seat = self.seats[0]
            games = np.cumsum([s == first_seat for s in self.seats]) - 1
        self._game_of_row = games
        self._n_games = int(games.max()) + 1 if n_rows else 0
        self._episode = np.arange(self._n_games, dtype=np.int64)[games]  # [n_rows] current episode id
        self._started = self._n_games
        self._step = np.zeros(n_rows, dtype=np.int64)
        self._chunks: List[Rows] = []
        self._since_flush = 0
        self.ended = 0  # episodes (games) among the first ``episodes`` that ended
        self.returns: List[float] = []  # the return of each row (seat) of those episodes, in the order they ended
        self._running = np.zeros(n_rows)  # [n_rows] each row's return so far

    @property
    def done(self) -> bool:
        """Whether ``episodes`` episodes have ended."""
        return self.limit is not None and self.ended >= self.limit

    def step(self, obs: VecObs, actions: Mapping[str, RaggedArray], next_obs: VecObs,
             probs: Optional[Mapping[str, RaggedArray]] = None, ids: Optional[Sequence[Mapping[str, list]]] = None,
             final_ids: Optional[Sequence[Mapping[str, list]]] = None) -> None:
        """Records one step of every row: ``obs`` (what each row saw), the ``actions`` taken
        (int64 ragged ``[n_actors, 1]``; float32 ragged ``[n_actors, n_values]`` for a continuous
        action), and ``next_obs`` (what followed; its ``final_obs`` holds the last observation of
        the episodes that ended).

        Args:
            probs: discrete action name -> float32 ragged ``[n_choices, 1]``, one sequence per
                actor (a continuous action has none).
            ids / final_ids: per row of ``obs`` (and of ``next_obs.final_obs``), entity type ->
                the ids the environment gave.

        Raises:
            ValueError: ``probs`` of a continuous action, or ended rows without their final
                observations.
        """
        n = len(obs)
        continuous = [a for a in (probs or {}) if isinstance(self.action_space.get(a), CONTINUOUS_SPACES)]
        if continuous:
            raise ValueError(f"Recorder.step: probs[{continuous[0]!r}] given, but the action is continuous; "
                             "probabilities are recorded for discrete actions only")
        state = to_state(obs, self.action_space)
        ended = next_obs.done
        result = [None] * n
        acting = Rows(self._episode.copy(), self._step.copy(), np.zeros(n, np.bool_), dict(state["entities"]),
                      _visible(state, self._types), {a: dict(m) for a, m in state["action_masks"].items()},
                      dict(actions), np.asarray(next_obs.reward, np.float32), ended & ~next_obs.truncated,
                      next_obs.truncated.copy(), self.seats, result, self._ids(ids, n),
                      {} if probs is None else {a: (p, np.ones(n, np.bool_)) for a, p in probs.items()})
        self._chunks.append(acting)
        self._running += next_obs.reward
        if ended.any():
            rows = np.flatnonzero(ended)
            final, index = next_obs.final_obs, next_obs.final_index  # final_obs's rows are in final_index's order
            if final is None or not np.array_equal(np.sort(index), rows):
                raise ValueError("Recorder.step: next_obs has ended rows without their final observations")
            fstate = to_state(final, self.action_space)
            k = len(index)
            last = Rows(self._episode[index], self._step[index] + 1, np.ones(k, np.bool_),
                        dict(fstate["entities"]), _visible(fstate, self._types),
                        {a: dict(m) for a, m in fstate["action_masks"].items()},
                        {a: empty_ragged(action_dtype(space), action_width(space), k)
                         for a, space in self.action_space.items()},
                        np.zeros(k, np.float32), ended[index] & ~next_obs.truncated[index],
                        next_obs.truncated[index].copy(), [self.seats[r] for r in index],
                        [None if np.isnan(s) else _RESULT_NAMES[float(s)] for s in next_obs.result[index]],
                        self._ids(final_ids, k),
                        {} if probs is None else {a: (empty_ragged(np.float32, 1, 0), np.zeros(k, np.bool_))
                                                  for a in probs})
            self._chunks.append(last)
            for game in np.unique(self._game_of_row[rows]):  # a new episode for every row of the game
                members = self._game_of_row == game
                if self.limit is None or self._episode[members][0] < self.limit:
                    self.ended += 1
                    self.returns += self._running[members].tolist()
                self._running[members] = 0.0
                self._episode[members] = self._started
                self._started += 1
                self._step[members] = 0
        self._step[~ended] += 1
        self._since_flush += 1
        if self._since_flush >= self.flush_every or self.done:
            self.flush()

    def _ids(self, ids: Optional[Sequence[Mapping[str, list]]], n: int) -> Dict[str, List[Optional[list]]]:
        if ids is None:
            return {}
        return {t: [list(row[t]) if t in row else None for row in ids] for t in self._types}

    def flush(self) -> None:
        """Hands the rows of the episodes that ended to the writer, ordered by episode and step."""
        if not self._chunks:
            return
        rows = concat_rows(self._chunks)
        wanted = rows.episode < self.limit if self.limit is not None else np.ones(len(rows), np.bool_)
        ended = np.isin(rows.episode, rows.episode[rows.final]) & wanted
        order = np.lexsort((rows.step, rows.episode))
        done_index = order[ended[order]]
        keep = np.flatnonzero(~ended & wanted)
        if len(done_index):
            self.writer.write(rows.take(done_index))
        self._chunks = [rows.take(keep)] if len(keep) else []
        self._since_flush = 0

    def close(self) -> None:
        """Writes the ended episodes' rows and the writer's last part (running episodes are dropped)."""
        self.flush()
        self._chunks = []
        self.writer.close()

