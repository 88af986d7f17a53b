"""Memory (``model.memory``): what it costs an update, and what a policy without it can reach.

Side by side in one run:

* **Update cost per row**, the MineSweeper workload of ``bench_frame_minesweeper.py`` (128 environments x
  16 steps, the default RogueNet with ``net.critic()``, batch 1024, 3 epochs): ``PPO.update()``'s seconds per
  stored row with a GRU state (``--size``, sequences of ``--sequence-length`` steps), and with a state per
  entity too (``per_entity: true``: every mine, robot and cannon keeps one), against the same network without
  memory, the sides alternating for ``--rounds`` rounds (median). Collection is not timed.
* **Without the memory the task needs** (``--seeds``): the bundled Recall config with ``model.memory: null``
  (its feed-forward bound is 1 / 4), and the bundled Conveyor config with ``model.memory: null`` (bound 1 / 2)
  and with a state per game row only (``per_entity: false``: it cannot tell the items apart), each trained
  with the bundled budget per seed and evaluated on 1,000 episodes (the best of most likely and sampled
  actions). The configs with their memory are rows of the learning table (``bench_learning.py``).

::

    python benchmarks/bench_memory.py                    # both
    python benchmarks/bench_memory.py --seeds            # the update cost only
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


SIDES = ("feed-forward", "memory", "per-entity")


def update_seconds_per_row(args: argparse.Namespace, side: str) -> float:
    """Seconds of ``PPO.update()`` per stored row, over ``args.iterations`` updates after one warm-up."""
    from entmachin.env import EnvList
    from entmachin.env.examples import MineSweeper
    from entmachin.frame import PPO, RolloutCollector
    from entmachin.model import RogueNet, RogueNetConfig
    from entmachin.model.config import MemoryConfig

    torch.manual_seed(0)
    envs = EnvList(MineSweeper, args.n_envs, seed=0)
    memory = side != "feed-forward"
    config = RogueNetConfig(memory=MemoryConfig(size=args.size, per_entity=side == "per-entity") if memory else None)
    net = RogueNet(envs.obs_space(), envs.action_space(), config)
    rows = args.n_envs * args.n_steps
    n_minibatches = args.epochs * -(-rows // args.batch_size)
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=args.batch_size,
              actor_update_times=n_minibatches, critic_update_times=n_minibatches, entropy_weight=-0.01,
              gae_lambda=0.95, gradient_max=0.5, seed=0, sequence_length=args.sequence_length if memory else None)
    collector = RolloutCollector(ppo, envs, n_steps=args.n_steps)
    collector.collect()
    ppo.update()  # warm-up
    spent = 0.0
    for _ in range(args.iterations):
        collector.collect()
        start = time.perf_counter()
        ppo.update()
        spent += time.perf_counter() - start
    envs.close()
    return spent / (args.iterations * rows)


# (what is measured, the bundled config, its overrides, the bound)
WITHOUT = [("Recall, model.memory: null", "Recall", ["model.memory=null", "frame.sequence_length=null"], 0.25),
           ("Conveyor, model.memory: null", "Conveyor", ["model.memory=null", "frame.sequence_length=null"], 0.5),
           ("Conveyor, per_entity: false (a state per game row)", "Conveyor", ["model.memory.per_entity=false"],
            None)]


def without_memory(env: str, overrides: List[str], seeds: List[int]) -> List[float]:
    """The bundled config of ``env`` with ``overrides``, one run per seed: the final return over 1,000 episodes."""
    from entmachin.env.examples import ENV_REGISTRY
    from entmachin.frame import evaluate
    from entmachin.run import train

    out = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as run_dir:
            frame = train(env, overrides=[*overrides, f"train.seed={seed}"], progress=False, run_dir=run_dir)
            out.append(max(evaluate(frame, ENV_REGISTRY[env], 1000, deterministic, seed=10_000 + seed).mean
                           for deterministic in (True, False)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-envs", type=int, default=128)
    parser.add_argument("--n-steps", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--size", type=int, default=64, help="the GRU state's width")
    parser.add_argument("--sequence-length", type=int, default=16, help="steps per sequence (divides --n-steps)")
    parser.add_argument("--iterations", type=int, default=3, help="timed updates per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side, alternating")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    if args.rounds:  # --rounds 0: the returns without memory only
        per_row: Dict[str, List[float]] = {side: [] for side in SIDES}
        for _ in range(args.rounds):
            for side in per_row:
                per_row[side].append(update_seconds_per_row(args, side))
        print(f"PPO.update() on MineSweeper: {args.n_envs} envs x {args.n_steps} steps, default RogueNet with "
              f"net.critic(), batch {args.batch_size}, {args.epochs} epochs; memory: GRU size {args.size}, "
              f"sequences of {args.sequence_length} steps; {args.rounds} alternating runs of {args.iterations} "
              f"updates; torch threads {args.threads}; load average {os.getloadavg()[0]:.2f}")
        for side, values in per_row.items():
            runs = ", ".join(f"{1e6 * v:.1f}" for v in values)
            print(f"{side:<13} µs per row: median {1e6 * statistics.median(values):.1f}   (runs: {runs})")
        for side in SIDES[1:]:
            ratio = statistics.median(per_row[side]) / statistics.median(per_row["feed-forward"])
            print(f"{side} / feed-forward update cost per row: {ratio:.2f}x (target <= 2x)")
    for what, env, overrides, bound in WITHOUT if args.seeds else ():
        returns = without_memory(env, overrides, args.seeds)
        shown = ", ".join(f"seed {s}: {r:.3f}" for s, r in zip(args.seeds, returns))
        print(f"{what} (bundled config), best of most likely and sampled over 1,000 episodes: median "
              f"{statistics.median(returns):.3f} ({shown})" + ("" if bound is None else f"; its bound is {bound}"))


if __name__ == "__main__":
    sys.exit(main())
