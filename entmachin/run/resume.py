"""What carries a run over a restart: the runner's counters (``RunState``), ``--resume`` from the latest
checkpoint, and ``train.init_from`` (another run's networks).

A resume reads and checks everything first (the frame's files, the best checkpoint, the self-play pool), then
applies it; the environments' state is restored where this user's key signed it, else they restart their
episodes (said in the log). Under ``torchrun`` each rank takes its own environments and generators from rank
0's checkpoint; with another number of ranks the environments restart.
"""
from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from entmachin.frame.checkpoint import latest_version, read_frame_checkpoint
from entmachin.model.wrappers import unwrap
from entmachin.run import env_state
from entmachin.run.best import read_best
from entmachin.run.envs import EnvFactory
from entmachin.run.distributed import rank_seed, restore_rank_state
from entmachin.run.evaluation import load_trained
from entmachin.run.logs import RunError

__all__ = ["RunState", "init_networks", "load_latest"]

logger = logging.getLogger(__name__)

FORMAT = 1  # of the runner's file in a checkpoint
WINDOW = 100  # training episodes in the running mean return


@dataclass
class RunState:
    """The runner's own counters, saved in every checkpoint (JSON: :meth:`to_bytes`, :meth:`from_bytes`)."""

    env_steps: int = 0
    iterations: int = 0
    episodes: int = 0
    next_checkpoint: int = 0
    next_eval: int = 0
    recent_returns: List[float] = field(default_factory=list)
    recent_lengths: List[int] = field(default_factory=list)
    curve: List[List[float]] = field(default_factory=list)  # [env steps, mean training return]
    evals: List[Dict[str, float]] = field(default_factory=list)
    spaces: Dict[str, Any] = field(default_factory=dict)  # what the policy was trained on
    best: Optional[Dict[str, Any]] = None  # log.best: env_steps, figure and value of checkpoints/best

    @property
    def mean_return(self) -> float:
        """The mean return of the latest training episodes (nan before any ended)."""
        return float(np.mean(self.recent_returns)) if self.recent_returns else math.nan

    def advance(self, stats: Any) -> None:
        """Counts one iteration of ``stats`` (a ``RolloutStats``): steps, episodes, the training curve."""
        self.env_steps += stats.n_env_steps
        self.iterations += 1
        self.episodes += len(stats.episode_returns)
        self.recent_returns = (self.recent_returns + list(stats.episode_returns))[-WINDOW:]
        self.recent_lengths = (self.recent_lengths + list(stats.episode_lengths))[-WINDOW:]
        if self.recent_returns:
            self.curve.append([self.env_steps, self.mean_return])

    def to_bytes(self) -> bytes:
        """The counters as a checkpoint's ``runner`` file holds them (JSON)."""
        return json.dumps({"format": FORMAT, **vars(self)}).encode()

    @classmethod
    def from_bytes(cls, blob: Optional[bytes], directory: str, version: int) -> "RunState":
        """The counters of checkpoint ``version`` in ``directory`` (``blob``: its ``runner`` file)."""
        where = f"{os.path.join(directory, f'checkpoint_{version}.json')!r}"
        if blob is None:
            raise RunError(f"{where} is a frame checkpoint without the runner's state; resume needs a checkpoint "
                           "written by entmachin train")
        try:
            data = json.loads(blob.decode("utf-8"))
            if data.pop("format") != FORMAT:
                raise ValueError("format")
            return cls(**data)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            raise RunError(f"{where}: the runner's state is damaged or of another format") from None


def init_networks(run: Any, path: str) -> None:
    """``train.init_from``: the networks (weights and input statistics) of a run's latest checkpoint."""
    try:
        source, _, _ = load_trained(path, EnvFactory(run.config.env))
    except (RunError, FileNotFoundError, ValueError) as e:
        raise RunError(f"train.init_from: {e}") from None
    theirs, ours = _memory_of(source), _memory_of(run.frame)
    if theirs != ours:  # named before torch's list of mismatched tensors
        raise RunError(f"train.init_from: {path!r}'s network has model.memory {theirs or 'null'}, this config's "
                       f"{ours or 'null'}; a state of another size (or none) cannot continue from it")
    for name in run.frame.network_names:
        try:
            getattr(run.frame, name).load_state_dict(getattr(source, name).state_dict())
        except (AttributeError, RuntimeError) as e:
            raise RunError(f"train.init_from: {path!r}'s {name} does not fit this config's model ("
                           f"{' '.join(str(e).split())[:300]}); give model the run's settings") from None
    logger.info("networks initialised from %s", path)


def _memory_of(frame: Any) -> str:
    """A frame's actor's memory core in words ("" without one)."""
    actor = unwrap(getattr(frame, "actor", None))
    core = getattr(actor, "memory", None)
    if core is None:
        return ""
    per_entity = getattr(actor, "entity_memory", None)
    if per_entity is None:
        return f"{{kind: {core.kind}, size: {core.size}}} ({core.state_size} floats per row)"
    return (f"{{kind: {core.kind}, size: {core.size}, per_entity: true}} ({core.state_size} floats per row and "
            f"{per_entity.state_size} per entity)")


def load_latest(run: Any) -> RunState:
    """``--resume``: the latest checkpoint's frame, environments (where signed), collector, self-play pool and
    best checkpoint restored into ``run``; its counters returned. Everything is read and checked first."""
    try:
        version = latest_version(run.checkpoint_dir, "resume")
        loaded = read_frame_checkpoint(run.frame, run.checkpoint_dir, None, version)
    except FileNotFoundError as e:
        raise RunError(f"--resume {run.run_dir}: no checkpoint to resume from ({e})") from None
    except ValueError as e:
        raise RunError(f"--resume {run.run_dir}: {e}") from None
    state = RunState.from_bytes(loaded.extras.get("runner"), run.checkpoint_dir, version)
    if run.config.log.best is not None:  # read and checked before anything changes
        state.best = read_best(run.frame, run.checkpoint_dir, run.config.log.best, state.best,
                               f"--resume {run.run_dir}")
    pool = None
    if run.selfplay is not None:  # read and checked before anything changes
        if "selfplay" not in loaded.extras:
            raise RunError(f"--resume {run.run_dir}: checkpoint {version} holds no self-play pool, but the "
                           "run's config sets selfplay.seats")
        pool = run.selfplay.check_bytes(loaded.extras["selfplay"], loaded.extra_paths["selfplay"])
    loaded.apply()
    envs_blob = _rank_envs(run, state, loaded.extras.get("ranks"), loaded.extras.get("envs"),
                           loaded.extra_paths.get("ranks"))
    envs_path = loaded.extra_paths.get("ranks" if "ranks" in loaded.extras else "envs")
    restored = False
    if envs_blob is not None and (snapshot := env_state.read(envs_blob, envs_path, run.trust_checkpoint)):
        memory, actor = _memory_of(run.frame), unwrap(getattr(run.frame, "actor", None))
        for key, what in (("memory", "recurrent states"), ("entity_memory", "per-entity states")):
            needed = memory and (key == "memory" or getattr(actor, "entity_memory", None) is not None)
            if needed and key not in snapshot["collector"]:
                raise RunError(f"--resume {run.run_dir}: checkpoint {version} holds its episodes in progress but no "
                               f"{what}, and the run's network has model.memory {memory}; its episodes cannot "
                               "continue without the states they built")
        try:
            run.envs.set_state(snapshot["envs"])
            run.collector.restore(snapshot["collector"])
            restored = True
        except Exception as e:  # an environment that does not unpickle: restart its episodes
            logger.warning("resume: the environments' state could not be restored (%s: %s); they restart their "
                           "episodes", type(e).__name__, e)
    elif envs_blob is None:
        logger.warning("resume: the checkpoint holds no environment state (the environments could not be "
                       "pickled or signed when it was written); they restart their episodes")
    if not restored:
        run.collector.total_env_steps = state.env_steps // (1 if run.dist is None else run.dist.world_size)
    if pool is not None:
        run.selfplay.load(pool, games=restored)
    logger.info("resumed %s at %d environment steps (checkpoint %d)", run.run_dir, state.env_steps, version)
    return state


def _rank_envs(run: Any, state: RunState, ranks_blob: Optional[bytes], envs_blob: Optional[bytes],
               ranks_path: Optional[str]) -> Optional[bytes]:
    """This rank's environments in a checkpoint (None: restart them), its generators restored."""
    saved = [{"envs": envs_blob}] if ranks_blob is None else \
        env_state.read_ranks(ranks_blob, ranks_path, run.trust_checkpoint)
    world_size = 1 if run.dist is None else run.dist.world_size
    if len(saved) != world_size:  # [] from read_ranks has said why already
        if saved:
            logger.warning("resume: the checkpoint was written by %d rank(s), this run has %d; models, "
                           "optimisers, statistics and counters are restored, the environments restart their "
                           "episodes", len(saved), world_size)
        if run.dist is not None and run.dist.rank > 0:  # not rank 0's generator: actions of its own
            torch.manual_seed(rank_seed(run.seeds["torch"] + state.env_steps, run.dist.rank))
        return None
    mine = saved[0 if run.dist is None else run.dist.rank]
    if "torch_rng" in mine:
        restore_rank_state(run.frame, mine)
    return mine["envs"]
