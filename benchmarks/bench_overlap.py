"""Overlapped sampling: ``RolloutCollector.collect()`` per iteration, sequential against overlapped.

Two workloads, each with environments in ``--processes`` worker processes (``ParallelEnvList``):

* ``bundled``: the bundled MineSweeper config as it is (32 environments x 16 steps, its RogueNet),
  with ``rollout.processes`` set;
* ``minesweeper``: the MineSweeper workload of docs/architecture.md on the same config (128
  environments x 16 steps, ``MineSweeper(orbital_cannon=True)``, RogueNet d_model 32, 2 layers,
  shared critic).

Both collectors are built from the same config and seeds and live side by side (their idle
workers cost nothing); the timed ``collect()`` calls alternate between them, the order swapped
every round, ``--rounds`` each after ``--warmup``; the buffer is cleared between calls (no
update: the figure is the collection alone). One torch thread. The table gives the median
milliseconds per ``collect()`` and the overlapped / sequential ratio of medians, measured in the
same run, with the sequential loop's split into environment step (``VecEnv.act``) and acting
(``frame.act`` + the action conversion): overlapping can hide at most the smaller of the two, and
needs a core for the learner beside the half that steps.

::

    python benchmarks/bench_overlap.py [--processes 2] [--rounds 9] [--workloads bundled minesweeper] [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _device import add_device_argument, checked_device, describe  # noqa: E402

WORKLOADS = {
    "bundled": [],
    "minesweeper": ["env.kwargs={orbital_cannon: true}", "rollout.num_envs=128", "rollout.n_steps=16",
                    "model.critic=shared", "model.d_model=32", "model.n_layer=2", "model.n_head=2", "model.d_qk=16",
                    "model.relpos_encoding=null"],
}


def config_for(workload: str, args: argparse.Namespace) -> Any:
    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import load_config

    # batch_size only has to fit the rows (no update is timed)
    extra = [f"rollout.num_envs={args.num_envs}", f"frame.batch_size={args.num_envs * 16}"] if args.num_envs else []
    return load_config(bundled_config_path("MineSweeper"), WORKLOADS[workload] + extra + [
        f"rollout.processes={args.processes}", "model.compile=false", "train.threads=1", f"train.device={args.device}"])


def _timed(fn: Callable[..., Any], spent: Dict[str, float], phase: str) -> Callable[..., Any]:
    def call(*a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[phase] += time.perf_counter() - start
    return call


def side(config: Any, overlap: bool) -> Any:
    """A collector (and its phase timings) of ``config``; ``overlap`` must take effect."""
    import torch

    from entmachin.frame import RolloutCollector
    from entmachin.run.build import make_envs, make_frame, seeds

    torch.manual_seed(seeds(config)["torch"])
    envs = make_envs(config, seeds(config)["envs"])
    frame, _ = make_frame(config, envs.obs_space(), envs.action_space())
    collector = RolloutCollector(frame, envs, n_steps=config.rollout.n_steps, overlap=overlap)
    if collector.overlap != overlap:
        raise SystemExit(f"overlap={overlap} did not take effect (rollout.processes must be >= 2)")
    collector.spent = {"env step": 0.0, "acting": 0.0, "waiting": 0.0}
    envs.act = _timed(envs.act, collector.spent, "env step")
    envs.receive = _timed(envs.receive, collector.spent, "waiting")
    frame.act = _timed(frame.act, collector.spent, "acting")
    collector.action_fn = _timed(collector.action_fn, collector.spent, "acting")
    return collector


def measure(workload: str, args: argparse.Namespace) -> None:
    config = config_for(workload, args)
    sides = {"sequential": side(config, False), "overlapped": side(config, True)}
    times: Dict[str, List[float]] = {name: [] for name in sides}
    try:
        for round_ in range(args.warmup + args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
            for name in order:
                collector = sides[name]
                if round_ == args.warmup:
                    collector.spent.update({phase: 0.0 for phase in collector.spent})
                start = time.perf_counter()
                collector.collect()
                if round_ >= args.warmup:
                    times[name].append(time.perf_counter() - start)
                collector.frame.replay_buffer.clear()
    finally:
        for collector in sides.values():
            collector.envs.close()
    rows = config.rollout.num_envs * config.rollout.n_steps
    medians = {name: 1e3 * statistics.median(values) for name, values in times.items()}
    print(f"\n{workload}: {config.rollout.num_envs} envs x {config.rollout.n_steps} steps ({rows:,} rows), "
          f"processes {config.rollout.processes}, halves {sides['overlapped'].envs.parts(2)}")
    print(f"{'collect()':<14}{'ms (median)':>12}{'runs (ms)':>40}{'env step':>10}{'acting':>9}{'waiting':>9}")
    for name, collector in sides.items():
        runs = " ".join(f"{1e3 * t:.0f}" for t in times[name])
        per = {phase: 1e3 * s / args.rounds for phase, s in collector.spent.items()}
        print(f"{name:<14}{medians[name]:>12.1f}{runs:>40}{per['env step']:>10.1f}{per['acting']:>9.1f}"
              f"{per['waiting']:>9.1f}")
    print(f"overlapped / sequential: {medians['overlapped'] / medians['sequential']:.2f} "
          f"(env steps/s {rows / medians['sequential'] * 1e3:,.0f} -> {rows / medians['overlapped'] * 1e3:,.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--processes", type=int, default=2, help="environment worker processes (>= 2)")
    parser.add_argument("--num-envs", type=int, default=None, help="override each workload's environments")
    parser.add_argument("--rounds", type=int, default=9, help="timed collect() calls of each side, alternating")
    parser.add_argument("--warmup", type=int, default=2, help="untimed collect() calls of each side first")
    add_device_argument(parser)
    args = parser.parse_args()
    device = checked_device(args.device)
    import torch

    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores; torch threads 1; the policy on "
          f"{describe(device)} (wall clock: acting converts its actions to numpy, which waits for the device)")
    for workload in args.workloads:
        measure(workload, args)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
