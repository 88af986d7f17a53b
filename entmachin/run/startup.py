"""How long ``entmachin train`` takes to reach its first environment step, phase by phase.

The runner marks each phase as it ends; with ``--debug`` the command prints one line such as
``start-up: python and imports 1.10 s, config 0.02 s, ...; first step at 3.9 s`` (the times count
from the start of the process where the platform says when that was, else from the first mark).
``benchmarks/bench_startup.py`` reads that line.
"""
from __future__ import annotations

import os
import time
from typing import List, Optional, Tuple

__all__ = ["begin", "mark", "finish", "process_age"]

_marks: Optional[List[Tuple[str, float]]] = None  # None: not timing (library use, tests)


def process_age() -> Optional[float]:
    """Seconds since this process started (Linux), or None where that is not known."""
    try:
        with open("/proc/self/stat", "rb") as f:
            started_ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return max(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def begin(phase: str = "python and imports") -> None:
    """Starts timing: ``phase`` is what ran from the start of the process until now."""
    global _marks
    age = process_age()
    now = time.perf_counter()
    _marks = [("", now - (age or 0.0)), (phase, now)]


def mark(phase: str) -> None:
    """``phase`` has just ended (nothing happens unless :func:`begin` was called)."""
    if _marks is not None:
        _marks.append((phase, time.perf_counter()))


def finish(last: str = "first step") -> Optional[str]:
    """The start-up line (each phase's seconds; when ``last`` came, counted from the start of the
    process), once; None when not timing."""
    global _marks
    marks, _marks = _marks, None
    if marks is None:
        return None
    mark_time = time.perf_counter()
    phases = [f"{name} {end - start:.2f} s" for (_, start), (name, end) in zip(marks, marks[1:])]
    return f"start-up: {', '.join(phases)}; {last} at {mark_time - marks[0][1]:.2f} s"
