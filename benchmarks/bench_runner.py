"""The runner's own cost: ``entmachin train`` against the bare RolloutCollector + update() loop.

Workload: the MineSweeper workload of docs/architecture.md, set on the bundled MineSweeper config
with overrides: ``MineSweeper(orbital_cannon=True)``, 128 environments x 16 steps, the default
RogueNet with a shared critic, batch 1024, 3 epochs, one torch thread, ``processes: 2``. The
runner keeps the bundled config's checkpoint and evaluation intervals and evaluation episodes.

Both sides train ``--steps`` environment steps from the same config (same seeds), alternating,
``--repeats`` runs each; the median of each is compared. The runner's side is timed whole
(construction, tensorboard, progress bar, checkpoints and evaluations on its schedule) and
without its final evaluation, which a run of any length pays once; its phases are printed.

    python benchmarks/bench_runner.py [--device cpu|cuda]

``--device`` sets ``train.device`` on both sides (the networks; the runner moves the batches).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _device import add_device_argument, checked_device, describe  # noqa: E402

WORKLOAD = ["env.kwargs={orbital_cannon: true}", "rollout.num_envs=128", "rollout.n_steps=16",
            "rollout.processes=2", "frame.batch_size=1024", "frame.n_epochs=3", "model.critic=shared",
            "model.d_model=32", "model.n_layer=2", "model.n_head=2", "model.d_qk=16", "model.relpos_encoding=null",
            "train.threads=1"]


def config_for(steps: int, processes: int, device: str = "cpu"):
    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import load_config

    return load_config(bundled_config_path("MineSweeper"), WORKLOAD + [
        f"train.total_steps={steps}", f"rollout.processes={processes}", f"train.device={device}"])


def bare(config) -> float:
    """The loop a script would write: build, then collect + update until the budget; seconds."""
    import torch

    from entmachin.frame import RolloutCollector
    from entmachin.run.build import make_envs, make_frame, seeds

    started = time.perf_counter()
    torch.manual_seed(seeds(config)["torch"])
    envs = make_envs(config, seeds(config)["envs"])
    try:
        frame, _ = make_frame(config, envs.obs_space(), envs.action_space())
        collector = RolloutCollector(frame, envs, n_steps=config.rollout.n_steps)
        while collector.total_env_steps < config.train.total_steps:
            collector.collect()
            frame.update()
    finally:
        envs.close()
    return time.perf_counter() - started


def runner(config, phases: Dict[str, List[float]]) -> Dict[str, float]:
    """``Runner.train()`` in a fresh run directory; seconds in all and in its extra phases."""
    from entmachin.run.runner import Runner

    directory = tempfile.mkdtemp(prefix="entmachin-bench-runner-")
    run = Runner(config, os.path.join(directory, "run"), progress=True)
    spent: Dict[str, float] = defaultdict(float)
    for name, owner, method in (("evaluations", run.evaluations, "evaluate"), ("checkpoints", run.checkpoints, "save")):
        original = getattr(owner, method)

        def timed(*args, _original=original, _name=name, **kwargs):
            t = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - t
                if _name == "evaluations" and kwargs.get("final"):
                    spent["final evaluation"] += time.perf_counter() - t
        setattr(owner, method, timed)
    started = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        stderr, sys.stderr = sys.stderr, devnull  # the bar's output is not what is timed
        try:
            run.train()
        finally:
            sys.stderr = stderr
    total = time.perf_counter() - started
    for name, value in spent.items():
        phases[name].append(value)
    return {"total": total, "without final evaluation": total - spent["final evaluation"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=65_536, help="environment steps per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each side (alternating)")
    parser.add_argument("--processes", type=int, default=2, help="environment worker processes")
    add_device_argument(parser)
    args = parser.parse_args()
    import logging

    import torch

    device = checked_device(args.device)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    config = config_for(args.steps, args.processes, args.device)
    print(f"load average {os.getloadavg()[0]:.2f}; {describe(device)}; {args.steps:,} steps per run, {args.repeats} runs each, "
          f"checkpoint every {config.log.checkpoint_interval:,} steps, evaluation every {config.log.eval_interval:,} "
          f"({config.log.eval_episodes} episodes)")
    bare_times: List[float] = []
    runner_times: Dict[str, List[float]] = defaultdict(list)
    phases: Dict[str, List[float]] = defaultdict(list)
    for _ in range(args.repeats):
        bare_times.append(bare(config))
        for key, value in runner(config, phases).items():
            runner_times[key].append(value)
    base = statistics.median(bare_times)
    print(f"{'side':<46}{'seconds':>9}{'env steps/s':>13}{'runner cost':>13}")
    print(f"{'bare collect + update loop':<46}{base:>9.2f}{args.steps / base:>13,.0f}{'':>13}")
    for key, values in runner_times.items():
        median = statistics.median(values)
        print(f"{'entmachin train, ' + key:<46}{median:>9.2f}{args.steps / median:>13,.0f}{median / base - 1:>13.1%}")
    print("runner phases (median seconds per run):")
    for name, values in phases.items():
        print(f"  {name.strip('_'):<44}{statistics.median(values):>9.2f}")


if __name__ == "__main__":
    main()
