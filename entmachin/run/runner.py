"""The training loop of ``entmachin train``: rollouts and updates, with callbacks at each event.

Everything else a run does is a callback (:mod:`entmachin.run.callbacks`): evaluation, checkpoints,
tensorboard, the progress bar, the self-play pool, behaviour cloning's validation, and the user's own
(``train.callbacks`` or :func:`entmachin.run.train`'s ``callbacks``).

A run directory holds::

    config.yaml          the resolved config (``entmachin train config.yaml`` re-runs it)
    events.out.tfevents* tensorboard scalars; the x-axis is environment steps
    checkpoints/         checkpoint_<env steps>.json + files: the frame, the runner's counters
                         and the environments' state, published atomically as one version
    checkpoints/best/    with log.best: the networks of the best evaluation so far (entmachin.run.best)
    eval.json            every evaluation so far and the final one
    curve.png            return vs environment steps (training episodes and evaluations)

Checkpoints are taken between rollouts, so a resumed run (:mod:`entmachin.run.resume`) continues
exactly where the checkpoint was taken (one thread, CPU). SIGINT and SIGTERM stop the run after the current
iteration with a checkpoint; a second SIGINT stops at once.

Under ``torchrun`` (a :class:`~entmachin.run.distributed.DistributedRun` given) every rank runs
this loop on its own environments with data-parallel updates; rank 0 alone writes the run
directory, and its checkpoints hold every rank's environments and generators. Resuming with
the same number of ranks continues exactly; with another, models, optimisers, statistics and
counters are restored and the environments restart their episodes (with a warning).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from entmachin.env.main_guard import start_forkserver
from entmachin.frame import RolloutCollector
from entmachin.model.compiled import recompiles
from entmachin.run import logs, startup
from entmachin.run.build import (check_device, check_translation, decide_compile, decide_overlap, decide_processes,
                                  make_envs, make_frame, seeds, symmetries_of)
from entmachin.run.envs import EnvFactory
from entmachin.run.best import BestCheckpoint
from entmachin.run.callbacks import Callbacks, load_callbacks
from entmachin.run.callbacks.checkpoints import Checkpoints
from entmachin.run.callbacks.evaluations import Evaluations, check_evaluations
from entmachin.run.callbacks.progress import ProgressBar
from entmachin.run.callbacks.tensorboard import Tensorboard
from entmachin.run.cloning import Cloning
from entmachin.run.config import RunConfig, config_to_dict, dump_yaml
from entmachin.run.defaults import DEFAULT_MAX_EPISODE_STEPS
from entmachin.run.distributed import DistributedRun, rank_seed
from entmachin.run.resume import RunState, init_networks, load_latest
from entmachin.run.selfplay import SelfPlay
# RunError and load_run_config live in logs, which evaluation imports too; importable from here as before
from entmachin.run.logs import RunError, load_run_config  # noqa: F401
from entmachin.run.spaces import spaces_record
from entmachin.run.tracker import RolloutTracker

__all__ = ["Runner", "TrainResult", "RunError"]

logger = logging.getLogger(__name__)

LONG_EPISODE = DEFAULT_MAX_EPISODE_STEPS  # steps without an end that make a run without a step limit warn


@dataclass(frozen=True)
class TrainResult:
    """How a run ended: steps done, the signal that stopped it (None: it finished, with its final
    evaluation), the final evaluation, and why a callback ended it early (None: it did not)."""

    env_steps: int
    stopped: Optional[str]
    final_eval: Optional[Dict[str, float]]
    run_dir: str
    reason: Optional[str] = None


class _StopSignals:
    """SIGINT / SIGTERM set a flag (the run stops after the iteration); a second SIGINT raises."""

    def __init__(self) -> None:
        self.received: Optional[str] = None
        self._previous: Dict[int, Any] = {}

    def __enter__(self) -> "_StopSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        logger.warning("%s received: stopping after this iteration with a checkpoint (press Ctrl-C again to stop "
                       "at once, without one)", self.received)

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Runner:
    """Trains a frame as a :class:`RunConfig` says, in ``run_dir``.

    Args:
        config: the run config.
        run_dir: where the run lives (created; must not hold another run unless ``resume`` or
            ``force``).
        resume: continue from the latest checkpoint in ``run_dir`` (its config.yaml is used).
        force: start a new run in a directory that holds one (its checkpoints are removed).
        progress: show a tqdm progress bar.
        trust_checkpoint: on resume, unpickle the environments' state even where this user's key
            did not sign it (a run directory from someone else, or from before checkpoints were
            signed): it can run any code its author put in it.
        callbacks: the user's callbacks (:mod:`entmachin.run.callbacks`), after ``train.callbacks``'.

    Raises:
        RunError: the run directory cannot be used as asked, or a callback of ``train.callbacks``
            cannot be built.
    """

    def __init__(self, config: RunConfig, run_dir: str, *, resume: bool = False, force: bool = False,
                 progress: bool = True, distributed: Optional[DistributedRun] = None,
                 trust_checkpoint: bool = False, callbacks: Sequence[Any] = ()) -> None:
        # The config records where the run lives, however the directory was chosen.
        config = dataclasses.replace(config, log=dataclasses.replace(config.log, run_dir=run_dir))
        self.config, self.run_dir, self.dist = config, run_dir, distributed
        self.trust_checkpoint = trust_checkpoint
        self.lead = distributed is None or distributed.rank == 0  # writes the run directory
        self.progress = progress and self.lead
        self.checkpoint_dir = os.path.join(run_dir, "checkpoints")
        check_device(config.train.device if distributed is None else distributed.device)
        if config.model.kind == "rogue_net" and config.model.translation is not None:  # names the env's entities
            check_translation(config, EnvFactory(config.env).spaces()[0])
        check_evaluations(config)  # refused now, before the run directory is written
        self.callbacks = Callbacks([], [*load_callbacks(config.train.callbacks), *callbacks])  # checked now
        self.symmetries = symmetries_of(config)
        # A run that fails before its first checkpoint takes away what it wrote (and the
        # directory, if it made it), so that starting again there needs no --force.
        self._created = not os.path.exists(run_dir)
        self._warned_long = False
        self.checkpoints = Checkpoints()
        self.writer: Any = logs.NullWriter()
        self.reason: Optional[str] = None  # why a callback stopped the run
        self.iteration_seconds = 0.0  # the latest rollout and update
        if self.lead:
            logs.prepare_run_dir(run_dir, self.checkpoint_dir, resume=resume, force=force)
        if distributed is not None:
            distributed.barrier()  # the run directory is ready (or rank 0 reported why not)
        self.resume = resume
        self.state = RunState(next_checkpoint=config.log.checkpoint_interval, next_eval=config.log.eval_interval)
        self.seeds = seeds(config)
        self.evaluations = Evaluations(self.seeds["eval"])

    # ------------------------------------------------------------------------------- set-up

    def _build(self) -> None:
        config = self.config
        torch.manual_seed(self.seeds["torch"])
        rank = 0 if self.dist is None else self.dist.rank
        if self.dist is not None and self.dist.device != config.train.device:  # "cuda" -> this rank's GPU
            config = dataclasses.replace(config, train=dataclasses.replace(config.train, device=self.dist.device))
        if self.dist is not None:  # refused before any worker boots
            _check_data_parallel(config, self.dist.world_size)
        processes, self.processes_note = decide_processes(config)
        logger.info(self.processes_note)
        config = dataclasses.replace(config, rollout=dataclasses.replace(config.rollout, processes=processes))
        self.envs, self.frame, note = self._envs_and_frame(config, rank)
        if self.dist is not None:  # identical weights everywhere; each rank samples its own actions
            self.dist.data_parallel.broadcast_modules([self.frame.actor, self.frame.critic])
            self.frame.data_parallel = self.dist.data_parallel
            torch.manual_seed(rank_seed(self.seeds["torch"], rank))
        self.state.spaces = spaces_record(self.envs.obs_space(), self.envs.action_space())
        if note:
            logger.info(note)
        if self.dist is not None and self.lead:  # both are per rank: the easiest setting to get wrong
            size = self.dist.world_size
            logger.info("%d ranks x rollout.num_envs %d = %d environments; minibatches of %d x frame.batch_size %d = "
                        "%d rows in all (to match a one-process run of N environments and batch B, give each rank "
                        "N / %d and B / %d)", size, config.rollout.num_envs, size * config.rollout.num_envs, size,
                        config.frame.settings.batch_size, size * config.frame.settings.batch_size, size, size)
        if config.train.init_from is not None and not self.resume:
            init_networks(self, config.train.init_from)
        self.selfplay = None if not config.selfplay.enabled else SelfPlay(
            config.selfplay, self.frame, self.envs.row_index(), self.seeds["selfplay"], self.state.spaces)
        self.tracker = RolloutTracker(self.envs.action_space())
        self.cloning = None
        overlap, self.overlap_note = decide_overlap(config)
        if config.frame.name == "BC":  # the dataset stands where the collector stands
            self.cloning = Cloning(config, self.frame, self.envs.obs_space(), self.envs.action_space(),
                                   self.seeds["frame"])
            logger.info("behaviour cloning from %s: %d episodes, %d held out (%d training rows)", config.bc.data,
                        self.cloning.n_episodes, self.cloning.n_held_out, self.cloning.train.n_rows)
            self.collector = self.cloning
        else:
            logger.info(self.overlap_note)
            self.collector = RolloutCollector(self.frame, self.envs, n_steps=config.rollout.n_steps,
                                              state_fn=self.tracker.state_fn, action_fn=self.tracker.action_fn,
                                              before_store=None if self.dist is None else self._merge_input_stats,
                                              opponents=self.selfplay, overlap=overlap,
                                              symmetries=self.symmetries)
        self._stats_before: List[torch.Tensor] = []
        if self.resume:
            self.state = load_latest(self)
        own = [c for c in (self.selfplay, self.cloning) if c is not None]
        own += [Tensorboard(self.tracker), ProgressBar(self.progress), self.evaluations]
        own += [BestCheckpoint(config.log.best)] if config.log.best is not None else []
        self.callbacks = Callbacks([*own, self.checkpoints], self.callbacks.users)

    def _envs_and_frame(self, config: RunConfig, rank: int) -> Tuple[Any, Any, str]:
        """The environments and the frame. Worker processes on this machine boot while this process
        builds the networks (on spaces read from an environment of its own): a thread waits for
        them, so the two overlap instead of adding up."""
        seed = rank_seed(self.seeds["envs"], rank)
        self.compiled, self.compile_note = decide_compile(config)
        logger.info(self.compile_note)
        if config.rollout.processes == 0 or config.rollout.workers is not None:
            envs = make_envs(config, seed)
            startup.mark("environments")
            frame, note = make_frame(config, envs.obs_space(), envs.action_space(), rank=rank, compiled=self.compiled,
                                     rows_per_env=_rows_per_env(envs))
            startup.mark("networks and frame")
            return envs, frame, note
        start_forkserver()  # from this thread, where it can ignore SIGTERM
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="entmachin-workers") as pool:
            booting = pool.submit(make_envs, config, seed)
            try:
                obs_space, action_space, rows_per_env = EnvFactory(config.env).layout()
                frame, note = make_frame(config, obs_space, action_space, rank=rank, compiled=self.compiled,
                                         rows_per_env=rows_per_env)
                startup.mark("networks and frame (the workers boot meanwhile)")
            except BaseException:
                booting.add_done_callback(lambda done: done.exception() or done.result().close())
                raise
            envs = booting.result()
        startup.mark("workers ready")
        if _rows_per_env(envs) > rows_per_env:
            envs.close()
            raise RunError(f"env.name: {config.env.name}'s instances have different numbers of seats (up to "
                           f"{_rows_per_env(envs)}; the first had {rows_per_env}); rollout.processes > 0 needs one "
                           "number of seats (or use rollout.processes: 0)")
        return envs, frame, note

    # ------------------------------------------------------------------------------- the loop

    def train(self) -> TrainResult:
        """Runs until ``train.total_steps``, a stop signal or a callback's :meth:`stop`; returns how it ended."""
        config = self.config
        previous_threads = torch.get_num_threads()
        torch.set_num_threads(config.train.threads)
        failed, started = True, False
        try:
            self._build()
            if self.lead:  # on resume too: the settings it may change, and what auto chose this time
                logs.write_config(self.run_dir, config, world_size=1 if self.dist is None else self.dist.world_size,
                                  notes=[self.compile_note, self.processes_note, self.overlap_note])
                purge = self.state.env_steps + 1 if self.resume else None  # the curves go on without repeats
                self.writer = logs.make_writer(self.run_dir, purge_step=purge)
            if not self.resume and self.lead:
                self.writer.add_text("config", "```yaml\n" + dump_yaml(config_to_dict(config)) + "\n```", 0)
            startup.mark("run directory and tensorboard")
            self.planned_steps = self._planned_steps()
            final = None
            with _StopSignals() as signals:
                started = True
                self.callbacks.emit("on_start", self)
                stopped = self._loop(signals)
                if stopped is None:  # a signal from here on still ends with the final checkpoint
                    final = self.evaluations.evaluate(self, final=True)
                    self.state.next_eval = self.state.env_steps + config.log.eval_interval  # a longer resumed run
                    self.checkpoints.save(self)
                    if final is not None:
                        logs.write_hparams(self.writer, config, final)
                else:
                    self.checkpoints.save(self)
                    logger.warning("%s: stopped at %d environment steps with a checkpoint; resume with:  entmachin "
                                   "train --resume %s", stopped, self.state.env_steps, self.run_dir)
            if self.compiled:
                logger.info("model.compile: %d recompiles over the run (graphs dynamo compiled beyond one per kernel)",
                            recompiles())
            result = TrainResult(self.state.env_steps, stopped, final, self.run_dir, self.reason)
            self.callbacks.emit("on_end", self, result)
            failed = False
            return result
        finally:
            if started:
                self.callbacks.close(self)
            self.writer.close()
            if hasattr(self, "envs"):
                self.envs.close()
            if hasattr(self, "frame"):
                self.frame.data_parallel = None
            torch.set_num_threads(previous_threads)
            if failed and self.lead and not (self.resume or self.checkpoints.published):
                logs.remove_run_files(self.run_dir, self.checkpoint_dir, whole_dir=self._created)

    def stop(self, reason: str) -> None:
        """Ends the run after the current iteration as a finished run ends (its final evaluation and
        checkpoint); ``reason`` goes to the log and to ``TrainResult.reason``. For callbacks."""
        if self.reason is None:
            self.reason = str(reason)
            logger.info("stopping: %s", self.reason)

    def _planned_steps(self) -> int:
        """The environment steps this run ends at: ``train.total_steps`` rounded up to whole rollouts
        (said once when it is rounded)."""
        config, done = self.config, self.state.env_steps
        per_rollout = config.rows_per_update * (1 if self.dist is None else self.dist.world_size)
        planned = done + math.ceil(max(config.train.total_steps - done, 0) / per_rollout) * per_rollout
        if planned != config.train.total_steps and planned > done and self.lead:
            ranks = "" if self.dist is None else f" x {self.dist.world_size} ranks"
            unit = "updates of %d rows" if config.frame.name == "BC" else "rollouts of %d steps"
            logger.info("train.total_steps=%d is not a whole number of " + unit + " (%s%s): the run ends at %d steps",
                        config.train.total_steps, per_rollout, config.rows_per_update_source(), ranks, planned)
        return planned

    def _warn_if_episodes_never_end(self, stats: Any) -> None:
        """Once per run: an episode has run past ``LONG_EPISODE`` steps and the config sets no step limit."""
        if self._warned_long or self.config.env.max_episode_steps is not None or \
                stats.longest_running < LONG_EPISODE or not self.lead:
            return
        self._warned_long = True
        logger.warning("an episode has run %d steps without ending and env.max_episode_steps is null: episodes that "
                       "do not end show in no return curve and teach nothing about their end; set "
                       "env.max_episode_steps to cut them (the cut is truncated: the critic bootstraps)",
                       stats.longest_running)

    def _everywhere(self, here: bool) -> bool:
        """``here``, or under torchrun whether it holds on any rank (every rank decides alike)."""
        return here if self.dist is None else self.dist.any_true(here)

    def _loop(self, signals: _StopSignals) -> Optional[str]:
        """Iterations until the end; the signal that stopped them, or None (the end, or a callback's stop)."""
        config, state = self.config, self.state
        while state.env_steps < config.train.total_steps:
            if self._everywhere(signals.received is not None):
                return signals.received or "a stop signal to another rank"
            if self._everywhere(self.reason is not None):
                self.reason = self.reason or "a callback on another rank stopped the run"
                return None
            started = time.perf_counter()
            line = startup.finish()  # once, and only under the command
            if line is not None:
                logger.debug(line)
            if self.dist is not None:  # every rank's input statistics are merged before its rows are stored
                self._stats_before = self.dist.data_parallel.snapshot_input_stats([self.frame.actor, self.frame.critic])
            stats = self.collector.collect()
            if self.dist is not None:  # the episodes of every rank
                stats = self.dist.gather_rollout(stats)
            self.callbacks.emit("after_rollout", self, stats)
            for _ in range(config.frame.n_updates):  # 1 but for the DQN frames
                self.frame.update()
            if self.dist is not None:
                self.frame.last_update = self.dist.data_parallel.reduce_stats(self.frame.last_update)
            self.iteration_seconds = time.perf_counter() - started
            self._warn_if_episodes_never_end(stats)
            state.advance(stats)
            self.callbacks.emit("after_update", self, stats)
        return signals.received

    def _merge_input_stats(self) -> None:
        """Every rank's input statistics merged into every rank's, before the rollout's rows are
        stored: their values (and so advantages and value targets) come from the statistics of
        all ranks' steps, as one process stepping every environment would compute them."""
        self.dist.data_parallel.merge_input_stats([self.frame.actor, self.frame.critic], self._stats_before)


def _check_data_parallel(config: RunConfig, world_size: int) -> None:
    """What data-parallel ranks cannot train: frames other than PPO and A2C, self-play."""
    if config.frame.name not in ("PPO", "A2C"):
        raise RunError(f"frame.name: {config.frame.name} trains in one process; data-parallel training "
                       f"(torchrun, {world_size} ranks) supports PPO and A2C")
    if config.selfplay.enabled:
        raise RunError(f"selfplay.seats: self-play trains in one process (rollout.processes: N steps its games in "
                       f"worker processes); under torchrun ({world_size} ranks) each rank would keep a "
                       "pool and Elo ratings of its own, which are not merged yet")


def _rows_per_env(envs: Any) -> int:
    """The most rows one environment gives (its seats, for a game of several players)."""
    return int(np.bincount(envs.row_index().env).max())
