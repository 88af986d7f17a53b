"""Collecting rollouts from a ``VecEnv`` with a frame: act -> env.act -> ``store_rollout``.

Example (RogueNet on an entity environment)::

    envs = EnvList(MineSweeper, num_envs=16, seed=0)
    collector = RolloutCollector(ppo, envs, n_steps=32)
    for _ in range(n_iterations):
        stats = collector.collect()     # 32 x 16 rows stored in ppo's buffer
        ppo.update()
        print(stats.mean_return)

Dense models on adapted gymnasium environments use ``global_state`` / ``global_actions``, which read the
``__global__`` features as ``{"state": [B, d]}`` and turn an MLP's ``[B, 1]`` choices into one global action per row.

With ``overlap=True`` and environments in worker processes (``ParallelEnvList`` of two or more workers) the
rows are stepped in two halves, double-buffered: the policy acts on one half while the workers step the other
(see :class:`RolloutCollector`).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, runtime_checkable

import numpy as np
import torch

from entmachin.env import GLOBAL_ENTITY, VecEnv, VecObs, to_state, to_vec_actions
from entmachin.env.symmetry import Symmetry
from entmachin.frame.augment import augment
from entmachin.frame.entity_memory import entity_rows
from entmachin.frame.memory import memory_rows
from entmachin.frame.opponents import Opponents, merge_rows
from entmachin.frame.overlap import overlapped_steps
from entmachin.ragged import trees
from entmachin.ragged.array import RaggedArrayI64
from entmachin.ragged.tensor import tree_to_torch

logger = logging.getLogger(__name__)

__all__ = ["Collector", "RolloutCollector", "RolloutStats", "Opponents", "default_actions", "global_state",
           "global_actions", "merge_rows"]

StateFn = Callable[[VecObs], Dict[str, Any]]
ActionFn = Callable[[Any], Tuple[Dict[str, Any], Dict[str, Any]]]  # frame.act's result -> (stored action, env actions)


@dataclass(frozen=True)
class RolloutStats:
    """What one :meth:`RolloutCollector.collect` saw.

    Attributes:
        n_env_steps: environment steps taken (``n_steps * num_envs``).
        episode_returns: undiscounted return of every episode that ended, in order of ending.
        episode_lengths: length of each of those episodes.
        longest_running: steps so far of the longest episode still running when the rollout ended (an
            environment that never ends shows here, not in ``episode_lengths``).
    """

    n_env_steps: int
    episode_returns: Tuple[float, ...]
    episode_lengths: Tuple[int, ...]
    longest_running: int = 0

    @property
    def mean_return(self) -> float:
        """Mean of ``episode_returns`` (nan when no episode ended)."""
        return float(np.mean(self.episode_returns)) if self.episode_returns else math.nan


def default_actions(result: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """For RogueNet-like actors: stores ``{"action": {name: ragged}}``, steps with the same."""
    env_actions = to_vec_actions(result[0])
    return {"action": env_actions}, env_actions


def global_state(obs: VecObs) -> Dict[str, Any]:
    """``{"state": float32 [B, d]}`` from the global features of ``obs``, the ``VecObs`` of an adapted dense
    environment.

    Raises:
        ValueError: the rows do not each hold exactly one ``__global__`` entity.
    """
    feats = obs.features.get(GLOBAL_ENTITY)
    if feats is None or feats.size1().tolist() != [1] * feats.size0():
        raise ValueError(
            "global_state: every row needs exactly one __global__ entity (an environment with global "
            "features, such as from_gymnasium's); use the canonical state (to_state) for entity environments"
        )
    return {"state": torch.from_numpy(feats.as_array().copy())}  # [B, d]


def global_actions(action_name: str = "action") -> ActionFn:
    """An ``ActionFn`` for dense actors choosing one global categorical action per row: the actor's ``[B, 1]``
    (or ``[B]``) int choices are stored as ``{"action": [B, 1]}`` and sent to the environments as one actor per
    row of ``action_name``."""

    ones = np.ones(0, dtype=np.int64)

    def convert(result: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        nonlocal ones
        action = result[0]  # each conversion only where needed: this runs once per environment step
        if action.requires_grad:
            action = action.detach()
        if action.dtype != torch.int64 or action.device.type != "cpu":
            action = action.to("cpu", torch.int64)
        if action.dim() != 2 or action.shape[1] != 1:
            action = action.reshape(-1, 1)  # [B, 1]
        if ones.shape[0] != action.shape[0]:
            ones = np.ones(action.shape[0], dtype=np.int64)  # [B]: one actor per row
        return {"action": action}, {action_name: RaggedArrayI64.from_flattened(np.ascontiguousarray(action.numpy()),
                                                                               ones)}

    return convert


@runtime_checkable
class Collector(Protocol):
    """What a training loop collects with: :class:`RolloutCollector` steps environments; behaviour cloning's
    ``Cloning`` (``entmachin.run.cloning``) hands over a dataset's rows. ``snapshot`` / ``restore`` carry its
    state (and ``total_env_steps``, the steps or rows so far) through a checkpoint."""

    total_env_steps: int

    def collect(self) -> RolloutStats:
        """Stores the next rows in the frame; what they held."""

    def snapshot(self) -> Dict[str, Any]:
        """Its state, for a checkpoint."""

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Goes on from a :meth:`snapshot`."""


class RolloutCollector:
    """Steps a ``VecEnv`` with a frame's policy and stores each rollout with ``store_rollout``.

    Episodes continue across calls; rows whose episode ended (environments auto-reset) are stored as terminal
    or truncated, and truncated rows carry the final observation as ``next_state`` so that they bootstrap from
    it. Each observation's state is converted to torch once (numpy arrays shared, ragged arrays copied into
    ``RaggedTensor``s); the actor reads that state and ``store_rollout`` concatenates it, the only other copy
    of its features before ``update()`` takes minibatches.

    Args:
        frame: an ``A2C`` / ``PPO`` frame (anything with ``act`` and ``store_rollout``).
        envs: the environments.
        n_steps: steps per :meth:`collect` (``T``); each stores ``T * len(envs)`` rows (one per environment, or
            per (environment, seat) for games of several players: every seat's rows are stored) and counts
            ``T * envs.num_envs`` environment steps.
        state_fn: ``VecObs`` -> state dict (default: the canonical state with every mask).
        action_fn: ``frame.act``'s result -> (stored action dict, ``VecEnv.act`` actions) (default:
            :func:`default_actions`).
        before_store: called after the last step of each rollout, before ``store_rollout`` computes the rows'
            values (data-parallel ranks merge their input statistics there, so that every rank's values come
            from the statistics of all ranks' steps).
        opponents: who plays the rows the frame does not (:class:`Opponents`); only the frame's rows are
            trained on, and returns and lengths are the learner's. None: the frame plays every row.
        overlap: step the rows in two halves, double-buffered (below). Environments that cannot step part
            of their rows while the caller works (``envs.parts(2)`` gives one part: ``EnvList``, a
            ``ParallelEnvList`` of one worker, ``RayEnvList``) and games with ``opponents`` fall back to the
            sequential loop, with a warning; :attr:`overlap` says which loop runs.
        symmetries: the game's symmetries (``entmachin.env.symmetry.Symmetry``) whose images of every row are
            stored too (``entmachin.frame.augment``): each rollout stores ``1 + len(symmetries)`` times the rows;
            the frame's ``replay_size`` must hold them.

    **Overlapped sampling** (``overlap=True``): the rows split into halves A and B of whole workers
    (``envs.parts(2)``). Each step receives A's observations, acts on A and sends A's actions, then does the
    same for B, so that the policy's forward on one half runs while the workers step the other (period per
    step about ``act_half + max(act_half, env_step)`` instead of ``2 act_half + env_step``). Every action
    comes from the current policy; both halves' last actions are chosen and their observations received
    before ``collect()`` returns, so nothing is in flight across ``update()``. The stored rows are the same as
    the sequential loop's: ``T`` steps of every row, in row order, the same ``next_state`` / reward / terminal
    / truncated rules, the same episode statistics, :meth:`snapshot` / :meth:`restore` unchanged. What
    differs for a seed: the policy runs once per half, so a sampling network draws its random numbers in
    another order (other actions, unless acting is deterministic), and running input statistics are updated
    per half (B's forward is normalised with statistics that already saw A's step; after a step they are
    those of the sequential loop up to rounding). With a deterministic policy and deterministic environments
    the two loops store identical rows. Each step's halves are joined once more (one copy of their states
    beyond the sequential loop's). A step that fails while a half is in flight receives it and leaves the
    halves a step apart: the next :meth:`collect` resets the environments and the episodes in progress
    restart (the ones that ended before the failure were counted).

    Raises:
        ValueError: ``n_steps`` is not a positive int.
    """

    def __init__(self, frame: Any, envs: VecEnv, n_steps: int, *, state_fn: Optional[StateFn] = None,
                 action_fn: Optional[ActionFn] = None, before_store: Optional[Callable[[], None]] = None,
                 opponents: Optional[Opponents] = None, overlap: bool = False,
                 symmetries: Sequence[Symmetry] = ()) -> None:
        if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
            raise ValueError(f"RolloutCollector: n_steps must be an int >= 1, got {n_steps!r}")
        if not isinstance(overlap, bool):
            raise TypeError(f"RolloutCollector: overlap must be a bool, got {overlap!r}")
        self.frame, self.envs, self.n_steps, self.before_store = frame, envs, n_steps, before_store
        self.opponents, self.symmetries = opponents, list(symmetries)
        self._halves: Optional[List[Tuple[int, int]]] = None
        if overlap:
            halves = envs.parts(2)
            why = ("self-play's opponents share the rows' steps" if opponents is not None else
                   f"{type(envs).__name__} steps its rows in one part (overlap needs environments in two or more "
                   "worker processes: ParallelEnvList with num_processes >= 2)" if len(halves) < 2 else None)
            if why is None:
                self._halves = halves
            else:
                logger.warning("RolloutCollector: overlap=True, but %s; collecting sequentially", why)
        self._restart = False  # a failed overlapped step left the halves a step apart
        self._memory = memory_rows(frame, len(envs))  # the rows' recurrent state, for a network with memory
        self._entities = entity_rows(frame, len(envs))  # and the entities', with model.memory.per_entity
        if self._memory is not None and (self._halves is not None or self.symmetries):
            raise ValueError(f"RolloutCollector: a network with memory is trained on whole sequences of every row; "
                             f"{'overlap' if self._halves else 'symmetries'} not with memory yet")
        space = envs.action_space()
        self.state_fn: StateFn = state_fn or (lambda obs: to_state(obs, space))
        self.action_fn: ActionFn = action_fn or default_actions
        self._state: Optional[Dict[str, Any]] = None
        n_rows = len(envs) if opponents is None else len(opponents.learner_rows())
        self._returns = np.zeros(n_rows, dtype=np.float64)  # [B]: the episodes in progress (the frame's rows)
        self._lengths = np.zeros(n_rows, dtype=np.int64)  # [B]
        self.total_env_steps = 0

    @property
    def overlap(self) -> bool:
        """Whether :meth:`collect` steps the rows in two overlapped halves."""
        return self._halves is not None

    def _next_state(self, obs: VecObs, state: Dict[str, Any]) -> Dict[str, Any]:
        """The state after each row's step: the final observation where the episode was truncated (its row
        bootstraps from it); elsewhere the state the environment returned, which for a terminal row is the next
        episode's first (never read: it does not bootstrap)."""
        if obs.final_obs is None or not np.asarray(obs.truncated).any():
            return state
        truncated = np.asarray(obs.truncated, dtype=np.bool_) & np.asarray(obs.done, dtype=np.bool_)  # [B]
        final_index = np.asarray(obs.final_index, dtype=np.int64)  # [n_done]
        cut = np.flatnonzero(truncated[final_index])  # [n_truncated]: places in final_obs
        if cut.size == 0:
            return state
        final = tree_to_torch(self.state_fn(obs.final_obs))
        index = np.arange(len(obs), dtype=np.int64)  # [B]
        index[final_index[cut]] = len(obs) + cut
        joined = trees.stack([state, final], lambda i: ("state", "final_obs state")[i])
        return trees.take(joined, index)

    def _episodes(self, reward: np.ndarray, done: np.ndarray) -> Tuple[List[float], List[int]]:
        """Return and length of every episode that ended in a rollout's ``reward`` and ``done`` (``[T, B]``), in
        order of ending (step, then row); the episodes in progress carry on. Returns are differences of float64
        running sums of the float32 rewards."""
        running = np.cumsum(np.concatenate([self._returns[None], reward]), axis=0).tolist()  # [T + 1][B]
        base = [0.0] * done.shape[1]  # [B]: the running sum where each row's episode began
        began = (-self._lengths).tolist()  # [B]: the step where it began (< 0: before this rollout)
        returns: List[float] = []
        lengths: List[int] = []
        step, row = np.nonzero(done)  # step-major
        for t, b in zip(step.tolist(), row.tolist()):
            returns.append(running[t + 1][b] - base[b])
            lengths.append(t + 1 - began[b])
            base[b], began[b] = running[t + 1][b], t + 1
        self._returns = np.array(running[-1], dtype=np.float64) - np.array(base, dtype=np.float64)  # [B]
        self._lengths = reward.shape[0] - np.array(began, dtype=np.int64)  # [B]
        return returns, lengths

    def snapshot(self) -> Dict[str, Any]:
        """What :meth:`restore` needs to continue the episodes in progress (picklable)."""
        return {"state": self._state, "returns": self._returns.copy(), "lengths": self._lengths.copy(),
                "total_env_steps": self.total_env_steps,
                **({} if self._memory is None else {"memory": self._memory.snapshot()}),
                **({} if self._entities is None else {"entity_memory": self._entities.snapshot()})}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Continues from :meth:`snapshot`'s episodes; the environments must be restored alike."""
        returns = np.asarray(snapshot["returns"], dtype=np.float64)  # [B]
        if returns.shape != self._returns.shape:
            raise ValueError(f"RolloutCollector.restore: the snapshot has {returns.shape[0]} rows; this collector "
                             f"steps {self._returns.shape[0]} environments")
        self._state = None if snapshot["state"] is None else tree_to_torch(snapshot["state"])
        self._returns, self._lengths = returns, np.asarray(snapshot["lengths"], dtype=np.int64)  # [B] each
        self.total_env_steps = int(snapshot["total_env_steps"])
        if self._memory is not None:
            if "memory" not in snapshot:
                raise ValueError("RolloutCollector.restore: the snapshot holds no recurrent state, but this run's "
                                 "network has memory (model.memory); resume a run with the same model")
            self._memory.restore(snapshot["memory"], "RolloutCollector.restore")
        if self._entities is not None:
            if "entity_memory" not in snapshot:
                raise ValueError("RolloutCollector.restore: the snapshot holds no per-entity states, but this run's "
                                 "network keeps one per entity (model.memory.per_entity); resume a run with the same "
                                 "model")
            self._entities.restore(snapshot["entity_memory"], "RolloutCollector.restore")

    def _step_with_opponents(self, opponents: Opponents) -> Tuple[Any, ...]:
        """One step in which the frame plays ``opponents.current_rows()`` and the opponents the other rows;
        returns every row of it, with the rows the frame played (``stored``) and the learner's slots."""
        learner, current = opponents.learner_rows(), opponents.current_rows()  # [L], [n]: before observe()
        every = self._state if self._memory is None else self._memory.state(self._state)  # the frame's own states
        acted = self.frame.act(trees.take(every, current))
        _, actions = self.action_fn(acted)
        env_actions = merge_rows(len(self.envs), [(current, actions)] + opponents.act(self._state))
        obs = self.envs.act(env_actions)
        opponents.observe(obs)
        next_state, self._state = self._carried(acted, obs, tree_to_torch(self.state_fn(obs)), current)
        stored = np.zeros(len(self.envs), dtype=np.bool_)  # [B]
        stored[current] = True
        return (every, {"action": env_actions}, next_state, obs.reward, obs.done, np.asarray(obs.truncated), stored,
                learner)

    def _carried(self, acted: Any, obs: VecObs, after: Dict[str, Any], rows: Optional[np.ndarray] = None
                 ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """The step's next state (:meth:`_next_state` of ``after``, the state of ``obs``) and the state the next
        step acts on. With memory the rows' states after the step (kept for the next; ``rows``: the rows the
        frame acted, None: all) go with the next state, so that a truncated row's final observation is valued
        with the state it reached; with per-entity memory the entities' (kept by id) go with both."""
        next_state = self._next_state(obs, after)
        if self._memory is None:
            return next_state, after
        carried = self._memory.advance(acted, obs.done, rows)  # [B, memory_size]
        next_state = {**next_state, "memory": carried, "episode_start": torch.zeros(len(obs), 1, dtype=torch.bool)}
        if self._entities is not None:
            next_state = {**next_state, **self._entities.advance(acted, obs, rows)}
            after = {**after, **self._entities.entries(obs)}
        return next_state, after

    def _sequential_steps(self, seen: List[Tuple[Any, ...]]) -> None:
        """``n_steps`` steps of every row at once; appends each to ``seen``."""
        for _ in range(self.n_steps):
            if self.opponents is not None:
                seen.append(self._step_with_opponents(self.opponents))
                continue
            state = self._state if self._memory is None else self._memory.state(self._state)
            acted = self.frame.act(state)
            stored_action, env_actions = self.action_fn(acted)
            obs = self.envs.act(env_actions)
            next_state, after = self._carried(acted, obs, tree_to_torch(self.state_fn(obs)))
            seen.append((state, stored_action, next_state, obs.reward, obs.done, obs.truncated))
            self._state = after

    def collect(self) -> RolloutStats:
        """Runs ``n_steps`` steps, stores them with ``frame.store_rollout`` and returns statistics."""
        if self._state is None:
            obs = self.envs.reset()
            self._state = tree_to_torch(self.state_fn(obs))
            self._returns[:], self._lengths[:] = 0.0, 0  # new episodes (after a failed overlapped step)
            if self._memory is not None:
                self._memory = memory_rows(self.frame, len(self.envs))
            if self._entities is not None:
                self._entities = entity_rows(self.frame, len(self.envs))
                self._state = {**self._state, **self._entities.entries(obs)}
        # per step: state, stored action, next state, reward, done, truncated (with opponents: stored, learner rows)
        seen: List[Tuple[Any, ...]] = []
        try:
            if self._halves is None:
                self._sequential_steps(seen)
            else:
                overlapped_steps(self, seen)
        finally:  # the episodes keep the steps taken, also when a step raised (the state moved on with them)
            if seen:  # always, unless the first step raised
                states, actions, next_states, rewards, dones, truncations, *chosen = zip(*seen)
                reward = np.array(rewards, dtype=np.float32)  # [T, B]
                done = np.array(dones, dtype=np.bool_)  # [T, B]
                if chosen:  # the learner's episodes: its slots' rows at each step
                    learner = np.array(chosen[1])  # [T, L]
                    returns, lengths = self._episodes(np.take_along_axis(reward, learner, 1),
                                                      np.take_along_axis(done, learner, 1))
                else:
                    returns, lengths = self._episodes(reward, done)
            if self._restart:
                self._state, self._restart = None, False
        truncated = np.array(truncations, dtype=np.bool_) & done  # [T, B]
        terminal = done & ~truncated  # [T, B]
        steps = [{"state": s, "action": a, "next_state": n, "reward": reward[t], "terminal": terminal[t],
                  "truncated": truncated[t]} for t, (s, a, n) in enumerate(zip(states, actions, next_states))]
        for step, stored in zip(steps, chosen[0] if chosen else ()):
            step["stored"] = stored
        if self.symmetries:
            steps = augment(steps, self.symmetries, self.envs.obs_space())
        if self.before_store is not None:
            self.before_store()
        self.frame.store_rollout(steps)
        n_env_steps = self.n_steps * self.envs.num_envs  # environment steps, not rows: a game's seats step together
        self.total_env_steps += n_env_steps
        return RolloutStats(n_env_steps, tuple(returns), tuple(lengths), int(self._lengths.max(initial=0)))
