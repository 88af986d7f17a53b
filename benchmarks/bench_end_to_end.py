"""The MineSweeper workload end to end: whole ``entmachin train`` processes against enn-trainer's.

Workload: the MineSweeper workload of docs/architecture.md (``bench_runner.WORKLOAD``:
``MineSweeper(orbital_cannon=True)``, 128 environments x 16 steps, ``processes: 2``, the default
RogueNet with a shared critic, batch 1024, 3 epochs, one torch thread). Each side is one whole
process timed by the wall clock from its start to its exit (imports, start-up, compiling where
it compiles, training, the final checkpoint and an 8-episode final evaluation; no evaluation or
checkpoint on the way, as enn-trainer's run has none), ``--repeats`` runs each, alternating, the
order reversed every round; the table gives the median environment steps/s of each side and its
ratio to the first side.

Sides (``--sides``, in this order by default):

* ``auto``: ``model.compile`` and ``rollout.overlap`` as ``auto`` picks them (the log line of
  each choice is printed);
* ``eager``: ``model.compile: false``, ``rollout.overlap: false`` (entmachin before either);
* ``compiled``: ``model.compile: true`` (overlap as auto picks it); the run's last log lines
  give dynamo's recompiles;
* ``overlap``: ``model.compile: false``, ``rollout.overlap: true``;
* ``enn``: enn-trainer 0.1.16 on the same environment with its defaults
  (``bash ../shared/tools/enn_trainer_side/run.sh``, which builds its venv on first use).

::

    python benchmarks/bench_end_to_end.py [--steps 100000] [--repeats 3] [--sides auto,eager,enn] [--device cpu|cuda]

``--device`` sets ``train.device`` of entmachin's sides (enn-trainer's side runs on the CPU).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _device import add_device_argument, checked_device, describe  # noqa: E402
from bench_runner import WORKLOAD  # noqa: E402  (the same workload)

SIDES: Dict[str, List[str]] = {
    "auto": [],
    "eager": ["model.compile=false", "rollout.overlap=false"],
    "compiled": ["model.compile=true"],
    "overlap": ["model.compile=false", "rollout.overlap=true"],
}
ENN = os.path.normpath(os.path.join(REPO, "..", "shared", "tools", "enn_trainer_side", "run.sh"))
ROLLOUT = 128 * 16  # environment steps per rollout of the workload
CHOICES = re.compile(r"(model\.compile: [^;\n]*|rollout\.overlap: [^;\n]*|recompile[^\n]*)")


def entmachin(side: str, steps: int, run_dir: str, device: str) -> Tuple[float, int, List[str]]:
    """Seconds of one whole ``entmachin train`` process, its steps, and its log lines on compile and overlap."""
    sets = WORKLOAD + SIDES[side] + [f"train.total_steps={steps}", f"train.device={device}", "log.eval_interval=1000000000",
                                     "log.checkpoint_interval=1000000000", "log.eval_episodes=8"]
    command = [sys.executable, "-m", "entmachin", "train", "MineSweeper", "--run-dir", run_dir, "--no-progress"]
    for item in sets:
        command += ["--set", item]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"entmachin ({side}) failed:\n{done.stderr[-3000:]}")
    return seconds, math.ceil(steps / ROLLOUT) * ROLLOUT, sorted(set(CHOICES.findall(done.stderr + done.stdout)))


def enn(steps: int) -> Tuple[float, int, List[str]]:
    """Seconds of one whole enn-trainer process (its side script, on the CPU) and its steps."""
    env = {**os.environ, "STEPS": str(steps), "THREADS": "1", "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    done = subprocess.run(["bash", ENN], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"enn-trainer failed:\n{done.stderr[-3000:]}")
    return seconds, steps, [line for line in done.stdout.splitlines() if line.startswith("enn-trainer")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sides", default="auto,eager,enn", help=f"comma-separated, of {list(SIDES) + ['enn']}")
    add_device_argument(parser)
    args = parser.parse_args()
    device = describe(checked_device(args.device))
    sides = args.sides.split(",")
    unknown = [s for s in sides if s not in SIDES and s != "enn"]
    if unknown:
        parser.error(f"unknown side {unknown[0]!r}; expected some of {list(SIDES) + ['enn']}")
    print(f"MineSweeper workload end to end on {device}, whole processes, {args.steps} steps, {args.repeats} "
          f"alternating runs each; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rates: Dict[str, List[float]] = {s: [] for s in sides}
    notes: Dict[str, List[str]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory(prefix="entmachin-e2e-") as tmp:
        for r in range(args.repeats):
            for side in (sides if r % 2 == 0 else sides[::-1]):
                if side == "enn":
                    seconds, steps, lines = enn(args.steps)
                else:
                    seconds, steps, lines = entmachin(side, args.steps, os.path.join(tmp, f"{side}-{r}"), args.device)
                rates[side].append(steps / seconds)
                notes[side] = lines
                print(f"  run {r + 1} {side:<9} {steps} steps in {seconds:6.1f} s: {steps / seconds:8,.0f} steps/s",
                      flush=True)
    first = statistics.median(rates[sides[0]])
    print(f"\n{'side':<10} {'median steps/s':>15} {'vs ' + sides[0]:>12}   runs")
    for side in sides:
        median = statistics.median(rates[side])
        print(f"{side:<10} {median:>15,.0f} {first / median if side != sides[0] else 1.0:>11.2f}x   "
              + ", ".join(f"{x:,.0f}" for x in rates[side]))
    print(f"(the ratio column is {sides[0]} / side)")
    for side in sides:
        for line in notes[side]:
            print(f"  {side}: {line}")
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
