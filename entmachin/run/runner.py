"""The training loop of ``entmachin train``: rollouts, updates, tensorboard, checkpoints, evaluation.

A run directory holds::

    config.yaml          the resolved config (``entmachin train config.yaml`` re-runs it)
    events.out.tfevents* tensorboard scalars; the x-axis is environment steps
    checkpoints/         checkpoint_<env steps>.json + files: the frame, the runner's counters
                         and the environments' state, published atomically as one version
    checkpoints/best/    with log.best: the networks of the best evaluation so far (entmachin.run.best)
    eval.json            every evaluation so far and the final one
    curve.png            return vs environment steps (training episodes and evaluations)

Checkpoints are taken between rollouts, so a resumed run continues exactly where the
checkpoint was taken (one thread, CPU). SIGINT and SIGTERM stop the run after the current
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
import json
import logging
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from entmachin.env.main_guard import start_forkserver
from entmachin.env.multi_agent import is_multi_agent
from entmachin.frame import RolloutCollector, evaluate
from entmachin.frame.checkpoint import latest_version, read_frame_checkpoint, save_frame
from entmachin.frame.checkpoint_files import manifest_versions, remove_version
from entmachin.frame.summary import log_update
from entmachin.model.compiled import recompiles
from entmachin.run import logs, startup
from entmachin.run.build import (EnvFactory, check_device, check_translation, decide_compile, decide_overlap,
                                  decide_processes, make_envs,
                                  make_frame, seeds, symmetries_of)
from entmachin.run.best import candidate, improves, publish_best, read_best
from entmachin.run.cloning import Cloning
from entmachin.run.config import RunConfig, config_to_dict, dump_yaml
from entmachin.run.defaults import DEFAULT_MAX_EPISODE_STEPS
from entmachin.run import env_state
from entmachin.run.distributed import DistributedRun, rank_seed, rank_state, ranks_to_bytes, restore_rank_state
from entmachin.run.evaluation import eval_options, load_trained
from entmachin.run.matches import load_opponent, match
from entmachin.run.selfplay import SelfPlay
# RunError and load_run_config live in logs, which evaluation imports too; importable from here as before
from entmachin.run.logs import RunError, load_run_config
from entmachin.run.spaces import spaces_record
from entmachin.run.tracker import RolloutTracker

__all__ = ["Runner", "TrainResult", "RunError"]

logger = logging.getLogger(__name__)

_RUNNER_FORMAT = 1
_WINDOW = 100  # training episodes in the running mean return
LONG_EPISODE = DEFAULT_MAX_EPISODE_STEPS  # steps without an end that make a run without a step limit warn


@dataclass
class RunState:
    """The runner's own counters, saved in every checkpoint."""

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


@dataclass(frozen=True)
class TrainResult:
    """How a run ended: steps done, whether a signal stopped it, and the final evaluation."""

    env_steps: int
    stopped: Optional[str]
    final_eval: Optional[Dict[str, float]]
    run_dir: str


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

    Raises:
        RunError: the run directory cannot be used as asked.
    """

    def __init__(self, config: RunConfig, run_dir: str, *, resume: bool = False, force: bool = False,
                 progress: bool = True, distributed: Optional[DistributedRun] = None,
                 trust_checkpoint: bool = False) -> None:
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
        _check_evaluations(config)  # refused now, before the run directory is written
        self.symmetries = symmetries_of(config)
        # A run that fails before its first checkpoint takes away what it wrote (and the
        # directory, if it made it), so that starting again there needs no --force.
        self._created = not os.path.exists(run_dir)
        self._checkpointed = resume
        self._warned_long = False
        if self.lead:
            logs.prepare_run_dir(run_dir, self.checkpoint_dir, resume=resume, force=force)
        if distributed is not None:
            distributed.barrier()  # the run directory is ready (or rank 0 reported why not)
        self.resume = resume
        self.state = RunState(next_checkpoint=config.log.checkpoint_interval, next_eval=config.log.eval_interval)
        self._seeds = seeds(config)

    # ------------------------------------------------------------------------------- set-up

    def _build(self) -> None:
        config = self.config
        torch.manual_seed(self._seeds["torch"])
        rank = 0 if self.dist is None else self.dist.rank
        if self.dist is not None and self.dist.device != config.train.device:  # "cuda" -> this rank's GPU
            config = dataclasses.replace(config, train=dataclasses.replace(config.train, device=self.dist.device))
        if self.dist is not None and config.selfplay.enabled:
            raise RunError(f"selfplay.seats: self-play trains in one process (rollout.processes: N steps its games in "
                           f"worker processes); under torchrun ({self.dist.world_size} ranks) each rank would keep a "
                           "pool and Elo ratings of its own, which are not merged yet")
        processes, self.processes_note = decide_processes(config)
        logger.info(self.processes_note)
        config = dataclasses.replace(config, rollout=dataclasses.replace(config.rollout, processes=processes))
        self.envs, self.frame, note = self._envs_and_frame(config, rank)
        if self.dist is not None and config.frame.name not in ("PPO", "A2C"):
            raise RunError(f"frame.name: {config.frame.name} trains in one process; data-parallel training "
                           f"(torchrun, {self.dist.world_size} ranks) supports PPO and A2C")
        if self.dist is not None:  # identical weights everywhere; each rank samples its own actions
            self.dist.data_parallel.broadcast_modules([self.frame.actor, self.frame.critic])
            self.frame.data_parallel = self.dist.data_parallel
            torch.manual_seed(rank_seed(self._seeds["torch"], rank))
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
            self._init_networks(config.train.init_from)
        self.selfplay = None if not config.selfplay.enabled else SelfPlay(
            config.selfplay, self.frame, self.envs.row_index(), self._seeds["selfplay"], self.state.spaces)
        self.tracker = RolloutTracker(self.envs.action_space())
        self.cloning = None
        overlap, self.overlap_note = decide_overlap(config)
        if config.frame.name == "BC":  # the dataset stands where the collector stands
            if self.dist is not None:
                raise RunError(f"frame.name: BC trains in one process; data-parallel training (torchrun, "
                               f"{self.dist.world_size} ranks) supports PPO and A2C")
            self.cloning = Cloning(config, self.frame, self.envs.obs_space(), self.envs.action_space(),
                                   self._seeds["frame"])
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
            self._load_latest()

    def _envs_and_frame(self, config: RunConfig, rank: int) -> Tuple[Any, Any, str]:
        """The environments and the frame. Worker processes on this machine boot while this process
        builds the networks (on spaces read from an environment of its own): a thread waits for
        them, so the two overlap instead of adding up."""
        seed = rank_seed(self._seeds["envs"], rank)
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

    def _init_networks(self, path: str) -> None:
        """``train.init_from``: the networks (weights and input statistics) of a run's latest checkpoint."""
        try:
            source, _, _ = load_trained(path, EnvFactory(self.config.env))
        except (RunError, FileNotFoundError, ValueError) as e:
            raise RunError(f"train.init_from: {e}") from None
        for name in self.frame.network_names:
            try:
                getattr(self.frame, name).load_state_dict(getattr(source, name).state_dict())
            except (AttributeError, RuntimeError) as e:
                raise RunError(f"train.init_from: {path!r}'s {name} does not fit this config's model ("
                               f"{' '.join(str(e).split())[:300]}); give model the run's settings") from None
        logger.info("networks initialised from %s", path)

    def _load_latest(self) -> None:
        try:
            version = latest_version(self.checkpoint_dir, "resume")
            loaded = read_frame_checkpoint(self.frame, self.checkpoint_dir, None, version)
        except FileNotFoundError as e:
            raise RunError(f"--resume {self.run_dir}: no checkpoint to resume from ({e})") from None
        except ValueError as e:
            raise RunError(f"--resume {self.run_dir}: {e}") from None
        runner = _decode_runner(loaded.extras.get("runner"), self.checkpoint_dir, version)
        if self.config.log.best is not None:  # read and checked before anything changes
            runner.best = read_best(self.frame, self.checkpoint_dir, self.config.log.best, runner.best,
                                    f"--resume {self.run_dir}")
        pool = None
        if self.selfplay is not None:  # read and checked before anything changes
            if "selfplay" not in loaded.extras:
                raise RunError(f"--resume {self.run_dir}: checkpoint {version} holds no self-play pool, but the "
                               "run's config sets selfplay.seats")
            pool = self.selfplay.check_bytes(loaded.extras["selfplay"], loaded.extra_paths["selfplay"])
        loaded.apply()
        self.state = runner
        envs_blob = self._rank_envs(loaded.extras.get("ranks"), loaded.extras.get("envs"),
                                    loaded.extra_paths.get("ranks"))
        envs_path = loaded.extra_paths.get("ranks" if "ranks" in loaded.extras else "envs")
        restored = False
        if envs_blob is not None and (snapshot := env_state.read(envs_blob, envs_path, self.trust_checkpoint)):
            try:
                self.envs.set_state(snapshot["envs"])
                self.collector.restore(snapshot["collector"])
                restored = True
            except Exception as e:  # an environment that does not unpickle: restart its episodes
                logger.warning("resume: the environments' state could not be restored (%s: %s); they restart their "
                               "episodes", type(e).__name__, e)
        elif envs_blob is None:
            logger.warning("resume: the checkpoint holds no environment state (the environments could not be "
                           "pickled or signed when it was written); they restart their episodes")
        if not restored:
            self.collector.total_env_steps = self.state.env_steps // (1 if self.dist is None else self.dist.world_size)
        if pool is not None:
            self.selfplay.load(pool, games=restored)
        logger.info("resumed %s at %d environment steps (checkpoint %d)", self.run_dir, self.state.env_steps, version)

    def _rank_envs(self, ranks_blob: Optional[bytes], envs_blob: Optional[bytes],
                   ranks_path: Optional[str]) -> Optional[bytes]:
        """This rank's environments in a checkpoint (None: restart them), its generators restored."""
        saved = [{"envs": envs_blob}] if ranks_blob is None else \
            env_state.read_ranks(ranks_blob, ranks_path, self.trust_checkpoint)
        world_size = 1 if self.dist is None else self.dist.world_size
        if len(saved) != world_size:  # [] from read_ranks has said why already
            if saved:
                logger.warning("resume: the checkpoint was written by %d rank(s), this run has %d; models, "
                               "optimisers, statistics and counters are restored, the environments restart their "
                               "episodes", len(saved), world_size)
            if self.dist is not None and self.dist.rank > 0:  # not rank 0's generator: actions of its own
                torch.manual_seed(rank_seed(self._seeds["torch"] + self.state.env_steps, self.dist.rank))
            return None
        mine = saved[0 if self.dist is None else self.dist.rank]
        if "torch_rng" in mine:
            restore_rank_state(self.frame, mine)
        return mine["envs"]

    # ------------------------------------------------------------------------------- the loop

    def train(self) -> TrainResult:
        """Runs until ``train.total_steps`` (or a stop signal); returns how it ended."""
        config = self.config
        previous_threads = torch.get_num_threads()
        torch.set_num_threads(config.train.threads)
        writer, failed = None, True
        try:
            self._build()
            if self.lead:  # on resume too: the settings it may change, and what auto chose this time
                logs.write_config(self.run_dir, config, world_size=1 if self.dist is None else self.dist.world_size,
                                  notes=[self.compile_note, self.processes_note, self.overlap_note])
            writer = logs.make_writer(self.run_dir, purge_step=self.state.env_steps + 1 if self.resume else None) \
                if self.lead else logs.NullWriter()
            if not self.resume and self.lead:
                writer.add_text("config", "```yaml\n" + dump_yaml(config_to_dict(config)) + "\n```", 0)
            startup.mark("run directory and tensorboard")
            final = None
            total = self._planned_steps()
            with _StopSignals() as signals, logs.progress_bar(config, self.state.env_steps, total, self.progress) as bar:
                stopped = self._loop(writer, signals, bar)
                if stopped is None:  # a signal from here on still ends with the final checkpoint
                    final = self._evaluate(writer, final=True)
                    self.state.next_eval = self.state.env_steps + config.log.eval_interval  # a longer resumed run
                    self._checkpoint()
                    if final is not None:
                        logs.write_hparams(writer, config, final)
                else:
                    self._checkpoint()
                    logger.warning("%s: stopped at %d environment steps with a checkpoint; resume with:  entmachin "
                                   "train --resume %s", stopped, self.state.env_steps, self.run_dir)
            if self.compiled:
                logger.info("model.compile: %d recompiles over the run (graphs dynamo compiled beyond one per kernel)",
                            recompiles())
            failed = False
            return TrainResult(self.state.env_steps, stopped, final, self.run_dir)
        finally:
            if writer is not None:
                writer.close()
            if hasattr(self, "envs"):
                self.envs.close()
            if hasattr(self, "frame"):
                self.frame.data_parallel = None
            torch.set_num_threads(previous_threads)
            if failed and self.lead and not self._checkpointed:
                logs.remove_run_files(self.run_dir, self.checkpoint_dir, whole_dir=self._created)

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

    def _loop(self, writer: Any, signals: _StopSignals, bar: Any) -> Optional[str]:
        config, state = self.config, self.state
        while state.env_steps < config.train.total_steps:
            if signals.received if self.dist is None else self.dist.any_true(signals.received is not None):
                return signals.received or "a stop signal to another rank"
            started = time.perf_counter()
            line = startup.finish()  # once, and only under the command
            if line is not None:
                logger.debug(line)
            if self.dist is None:
                stats = self.collector.collect()
                for _ in range(config.frame.n_updates):  # 1 but for the DQN frames
                    self.frame.update()
            else:
                stats = self._collect_and_update()
            elapsed = time.perf_counter() - started
            self._warn_if_episodes_never_end(stats)
            state.env_steps += stats.n_env_steps
            if self.selfplay is not None:
                self.selfplay.after_update(state.env_steps)
                self.selfplay.write(writer, state.env_steps)
            if self.cloning is not None:
                self.cloning.write(writer, state.env_steps)
            state.iterations += 1
            state.episodes += len(stats.episode_returns)
            state.recent_returns = (state.recent_returns + list(stats.episode_returns))[-_WINDOW:]
            state.recent_lengths = (state.recent_lengths + list(stats.episode_lengths))[-_WINDOW:]
            step = state.env_steps
            logs.write_iteration(writer, self.tracker, stats, step, stats.n_env_steps / max(elapsed, 1e-9))
            log_update(writer, self.frame.last_update, step)
            mean_return = float(np.mean(state.recent_returns)) if state.recent_returns else math.nan
            if state.recent_returns:
                state.curve.append([step, mean_return])
            bar.update(stats.n_env_steps)
            bar.set_postfix(mean_return=f"{mean_return:.3f}", refresh=False)
            if step >= state.next_eval and step < config.train.total_steps:
                if self.lead:
                    self._evaluate(writer, final=False)
                state.next_eval = logs.next_due(state.next_eval, step, config.log.eval_interval)
            if step >= state.next_checkpoint:
                self._checkpoint()
                state.next_checkpoint = logs.next_due(state.next_checkpoint, step, config.log.checkpoint_interval)
        return signals.received

    def _collect_and_update(self) -> Any:
        """One data-parallel iteration: every rank's input statistics merged before the rows are
        stored, the update's statistics and the rollout's episodes gathered from every rank."""
        self._stats_before = self.dist.data_parallel.snapshot_input_stats([self.frame.actor, self.frame.critic])
        stats = self.collector.collect()  # merges the statistics (_merge_input_stats) before storing the rows
        self.frame.update()
        self.frame.last_update = self.dist.data_parallel.reduce_stats(self.frame.last_update)
        return self.dist.gather_rollout(stats)

    def _merge_input_stats(self) -> None:
        """Every rank's input statistics merged into every rank's, before the rollout's rows are
        stored: their values (and so advantages and value targets) come from the statistics of
        all ranks' steps, as one process stepping every environment would compute them."""
        self.dist.data_parallel.merge_input_stats([self.frame.actor, self.frame.critic], self._stats_before)

    # ------------------------------------------------------------------------------- evaluation

    def _evaluate(self, writer: Any, final: bool) -> Optional[Dict[str, float]]:
        config = self.config
        if not self.lead:
            return None
        # Evaluations sample from torch's generator too: on a fork of it, seeded alike each time,
        # so that training does not depend on when (or whether) evaluations run.
        with torch.random.fork_rng(devices=_cuda_devices()):
            torch.manual_seed(self._seeds["eval"])
            result = evaluate(self.frame, EnvFactory(config.env), config.log.eval_episodes,
                              deterministic=config.log.eval_deterministic, seed=self._seeds["eval"],
                              **eval_options(config, config.log.eval_episodes))
            win_rates = {}
            for opponent in config.log.eval_opponents:  # games of several players
                matched = match(self.frame, EnvFactory(config.env), opponent, config.log.eval_episodes,
                                config.log.eval_deterministic, self._seeds["eval"])
                win_rates[opponent] = matched.win_rate
                writer.add_scalar(f"eval/win_rate/{opponent}", matched.win_rate, self.state.env_steps)
                logger.info("evaluation at %d steps against %s over %d games: %d wins, %d draws, %d losses, %s",
                            self.state.env_steps, opponent, matched.games, matched.wins, matched.draws,
                            matched.losses, matched.line())
        record = {"env_steps": self.state.env_steps, "mean": result.mean, "min": result.min, "max": result.max,
                  "episodes": len(result.returns), "final": final}
        if win_rates:
            record["win_rate"] = win_rates
        self.state.evals.append(record)
        writer.add_scalar("eval/mean_return", result.mean, self.state.env_steps)
        logs.write_evals(self.run_dir, self.state)
        logger.info("evaluation at %d steps over %d episodes: mean %.3f, min %.3f, max %.3f", self.state.env_steps,
                    len(result.returns), result.mean, result.min, result.max)
        if config.log.best is not None and improves(best := candidate(record, config.log.best), self.state.best):
            self.state.best = best
            publish_best(self.frame, self.checkpoint_dir, best, {"runner": self._runner_bytes()})
            logger.info("checkpoints/best: the networks of %d steps (%s %.3f)", best["env_steps"],
                        "mean return" if best["figure"] == "return" else f"win rate against {best['figure']}",
                        best["value"])
        return record

    # ------------------------------------------------------------------------------- checkpoints

    def _runner_bytes(self) -> bytes:
        return json.dumps({"format": _RUNNER_FORMAT, **vars(self.state)}).encode()

    def _checkpoint(self) -> None:
        extras = {"runner": self._runner_bytes()}
        envs = env_state.write(self.envs, self.collector)  # signed: resume unpickles only the user's own
        if self.dist is not None:  # every rank's environments and generators, in rank 0's checkpoint
            extras["ranks"] = ranks_to_bytes(self.dist.gather_bytes(rank_state(self.frame, envs)))
        if envs is not None:
            extras["envs"] = envs
        if self.selfplay is not None:
            extras["selfplay"] = self.selfplay.to_bytes()
        if self.lead:
            save_frame(self.frame, self.checkpoint_dir, None, self.state.env_steps, extras=extras)
            self._checkpointed = True
            keep = self.config.log.keep_checkpoints
            for version in manifest_versions(self.checkpoint_dir)[:-keep] if keep is not None else ():
                remove_version(self.checkpoint_dir, version)


def _check_evaluations(config: RunConfig) -> None:
    """Refuses an opponent of ``log.eval_opponents`` the environment does not have, and ``log.best: return``
    for a game of several players (its seats' returns cancel out), naming the field."""
    factory = EnvFactory(config.env)
    for opponent in config.log.eval_opponents:
        try:
            load_opponent(opponent, factory, 0)
        except RunError as e:
            fields = "log.eval_opponents" + (" and log.best" if opponent == config.log.best else "")
            raise RunError(f"{fields}: {e}") from None
    if config.log.best == "return" and _is_game(factory):
        raise RunError(f"log.best: return is a one-player figure; {factory.name} is a game of several players, whose "
                       f"seats' returns cancel out: name an opponent of log.eval_opponents "
                       f"{list(config.log.eval_opponents)}")


def _is_game(factory: EnvFactory) -> bool:
    env = factory()
    try:
        return is_multi_agent(env)
    finally:
        env.close()


def _cuda_devices() -> List[int]:
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() and torch.cuda.is_initialized() else []


def _decode_runner(blob: Optional[bytes], directory: str, version: int) -> RunState:
    where = f"{os.path.join(directory, f'checkpoint_{version}.json')!r}"
    if blob is None:
        raise RunError(f"{where} is a frame checkpoint without the runner's state; resume needs a checkpoint "
                       "written by entmachin train")
    try:
        data = json.loads(blob.decode("utf-8"))
        if data.pop("format") != _RUNNER_FORMAT:
            raise ValueError("format")
        return RunState(**data)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise RunError(f"{where}: the runner's state is damaged or of another format") from None


def _rows_per_env(envs: Any) -> int:
    """The most rows one environment gives (its seats, for a game of several players)."""
    return int(np.bincount(envs.row_index().env).max())
