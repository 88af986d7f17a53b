"""Running a competitor's side of a benchmark in its own interpreter, and keeping best runs.

Competitors (Machin, Stable-Baselines3) live in throwaway virtual environments; a benchmark
script re-runs itself there with a worker flag and prints one JSON line as its last output.
"""
from __future__ import annotations

import json
import subprocess
from typing import Any, Callable, Dict, List, Optional, Tuple


def run_competitor(python: str, script: str, args: List[str], side: str) -> Any:
    """Runs ``python script *args`` and returns the JSON of its last output line.

    Raises:
        RuntimeError: the competitor's side failed; the message ends with its stderr.
    """
    done = subprocess.run([python, script, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {side} side failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


Figures = Dict[str, float]


def best_alternating(
    ours: Callable[[], Figures], theirs: Callable[[], Optional[Figures]], repeats: int, key: str = "rate"
) -> Tuple[Figures, Optional[Figures]]:
    """Alternates the two sides ``repeats`` times (so both meet the same machine load) and
    keeps each side's run with the highest ``key``; ``theirs`` may return None (skipped)."""
    best_ours: Optional[Figures] = None
    best_theirs: Optional[Figures] = None
    for _ in range(repeats):
        t = theirs()
        if t is not None and (best_theirs is None or t[key] > best_theirs[key]):
            best_theirs = t
        o = ours()
        if best_ours is None or o[key] > best_ours[key]:
            best_ours = o
    if best_ours is None:
        raise ValueError(f"best_alternating: repeats must be >= 1, got {repeats}")
    return best_ours, best_theirs
