"""Random-policy rollout of an example environment.

Usage: ``python -m entmachin.env.examples MineSweeper --num-envs 8 --steps 200 --seed 0``

A game of several players (``MULTI_AGENT``) steps one row per seat, every seat choosing at
random; its summary adds each seat's results.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

import numpy as np

from entmachin.env import EnvList, ParallelEnvList, random_actions
from entmachin.env.examples import ENV_REGISTRY
from entmachin.env.multi_agent import RESULT_NAMES


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m entmachin.env.examples", description=__doc__.splitlines()[0])
    parser.add_argument("env", choices=sorted(ENV_REGISTRY), help="example environment")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200, help="vectorised steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=0, help="worker processes (0: in-process EnvList)")
    parser.add_argument("--kwargs", type=json.loads, default={}, help="constructor keywords as JSON")
    args = parser.parse_args(argv)
    if args.num_envs < 1 or args.steps < 1:
        parser.error("--num-envs and --steps must be >= 1")

    env_cls = ENV_REGISTRY[args.env]
    make = lambda: env_cls(**args.kwargs)  # noqa: E731
    if args.processes:
        envs = ParallelEnvList(make, args.num_envs, args.processes, seed=args.seed)
    else:
        envs = EnvList(make, args.num_envs, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    returns: List[float] = []
    running = np.zeros(len(envs))  # [n_rows]: one row per environment, or per (environment, seat) in a game
    seats = envs.row_index().seat
    results = {seat: {"win": 0, "draw": 0, "loss": 0} for seat in dict.fromkeys(seats) if seat is not None}
    counts = {etype: [] for etype in envs.obs_space().entities}
    with envs:
        obs = envs.reset()
        for _ in range(args.steps):
            for etype in counts:
                if etype in obs.features:
                    counts[etype].append(obs.features[etype].size1())
            obs = envs.act(random_actions(obs, envs.action_space(), rng))
            running += obs.reward
            returns.extend(running[obs.done].tolist())
            running[obs.done] = 0.0
            for row in np.flatnonzero(obs.done & ~np.isnan(obs.result)):
                results[seats[row]][RESULT_NAMES[float(obs.result[row])]] += 1

    game = f", seats {list(results)} (one row each)" if results else ""
    print(f"{args.env}: {args.num_envs} environments x {args.steps} steps{game}, random policy, seed {args.seed}")
    for etype, per_step in counts.items():
        c = np.concatenate(per_step) if per_step else np.zeros(1)
        print(f"  entities {etype:>16}: mean {c.mean():6.2f}  min {c.min():3d}  max {c.max():3d}")
    if returns:
        r = np.array(returns)
        print(f"  episodes {len(r)}: return mean {r.mean():.3f}  min {r.min():.3f}  max {r.max():.3f}")
        for seat, tally in results.items():
            print(f"  seat {seat}: " + "  ".join(f"{k} {v}" for k, v in tally.items()))
    else:
        print("  no episode finished; raise --steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
