"""PPO on gymnasium's Pendulum-v1: entmachin's bundled config beside Stable-Baselines3 2.9.2, in one run.

    python benchmarks/bench_pendulum.py --sb3-python /path/to/sb3-venv/bin/python   # every job not yet run
    python benchmarks/bench_pendulum.py --sb3-python ... --seeds 0 --trainers entmachin sb3-gsde
    python benchmarks/bench_pendulum.py --table-only                                 # the table of what ran

The target: ``entmachin train Pendulum-v1`` reaches a mean evaluation return of at least -250 within
300,000 environment steps (the median seed's final evaluation). Beside it, Stable-Baselines3's PPO with
rl-baselines3-zoo's tuned Pendulum-v1 settings (``hyperparams/ppo.yml``: 4 environments x 1024 steps,
gae_lambda 0.95, gamma 0.9, 10 epochs of minibatches of 64, ent_coef 0, learning rate 1e-3, clip 0.2) with
its gSDE (``sb3-gsde``, sde_sample_freq 4) and without it (``sb3-no-gsde``), at the same budget. SB3 runs
in its own interpreter (``--sb3-python``, a venv with ``stable-baselines3==2.9.2``; its side is
``pendulum_sb3_side.py``); without that option its jobs are skipped. One torch thread on every side.

Each (trainer, seed) is one job, and the jobs of a seed run trainer after trainer, so that the machine's
load meets every trainer alike. Each trains ``--budget`` steps (both sides round up to whole rollouts of
4,096 steps), evaluating the deterministic policy on 20 episodes of a separately seeded environment every
tenth of the budget (between rollouts, after the one crossing it) and at the end. entmachin's job is
``entmachin train Pendulum-v1 --set train.seed=S ...`` as a subprocess; its record is read from the run
directory as ``bench_learning.record_runs`` reads one (``eval.json``, plus the final checkpoint's
deterministic return re-evaluated, and a random policy's). Each finished job appends one JSON line to the
results file (default ``benchmarks/results/pendulum.jsonl``); jobs already there are skipped (key: trainer,
seed, budget and, for entmachin, the bundled config's fingerprint, so that editing the config runs its
jobs again and the table shows only records of the config as it is now).

Steps per second are of training alone (collecting and updating): entmachin's from its per-iteration
``charts/SPS`` (evaluations and checkpoints are outside those iterations), SB3's from ``learn`` less the
evaluations run inside it. The table prints, per trainer: each seed's final return and their median, the
steps at which an evaluation first reached -250 (median over seeds; "never" when the median seed never
did), the median steps per second and whether the median final return meets -250.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _competitor import run_competitor  # noqa: E402
from bench_learning import config_fingerprint, read_results, record_runs  # noqa: E402

ENV, FRAME = "Pendulum-v1", "PPO"
GOAL = -250.0
BUDGET = 300_000
EVAL_EPISODES = 20
TRAINERS = ("sb3-gsde", "sb3-no-gsde", "entmachin")
SB3_SIDE = os.path.join(HERE, "pendulum_sb3_side.py")


def eval_interval(budget: int) -> int:
    """Environment steps between evaluations: a tenth of the budget."""
    return max(budget // 10, 1)


def run_sb3(trainer: str, seed: int, budget: int, python: str) -> Dict[str, Any]:
    """One Stable-Baselines3 job in its own interpreter; its record."""
    args = ["--seed", str(seed), "--budget", str(budget), "--eval-interval", str(eval_interval(budget)),
            "--eval-episodes", str(EVAL_EPISODES)] + (["--no-gsde"] if trainer == "sb3-no-gsde" else [])
    started = time.perf_counter()
    record = run_competitor(python, SB3_SIDE, args, f"Stable-Baselines3 ({trainer})")
    return {"trainer": trainer, "seed": seed, "budget": budget, **record,
            "wall_s": round(time.perf_counter() - started, 1), "loadavg": os.getloadavg()[0]}


def run_entmachin(seed: int, budget: int, runs_dir: str) -> Dict[str, Any]:
    """One ``entmachin train Pendulum-v1`` job as a subprocess; its record read from the run directory."""
    run_dir = os.path.join(runs_dir, f"entmachin-{seed}-{budget}")
    overrides = [f"train.seed={seed}", f"train.total_steps={budget}", f"log.eval_interval={eval_interval(budget)}",
                 f"log.eval_episodes={EVAL_EPISODES}", "log.eval_deterministic=true",
                 f"log.checkpoint_interval={budget * 2}"]  # the final checkpoint only
    command = [sys.executable, "-m", "entmachin", "train", ENV, "--frame", FRAME, "--run-dir", run_dir, "--force",
               "--no-progress"] + [a for o in overrides for a in ("--set", o)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          cwd=os.path.dirname(HERE))
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"entmachin train failed ({' '.join(command)}):\n{done.stderr[-5000:]}")
    import gymnasium

    learned = record_runs([run_dir])[0]
    train_s = training_seconds(run_dir)
    return {"trainer": "entmachin", "seed": seed, "budget": budget, "config": learned["config"],
            "env_steps": learned["env_steps"], "evals": learned["evals"], "final": learned["evals"][-1][1],
            "checkpoint_deterministic": learned["deterministic"], "random": learned["random"],
            "train_s": round(train_s, 2), "sps": learned["env_steps"] / train_s, "wall_s": round(wall, 1),
            "loadavg": os.getloadavg()[0], "versions": {"gymnasium": gymnasium.__version__}}


def training_seconds(run_dir: str) -> float:
    """Seconds spent collecting and updating: each iteration's steps over its ``charts/SPS``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    seconds, last = 0.0, 0
    for scalar in sorted(events.Scalars("charts/SPS"), key=lambda s: s.step):
        seconds += (scalar.step - last) / scalar.value
        last = scalar.step
    return seconds


def steps_to_goal(record: Dict[str, Any]) -> Optional[int]:
    """Environment steps at the first evaluation reaching ``GOAL``, or None."""
    return next((step for step, mean in record["evals"] if mean >= GOAL), None)


def is_current(record: Dict[str, Any], fingerprint: Optional[str]) -> bool:
    """Whether a record counts: SB3's always; entmachin's while the bundled config is unchanged."""
    return record["trainer"] != "entmachin" or record.get("config") == fingerprint


def table(records: List[Dict[str, Any]], budget: int) -> str:
    """Per trainer: final returns per seed and their median, steps to -250, steps per second, the target."""
    lines = [f"Pendulum-v1, {budget:,} steps; deterministic evaluations on {EVAL_EPISODES} episodes every "
             f"{eval_interval(budget):,} steps and at the end; steps/s of training alone (no evaluation)", "",
             "| trainer | seeds | final return per seed | median final | steps to -250 per seed | median steps to "
             "-250 | steps/s per seed | median steps/s | median >= -250 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for trainer in TRAINERS:
        rows = sorted((r for r in records if r["trainer"] == trainer and r["budget"] == budget),
                      key=lambda r: r["seed"])
        if not rows:
            continue
        finals = [r["final"] for r in rows]
        reached = [steps_to_goal(r) for r in rows]
        median_reached = statistics.median(math.inf if s is None else s for s in reached)
        median = statistics.median(finals)
        lines.append(
            f"| {trainer} | {','.join(str(r['seed']) for r in rows)} | "
            + " / ".join(f"{f:.1f}" for f in finals) + f" | {median:.1f} | "
            + " / ".join("never" if s is None else f"{s:,}" for s in reached)
            + f" | {'never' if math.isinf(median_reached) else f'{median_reached:,.0f}'} | "
            + " / ".join(f"{r['sps']:.0f}" for r in rows)
            + f" | {statistics.median(r['sps'] for r in rows):.0f} | {'yes' if median >= GOAL else 'no'} |")
    ours = sorted((r for r in records if r["trainer"] == "entmachin" and r["budget"] == budget),
                  key=lambda r: r["seed"])
    if ours:
        lines += ["", "entmachin's final checkpoint re-evaluated (deterministic, bench_learning.evaluate_run): "
                  + " / ".join(f"{r['checkpoint_deterministic']:.1f}" for r in ours)
                  + f"; a random policy: {statistics.mean(r['random'] for r in ours):.1f}"]
    loads = [r["loadavg"] for r in records if r["budget"] == budget]
    if loads:
        lines.append(f"load average at the jobs' ends: {min(loads):.1f} to {max(loads):.1f} (2 cores shared)")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=BUDGET, help="environment steps per job")
    parser.add_argument("--trainers", nargs="+", default=list(TRAINERS), choices=TRAINERS)
    parser.add_argument("--sb3-python", default=None,
                        help="python of a venv with stable-baselines3==2.9.2 (without it SB3's jobs are skipped)")
    parser.add_argument("--results", default=os.path.join(HERE, "results", "pendulum.jsonl"))
    parser.add_argument("--runs-dir", default=None, help="keep entmachin's run directories here (default: a temp dir)")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    import torch

    torch.set_num_threads(1)
    fingerprint = config_fingerprint(ENV, FRAME)
    done = [r for r in read_results(args.results) if is_current(r, fingerprint)]
    if not args.table_only:
        runs_dir = args.runs_dir or tempfile.mkdtemp(prefix="entmachin-pendulum-")
        os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
        for seed in args.seeds:
            for trainer in (t for t in TRAINERS if t in args.trainers):
                if any(r["trainer"] == trainer and r["seed"] == seed and r["budget"] == args.budget for r in done):
                    continue
                if trainer != "entmachin" and args.sb3_python is None:
                    print(f"skipping {trainer} seed {seed}: no --sb3-python", flush=True)
                    continue
                print(f"running {trainer} seed {seed} for {args.budget:,} steps", flush=True)
                record = run_entmachin(seed, args.budget, runs_dir) if trainer == "entmachin" else \
                    run_sb3(trainer, seed, args.budget, args.sb3_python)
                print(f"  final {record['final']:.1f}, {record['sps']:.0f} steps/s, {record['wall_s']:.0f} s",
                      flush=True)
                with open(args.results, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
                done.append(record)
        if args.runs_dir is None:
            shutil.rmtree(runs_dir, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f}; one torch thread per job")
    print(table(done, args.budget))


if __name__ == "__main__":
    main()
