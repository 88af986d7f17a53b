"""The ``--device`` option of the model and frame benchmarks, and clocks that are right on it.

On CPU a benchmark may read process CPU time (``time.process_time``, which leaves out the time
another process held the core); on CUDA the work runs on the card while the process waits, so
every clock reading is wall time taken after ``torch.cuda.synchronize()``.

torch is imported inside the functions only: rogue-net's interpreter parses the same options.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Tuple

DEVICES = ("cpu", "cuda")


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where the networks (and the batches fed to them) live; cuda times wall clock after "
                             "synchronising")


def checked_device(name: str) -> Any:
    """``torch.device(name)``; without CUDA, ``cuda`` ends the script with one line and status 2."""
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        print(f"--device cuda: torch {torch.__version__} finds no CUDA device (torch.cuda.is_available() is False)",
              file=sys.stderr)
        raise SystemExit(2)
    return torch.device(name)


def describe(device: Any) -> str:
    """``cpu``, or ``cuda (<the card's name>)`` for the header lines."""
    import torch

    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return str(device)


def clock(device: Any, cpu_time: bool = False) -> Callable[[], float]:
    """A clock in seconds for timing work on ``device``: on CUDA, wall time after synchronising;
    on CPU, process CPU time if ``cpu_time``, else wall time."""
    if device.type == "cuda":
        import torch

        def synchronised() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()

        return synchronised
    return time.process_time if cpu_time else time.perf_counter


def wall_and_cpu(fn: Callable[[], Any], device: Any) -> Tuple[float, float]:
    """Seconds of ``fn()``: wall clock, and the process's CPU time (on CUDA the synchronised wall
    time twice: the card's work is not the process's CPU time)."""
    wall, cpu = clock(device), clock(device, cpu_time=True)
    start, cpu_start = wall(), cpu()
    fn()
    return wall() - start, cpu() - cpu_start
