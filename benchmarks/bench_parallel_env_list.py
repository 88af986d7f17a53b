"""Steps per second of ``ParallelEnvList`` against ``EnvList`` on CPU-bound environments.

Usage: ``python benchmarks/bench_parallel_env_list.py [--num-envs 16 64] [--processes 2]
[--env-steps 3200] [--block-env-steps 160] [--work-ms 1.0] [--start-method forkserver]``

The benchmark environment burns a fixed amount of pure-Python CPU work in every ``act``
(calibrated here to ``--work-ms`` milliseconds on one core; Python holds the GIL, so only
processes run it in parallel) and shows four entities with one categorical action. Both
vector environments step the same number of environments with the same seed in the same run;
the figures are environment-steps per second over ``--env-steps`` environment steps after a
short warm-up, worker start-up excluded. The two alternate in blocks of ``--block-env-steps``
environment steps, so that on a shared machine both meet the same load. Each count of
environments in ``--num-envs`` is measured in turn: a vector step costs a fixed round trip
to every worker and some serial work in the parent (checking and packing the actions, merging
the replies, choosing the next actions), which more environments per step amortise. Bare
processes burning the same work alone and together show what the cores themselves give, and so
bound the ratio: once with one round trip per block, and once with one round trip per step, the
synchronisation that a vector step imposes (on a busy or virtualised machine, waking a process
and waiting for the slower one costs more than the pickling does).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from typing import Dict, List, Mapping, Optional

import numpy as np

from entmachin.env import (
    Action,
    ActionSpace,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    EnvList,
    Environment,
    Observation,
    ObsSpace,
    VecEnv,
    random_actions,
)
from entmachin.env.parallel_env_list import ParallelEnvList

N_UNITS = 4
EPISODE_LENGTH = 50


def burn(n_iterations: int) -> int:
    """A fixed amount of interpreter work (no numpy, so no BLAS threads to blur the figures)."""
    total = 0
    for i in range(n_iterations):
        total = (total + i * i) % 1_000_003
    return total


def calibrate(work_ms: float) -> int:
    """Iterations of ``burn`` that take ``work_ms`` milliseconds on this core."""
    n = 20_000
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        burn(n)
        best = min(best, time.perf_counter() - t)
    return max(1, int(n * work_ms * 1e-3 / best))


class Grind(Environment):
    """Four units on a line, one ``move`` action each; every ``act`` burns fixed CPU work."""

    def __init__(self, n_iterations: int) -> None:
        self.n_iterations = n_iterations
        self.rng = np.random.default_rng()

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Unit": Entity(["x", "y", "hp"])})

    def action_space(self) -> Dict[str, ActionSpace]:
        return {"move": CategoricalActionSpace(["left", "stay", "right"])}

    def reset(self) -> Observation:
        self.t = 0
        self.pos = self.rng.random((N_UNITS, 2)).astype(np.float32)  # [n_units, 2]
        return self._observe(0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        burn(self.n_iterations)
        self.t += 1
        self.pos[:, 0] += np.asarray(actions["move"].indices, dtype=np.float32) - 1.0
        return self._observe(float(-np.abs(self.pos[:, 0]).sum()))

    def _observe(self, reward: float) -> Observation:
        hp = np.full((N_UNITS, 1), self.t, dtype=np.float32)  # [n_units, 1]
        return Observation(
            features={"Unit": np.concatenate([self.pos, hp], axis=1)},  # [n_units, 3]
            ids={"Unit": list(range(N_UNITS))},
            actions={"move": CategoricalActionMask(actor_types=["Unit"])},
            done=self.t >= EPISODE_LENGTH,
            truncated=self.t >= EPISODE_LENGTH,
            reward=reward,
        )


def steal_seconds() -> Optional[float]:
    """CPU time the hypervisor gave to other machines so far (Linux guests), or None."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Stepper:
    """Steps a vector environment with seeded random actions, a block of steps at a time."""

    def __init__(self, envs: VecEnv) -> None:
        self.envs = envs
        self.rng = np.random.default_rng(0)
        self.obs = envs.reset()

    def run(self, n_steps: int) -> float:
        """Seconds taken by ``n_steps`` steps (choosing the actions included)."""
        t = time.perf_counter()
        for _ in range(n_steps):
            self.obs = self.envs.act(random_actions(self.obs, self.envs.action_space(), self.rng))
        return time.perf_counter() - t


def _burner(conn) -> None:
    """Burns the number of iterations it receives and answers; stops on 0."""
    while True:
        n_iterations = conn.recv()
        if n_iterations == 0:
            return
        burn(n_iterations)
        conn.send(None)


class Ceiling:
    """Bare processes burning the same work: what the cores give, with no environments or pickling."""

    def __init__(self, n_processes: int, start_method: str) -> None:
        ctx = mp.get_context(start_method)
        self.pipes = [ctx.Pipe() for _ in range(n_processes)]
        self.processes = [ctx.Process(target=_burner, args=(child,), daemon=True) for _, child in self.pipes]
        for process in self.processes:
            process.start()
        self.run_together(1)  # wait until every process is up

    def run_alone(self, n_iterations: int) -> float:
        t = time.perf_counter()
        for _ in self.pipes:
            burn(n_iterations)
        return time.perf_counter() - t

    def run_together(self, n_iterations: int, n_round_trips: int = 1) -> float:
        """Seconds for the processes to burn ``n_iterations`` each, in ``n_round_trips`` requests."""
        t = time.perf_counter()
        for _ in range(n_round_trips):
            for conn, _ in self.pipes:
                conn.send(n_iterations // n_round_trips)
            for conn, _ in self.pipes:
                conn.recv()
        return time.perf_counter() - t

    def close(self) -> None:
        for conn, _ in self.pipes:
            conn.send(0)
        for process in self.processes:
            process.join()


def measure(args: argparse.Namespace, num_envs: int, n_iterations: int) -> Dict[str, float]:
    """Env-steps/s of EnvList and ParallelEnvList over ``num_envs`` environments, and the bare
    processes' ratios, alternating in blocks."""

    def create_env() -> Grind:
        return Grind(n_iterations)

    block = max(1, args.block_env_steps // num_envs)  # steps per block
    n_blocks = max(1, args.env_steps // (block * num_envs))
    parallel_envs = ParallelEnvList(create_env, num_envs, args.processes, args.start_method, seed=0)
    serial, parallel = Stepper(EnvList(create_env, num_envs, seed=0)), Stepper(parallel_envs)
    ceiling = Ceiling(parallel_envs.num_processes, parallel_envs.start_method)
    serial.run(args.warmup), parallel.run(args.warmup)
    # Other tenants come and go on a shared machine: alternating short blocks lets both vector
    # environments (and the bare processes) see the same conditions.
    per_worker = n_iterations * block * num_envs // parallel_envs.num_processes
    times: Dict[str, List[float]] = {"serial": [], "parallel": [], "alone": [], "together": [], "stepwise": []}
    for _ in range(n_blocks):
        times["serial"].append(serial.run(block))
        times["parallel"].append(parallel.run(block))
        times["alone"].append(ceiling.run_alone(per_worker))
        times["together"].append(ceiling.run_together(per_worker))
        times["stepwise"].append(ceiling.run_together(per_worker, n_round_trips=block))
    parallel_envs.close()
    ceiling.close()
    n_env_steps = n_blocks * block * num_envs
    alone = np.array(times["alone"])
    return {
        "steps": n_blocks * block,
        "serial": n_env_steps / sum(times["serial"]),
        "parallel": n_env_steps / sum(times["parallel"]),
        "block_ratio": float(np.median(np.array(times["serial"]) / np.array(times["parallel"]))),
        "bare": float(np.median(alone / np.array(times["together"]))),
        "stepwise": float(np.median(alone / np.array(times["stepwise"]))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--env-steps", type=int, default=3200, help="timed environment steps of each vector env")
    parser.add_argument("--block-env-steps", type=int, default=160,
                        help="environment steps per block; the vector envs alternate by block")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps of each vector env")
    parser.add_argument("--work-ms", type=float, default=1.0, help="CPU work per environment act")
    parser.add_argument("--start-method", default=None, choices=["fork", "spawn", "forkserver"])
    args = parser.parse_args()

    n_iterations = calibrate(args.work_ms)
    steal_before = steal_seconds()
    results = {n: measure(args, n, n_iterations) for n in args.num_envs}
    steal_after = steal_seconds()
    print(f"{args.work_ms:g} ms of CPU per act ({n_iterations} iterations), {args.processes} processes, "
          f"{os.cpu_count()} CPUs; env-steps/s (target: parallel / serial >= 1.6x on 2 cores)")
    print(f"{'envs':>5} {'steps':>6} {'EnvList':>9} {'Parallel':>9} {'ratio':>6} {'median':>7} "
          f"{'bare':>6} {'bare/step':>9} {'of bare':>8}")
    for n, r in results.items():
        print(f"{n:>5} {r['steps']:>6} {r['serial']:>9.1f} {r['parallel']:>9.1f} {r['parallel'] / r['serial']:>5.2f}x "
              f"{r['block_ratio']:>6.2f}x {r['bare']:>5.2f}x {r['stepwise']:>8.2f}x {r['block_ratio'] / r['bare']:>8.0%}")
    print("ratio: ParallelEnvList / EnvList over all blocks; median: over blocks; bare: two bare processes "
          "burning the same work together vs one after the other (what the cores give, bounding the ratio); "
          "bare/step: the same with one round trip per vector step; of bare: median / bare")
    if steal_before is not None and steal_after is not None:
        print(f"CPU taken by the hypervisor (steal): {steal_after - steal_before:.1f} s (0 on a quiet host)")


if __name__ == "__main__":
    main()
