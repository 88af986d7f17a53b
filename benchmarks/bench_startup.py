"""How long `entmachin train` takes to reach its first environment step, with a breakdown by phase.

    python benchmarks/bench_startup.py              # 5 runs of each case, medians
    python benchmarks/bench_startup.py --runs 1     # the smoke test

Each run is a fresh process, `entmachin --debug train ... --set train.total_steps=<one rollout>`,
timed by the runner itself (its ``start-up:`` line, counted from the start of the process, see
``entmachin/run/startup.py``). The cases: the bundled MineSweeper config as the quick start runs it
(``processes: 0``), and the same with two worker processes, whose workers boot while the learner
builds its networks. The target is a first step within 5 s for the bundled config on a quiet
two-core machine; run it alone.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET_S = 5.0
CASES: Dict[str, List[str]] = {
    "MineSweeper, bundled config (processes: 0)": [],
    "MineSweeper, processes: 2": ["--set", "rollout.processes=2"],
}
LINE = re.compile(r"^start-up: (.*); first step at ([\d.]+) s$", re.M)


def one_run(extra: List[str], run_dir: str) -> Tuple[Dict[str, float], float]:
    """The phases (name -> seconds) and the time of the first step of one fresh `entmachin train`."""
    command = [sys.executable, "-m", "entmachin", "--debug", "train", "MineSweeper", "--set", "train.total_steps=512",
               "--set", "log.eval_episodes=1", "--no-progress", "--run-dir", run_dir, *extra]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    match = LINE.search(done.stderr + done.stdout)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"bench_startup: {' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    phases = {}
    for part in match.group(1).split(", "):
        name, seconds = part.removesuffix(" s").rsplit(" ", 1)
        phases[name] = float(seconds)
    return phases, float(match.group(2))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} fresh processes per case, medians")
    for case, extra in CASES.items():
        runs = []
        with tempfile.TemporaryDirectory(prefix="entmachin-startup-") as tmp:
            for i in range(args.runs):
                runs.append(one_run(extra, os.path.join(tmp, f"run{i}")))
        first = statistics.median(t for _, t in runs)
        print(f"\n{case}: first step at {first:.2f} s (runs: {', '.join(f'{t:.2f}' for _, t in runs)})"
              + (f"; target {TARGET_S:.0f} s: {'met' if first <= TARGET_S else 'not met'}" if not extra else ""))
        for name in runs[0][0]:
            print(f"  {name:<48} {statistics.median(p.get(name, 0.0) for p, _ in runs):6.2f} s")


if __name__ == "__main__":
    main()
