"""PPO training speed on MineSweeper: the frame against the same PPO written by hand, per phase.

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

The second side is the same PPO as one hand-written loop with no frame (``_plain_ppo.py``):
same environments, ``to_state`` and ``RogueNet.forward``, same mathematics, its phases timed
inline. The sides alternate (``--rounds`` runs each, median); the ratio is entmachin's
environment steps/s over the plain loop's, and the table shows where the difference goes.

::

    python benchmarks/bench_frame_minesweeper.py [--device cpu|cuda]

``--device cuda`` puts both sides' networks on the card (their batches follow them); every
time is then wall clock after ``torch.cuda.synchronize()``.

entity-gym's own trainer is compared with these figures outside the project.
"""

import argparse
import os
import statistics
import sys
from collections import defaultdict
from typing import Dict, List

import torch
from _device import add_device_argument, checked_device, clock, describe
from _phases import time_collection
from torch import nn

PHASES = ("env step", "acting", "state conversion", "storing", "update", "other")


def entmachin_side(args: argparse.Namespace, spent: Dict[str, float], device: torch.device) -> float:
    """Environment steps/s of the PPO frame's collect + update; phases into ``spent``."""
    from entmachin.env import EnvList
    from entmachin.env.examples import MineSweeper
    from entmachin.frame import PPO, RolloutCollector
    from entmachin.model import RogueNet

    torch.manual_seed(0)
    envs = EnvList(MineSweeper, args.n_envs, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space()).to(device)
    rows = args.n_envs * args.n_steps
    n_minibatches = args.epochs * -(-rows // args.batch_size)  # epochs x ceil(rows / batch)
    ppo = PPO(net, net.critic().to(device), torch.optim.Adam, nn.MSELoss(), batch_size=args.batch_size,
              actor_update_times=n_minibatches, critic_update_times=n_minibatches, entropy_weight=-0.01,
              gae_lambda=0.95, gradient_max=0.5, seed=0)
    collector = RolloutCollector(ppo, envs, n_steps=args.n_steps)
    timing: Dict[str, float] = defaultdict(float)
    now = clock(device)
    update = time_collection(collector, timing, "state conversion", now)
    collector.collect()  # warm-up (first reset, allocations)
    update()
    timing.clear()
    collect_s = 0.0
    start = now()
    for _ in range(args.iterations):
        begin = now()
        collector.collect()
        collect_s += now() - begin
        update()
    total = now() - start
    timing["other"] = collect_s - sum(timing[p] for p in PHASES if p not in ("update", "other"))
    for phase, seconds in timing.items():
        spent[phase] += seconds
    return args.iterations * rows / total


def plain_side(args: argparse.Namespace, spent: Dict[str, float], device: torch.device) -> float:
    """Environment steps/s of the hand-written loop (``_plain_ppo.py``); phases into ``spent``."""
    from _plain_ppo import PlainPPO

    now = clock(device)
    loop = PlainPPO(args.n_envs, args.n_steps, args.batch_size, args.epochs, seed=0, device=device, clock=now)
    loop.iteration(defaultdict(float))  # warm-up
    timing: Dict[str, float] = defaultdict(float)
    start = now()
    for _ in range(args.iterations):
        loop.iteration(timing)
    total = now() - start
    timing["other"] = total - sum(timing.values())
    for phase, seconds in timing.items():
        spent[phase] += seconds
    return args.iterations * args.n_envs * args.n_steps / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-envs", type=int, default=128, help="environments")
    parser.add_argument("--n-steps", type=int, default=16, help="steps per rollout")
    parser.add_argument("--batch-size", type=int, default=1024, help="minibatch rows")
    parser.add_argument("--epochs", type=int, default=3, help="passes over each rollout")
    parser.add_argument("--iterations", type=int, default=4, help="timed collect + update iterations per run")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each side, alternating")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    add_device_argument(parser)
    args = parser.parse_args()
    device = checked_device(args.device)
    torch.set_num_threads(args.threads)

    sides = {"entmachin PPO": entmachin_side, "plain loop": plain_side}
    rates: Dict[str, List[float]] = {name: [] for name in sides}
    spent: Dict[str, Dict[str, float]] = {name: defaultdict(float) for name in sides}
    for _ in range(args.rounds):
        for name, side in sides.items():
            rates[name].append(side(args, spent[name], device))
    rows = args.n_envs * args.n_steps
    n_minibatches = args.epochs * -(-rows // args.batch_size)
    print(f"PPO on MineSweeper: {args.n_envs} envs x {args.n_steps} steps (EnvList, processes: 0), default "
          f"RogueNet, batch {args.batch_size}, {args.epochs} epochs ({n_minibatches} minibatches); {args.rounds} "
          f"alternating runs of {args.iterations} iterations per side; {describe(device)}, torch threads {args.threads}; "
          f"load average {os.getloadavg()[0]:.2f}")
    for name in sides:
        runs = ", ".join(f"{r:,.0f}" for r in rates[name])
        print(f"{name:<14} env steps/s: median {statistics.median(rates[name]):,.0f}   (runs: {runs})")
    ratio = statistics.median(rates["entmachin PPO"]) / statistics.median(rates["plain loop"])
    print(f"entmachin / plain loop: {ratio:.1%}")
    n_iterations = args.rounds * args.iterations
    print(f"{'phase (ms/iteration)':<22}" + "".join(f"{name:>16}" for name in sides) + f"{'difference':>12}")
    for phase in PHASES:
        ms = [1e3 * spent[name][phase] / n_iterations for name in sides]
        print(f"{phase:<22}" + "".join(f"{v:>16.1f}" for v in ms) + f"{ms[0] - ms[1]:>+12.1f}")


if __name__ == "__main__":
    sys.exit(main())
