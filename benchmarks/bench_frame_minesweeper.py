"""PPO training speed on MineSweeper: env steps/s of collect + update, with a per-phase breakdown.

Workload (as in the frame issue): 128 MineSweeper environments (``EnvList``) x 16 steps per
rollout, the default RogueNet (actor and ``net.critic()`` sharing the trunk), batch 1024 and
3 epochs per update (2048 rows -> 2 minibatches per epoch -> 6 policy and 6 value steps).
One warm-up iteration, then ``--iterations`` timed ones. Phases are timed by wrapping the
callables ``RolloutCollector`` uses, on the instances only:

* env step: ``VecEnv.act``;
* acting: ``PPO.act`` and the action conversion (``action_fn``);
* state conversion: ``state_fn`` (observations -> canonical state);
* storing: ``PPO.store_rollout`` (critic values, GAE, buffer append);
* update: ``PPO.update()``;
* other: the rest of ``collect`` (final observations, episode bookkeeping).

::

    python benchmarks/bench_frame_minesweeper.py

entity-gym's own trainer is compared with these figures outside the project.
"""

import argparse
import sys
import time
from collections import defaultdict
from typing import Dict

import torch
from _phases import time_collection
from torch import nn

PHASES = ("env step", "acting", "state conversion", "storing", "update", "other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-envs", type=int, default=128, help="environments")
    parser.add_argument("--n-steps", type=int, default=16, help="steps per rollout")
    parser.add_argument("--batch-size", type=int, default=1024, help="minibatch rows")
    parser.add_argument("--epochs", type=int, default=3, help="passes over each rollout")
    parser.add_argument("--iterations", type=int, default=10, help="timed collect + update iterations")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from entmachin.env import EnvList
    from entmachin.env.examples import MineSweeper
    from entmachin.frame import PPO, RolloutCollector
    from entmachin.model import RogueNet

    torch.manual_seed(0)
    envs = EnvList(MineSweeper, args.n_envs, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space())
    rows = args.n_envs * args.n_steps
    n_minibatches = args.epochs * -(-rows // args.batch_size)  # epochs x ceil(rows / batch)
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=args.batch_size,
              actor_update_times=n_minibatches, critic_update_times=n_minibatches, entropy_weight=-0.01,
              gae_lambda=0.95, gradient_max=0.5, seed=0)
    collector = RolloutCollector(ppo, envs, n_steps=args.n_steps)

    spent: Dict[str, float] = defaultdict(float)
    update = time_collection(collector, spent, "state conversion")

    collector.collect()  # warm-up (first reset, allocations)
    update()
    spent.clear()
    collect_s = 0.0
    start = time.perf_counter()
    for _ in range(args.iterations):
        begin = time.perf_counter()
        collector.collect()
        collect_s += time.perf_counter() - begin
        update()
    total = time.perf_counter() - start
    timed_in_collect = sum(spent[p] for p in PHASES if p != "update")
    spent["other"] = collect_s - timed_in_collect

    steps = args.iterations * rows
    print(f"PPO on MineSweeper: {args.n_envs} envs x {args.n_steps} steps, default RogueNet, batch "
          f"{args.batch_size}, {args.epochs} epochs ({n_minibatches} minibatches), {args.iterations} iterations, "
          f"torch threads {args.threads}")
    print(f"env steps/s (collect + update): {steps / total:,.0f}   ({steps} steps in {total:.2f} s)")
    print(f"env steps/s (collect only):     {steps / collect_s:,.0f}")
    print(f"{'phase':<18} {'s':>8} {'share':>7} {'ms/iteration':>13}")
    for phase in PHASES:
        seconds = spent[phase]
        print(f"{phase:<18} {seconds:>8.3f} {seconds / total:>6.1%} {1e3 * seconds / args.iterations:>13.1f}")


if __name__ == "__main__":
    sys.exit(main())
