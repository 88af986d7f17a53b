"""Ray rollout workers: environment steps/s of ``RayEnvList`` against ``ParallelEnvList``.

Both step ``MineSweeper(orbital_cannon=True)`` (the workload's environment) with ``--num-envs``
environments over ``--workers`` workers (Ray actors on a local Ray started here with that many
CPUs, or worker processes), the same seed and the same seeded random actions, alternating in
blocks of ``--block`` vector steps so that both meet the same load; worker start-up excluded.
The object store's cost per vector step is measured apart: the bytes of one step's messages
(the actions sent to every worker and the observations they return, in ``entmachin.env.wire``'s
form) and the microseconds of putting them in the object store and getting them back.

    python benchmarks/bench_ray_env_list.py [--num-envs 128] [--workers 2] [--steps 400]
"""
from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from entmachin.env import ParallelEnvList, random_actions  # noqa: E402
from entmachin.env.examples import MineSweeper  # noqa: E402
from entmachin.env.ray_env_list import RayEnvList, import_ray  # noqa: E402
from entmachin.env.wire import pack, pack_actions  # noqa: E402


def make_env() -> MineSweeper:
    return MineSweeper(orbital_cannon=True)


class Stepper:
    def __init__(self, envs) -> None:
        self.envs, self.rng = envs, np.random.default_rng(0)
        self.obs = envs.reset()

    def run(self, n_steps: int) -> float:
        t = time.perf_counter()
        for _ in range(n_steps):
            self.obs = self.envs.act(random_actions(self.obs, self.envs.action_space(), self.rng))
        return time.perf_counter() - t


def object_store_cost(ray, stepper: Stepper, bounds, n: int) -> tuple:
    """(bytes, microseconds) per vector step: one step's action messages to every worker and the
    observations coming back (the whole batch, as the workers' replies hold it together), put in
    the object store and got back ``n`` times."""
    actions = random_actions(stepper.obs, stepper.envs.action_space(), stepper.rng)
    payload = list(pack_actions(actions, bounds)) + [pack(stepper.obs)]
    n_bytes = sum(len(pickle.dumps(p, protocol=5)) for p in payload)
    t = time.perf_counter()
    for _ in range(n):
        ray.get([ray.put(p) for p in payload])
    return n_bytes, (time.perf_counter() - t) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=400, help="timed vector steps of each")
    parser.add_argument("--block", type=int, default=20, help="vector steps per block; the two alternate by block")
    parser.add_argument("--store-repeats", type=int, default=50)
    args = parser.parse_args()

    ray = import_ray()
    # the workers import entmachin and this script's module from this checkout
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(HERE), HERE, os.environ.get("PYTHONPATH"))
                                               if p)
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    remote = Stepper(RayEnvList(make_env, args.num_envs, args.workers, seed=0))
    local = Stepper(ParallelEnvList(make_env, args.num_envs, args.workers, seed=0))
    remote.run(3), local.run(3)
    times = {"ray": [], "parallel": []}
    for _ in range(max(1, args.steps // args.block)):
        times["ray"].append(remote.run(args.block))
        times["parallel"].append(local.run(args.block))
    n_env_steps = args.block * len(times["ray"]) * args.num_envs
    ray_sps, parallel_sps = n_env_steps / sum(times["ray"]), n_env_steps / sum(times["parallel"])
    ratio = statistics.median(p / r for r, p in zip(times["ray"], times["parallel"]))
    n_bytes, micros = object_store_cost(ray, local, remote.envs._bounds, args.store_repeats)
    n_entities = sum(int(buf.items()) for buf in local.obs.features.values())
    remote.envs.close()
    local.envs.close()
    ray.shutdown()
    print(f"MineSweeper(orbital_cannon=True), {args.num_envs} environments, {args.workers} workers, "
          f"{os.cpu_count()} CPUs; environment steps/s over {n_env_steps} steps each")
    print(f"{'RayEnvList':>11} {'Parallel':>9} {'ratio':>6} {'median':>7} {'bytes/step':>11} {'B/entity':>9} "
          f"{'store us/step':>13}")
    print(f"{ray_sps:>11.1f} {parallel_sps:>9.1f} {ray_sps / parallel_sps:>5.2f}x {ratio:>6.2f}x {n_bytes:>11d} "
          f"{n_bytes / max(n_entities, 1):>9.1f} {micros:>13.1f}")
    print("ratio: RayEnvList / ParallelEnvList over all blocks; median: over blocks; bytes/step: one vector step's "
          "actions and observations in wire form; store us/step: putting them in the object store and getting "
          "them back")


if __name__ == "__main__":
    main()
