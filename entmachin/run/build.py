"""What a run config builds: the environments (``EnvFactory``, :mod:`entmachin.run.envs`, makes each),
the networks and the frame; and what its ``auto`` settings resolve to on this machine."""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.env import EnvList, GymnasiumVecEnv, ParallelEnvList, VecEnv, random_actions, to_state
from entmachin.env.symmetry import Symmetry, check_symmetries
from entmachin.frame import A2C, BC, DQN, PPO, DQNPer
from entmachin.frame.config import resolve
from entmachin.frame.memory import MemoryRows
from entmachin.model.memory import memory_size
from entmachin.frame.safe_call import safe_call
from entmachin.model import DenseNet, RogueNet
from entmachin.ragged.tensor import tree_to_torch
from entmachin.run.config import Q_FRAMES, ConfigError, RunConfig, overlap_refusal, update_times
from entmachin.run.envs import EnvFactory

__all__ = ["EnvFactory", "check_device", "check_translation", "decide_compile", "decide_overlap", "make_envs",
           "make_frame", "seeds"]

logger = logging.getLogger(__name__)


def check_device(name: str) -> None:
    """Raises ``ConfigError`` naming ``train.device`` when this machine cannot put a tensor there."""
    device = torch.device(name)
    if device.type == "cpu":
        return
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, AttributeError) as e:  # torch says "not compiled with CUDA" by assert
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(f"train.device: {name!r} cannot be used on this machine ({reason}); set train.device: cpu "
                          "or run where that device exists") from None


def seeds(config: RunConfig) -> Dict[str, int]:
    """Every seed of a run, derived from ``train.seed``: torch, the frame, the environments, evaluation,
    self-play's draws; and ``fresh``, which the run never uses: games none of its evaluations played, to
    re-evaluate a checkpoint it chose by them (``log.best``: no winner's curse)."""
    base = config.train.seed
    return {"torch": base, "frame": base, "envs": base, "eval": base + 1_000_003, "selfplay": base + 2_000_003,
            "fresh": base + 3_000_017}


def make_envs(config: RunConfig, seed: int) -> VecEnv:
    """The environments of a rollout section: ``EnvList`` (``GymnasiumVecEnv`` for a gymnasium
    environment, the same ``VecObs`` from flat arrays), ``ParallelEnvList``, or with ``workers``
    set, a ``RayEnvList`` of ``max(1, processes)`` Ray actors (``auto``: the Ray this process is
    connected to, or a new local one; ``ray://ADDRESS``: that cluster). ``processes: auto`` is decided here
    (:func:`decide_processes`, logged) unless the caller resolved it."""
    factory = EnvFactory(config.env)
    workers, processes = config.rollout.workers, config.rollout.processes
    if processes == "auto":
        processes, note = decide_processes(config)
        logger.info(note)
    if workers is not None:
        from entmachin.env.ray_env_list import RayEnvList  # Ray only where asked for

        return RayEnvList(factory, config.rollout.num_envs, max(1, processes), seed=seed,
                          address=None if workers == "auto" else workers, check_finite=config.env.check_finite)
    if processes == 0:
        if factory.gymnasium is not None:
            return GymnasiumVecEnv(factory.gymnasium_env, config.rollout.num_envs, seed=seed,
                                   check_finite=config.env.check_finite)
        return EnvList(factory, config.rollout.num_envs, seed=seed, check_finite=config.env.check_finite)
    return ParallelEnvList(factory, config.rollout.num_envs, processes, seed=seed, check_finite=config.env.check_finite)


# model.compile: auto compiles only runs long enough for compiling to have been measured to pay.
# On CPUs: the MineSweeper workload trained 1.03x and 1.05x faster compiled over 1M steps, compile
# included (benchmarks/bench_end_to_end.py), although a training step alone ran 0.90-0.96x and
# acting 1.06-1.08x eager (bench_rogue_net_bound.py / bench_rogue_net.py --compile both): shorter
# runs cannot repay it. Not on GPUs: on an NVIDIA H200 a compiled training step ran at 0.77-0.81x of
# eager (benchmarks/gpu_check.sh), and a compiled 51,200-step run at 0.83x: at d_model 32 the card
# waits on the host's launches (busy 6 ms of a 27 ms step), and compiling added host time there.
AUTO_COMPILE_MIN_STEPS = {"cpu": 1_000_000}


def decide_compile(config: RunConfig) -> Tuple[bool, str]:
    """What ``model.compile`` resolves to for this run, and a line saying why.

    ``true`` where the compiler cannot work (``entmachin.model.compiled.compile_problem``) runs
    eagerly with a ``CompileWarning`` naming the cause.
    """
    from entmachin.model.compiled import CompileWarning, compile_problem

    choice, device = config.model.compile, torch.device(config.train.device)
    if config.model.kind != "rogue_net" or choice is False:
        return False, "model.compile: the network runs eagerly"
    if choice == "auto":
        least = AUTO_COMPILE_MIN_STEPS.get(device.type)
        if least is None:
            return False, (f"model.compile: auto chose eager: on {device.type}, the compiled network was not measured "
                           "faster (docs/performance.md; set model.compile: true to compile anyway)")
        if config.train.total_steps < least:
            return False, (f"model.compile: auto chose eager: {config.train.total_steps} steps are too few to repay "
                           f"the compile time (auto compiles runs of at least {least} steps on {device.type}; set "
                           "model.compile: true to compile anyway)")
    problem = compile_problem(device)
    if problem is not None:
        warnings.warn(f"model.compile: cannot compile on {device.type} ({problem}); the network runs eagerly",
                      CompileWarning, stacklevel=2)
        return False, f"model.compile: {choice} but cannot compile on {device.type} ({problem}); running eagerly"
    return True, f"model.compile: {'auto chose' if choice == 'auto' else 'true:'} compiled on {device.type}"


# rollout.overlap: auto overlaps only where it pays (benchmarks/bench_overlap.py). Each half costs the policy
# a forward of its own, with about 2.2 ms of fixed cost on one CPU thread (the bundled MineSweeper config's
# RogueNet acted in 2.4 ms on 8 rows, 3.5 on 64, 4.8 on 128), so small halves spend more on acting than
# they hide: with 32 environments the overlapped collect() took 1.08-1.15x the sequential time. And the
# policy needs a core beside the workers that step: on 2 cores with processes: 2 and 128 environments it
# took 0.92-0.96x with the machine's other load near one core, 0.85-1.27x with it near two.
AUTO_OVERLAP_MIN_ENVS = 64


# rollout.processes: auto starts worker processes only where they pay. Workers step the environments in
# parallel, but every vector step costs a round trip to each of them, and a worker without a core of its own
# takes the learner's: on 2 cores the MineSweeper workload trained at 1,127-1,286 env steps/s with
# processes: 2 against 1,445-1,509 in this process (alternating, the other core busy). So auto keeps a core
# for the learner and chooses the number of workers P that minimises the time per step it predicts from a
# probe of the run's own environments and network: acting + update + environments / P + P x WORKER_ROUND_TRIP_S,
# the update's share counted as UPDATE_PER_ACT times the acting forward (a profile of the MineSweeper workload:
# update 40% of the wall time, acting 13%), since workers do not shorten it.
AUTO_PROCESSES_MIN_CORES = 3  # the learner's core and two workers'
AUTO_PROCESSES_MIN_GAIN = 1.25  # the predicted speed-up of training that starting workers needs
UPDATE_PER_ACT = 3.0
# Per worker and vector step: on 2 cores, ParallelEnvList's step took 0.16 ms per worker beyond the environments'
# work with one environment per worker and 0.32 ms with 16 (their rows pickled and merged; 0.05 ms of work per
# act, `python benchmarks/bench_parallel_env_list.py --num-envs 2 32 --work-ms 0.05 --env-steps 6400`).
WORKER_ROUND_TRIP_S = 3e-4
PROBE_S = 0.25  # about this long stepping the environments in the probe


def available_cores() -> int:
    """The cores this process may run on (its affinity where the platform says), shared among the data-parallel
    ranks of this machine (``LOCAL_WORLD_SIZE`` under torchrun)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, n // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)))


def measure_step_costs(config: RunConfig, budget_s: float = PROBE_S) -> Tuple[float, float]:
    """``(environments, act)``: seconds per vector step of ``rollout.num_envs`` environments stepped in this
    process with random actions (at least 3 steps, then until ``budget_s``), and of a freshly built policy's
    forward on their rows."""
    envs = make_envs(dataclasses.replace(config, rollout=dataclasses.replace(config.rollout, processes=0,
                                                                             workers=None)), seed=0)
    try:
        rng, space = np.random.default_rng(0), envs.action_space()
        obs, n, env_s = envs.reset(), 0, 0.0
        while n < 3 or (env_s < budget_s and n < 100):
            actions = random_actions(obs, space, rng)
            start = time.perf_counter()
            obs = envs.act(actions)
            env_s += time.perf_counter() - start
            n += 1
        net = _networks(config, envs.obs_space(), space)[0].to(torch.device(config.train.device))
        state = tree_to_torch(to_state(obs, space))
        rows = MemoryRows(memory_size(net), len(obs)) if memory_size(net) else None
        state = state if rows is None else rows.state(state)  # acting with memory reads the rows' states
        with torch.no_grad():  # safe_call moves the state to the network's device, as acting does
            safe_call(net, state)  # the first call pays for what is done once
            start = time.perf_counter()
            for _ in range(3):
                safe_call(net, state)
            if config.train.device.startswith("cuda"):
                torch.cuda.synchronize()
            act_s = (time.perf_counter() - start) / 3
        return env_s / n, act_s
    finally:
        envs.close()


def decide_processes(config: RunConfig, n_cores: Optional[int] = None,
                     costs: Optional[Tuple[float, float]] = None) -> Tuple[int, str]:
    """What ``rollout.processes`` resolves to for this run, and a line saying why.

    ``auto``: no workers for behaviour cloning (it steps no environments while it trains) or on fewer than
    ``AUTO_PROCESSES_MIN_CORES`` cores (``n_cores``, default :func:`available_cores`); with Ray workers, one per
    core beside the learner's; otherwise the number the step costs (``costs``, default
    :func:`measure_step_costs`) predict fastest, if that step is ``AUTO_PROCESSES_MIN_GAIN`` times faster
    than stepping in this process, else none.
    """
    rollout = config.rollout
    if rollout.processes != "auto":
        return rollout.processes, (f"rollout.processes: {rollout.processes} worker processes" if rollout.processes else
                                   "rollout.processes: 0: the environments step in this process")
    if config.frame.name == "BC":
        return 0, "rollout.processes: auto chose 0: behaviour cloning steps no environments while it trains"
    if config.model.memory is not None and config.model.memory.per_entity:
        return 0, ("rollout.processes: auto chose 0: per-entity memory keeps its states by the entities' ids, which "
                   "environments stepped in this process pass")
    n_cores = available_cores() if n_cores is None else n_cores
    if rollout.workers is not None:
        n = max(1, min(rollout.num_envs, n_cores - 1))
        return n, (f"rollout.processes: auto chose {n} Ray workers, one per core of this machine beside the learner's "
                   f"({n_cores} cores); set rollout.processes to use a cluster's cores")
    if n_cores < AUTO_PROCESSES_MIN_CORES:
        leave = f"{n_cores} cores leave" if n_cores != 1 else "1 core leaves"
        return 0, (f"rollout.processes: auto chose 0 (the environments step in this process): {leave} worker "
                   "processes no core of their own beside the learner's "
                   f"(auto starts workers from {AUTO_PROCESSES_MIN_CORES} cores)")
    env_s, act_s = measure_step_costs(config) if costs is None else costs
    learner_s = act_s * (1.0 + UPDATE_PER_ACT)  # acting and the update's share per step

    def step(p: int) -> float:
        return learner_s + (env_s if p == 0 else env_s / p + WORKER_ROUND_TRIP_S * p)

    best = min(range(2, min(n_cores - 1, rollout.num_envs) + 1), key=step, default=0)
    gain = step(0) / step(best)
    costs_said = (f"a step of the {rollout.num_envs} environments takes {env_s * 1e3:.2f} ms, the policy's forward "
                  f"{act_s * 1e3:.2f} ms (with the update's share, {env_s / step(0):.0%} of the time is the "
                  f"environments'), {n_cores} cores")
    if gain < AUTO_PROCESSES_MIN_GAIN:
        return 0, (f"rollout.processes: auto chose 0 (the environments step in this process): {costs_said}; worker "
                   f"processes would train at most {gain:.2f}x faster (auto starts them from "
                   f"{AUTO_PROCESSES_MIN_GAIN}x)")
    return best, f"rollout.processes: auto chose {best} worker processes: {costs_said}; predicted {gain:.2f}x faster"


def decide_overlap(config: RunConfig, n_cores: Optional[int] = None) -> Tuple[bool, str]:
    """What ``rollout.overlap`` resolves to for this run, and a line saying why.

    ``auto`` overlaps with two or more worker processes on this machine, at least
    ``AUTO_OVERLAP_MIN_ENVS`` environments and more cores than worker processes (``n_cores``:
    default, the cores this process may run on), outside self-play and behaviour cloning.
    """
    rollout, choice = config.rollout, config.rollout.overlap
    if choice is False:
        return False, "rollout.overlap: false: every row steps at once"
    if choice is True:
        if (refused := overlap_refusal(config)) is not None:  # rollout.processes: auto chose fewer than two
            raise ConfigError(f"rollout.overlap: true, but {refused}; set rollout.processes to 2 or more, or "
                              "rollout.overlap: auto")
        return True, (f"rollout.overlap: true: the policy acts on one half of the {rollout.processes} worker processes "
                      "while the other half steps")
    if n_cores is None:
        n_cores = available_cores()
    if (refused := overlap_refusal(config)) is not None:
        return False, f"rollout.overlap: auto chose sequential: {refused}"
    why = (f"{rollout.num_envs} environments are too few (halves under {AUTO_OVERLAP_MIN_ENVS // 2} cost the policy "
           f"more in acting than they hide; auto overlaps from {AUTO_OVERLAP_MIN_ENVS})"
           if rollout.num_envs < AUTO_OVERLAP_MIN_ENVS else
           f"{n_cores} cores for {rollout.processes} worker processes leave the policy no core of its own (auto "
           f"overlaps with more cores than worker processes)" if n_cores <= rollout.processes else None)
    if why is not None:
        return False, f"rollout.overlap: auto chose sequential: {why}; set rollout.overlap: true to overlap anyway"
    return True, (f"rollout.overlap: auto chose overlapped: the policy acts on one half of the {rollout.processes} worker "
                  f"processes while the other half steps ({n_cores} cores)")


def make_frame(config: RunConfig, obs_space: Any, action_space: Any, writer: Any = None, *,
               rank: int = 0, rows_per_env: int = 1, compiled: bool = False) -> Tuple[Any, str]:
    """Builds the network (RogueNet, or DenseNet for ``model.kind: mlp``), its critic and the frame;
    returns ``(frame, what n_epochs became)``.

    ``rank``: a data-parallel rank other than 0 shuffles its minibatches with a seed of its own.
    ``rows_per_env``: rows each environment stores per step (its seats, for a game of several
    players): a rollout stores ``rollout.num_envs x rollout.n_steps x rows_per_env`` rows, and as many again
    for each of ``rollout.symmetries``.
    ``compiled``: the RogueNets run compiled (what :func:`decide_compile` resolved ``model.compile``
    to for a run; eager elsewhere, e.g. evaluating a checkpoint).
    """
    if config.frame.name in Q_FRAMES:
        return _make_q_frame(config, obs_space, action_space, writer, compiled), ""
    net, critic = _networks(config, obs_space, action_space, compiled)
    device = torch.device(config.train.device)
    net.to(device)
    critic.to(device)
    rows = config.rows_per_update * (1 if config.frame.name == "BC" else rows_per_env * config.rollout.images)
    actor_times, critic_times = update_times(config, rows)
    settings = dict(vars(config.frame.settings))
    settings.update(actor_update_times=actor_times, critic_update_times=critic_times,
                    replay_size=rows,
                    seed=seeds(config)["frame"] if rank == 0 else seeds(config)["frame"] + rank)
    cls = {"PPO": PPO, "A2C": A2C, "BC": BC}[config.frame.name]
    optimizer = resolve(config.frame.optimizer, "torch.optim", "frame.optimizer")
    frame = cls(net, critic, optimizer, nn.MSELoss(), writer=writer, **settings)
    note = ""
    if config.frame.n_epochs is not None:
        per_epoch = math.ceil(rows / config.frame.settings.batch_size)
        note = (f"frame.n_epochs={config.frame.n_epochs}: actor_update_times = critic_update_times = "
                f"{config.frame.n_epochs} x ceil({rows} rows / batch_size "
                f"{config.frame.settings.batch_size}) = {config.frame.n_epochs * per_epoch} minibatch steps per update")
    return frame, note


def symmetries_of(config: RunConfig) -> List[Symmetry]:
    """The environment's symmetries that ``rollout.symmetries`` names, in that order (a run resolves them
    before it writes its directory).

    Raises:
        ConfigError: a name the environment's ``symmetries()`` does not have (the message lists those it
            has), or a symmetry that names entities, features or actions the environment does not have.
    """
    if not config.rollout.symmetries:
        return []
    env = EnvFactory(config.env)()
    try:
        offered = getattr(env, "symmetries", dict)()  # an environment of no entmachin base offers none
        obs_space, action_space = env.obs_space(), env.action_space()
    finally:
        env.close()
    unknown = [n for n in config.rollout.symmetries if n not in offered]
    if unknown:
        has = f"it offers {sorted(offered)}" if offered else "it offers none (its symmetries() is empty)"
        raise ConfigError(f"rollout.symmetries: {unknown} are not symmetries of {config.env.name}; {has}")
    try:
        check_symmetries(offered, obs_space, action_space, f"{config.env.name}.symmetries()")
    except (TypeError, ValueError) as e:
        raise ConfigError(f"rollout.symmetries: {e}") from None
    return [offered[n] for n in config.rollout.symmetries]


def check_translation(config: RunConfig, obs_space: Any) -> None:
    """``model.translation`` against the environment's entity types and features (a run checks it before it
    writes its directory; RogueNet would refuse it later, naming less).

    Raises:
        ConfigError: the reference entity type, or a feature it names, is not the environment's; the
            message names it and every entity type with its features.
    """
    translation = config.model.translation
    entities = {name: list(space.features) for name, space in obs_space.entities.items()}
    exist = "; ".join(f"{name}: {features}" for name, features in entities.items()) or "none"
    what = f"{config.env.name}'s entity types and their features are {exist}"
    if translation.reference_entity not in entities:
        raise ConfigError(f"model.translation.reference_entity: {translation.reference_entity!r} is not an entity type "
                          f"of {config.env.name}; {what}")
    features = entities[translation.reference_entity]
    named = [("position_features", f) for f in translation.position_features]
    named += [("rotation_vec_features", f) for f in translation.rotation_vec_features or ()]
    if translation.rotation_angle_feature is not None:
        named.append(("rotation_angle_feature", translation.rotation_angle_feature))
    for field, feature in named:
        if feature not in features:
            raise ConfigError(f"model.translation.{field}: {feature!r} is not a feature of the reference entity type "
                              f"{translation.reference_entity!r} ({features}); {what}")


def _networks(config: RunConfig, obs_space: Any, action_space: Any, compiled: bool = False
              ) -> Tuple[nn.Module, nn.Module]:
    """The actor and its critic (a view of the actor's network, or of a network of its own)."""
    shared = config.model.critic == "shared"
    if config.model.kind == "mlp":
        if obs_space.entities:
            raise ConfigError(f"model.kind: mlp reads global features only, and {config.env.name} has entity types "
                              f"{list(obs_space.entities)}: use model.kind: rogue_net")
        try:
            net = DenseNet(obs_space, action_space, **config.model.mlp_options())
        except (TypeError, ValueError) as e:
            raise ConfigError(f"model.kind: mlp does not fit {config.env.name}: {e}") from None
        # A separate critic needs no action heads.
        return net, net.critic() if shared else DenseNet(obs_space, {}, **config.model.mlp_options()).critic()
    net_config = config.model.net_config(compiled)
    net = RogueNet(obs_space, action_space, net_config)
    # A separate critic is a RogueNet of its own (its action heads stay unused), so that spaces
    # with only global features, which need the global token of a global action, work too.
    return net, net.critic() if shared else RogueNet(obs_space, action_space, net_config).critic()


def _make_q_frame(config: RunConfig, obs_space: Any, action_space: Any, writer: Any, compiled: bool) -> Any:
    """RogueNet with Q-heads, its target copy and a DQN / DQNPer frame."""
    net = RogueNet(obs_space, action_space, config.model.net_config(compiled), q_head=config.model.q_head)
    target = RogueNet(obs_space, action_space, config.model.net_config(compiled), q_head=config.model.q_head)
    device = torch.device(config.train.device)
    net.to(device)
    target.to(device)
    cls = {"DQN": DQN, "DQNPer": DQNPer}[config.frame.name]
    optimizer = resolve(config.frame.optimizer, "torch.optim", "frame.optimizer")
    criterion = nn.MSELoss(reduction="none" if cls is DQNPer else "mean")
    settings = dict(vars(config.frame.settings))
    settings.update(seed=seeds(config)["frame"])
    return cls(net, target, optimizer, criterion, writer=writer, **settings)
