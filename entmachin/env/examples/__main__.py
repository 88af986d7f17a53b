"""Random-policy rollout of an example environment.

Usage: ``python -m entmachin.env.examples MineSweeper --num-envs 8 --steps 200 --seed 0``

A game of several players (``MULTI_AGENT``) is played in-process, every seat choosing at random
(``--processes`` does not apply); its summary adds each seat's results.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

import numpy as np

from entmachin.env import EnvList, ParallelEnvList, random_actions
from entmachin.env.examples import ENV_REGISTRY, MULTI_AGENT
from entmachin.env.examples._play import random_opponent


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
    if args.env in MULTI_AGENT:
        if args.processes:
            parser.error(f"--processes: {args.env} is a game of several players, played in-process only")
        return _play_games(args, env_cls)
    make = lambda: env_cls(**args.kwargs)  # noqa: E731
    if args.processes:
        envs = ParallelEnvList(make, args.num_envs, args.processes, seed=args.seed)
    else:
        envs = EnvList(make, args.num_envs, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    returns: List[float] = []
    running = np.zeros(args.num_envs)
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

    print(f"{args.env}: {args.num_envs} environments x {args.steps} steps, random policy, seed {args.seed}")
    for etype, per_step in counts.items():
        c = np.concatenate(per_step) if per_step else np.zeros(1)
        print(f"  entities {etype:>16}: mean {c.mean():6.2f}  min {c.min():3d}  max {c.max():3d}")
    if returns:
        r = np.array(returns)
        print(f"  episodes {len(r)}: return mean {r.mean():.3f}  min {r.min():.3f}  max {r.max():.3f}")
    else:
        print("  no episode finished; raise --steps")
    return 0


def _play_games(args: argparse.Namespace, env_cls: Any) -> int:
    """The random rollout of a game of several players: ``num_envs`` games side by side."""
    envs = [env_cls(**args.kwargs) for _ in range(args.num_envs)]
    rng = np.random.default_rng(args.seed)
    seats = envs[0].seats()
    space = envs[0].action_space()
    counts: Dict[str, List[int]] = {etype: [] for etype in envs[0].obs_space().entities}
    running = np.zeros((args.num_envs, len(seats)))
    returns: List[float] = []
    results = {seat: {"win": 0, "draw": 0, "loss": 0} for seat in seats}
    obs = []
    for i, env in enumerate(envs):
        env.seed(args.seed + i)
        obs.append(env.reset())
    for _ in range(args.steps):
        for i, env in enumerate(envs):
            for o in obs[i].values():
                for etype in counts:
                    counts[etype].append(o.num_entities(etype))
            obs[i] = env.act({seat: random_opponent(o, space, rng) for seat, o in obs[i].items()})
            running[i] += [obs[i][seat].reward for seat in seats]
            if obs[i][seats[0]].done:
                returns.extend(running[i].tolist())
                running[i] = 0.0
                for seat in seats:
                    if obs[i][seat].result is not None:
                        results[seat][obs[i][seat].result] += 1
                obs[i] = env.reset()

    print(f"{args.env}: {args.num_envs} games x {args.steps} steps, seats {seats}, random play, seed {args.seed}")
    for etype, per_step in counts.items():
        c = np.array(per_step or [0])
        print(f"  entities {etype:>16}: mean {c.mean():6.2f}  min {c.min():3d}  max {c.max():3d}  (per seat)")
    if returns:
        r = np.array(returns)
        print(f"  seat-episodes {len(r)}: return mean {r.mean():.3f}  min {r.min():.3f}  max {r.max():.3f}")
        for seat, tally in results.items():
            print(f"  seat {seat}: " + "  ".join(f"{k} {v}" for k, v in tally.items()))
    else:
        print("  no game finished; raise --steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
