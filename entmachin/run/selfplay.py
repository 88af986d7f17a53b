"""Self-play: the learner against a pool of its past selves, rated by Elo (the ``selfplay`` section).

In each environment (a game of several players) the learner plays the seats the config gives it
(``random``: one seat drawn per game; or a list of seats) and an *opponent* plays every other seat.
The opponent of a game is drawn when the game starts and kept until it ends, never changed in the
middle of a game:

* with probability ``play_against_latest``, the current policy itself: every seat of that game is
  played by the current parameters, so all of its rows are on-policy and are stored and trained on
  (the input statistics learn from them too);
* otherwise one of the at most ``max_snapshots`` (M) snapshots *in play*, each of which acts for
  all of its games in one batched forward pass per step.

Every ``save_steps`` environment steps the learner's actor is copied into the pool (its weights and
input statistics, frozen; never random weights: until the first snapshot the learner plays its
current self), which keeps the latest ``window`` snapshots. Every ``swap_steps`` the snapshots in
play are drawn again from the pool, uniformly without replacement (one drawn again stays where
it is); a snapshot drawn out of play leaves when its last game ends, and no new game starts
against it meanwhile (such games play another snapshot in play, or the current self), so at most
M are ever in play. With ``sampling: pfsp`` (prioritised fictitious self-play, as AlphaStar's league
draws) the draw weighs each snapshot by ``(1 - p)^2``, ``p`` the learner's expected score against it
from their Elo ratings: the snapshots it still loses to are played most, the ones it beats surely
hardly at all. With ``snapshot_actions: most_likely`` the snapshots play their most likely choices instead
of sampling: sharper opponents, which punish a missed block whenever they see the win. The rows the current
parameters act (the learner's seats, and every seat of a game
against its current self) are stored and trained on; the snapshots' rows take part in GAE only as the
other seats' steps, never in the losses (``RolloutCollector(opponents=...)``).

Elo ratings (``entmachin.run.elo``): the learner starts at ``elo_initial``; a snapshot starts at the
learner's rating when it was taken; every finished game between the learner and a snapshot moves
both (K = ``elo_k``), scored by the learner's seats' mean result. Games against the current self
rate nobody.

The whole pool (snapshots' weights, ratings, the games' opponents and seats, the generator) goes in
every checkpoint as one file loadable with ``torch.load(weights_only=True)``, so ``--resume``
continues exactly.

With a network with memory (``model.memory``) each snapshot in play keeps its own recurrent state for every
row it plays, zeroed where the row's episode ends and when another snapshot takes its place, as the
collector keeps the learner's for the rows the current parameters play: a snapshot never reads the
learner's states, nor the learner a snapshot's (a row changes hands only where its game ends). With
``model.memory.per_entity`` a snapshot keeps its own state per entity of those rows too, by the learner's
numbering of each episode's entities. The states of the snapshots in play go in the pool's file too.
"""
from __future__ import annotations

import copy
import io
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

from entmachin.env import RowIndex, VecObs
from entmachin.frame.checkpoint import CheckpointError, check_state_dict
from entmachin.frame.collector import default_actions
from entmachin.frame.entity_memory import entity_rows
from entmachin.frame.memory import actor_memory_size
from entmachin.frame.opponents import OpponentStates
from entmachin.frame.safe_call import safe_call
from entmachin.ragged import trees
from entmachin.run.callbacks.base import Callback
from entmachin.run.sections import SelfPlaySection
from entmachin.run.elo import expected, updated
from entmachin.run.logs import RunError, next_due
from entmachin.run.spaces import space_differences

__all__ = ["SelfPlay", "LATEST", "POOL_FORMAT"]

LATEST = -1  # a game's opponent: the current policy (else the index of a snapshot in play)
POOL_FORMAT = 1


@dataclass(eq=False)  # slots are told apart by identity
class _Slot:
    """A place for a snapshot in play: its actor (a frozen copy of the learner's) and what it plays."""

    module: Optional[torch.nn.Module] = None
    snapshot: int = -1  # the snapshot it acts for (-1: empty)
    due: int = -1  # the snapshot that replaces it when its last game ends (-1: none)
    states: Optional[OpponentStates] = None  # with model.memory: its states of every row (read where it plays)


class SelfPlay(Callback):
    """The opponents of the learner's games (an ``Opponents`` of ``RolloutCollector``), their pool and Elo
    (a run's callback: after each update it advances the pool and writes ``selfplay/*``).

    Args:
        section: the run config's ``selfplay`` section (``seats`` other than ``all``).
        frame: the learner's frame (its ``actor`` is copied into snapshots; ``act`` plays the current self).
        rows: the environments' rows (``VecEnv.row_index()``): every environment a game of several players.
        seed: seeds the draws of seats, opponents and snapshots.
        spaces: the spaces the learner was built on (``spaces_record``), kept with the pool.

    Raises:
        RunError: an environment with one player, ``seats`` naming a seat an environment lacks, or
            giving the learner every seat (say ``all`` then).
    """

    def __init__(self, section: SelfPlaySection, frame: Any, rows: RowIndex, seed: int,
                 spaces: Optional[Mapping[str, Any]] = None) -> None:
        self.section, self.frame, self.rows = section, frame, rows
        self.spaces = dict(spaces or {})
        if not rows.multi_agent or any(seats is None for seats in rows.seats):
            raise RunError("selfplay.seats: self-play needs a game of several players; this environment has one "
                           "player (remove the selfplay section)")
        self._n_seats = np.array([len(seats) for seats in rows.seats], dtype=np.int64)  # [E]
        self._first_row = np.searchsorted(rows.env, np.arange(rows.num_envs)).astype(np.int64)  # [E]
        self._fixed: Optional[np.ndarray] = None  # [E, L]: the learner's seats when the config lists them
        if section.seats != "random":
            for e, seats in enumerate(rows.seats):
                unknown = [name for name in section.seats if name not in seats]
                if unknown:
                    raise RunError(f"selfplay.seats: the game has no seat {', '.join(map(repr, unknown))} "
                                   f"(environment {e} has seats {list(seats)})")
                if len(section.seats) >= len(seats):
                    raise RunError(f"selfplay.seats: {list(section.seats)} are all of the game's seats: nobody is "
                                   "left for the pool to play; say selfplay.seats: all")
            self._fixed = np.array([[seats.index(name) for name in section.seats] for seats in rows.seats],
                                   dtype=np.int64)
        self.n_learner = 1 if self._fixed is None else self._fixed.shape[1]  # L
        self._snapshot_options: Dict[str, Any] = {}  # the snapshots' forward keywords
        if section.snapshot_actions == "most_likely":
            if not getattr(frame, "_takes_deterministic", False):
                raise RunError(f"selfplay.snapshot_actions: most_likely needs an actor whose forward takes "
                               f"'deterministic'; {type(frame.actor).__name__}'s does not (say sample)")
            self._snapshot_options = {"deterministic": True}
        self.rng = np.random.default_rng(seed)
        self.learner_elo = float(section.elo_initial)
        self.snapshots: List[Dict[str, Any]] = []  # every snapshot taken: {"env_steps", "elo"} (index: its id)
        self.window: List[int] = []  # the pool: ids of the latest ``window`` snapshots
        self._weights: Dict[int, Dict[str, torch.Tensor]] = {}  # of the pool and the snapshots in play
        self.slots = [_Slot() for _ in range(section.max_snapshots)]
        self.next_save, self.next_swap = section.save_steps, section.swap_steps
        self.tally = np.zeros(3, dtype=np.int64)  # losses, draws, wins against snapshots since the last log
        self._seats = np.zeros((rows.num_envs, self.n_learner), dtype=np.int64)  # [E, L]
        self._opponent = np.full(rows.num_envs, LATEST, dtype=np.int64)  # [E]
        self._learner_rows: Optional[np.ndarray] = None
        self._memory_size = actor_memory_size(frame)  # 0: no memory
        self._acted: List[Tuple[int, np.ndarray, Any]] = []  # this step's (slot, rows, result) with memory
        self.restart_games()

    # ------------------------------------------------------------------ the games' opponents

    def restart_games(self) -> None:
        """Draws seats and opponents for a new game in every environment (their games restart)."""
        for e in range(self.rows.num_envs):
            self._new_game(e)

    def _new_game(self, e: int) -> None:
        if self._fixed is None:
            self._seats[e, 0] = self.rng.integers(self._n_seats[e])
        else:
            self._seats[e] = self._fixed[e]
        latest = self.rng.random() < self.section.play_against_latest
        ready = [i for i, slot in enumerate(self.slots) if slot.snapshot >= 0 and slot.due < 0]
        self._opponent[e] = LATEST if latest or not ready else ready[self.rng.integers(len(ready))]
        self._learner_rows = None

    def learner_rows(self) -> np.ndarray:
        """int64 ``[E * L]``: the rows the learner plays, environment by environment."""
        if self._learner_rows is None:
            self._learner_rows = (self._first_row[:, None] + self._seats).reshape(-1)
        return self._learner_rows

    def current_rows(self) -> np.ndarray:
        """int64 ``[n]``, ascending: the rows the current parameters play this step (the learner's
        seats, and every seat of a game against the current self)."""
        current = self._opponent[self.rows.env] == LATEST  # [n_rows]
        current[self.learner_rows()] = True
        return np.flatnonzero(current)

    def act(self, state: Mapping[str, Any]) -> List[Tuple[np.ndarray, Dict[str, Any]]]:
        """The actions of the snapshots' rows (every row not in :meth:`current_rows`): one forward
        pass per snapshot in play, sampled or most likely as ``selfplay.snapshot_actions`` says."""
        owner = self._opponent[self.rows.env]  # [n_rows]: each row's game's opponent
        others = np.ones(len(self.rows), dtype=np.bool_)
        others[self.current_rows()] = False
        pieces, self._acted = [], []
        for who in np.unique(owner[others]).tolist():
            rows = np.flatnonzero(others & (owner == who))
            taken = trees.take(state, rows)
            states = self.slots[who].states
            if states is not None:  # the snapshot's own states of these rows
                taken = states.given(taken, rows)
            with torch.no_grad():
                result = safe_call(self.slots[who].module, taken, self._snapshot_options)
            if states is not None:
                self._acted.append((who, rows, result))
            pieces.append((rows, default_actions(result)[1]))
        return pieces

    def observe(self, obs: VecObs) -> None:
        """Keeps the snapshots' next states (with memory), rates the games that ended on this step and draws
        the next games' seats and opponents."""
        done = np.asarray(obs.done, dtype=np.bool_)
        acted, self._acted = {who: (rows, result) for who, rows, result in self._acted}, []
        for who, slot in enumerate(self.slots):
            if slot.states is not None:
                rows, result = acted.get(who, (None, None))
                slot.states.advance(result, done, rows)
        if not done.any():
            return
        result = np.asarray(obs.result, dtype=np.float64)
        learner = self.learner_rows().reshape(-1, self.n_learner)  # [E, L]
        for e in np.unique(self.rows.env[done]).tolist():
            who = int(self._opponent[e])
            if who != LATEST:
                score = float(np.mean(result[learner[e]]))
                if math.isfinite(score):  # (every row of an ended game has its result)
                    snapshot = self.snapshots[self.slots[who].snapshot]
                    self.learner_elo, snapshot["elo"] = updated(self.learner_elo, snapshot["elo"], score,
                                                                self.section.elo_k)
                    self.tally[int(round(score * 2))] += 1
            self._new_game(e)
        self._fill_free_slots()

    # ------------------------------------------------------------------ the pool

    def after_update(self, run: Any, stats: Any) -> None:
        """The run's callback: :meth:`advance` the pool, then its tensorboard figures."""
        self.advance(run.state.env_steps)
        self.write(run.writer, run.state.env_steps)

    def advance(self, env_steps: int) -> None:
        """Takes a snapshot when ``save_steps`` have passed and draws the snapshots in play when
        ``swap_steps`` have (call after each update, with the run's environment steps)."""
        section = self.section
        swap = False
        if env_steps >= self.next_save:
            self._take_snapshot(env_steps)
            self.next_save = next_due(self.next_save, env_steps, section.save_steps)
            swap = any(slot.snapshot < 0 and slot.due < 0 for slot in self.slots)  # fill empty places at once
        if env_steps >= self.next_swap:
            swap = True
            self.next_swap = next_due(self.next_swap, env_steps, section.swap_steps)
        if swap and self.window:
            chosen = self.rng.choice(self.window, size=min(len(self.slots), len(self.window)), replace=False,
                                     p=self.draw_weights()).tolist()
            staying = [slot for slot in self.slots if slot.snapshot in chosen]  # drawn again: no swap
            for slot in staying:
                slot.due = -1
            coming = [s for s in chosen if s not in {slot.snapshot for slot in staying}]
            for slot, snapshot in zip([slot for slot in self.slots if slot not in staying], coming):
                slot.due = snapshot
            self._fill_free_slots()

    def draw_weights(self) -> Optional[np.ndarray]:
        """float64 ``[len(window)]`` summing to 1: each pooled snapshot's chance to be drawn into play
        (None: uniform). ``pfsp``: ``(1 - p)^2`` with ``p`` the learner's Elo-expected score, floored so
        that every snapshot keeps a small chance."""
        if self.section.sampling != "pfsp":
            return None
        p = np.array([expected(self.learner_elo, self.snapshots[s]["elo"]) for s in self.window])
        weights = np.maximum((1.0 - p) ** 2, 1e-3)
        return weights / weights.sum()

    def _take_snapshot(self, env_steps: int) -> None:
        weights = {k: v.detach().to("cpu", copy=True) for k, v in self.frame.actor.state_dict().items()}
        self._weights[len(self.snapshots)] = weights
        self.window = (self.window + [len(self.snapshots)])[-self.section.window:]
        self.snapshots.append({"env_steps": int(env_steps), "elo": self.learner_elo})
        self._forget()

    def _fill_free_slots(self) -> None:
        """Loads each drawn snapshot into its place once no game is played against the one there."""
        for i, slot in enumerate(self.slots):
            if slot.due >= 0 and not (self._opponent == i).any():
                self._load(slot, slot.due)
        self._forget()

    def _load(self, slot: _Slot, snapshot: int) -> None:
        """Puts ``snapshot`` in play in ``slot`` (a frozen copy of the actor, made the first time)."""
        if slot.module is None:
            slot.module = copy.deepcopy(self.frame.actor).requires_grad_(False)
        slot.module.load_state_dict(self._weights[snapshot])
        slot.snapshot, slot.due = snapshot, -1
        if self._memory_size:  # a new player: no state of any row yet
            slot.states = OpponentStates(self.frame.actor, len(self.rows))

    def _forget(self) -> None:
        keep = set(self.window) | {s.snapshot for s in self.slots} | {s.due for s in self.slots}
        for snapshot in [s for s in self._weights if s not in keep]:
            del self._weights[snapshot]

    # ------------------------------------------------------------------ tensorboard

    def write(self, writer: Any, step: int) -> None:
        """``selfplay/elo``, ``selfplay/pool_size`` and, when games against snapshots ended since the last
        call, ``selfplay/win_rate`` / ``selfplay/draw_rate`` of those games (draws count half)."""
        writer.add_scalar("selfplay/elo", self.learner_elo, step)
        writer.add_scalar("selfplay/pool_size", len(self.window), step)
        games = int(self.tally.sum())
        if games:
            writer.add_scalar("selfplay/win_rate", (self.tally[2] + 0.5 * self.tally[1]) / games, step)
            writer.add_scalar("selfplay/draw_rate", self.tally[1] / games, step)
        self.tally[:] = 0

    # ------------------------------------------------------------------ checkpoints

    def to_bytes(self) -> bytes:
        """The pool, the ratings and the games' opponents as one ``torch.save`` file (``weights_only``)."""
        state = {
            "format": POOL_FORMAT, "spaces": self.spaces, "learner_elo": self.learner_elo,
            "snapshots": [dict(s) for s in self.snapshots], "window": list(self.window),
            "weights": {str(k): v for k, v in self._weights.items()},
            "slots": [[slot.snapshot, slot.due] for slot in self.slots],
            "seats": torch.from_numpy(self._seats.copy()), "opponent": torch.from_numpy(self._opponent.copy()),
            "rng": self.rng.bit_generator.state, "next_save": self.next_save, "next_swap": self.next_swap,
        }
        saved = [(None, None) if slot.states is None else slot.states.snapshot() for slot in self.slots]
        state["memory"], state["entity_memory"] = [s[0] for s in saved], [s[1] for s in saved]
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return buffer.getvalue()

    def check_bytes(self, data: bytes, where: str) -> Dict[str, Any]:
        """Reads and checks :meth:`to_bytes`'s file against this pool's learner and games, changing
        nothing; ``where`` names the file in errors.

        Raises:
            RunError: the file is damaged, of another format, trained on other spaces, or holds a
                snapshot whose weights do not fit the learner's actor (naming the snapshot).
        """
        try:
            state = torch.load(io.BytesIO(data), weights_only=True)
        except Exception as e:
            raise RunError(f"{where}: the self-play pool cannot be read ({type(e).__name__}: {e})") from None
        keys = {"format", "spaces", "learner_elo", "snapshots", "window", "weights", "slots", "seats", "opponent",
                "rng", "next_save", "next_swap"}
        if not isinstance(state, dict) or state.get("format") != POOL_FORMAT or not keys <= set(state):
            raise RunError(f"{where}: not a self-play pool of format {POOL_FORMAT} (damaged, or written by "
                           "another entmachin)")
        if self.spaces and state["spaces"] and state["spaces"] != self.spaces:
            raise RunError(f"{where}: the pool's snapshots were trained on other spaces than this environment's: "
                           + "; ".join(space_differences(state["spaces"], self.spaces)))
        for key, weights in state["weights"].items():
            try:
                check_state_dict(where, "actor", weights, self.frame.actor)
            except CheckpointError as e:
                raise RunError(f"{where}: pool snapshot {key} (taken at {state['snapshots'][int(key)]['env_steps']} "
                               f"environment steps) does not fit the learner's actor: {e}") from None
        needed = set(state["window"]) | {i for pair in state["slots"] for i in pair if i >= 0}
        if not needed <= {int(k) for k in state["weights"]} or len(state["slots"]) != len(self.slots):
            raise RunError(f"{where}: the pool's snapshots in play do not match selfplay.max_snapshots "
                           f"{len(self.slots)} or their weights are missing")
        expected_shape = (len(self.rows), self._memory_size)
        for i, saved in enumerate(state.get("memory") or []):
            shape = None if saved is None else tuple(saved["memory"].shape)
            if shape is not None and shape != expected_shape:
                raise RunError(f"{where}: the recurrent states of snapshot place {i} have shape {shape}; this run's "
                               f"are {expected_shape} (rows, model.memory's state): model.memory or the games changed")
        for i, saved in enumerate(state.get("entity_memory") or []):
            entities = entity_rows(self.frame, len(self.rows))  # a place's states, restored to be checked
            try:
                if saved is not None and entities is not None:
                    entities.restore(saved, f"snapshot place {i}")
            except ValueError as e:
                raise RunError(f"{where}: {e}") from None
        return state

    def load(self, state: Mapping[str, Any], games: bool) -> None:
        """Restores :meth:`check_bytes`'s result; ``games``: also the games' opponents and seats (the
        environments were restored too; else every game restarts with new draws)."""
        self.learner_elo = float(state["learner_elo"])
        self.snapshots = [dict(s) for s in state["snapshots"]]
        self.window = [int(i) for i in state["window"]]
        self._weights = {int(k): v for k, v in state["weights"].items()}
        self.next_save, self.next_swap = int(state["next_save"]), int(state["next_swap"])
        self.rng.bit_generator.state = state["rng"]
        for slot, (snapshot, due) in zip(self.slots, state["slots"]):
            if snapshot >= 0:
                self._load(slot, int(snapshot))
            slot.snapshot, slot.due = int(snapshot), int(due)
        seats, opponent = state["seats"].numpy(), state["opponent"].numpy()
        if games and seats.shape == self._seats.shape and opponent.shape == self._opponent.shape:
            self._seats, self._opponent = seats.astype(np.int64), opponent.astype(np.int64)
            self._learner_rows = None
            saved = zip(state.get("memory") or [], state.get("entity_memory") or [None] * len(self.slots))
            for slot, (memory, entities) in zip(self.slots, saved):  # the games go on with their states
                if slot.states is not None and memory is not None:
                    slot.states.restore(memory, entities, "the self-play pool")
        else:
            self.restart_games()
        self._fill_free_slots()
