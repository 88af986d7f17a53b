"""``entmachin record``: episodes of a policy written to a dataset directory (``entmachin.data``).

Policies: ``random`` (a uniformly random allowed choice, continuous values uniform within each
actor's bounds; the discrete actions' probabilities are recorded), ``scripted`` (the
environment's own ``scripted_opponent`` or ``scripted_policy``), a run directory (its
checkpoint's actor, see below), or ``pkg.mod:function`` (``(observation, action_space, rng) ->
actions``, checked against the observation's masks; continuous values recorded as float32).
Functions see ``Observation`` objects, so they need the environments in this process
(``--processes 0``); so do entity ids, which are recorded where the environment gives ints or
strings.

A run's actor acts on a batch of every row a step. Its discrete actions are drawn from
``RogueNet.probabilities`` by inverse CDF with the recorder's generator, as exported policies
draw them (``--deterministic``: the most likely choice), and those probabilities are recorded.
A continuous action has no table: its values come from the network's forward pass (sampled
within each actor's bounds, or the deterministic point), seeded from the same generator, and
nothing but the values is recorded. Either kind, or both, cost one pass of the network a step
(``RogueNet.probabilities_and_values``). A network with memory keeps each row's state from step to step
(``MemoryRows``, as the collector and evaluation do), reset where the row's episode ends
(``RogueNet.probabilities_values_and_memory``); with ``model.memory.per_entity`` also each row's entities'
states by their ids (``EntityRows``), which needs the environments in this process (``--processes 0``). The
dataset records the rows, not the states.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from entmachin.data import DatasetWriter
from entmachin.data.dataset import plain_ids
from entmachin.data.recorder import Recorder
from entmachin.data.rows import action_dtype, action_width
from entmachin.env import EnvList, ParallelEnvList, random_actions, to_state
from entmachin.env.action import CONTINUOUS_SPACES, SelectEntityActionSpace
from entmachin.env.vec_env import VecObs
from entmachin.ragged.arrays import ragged_from_arrays
from entmachin.run.envs import EnvFactory, env_class
from entmachin.run.config import EnvSection
from entmachin.run.export import inverse_cdf_sample
from entmachin.run.logs import RunError
from entmachin.run.matches import call_policy, resolve_function

__all__ = ["RecordResult", "record"]

POLICY_KINDS = "random, scripted, a run directory or pkg.mod:function"


@dataclass(frozen=True)
class RecordResult:
    """The dataset written: its episodes, rows and parts, the mean return of its episodes (of
    each seat, in a game of several players), and whether it holds entity ids."""

    directory: str
    episodes: int
    rows: int
    parts: int
    mean_return: float
    ids: bool


def _widths(vec: VecObs, action_space: Mapping[str, Any], name: str) -> np.ndarray:
    """Choices of each actor of ``name``: the action's choices, or its row's actees."""
    mask = vec.action_masks[name]
    if isinstance(action_space[name], SelectEntityActionSpace):
        return np.repeat(mask.actees.size1(), mask.actors.size1())
    return np.full(mask.actors.items(), len(action_space[name].index_to_label), np.int64)


def _allowed(vec: VecObs, action_space: Mapping[str, Any], name: str, width: int) -> np.ndarray:
    """bool ``[n_actors, width]`` of the allowed choices (padding: not allowed)."""
    mask = vec.action_masks[name]
    widths = _widths(vec, action_space, name)
    inside = np.arange(width)[None, :] < widths[:, None]  # [n_actors, width]
    if mask.mask is None:
        return inside
    out = np.zeros(inside.shape, np.bool_)
    out[inside] = mask.mask.as_array().reshape(-1)  # row-major: categorical rows, or actor x actee pairs
    return out


class _Policy:
    """Chooses every row's actions from a batch; ``probs`` says whether it gives probabilities."""

    probs = False
    needs_observations = False
    needs_ids = False  # keeps states by the entities' ids, which only environments in this process pass

    def choose(self, vec: VecObs, observations: Optional[Sequence[Any]]) -> Tuple[Dict[str, Any], Optional[Dict]]:
        raise NotImplementedError

    def advance(self, done: np.ndarray) -> None:
        """After the step: bool ``[B]``, the rows whose episode ended (a policy with memory resets them)."""


def _discrete(action_space: Mapping[str, Any]) -> List[str]:
    """The actions that have a table of choices (every one but the continuous ones)."""
    return [name for name, space in action_space.items() if not isinstance(space, CONTINUOUS_SPACES)]


class _Random(_Policy):
    def __init__(self, action_space: Mapping[str, Any], rng: np.random.Generator) -> None:
        self.action_space, self.rng = action_space, rng
        self.probs = bool(_discrete(action_space))

    def choose(self, vec, observations):
        actions = random_actions(vec, self.action_space, self.rng)
        probs = {}
        for name in _discrete(self.action_space):
            widths = _widths(vec, self.action_space, name)
            width = int(widths.max(initial=0))
            allowed = _allowed(vec, self.action_space, name, width)
            p = allowed / np.maximum(allowed.sum(axis=1, keepdims=True), 1)
            probs[name] = ragged_from_arrays(p[np.arange(width)[None, :] < widths[:, None]].reshape(-1, 1), widths,
                                             np.float32)
        return actions, probs


class _Checkpoint(_Policy):
    """A run's RogueNet (see the module docstring for how it draws and what it records)."""

    def __init__(self, frame: Any, action_space: Mapping[str, Any], rng: np.random.Generator,
                 deterministic: bool) -> None:
        import torch

        from entmachin.model.wrappers import unwrap

        from entmachin.frame.memory import actor_memory_size
        from entmachin.model.memory import entity_memory_size

        self.net, self.torch = unwrap(frame.actor), torch
        self.memory_size, self.entity_size = actor_memory_size(frame), entity_memory_size(self.net)
        self.needs_ids = self.entity_size > 0
        self._rows: Any = None  # MemoryRows, once the number of rows is known (a network with memory)
        self._entities: Any = None  # and EntityRows (model.memory.per_entity)
        self._next: Any = None  # the NextStates the last step left
        if not hasattr(self.net, "probabilities"):
            raise RunError(f"record: the run's actor is a {type(self.net).__name__}; recording needs a RogueNet policy")
        self.action_space, self.rng, self.deterministic = action_space, rng, deterministic
        self.discrete = _discrete(action_space)
        self.probs = bool(self.discrete)
        self.continuous = any(name not in self.discrete for name in action_space)
        # fork_rng restores these devices' generators (the CPU's always) after each seeded pass.
        self._cuda = sorted({p.device.index or 0 for p in self.net.parameters() if p.device.type == "cuda"})

    def choose(self, vec, observations):
        state = to_state(vec, self.action_space)
        # continuous values are drawn seeded by --seed, in a fork of the global generator (which is kept)
        seeded = self.torch.random.fork_rng(devices=self._cuda) if self.continuous else contextlib.nullcontext()
        with self.torch.no_grad(), seeded:
            if self.continuous:
                self.torch.manual_seed(int(self.rng.integers(2 ** 63 - 1)))
            # one pass of the trunk: the discrete tables, and the continuous values drawn as forward draws them
            if self.memory_size:
                rows = self._memory_rows(len(vec))
                entity_memory = None if self._entities is None else self._entities.entries(vec)["entity_memory"]
                tables, values, self._next = self.net.probabilities_values_and_memory(
                    state["entities"], state["action_masks"], state.get("visible"), rows.memory, rows.episode_start,
                    deterministic=self.deterministic, entity_memory=entity_memory)
            else:
                tables, values = self.net.probabilities_and_values(state["entities"], state["action_masks"],
                                                                   state.get("visible"), deterministic=self.deterministic)
        actions, probs = {}, {}
        for name, table in tables.items():
            p = table.data.cpu().numpy()  # [n_actors, width]
            widths = _widths(vec, self.action_space, name)
            lengths = vec.action_masks[name].actors.size1()
            if self.deterministic:
                chosen = p.argmax(axis=1) if len(p) else np.zeros(0, np.int64)
            else:
                noise = self.torch.from_numpy(self.rng.random(len(p), dtype=np.float32))
                chosen = inverse_cdf_sample(table.data.cpu(), table.data.cpu() > 0, noise).numpy()  # as exports sample
            actions[name] = ragged_from_arrays(chosen.reshape(-1, 1).astype(np.int64), lengths, np.int64)
            inside = np.arange(p.shape[1])[None, :] < widths[:, None] if p.ndim == 2 else np.zeros((0, 0), bool)
            probs[name] = ragged_from_arrays(p[inside].reshape(-1, 1), widths, np.float32)
        for name, chosen in values.items():
            lengths = vec.action_masks[name].actors.size1()
            flat = chosen.data.cpu().numpy().astype(np.float32, copy=False)  # [n_actors, n_values]
            actions[name] = ragged_from_arrays(flat.reshape(-1, len(self.action_space[name])), lengths, np.float32)
        return actions, probs

    def _memory_rows(self, n_rows: int) -> Any:
        if self._rows is None:
            from entmachin.frame.entity_memory import EntityRows
            from entmachin.frame.memory import MemoryRows

            self._rows = MemoryRows(self.memory_size, n_rows)
            if self.entity_size:
                self._entities = EntityRows(self.entity_size, n_rows, list(self.net.obs_space.entities))
        return self._rows

    def advance(self, done: np.ndarray) -> None:
        if self._rows is not None:  # the NextStates have the fields both read (memory, entity_memory)
            self._rows.advance(self._next, done)
            if self._entities is not None:
                self._entities.keep(self._next)
                self._entities.end(done)


class _Function(_Policy):
    needs_observations = True

    def __init__(self, fn: Callable[..., Any], name: str, obs_space: Any, action_space: Mapping[str, Any],
                 rng: np.random.Generator) -> None:
        self.fn, self.name, self.obs_space, self.action_space, self.rng = fn, name, obs_space, action_space, rng

    def choose(self, vec, observations):
        per_row = [call_policy(self.fn, obs, self.obs_space, self.action_space, self.rng,
                               f"policy {self.name!r} (row {r})", RunError)[1] for r, obs in enumerate(observations)]
        out = {}
        for name, space in self.action_space.items():
            # checked_choices: int64 [n_actors] choices, or float32 [n_actors, n_values] continuous values
            width, dtype = action_width(space), action_dtype(space)
            chosen = [np.asarray(row.get(name, np.zeros(0, dtype)), dtype).reshape(-1, width) for row in per_row]
            lengths = vec.action_masks[name].actors.size1()
            flat = np.concatenate(chosen) if chosen else np.zeros((0, width), dtype)  # [n_actors, width]
            out[name] = ragged_from_arrays(flat, lengths, dtype)
        return out, None


def _policy(spec: str, factory: EnvFactory, obs_space: Any, action_space: Mapping[str, Any],
            rng: np.random.Generator, deterministic: bool, version: Union[int, str, None] = None) -> _Policy:
    if spec == "random":
        return _Random(action_space, rng)
    if spec == "scripted":
        env = factory()
        try:
            fn = getattr(env, "scripted_opponent", None) or getattr(env, "scripted_policy", None)
        finally:
            env.close()
        if fn is None:
            raise RunError(f"record --policy scripted: {factory.name} has no scripted policy (scripted_opponent or "
                           f"scripted_policy); name another ({POLICY_KINDS})")
        return _Function(fn, "scripted", obs_space, action_space, rng)
    if os.path.isdir(spec):
        from entmachin.run.evaluation import load_trained

        frame, _, _ = load_trained(spec, factory, version)
        return _Checkpoint(frame, action_space, rng, deterministic)
    if ":" in spec:
        return _Function(resolve_function(spec, "record --policy"), spec, obs_space, action_space, rng)
    raise RunError(f"record --policy {spec!r}: not a run directory, and not one of {POLICY_KINDS}")


def _env_section(env: Optional[str], policy: str) -> EnvSection:
    """The environment: ENV's bundled settings (its step limit), or the policy's run's."""
    if env is None:
        if not os.path.isdir(policy):
            raise RunError("record: name the environment (ENV), or record a run directory's policy")
        from entmachin.run.evaluation import run_dir_of
        from entmachin.run.logs import load_run_config

        return load_run_config(run_dir_of(policy)).env
    from entmachin.run.config import load_config
    from entmachin.run.defaults import default_env_section
    from entmachin.run.paths import bundled_config_path

    cls = env_class(env)  # an unknown name says so, with close matches
    path = bundled_config_path(env)
    if path is not None:
        return load_config(path).env
    return EnvSection(**default_env_section(env, cls))


def record(env: Optional[str], policy: str, episodes: int, out: str, *, seed: int = 0, processes: int = 0,
           num_envs: int = 16, deterministic: bool = False, progress: bool = True,
           checkpoint: Union[int, str, None] = None) -> RecordResult:
    """Records ``episodes`` episodes (games) of ``policy`` on ``env`` into the new dataset ``out`` (``checkpoint``:
    a run directory's checkpoint of these environment steps, or ``"best"``; default: its latest).

    Raises:
        RunError: an unknown policy, a function policy with worker processes, a run of other
            spaces, or ``out`` already holding a dataset.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise RunError(f"record: --episodes must be an int >= 1, got {episodes!r}")
    section = _env_section(env, policy)
    factory = EnvFactory(section)
    obs_space, action_space, _ = factory.layout()
    rng = np.random.default_rng(seed)
    if checkpoint is not None and not os.path.isdir(policy):
        raise RunError(f"record --checkpoint {checkpoint}: only a run directory's policy has checkpoints")
    chooser = _policy(policy, factory, obs_space, action_space, rng, deterministic, checkpoint)
    if chooser.needs_observations and processes:
        raise RunError(f"record --policy {policy}: a function sees each Observation, which worker processes keep; "
                       "record it with --processes 0")
    if chooser.needs_ids and processes:
        raise RunError(f"record --policy {policy}: the run's network keeps a state per entity by its id "
                       "(model.memory.per_entity), and worker processes pass no ids; record it with --processes 0")
    n_envs = min(num_envs, episodes)
    envs = (EnvList(factory, n_envs, seed=seed, check_finite=section.check_finite) if not processes else
            ParallelEnvList(factory, n_envs, processes, seed=seed, check_finite=section.check_finite))
    from entmachin.data import DatasetError

    try:
        rows = envs.row_index()
        seats = [s for game in rows.seats for s in game] if rows.multi_agent else None
        obs = envs.reset()
        with_ids = not processes and plain_ids([o.ids for o in envs.last_obs])
        recorded = {"env": section.name, "env_kwargs": dict(section.kwargs),
                    "max_episode_steps": section.max_episode_steps, "policy": policy, "checkpoint": checkpoint,
                    "deterministic": deterministic, "seed": seed, "episodes": episodes, "num_envs": n_envs,
                    "processes": processes}
        try:
            writer = DatasetWriter(out, obs_space, action_space, seats=sorted(set(seats)) if seats else None,
                                   recorded=recorded, probs=chooser.probs)
        except DatasetError as e:
            raise RunError(str(e)) from None
        recorder = Recorder(writer, len(obs), seats=seats, episodes=episodes)
        bar = _progress(episodes, progress)
        try:
            while not recorder.done:
                observations = envs.last_obs if not processes else None
                ids = [o.ids for o in observations] if with_ids else None
                actions, probs = chooser.choose(obs, observations)
                nxt = envs.act(actions)
                chooser.advance(nxt.done)
                final_ids = [o.ids for o in envs.final_observations] if with_ids and nxt.done.any() else None
                before = recorder.ended
                recorder.step(obs, actions, nxt, probs, ids, final_ids)
                bar.update(recorder.ended - before)
                obs = nxt
        finally:
            bar.close()
            recorder.close()
    finally:
        envs.close()
    return RecordResult(out, recorder.ended, writer.rows, writer.parts,
                        float(np.mean(recorder.returns)) if recorder.returns else float("nan"), with_ids)


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="episode", disable=not enabled, leave=False)
