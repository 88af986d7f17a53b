"""Behaviour cloning in the runner: a dataset fed to a ``BC`` frame as a rollout would be.

``Cloning`` stands where the ``RolloutCollector`` stands for the other frames: ``collect()``
hands the frame the next ``bc.rows_per_update`` rows (shuffled epochs over the training episodes)
and reports them as that many steps, so the runner's loop, its evaluations on the environment,
checkpoints, ``--resume`` and logs work unchanged; a held-out share of the episodes gives the
validation loss and action accuracy (``bc/*`` in tensorboard). The loss is the mean negative
log-likelihood of every actor's recorded action (continuous values' log-densities included); the
accuracy counts discrete actors only, and is not written where the held-out rows have none.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from entmachin.data import Dataset, DatasetError, Rows
from entmachin.data.relabel import next_rows
from entmachin.frame.bc import Held
from entmachin.frame.collector import RolloutStats
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


def _held(rows: Rows, returns: np.ndarray) -> Held:
    probs = {name: values for name, (values, _) in rows.probs.items()}
    return Held(rows.state(), rows.action, returns, probs)


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
        self.train = _held(rows.take(train), returns[train])
        val = np.flatnonzero(acting & validation)
        if len(val) > _VALIDATION_ROWS:
            val = np.sort(self._rng.choice(val, _VALIDATION_ROWS, replace=False))
        self.validation = _held(rows.take(val), returns[val]) if len(val) else None
        self.n_episodes, self.n_held_out = len(episodes), n_held_out
        frame.learn_input_statistics(self.train)  # a resumed run's checkpoint then replaces them
        self._order = self._rng.permutation(self.train.n_rows)
        self._cursor = 0
        self.total_env_steps = 0

    def collect(self) -> RolloutStats:
        """The next ``rows_per_update`` training rows, stored in the frame."""
        index = []
        needed = self.rows_per_update
        while needed:
            chunk = self._order[self._cursor:self._cursor + needed]
            index.append(chunk)
            needed -= len(chunk)
            self._cursor += len(chunk)
            if self._cursor >= len(self._order):  # a new epoch, shuffled anew
                self._order, self._cursor = self._rng.permutation(self.train.n_rows), 0
        batch = self.train.take(np.concatenate(index))
        self.frame.store_rows(batch.state, batch.action, batch.returns, batch.probs or None)
        self.total_env_steps += self.rows_per_update
        return RolloutStats(self.rows_per_update, (), ())

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
