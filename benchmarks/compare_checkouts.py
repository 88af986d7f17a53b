"""This checkout against another one (an earlier commit in its own venv), alternately, figure by figure.

Runs the benchmarks that bound a change to entmachin's core (``bench_env_list.py``,
``bench_parallel_env_list.py``, ``bench_buffer.py`` and ``bench_frame_minesweeper.py``, plus a
ragged ``Buffer.append`` of canonical MineSweeper states, which ``bench_buffer.py`` does not
time) with each checkout's own script and interpreter, one side after the other for
``--rounds`` rounds, and prints each figure's median per side and new / old as a speed ratio
(above 1: this checkout is faster). Make the other checkout with ``git worktree add`` and give
it a venv as the README's test command does::

    git worktree add /tmp/old <commit> && (cd /tmp/old && python3 -m venv .venv && \\
        .venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -e '.[test]')
    python benchmarks/compare_checkouts.py --old-root /tmp/old --old-python /tmp/old/.venv/bin/python

``--frames`` runs the figures that bound a change to the frames instead (``FRAME_BENCHMARKS``:
PPO against the hand-written loop, the contract floor, SB3 and Machin; DQNPer's updates/s),
given the competitors' venvs with ``--sb3-python`` and ``--machin-python``.

Run it alone on the machine: anything busy on the other core skews a ratio.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Sequence

ROOT = Path(__file__).resolve().parents[1]


class Figure(NamedTuple):
    """One number a benchmark prints: found by ``pattern`` (one group) in its output."""

    label: str
    pattern: str
    higher_is_better: bool


class Benchmark(NamedTuple):
    script: str  # under benchmarks/, or "-" for RAGGED_APPEND
    args: Sequence[str]
    figures: Sequence[Figure]


# A ragged Buffer.append of canonical MineSweeper states, one 64-row step at a time: the same
# code for both checkouts (it uses only APIs both have).
RAGGED_APPEND = """
import json, time, numpy as np, torch
torch.set_num_threads(1)
from entmachin.buffer import Buffer, Transition
from entmachin.env import EnvList, random_actions, to_state
from entmachin.env.examples import MineSweeper
envs = EnvList(lambda: MineSweeper(orbital_cannon=True), num_envs=64, seed=0)
space, rng = envs.action_space(), np.random.default_rng(0)
obs, steps = envs.reset(), []
for _ in range(64):
    actions = random_actions(obs, space, rng)
    state = to_state(obs, space)
    obs = envs.act(actions)
    steps.append(Transition(state, {"action": actions}, to_state(obs, space), obs.reward, obs.done))
best = float("inf")
for _ in range(5):
    buffer = Buffer(buffer_size=64 * 64, seed=0)
    start = time.perf_counter()
    for step in steps:
        buffer.append(step)
    best = min(best, time.perf_counter() - start)
print(json.dumps({"rows_per_s": 64 * 64 / best}))
"""

BENCHMARKS = [
    Benchmark("bench_env_list.py", [], [
        Figure("EnvList.act, us/env-step", r"EnvList\.act total\s+([\d.]+)", False),
        Figure("  of which batch_obs, us/env-step", r"batch_obs alone\s+([\d.]+)", False),
    ]),
    Benchmark("bench_parallel_env_list.py", [], [
        Figure("ParallelEnvList 16 envs, env-steps/s", r"^\s+16\s+\d+\s+[\d.]+\s+([\d.]+)", True),
        Figure("ParallelEnvList 64 envs, env-steps/s", r"^\s+64\s+\d+\s+[\d.]+\s+([\d.]+)", True),
    ]),
    Benchmark("bench_buffer.py", ["--repeats", "1"], [
        Figure("dense append, transitions/s", r"^append, one transition at a time\s+\S+\s+([\d,]+)", True),
        Figure("ragged sample_batch(256), ms", r"^sample_batch\(256\) ms\s+([\d.]+)", False),
        Figure("ragged sample_batch(4096), ms", r"^sample_batch\(4096\) ms\s+([\d.]+)", False),
    ]),
    Benchmark("-", [], [Figure("ragged append of MineSweeper states, rows/s", r'"rows_per_s": ([\d.]+)', True)]),
    Benchmark("bench_frame_minesweeper.py", ["--iterations", "2", "--rounds", "1"], [
        Figure("PPO on MineSweeper, env-steps/s", r"entmachin PPO\s+env steps/s: median ([\d,]+)", True),
    ]),
]


# The figures that bound a change to the frames (``--frames``): each is measured against its own
# reference inside one run (the hand-written loop, the contract floor, SB3, Machin), so the speed
# column compares those ratios between the checkouts; ``{sb3}`` / ``{machin}`` are the
# competitors' interpreters.
FRAME_BENCHMARKS = [
    Benchmark("bench_frame_minesweeper.py", ["--iterations", "2", "--rounds", "1"], [
        Figure("PPO MineSweeper / hand-written loop, %", r"entmachin / plain loop: ([\d.]+)%", True),
    ]),
    Benchmark("bench_frame_sb3.py", ["--repeats", "1", "--sb3-python", "{sb3}"], [
        Figure("PPO CartPole / contract floor, %", r"entmachin / the contract floor: (\d+)%", True),
        Figure("PPO CartPole / SB3, x", r"ratio entmachin / sb3: ([\d.]+)x", True),
    ]),
    Benchmark("bench_frame_machin.py", ["--repeats", "1", "--machin-python", "{machin}"], [
        Figure("PPO Machin's workload / Machin, x", r"^ratio: ([\d.]+)x", True),
    ]),
    Benchmark("bench_dqn.py", ["--repeats", "3"], [
        Figure("DQNPer MineSweeper, updates/s", r"updates/s ([\d,.]+)", True),
        Figure("DQNPer CartPole, updates/s", r"^entmachin\s+([\d,]+)", True),
    ]),
]


def run_side(python: str, root: Path, bench: Benchmark, competitors: Dict[str, str]) -> Dict[str, float]:
    """One run of ``bench`` with one checkout; its figures by label."""
    if bench.script == "-":
        command = [python, "-c", RAGGED_APPEND]
    else:
        args = [a.format(**competitors) for a in bench.args]
        command = [python, str(root / "benchmarks" / bench.script), *args]
    out = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True).stdout
    values = {}
    for figure in bench.figures:
        found = re.search(figure.pattern, out, re.M)
        if found is None:
            raise RuntimeError(f"{bench.script}: no '{figure.label}' in its output:\n{out}")
        values[figure.label] = float(found.group(1).replace(",", ""))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-root", required=True, help="the other checkout's root")
    parser.add_argument("--old-python", required=True, help="the interpreter of the other checkout's venv")
    parser.add_argument("--new-python", default=sys.executable, help="this checkout's interpreter")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each side, alternating")
    parser.add_argument("--only", nargs="*", default=None, help="benchmark scripts to run (default: all)")
    parser.add_argument("--json", default=None, help="also write every run's figures here")
    parser.add_argument("--frames", action="store_true", help="the frames' figures instead (FRAME_BENCHMARKS)")
    parser.add_argument("--sb3-python", default="", help="with --frames: a venv's python with stable-baselines3==2.9.2")
    parser.add_argument("--machin-python", default="", help="with --frames: a venv's python with machin==0.4.2")
    args = parser.parse_args()
    sides = {"old": (args.old_python, Path(args.old_root).resolve()), "new": (args.new_python, ROOT)}
    competitors = {"sb3": args.sb3_python, "machin": args.machin_python}
    chosen = [b for b in (FRAME_BENCHMARKS if args.frames else BENCHMARKS) if args.only is None or b.script in args.only]
    runs: Dict[str, Dict[str, List[float]]] = {"old": {}, "new": {}}
    started = time.time()
    for r in range(args.rounds):
        for bench in chosen:
            order = ("old", "new") if r % 2 == 0 else ("new", "old")  # neither side always goes first
            for side in order:
                for label, value in run_side(*sides[side], bench, competitors).items():
                    runs[side].setdefault(label, []).append(value)
        print(f"round {r + 1}/{args.rounds} done ({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
    print(f"old: {sides['old'][1]}\nnew: {ROOT}\nmedians of {args.rounds} alternating runs; speed new/old > 1: new is faster")
    print(f"{'figure':<48} {'old':>12} {'new':>12} {'speed new/old':>14}")
    for bench in chosen:
        for figure in bench.figures:
            old, new = (statistics.median(runs[side][figure.label]) for side in ("old", "new"))
            speed = new / old if figure.higher_is_better else old / new
            print(f"{figure.label:<48} {old:>12,.2f} {new:>12,.2f} {speed:>13.3f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
