"""Behaviour cloning in the runner: a dataset fed to a ``BC`` frame as a rollout would be.

``Cloning`` stands where the ``RolloutCollector`` stands for the other frames: ``collect()``
hands the frame the next ``bc.rows_per_update`` rows (shuffled epochs over the training episodes)
and reports them as that many steps, so the runner's loop, its evaluations on the environment,
checkpoints, ``--resume`` and logs work unchanged; a held-out share of the episodes gives the
validation loss and action accuracy (``bc/*`` in tensorboard). The loss is the mean negative
log-likelihood of every actor's recorded action (continuous values' log-densities included); the
accuracy counts discrete actors only, and is not written where the held-out rows have none.

A network with memory trains on sequences of whole episodes (``entmachin.frame.bc_sequences``): the acting
rows of each episode and seat are held together in step order, ``collect()`` hands the frame whole episodes
(shuffled epochs over them) until it holds at least ``bc.rows_per_update`` rows, and the held-out rows are
whole episodes too. An episode whose steps have gaps (rows missing from a dataset written by other means
than ``entmachin record``) is refused, naming it: its sequences would skip steps. With per-entity memory
(``model.memory.per_entity``) each row's entities are numbered in their episode from the recorded ids
(``state['entity_handles']``); a dataset without the ids of a type that has entities is refused, naming it.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from entmachin.data import Dataset, DatasetError, Rows
from entmachin.data.relabel import next_rows
from entmachin.env import GLOBAL_ENTITY
from entmachin.frame.bc import Held
from entmachin.frame.bc_sequences import entity_handles
from entmachin.frame.memory import actor_memory_size
from entmachin.frame.collector import RolloutStats
from entmachin.model.memory import entity_memory_size
from entmachin.model.wrappers import unwrap
from entmachin.run.callbacks.base import Callback
from entmachin.run.config import RunConfig
from entmachin.run.logs import RunError

__all__ = ["Cloning", "discounted_returns"]

# Held-out rows scored after every update (a sample of them where there are more).
_VALIDATION_ROWS = 2048


def discounted_returns(rows: Rows, discount: float) -> np.ndarray:
    """float32 ``[n]``: each row's discounted return to its episode's end (per seat); a truncated
    episode counts nothing after its cut (no value to bootstrap from), a final row 0."""
    nxt = next_rows(rows)
    out = np.zeros(len(rows), np.float64)
    for step in range(int(rows.step.max(initial=0)), -1, -1):
        at = np.flatnonzero((rows.step == step) & ~rows.final)
        following = np.where(rows.terminal[at], 0.0, out[nxt[at]])
        out[at] = rows.reward[at] + discount * following
    return out.astype(np.float32)


def _held(rows: Rows, returns: np.ndarray, episodes: Optional[np.ndarray] = None, where: Optional[str] = None
          ) -> Held:
    """``rows`` held; ``where`` (with ``episodes``): per-entity memory, each row's entities numbered in their
    episode from the recorded ids (errors name ``where``)."""
    probs = {name: values for name, (values, _) in rows.probs.items()}
    state = rows.state()
    if where is not None:
        counts = {t: np.asarray(v.size1()) for t, v in state["entities"].items() if t != GLOBAL_ENTITY}
        try:
            state = {**state, "entity_handles": entity_handles(rows.ids, counts, episodes, where)}
        except ValueError as e:
            raise RunError(str(e)) from None
    return Held(state, rows.action, returns, probs, episodes)


def episode_order(rows: Rows, index: np.ndarray, where: str) -> Tuple[np.ndarray, np.ndarray]:
    """The acting rows ``index`` of ``rows`` in episode order: int64 ``[n]`` the rows, each episode's (of
    one seat) together in step order, and int64 ``[n]`` their episode (one id per episode and seat, 0, 1, ...).

    Raises:
        RunError: an episode whose steps are not 0, 1, 2, ... (rows missing).
    """
    seats = np.unique(np.array([str(s) for s in rows.seat]), return_inverse=True)[1][index]  # [n]
    episode, step = rows.episode[index], rows.step[index]
    order = np.lexsort((step, seats, episode))  # [n]
    pairs = np.stack([episode[order], seats[order]], axis=1)  # [n, 2]
    new = np.r_[True, (pairs[1:] != pairs[:-1]).any(axis=1)]  # [n]: an episode's first row
    ids = np.cumsum(new) - 1  # [n]
    position = np.arange(len(order)) - np.flatnonzero(new)[ids]  # [n]: the row's place in its episode
    gap = np.flatnonzero(step[order] != position)
    if len(gap):
        r = index[order[gap[0]]]
        raise RunError(f"{where}: episode {int(rows.episode[r])} (seat {rows.seat[r]!r}) has step {int(rows.step[r])} "
                       f"where step {int(position[gap[0]])} should be; a network with memory trains on whole "
                       "episodes in step order, and this one has rows missing")
    return index[order], ids.astype(np.int64)


class Cloning(Callback):
    """The dataset side of a BC run (see the module docstring): a ``Collector``, and a callback that scores
    the held-out rows after each update.

    Raises:
        RunError: no dataset there, a damaged one, spaces other than the environment's (named),
            no acting rows, or too few episodes to hold some out.
    """

    def __init__(self, config: RunConfig, frame: Any, obs_space: Any, action_space: Any, seed: int) -> None:
        self.frame = frame
        self.rows_per_update = config.bc.rows_per_update
        if config.bc.data is None:
            raise RunError("bc.data: frame.name: BC learns from a dataset; give the directory `entmachin record` wrote "
                           "(--set bc.data=DIR)")
        try:
            dataset = Dataset(config.bc.data)
            dataset.check_spaces(obs_space, action_space, config.env.name)
            rows = dataset.read()
        except DatasetError as e:
            raise RunError(f"bc.data: {e}") from None
        returns = discounted_returns(rows, frame.config.discount)
        acting = ~rows.final
        episodes = np.unique(rows.episode)
        self._rng = np.random.default_rng(seed)
        n_held_out = int(round(config.bc.validation * len(episodes)))
        if config.bc.validation > 0 and n_held_out == 0 and len(episodes) > 1:
            n_held_out = 1
        if n_held_out >= len(episodes):
            raise RunError(f"bc.validation: {config.bc.data} holds {len(episodes)} episode(s); holding out "
                           f"{config.bc.validation:.0%} leaves none to train on")
        held_out = self._rng.permutation(episodes)[:n_held_out]
        validation = np.isin(rows.episode, held_out)
        train = np.flatnonzero(acting & ~validation)
        if not len(train):
            raise RunError(f"bc.data: {config.bc.data} has no rows with actions to train on")
        val = np.flatnonzero(acting & validation)
        self.memory = bool(actor_memory_size(frame))
        if self.memory:  # whole episodes in step order, and whole held-out episodes
            per_entity = f"bc.data: {config.bc.data}" if entity_memory_size(unwrap(frame.actor)) else None
            self.train = _held(*self._episodes(rows, returns, train, "bc.data"), per_entity)
            self._check_length(frame.config.sequence_length, config.bc.data)
            val_rows, val_returns, val_episodes = self._episodes(rows, returns, val, "bc.data")
            if len(val_rows):
                self.validation = _held(val_rows, val_returns, val_episodes, per_entity).take(
                    self._validation_sample(val_episodes))
            else:
                self.validation = None
        else:
            self.train = _held(rows.take(train), returns[train])
            if len(val) > _VALIDATION_ROWS:
                val = np.sort(self._rng.choice(val, _VALIDATION_ROWS, replace=False))
            self.validation = _held(rows.take(val), returns[val]) if len(val) else None
        self.n_episodes, self.n_held_out = len(episodes), n_held_out
        frame.learn_input_statistics(self.train)  # a resumed run's checkpoint then replaces them
        self._ends = np.r_[np.flatnonzero(np.diff(self.train.episodes)) + 1, self.train.n_rows] \
            if self.memory else None  # [n_episodes]: where each training episode's rows end
        self._order = self._rng.permutation(self._n_units())
        self._cursor = 0
        self.total_env_steps = 0

    def _n_units(self) -> int:
        """What an epoch shuffles: training rows, or with memory training episodes."""
        return self.train.n_rows if not self.memory else len(self._ends)

    @staticmethod
    def _episodes(rows: Rows, returns: np.ndarray, index: np.ndarray, where: str
                  ) -> Tuple[Rows, np.ndarray, np.ndarray]:
        ordered, ids = episode_order(rows, index, where)
        return rows.take(ordered), returns[ordered], ids

    def _check_length(self, length: Optional[int], data: str) -> None:
        longest = int(np.bincount(self.train.episodes).max())
        if length is not None and length > longest:
            raise RunError(f"frame.sequence_length: {length}, but the longest training episode of {data} has "
                           f"{longest} acting steps; every sequence would be mostly padding: set it to at most "
                           f"{longest}, or null (whole episodes)")

    def _validation_sample(self, episodes: np.ndarray) -> np.ndarray:
        """The held-out rows scored: whole episodes, a random sample of them where they hold more than
        ``_VALIDATION_ROWS`` rows (in their order)."""
        ends = np.r_[np.flatnonzero(np.diff(episodes)) + 1, len(episodes)]  # [n_episodes]
        starts = np.r_[0, ends[:-1]]
        picked, total = [], 0
        for e in self._rng.permutation(len(ends)):
            if total >= _VALIDATION_ROWS:
                break
            picked.append(e)
            total += ends[e] - starts[e]
        return np.concatenate([np.arange(starts[e], ends[e]) for e in sorted(picked)])

    def collect(self) -> RolloutStats:
        """The next ``rows_per_update`` training rows (with memory: whole episodes, at least that many rows),
        stored in the frame."""
        index = []
        needed = self.rows_per_update
        while needed > 0:
            chunk = self._order[self._cursor:self._cursor + (needed if not self.memory else 1)]
            if self.memory:  # one whole episode
                e = int(chunk[0])
                chunk = np.arange(self._ends[e - 1] if e else 0, self._ends[e])
            index.append(chunk)
            needed -= len(chunk)
            self._cursor += len(chunk) if not self.memory else 1
            if self._cursor >= len(self._order):  # a new epoch, shuffled anew
                self._order, self._cursor = self._rng.permutation(self._n_units()), 0
        batch = self.train.take(np.concatenate(index))
        # an epoch's end may hand one episode twice: each handed episode its own id
        episodes = np.repeat(np.arange(len(index)), [len(c) for c in index]) if self.memory else None  # [n]
        self.frame.store_rows(batch.state, batch.action, batch.returns, batch.probs or None, episodes)
        n_rows = batch.n_rows
        self.total_env_steps += n_rows
        return RolloutStats(n_rows, (), ())

    def after_update(self, run: Any, stats: Any) -> None:
        self.write(run.writer, run.state.env_steps)

    def write(self, writer: Any, step: int) -> Dict[str, float]:
        """``bc/validation_loss`` and ``bc/validation_accuracy`` on the held-out rows (the accuracy
        counts discrete actors; without any, as with continuous actions only, it is left out)."""
        if self.validation is None:
            return {}
        loss, accuracy = self.frame.accuracy(self.validation)
        writer.add_scalar("bc/validation_loss", loss, step)
        figures = {"validation_loss": loss}
        if not np.isnan(accuracy):
            writer.add_scalar("bc/validation_accuracy", accuracy, step)
            figures["validation_accuracy"] = accuracy
        return figures

    def snapshot(self) -> Dict[str, Any]:
        return {"order": self._order, "cursor": self._cursor, "rng": self._rng.bit_generator.state,
                "total": self.total_env_steps}

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self._order, self._cursor = snapshot["order"], snapshot["cursor"]
        self._rng.bit_generator.state = snapshot["rng"]
        self.total_env_steps = snapshot["total"]
