"""Data-parallel ranks: 2 ranks of ``entmachin train`` against 1, and against what 2 cores give.

Workload: the MineSweeper workload of docs/architecture.md (128 environments x 16 steps per
rollout and rank, the default RogueNet with a shared critic, batch 1024, 3 epochs, one torch
thread) with ``processes: 0``, so each rank is one process. Each rank trains ``--steps``
environment steps (the 2-rank run does twice the steps of the 1-rank run in all), started as
torchrun starts them (``RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR``, gloo), timed from the
spawned process's first line to the end of its run (start-up included; evaluation and
checkpoints kept to one small final each).

The bound is ``bench_parallel_env_list.py``'s: two bare processes burning the same pure-Python
work together vs one after the other (what the cores give). Printed per repeat, alternating
1 rank, 2 ranks and the bare processes so that all meet the same load: throughputs, the
2-rank / 1-rank ratio, and that ratio as a share of the bare bound (target >= 80%).

    python benchmarks/bench_data_parallel.py [--steps 32768] [--repeats 3] [--device cpu|cuda]

``--device cuda`` sets ``train.device=cuda``: each rank takes ``cuda:LOCAL_RANK``, so 2 ranks
need 2 cards.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _device import add_device_argument, checked_device, describe  # noqa: E402
from bench_parallel_env_list import Ceiling, calibrate  # noqa: E402  (the same bare bound)
from bench_runner import WORKLOAD  # noqa: E402  (the same workload)


def _rank(rank: int, world_size: int, port: int, steps: int, run_dir: str, out: "mp.Queue", device: str) -> None:
    started = time.perf_counter()
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import load_config
    from entmachin.run.distributed import from_environment
    from entmachin.run.runner import Runner

    config = load_config(bundled_config_path("MineSweeper"), WORKLOAD + [
        "rollout.processes=0", f"train.total_steps={steps * world_size}", f"log.checkpoint_interval={10 ** 9}",
        f"log.eval_interval={10 ** 9}", "log.eval_episodes=2", f"train.device={device}"])
    distributed = from_environment(config.distributed, config.train.device)
    try:
        result = Runner(config, run_dir, progress=False, distributed=distributed).train()
    finally:
        if distributed is not None:
            distributed.close()
    out.put((rank, result.env_steps, time.perf_counter() - started))


def run_ranks(world_size: int, steps: int, device: str) -> float:
    """Environment steps per second of all ranks together (slowest rank's time)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        processes = [ctx.Process(target=_rank, args=(r, world_size, port, steps, os.path.join(tmp, "run"), queue,
                                                                device))
                     for r in range(world_size)]
        for p in processes:
            p.start()
        results = [queue.get(timeout=3600) for _ in processes]
        for p in processes:
            p.join()
    env_steps = results[0][1]
    return env_steps / max(seconds for _, _, seconds in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32768, help="environment steps per rank")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work-ms", type=float, default=200.0, help="bare work per process and repeat")
    add_device_argument(parser)
    args = parser.parse_args()
    device = checked_device(args.device)

    n_iterations = calibrate(1.0)
    bare = Ceiling(2, "spawn")
    one, two, bound = [], [], []
    for _ in range(args.repeats):
        one.append(run_ranks(1, args.steps, args.device))
        two.append(run_ranks(2, args.steps, args.device))
        work = int(n_iterations * args.work_ms)
        bound.append(bare.run_alone(work) / bare.run_together(work))
    bare.close()
    print(f"MineSweeper workload, processes: 0, {describe(device)}, {args.steps} environment steps per rank, "
          f"{os.cpu_count()} CPUs; "
          "environment steps/s (start-up included), median of", args.repeats)
    print(f"{'repeat':>6} {'1 rank':>9} {'2 ranks':>9} {'ratio':>7} {'bare':>6} {'of bare':>8}")
    for i, (a, b, c) in enumerate(zip(one, two, bound)):
        print(f"{i:>6} {a:>9.1f} {b:>9.1f} {b / a:>6.2f}x {c:>5.2f}x {b / a / c:>8.0%}")
    a, b, c = statistics.median(one), statistics.median(two), statistics.median(bound)
    print(f"{'median':>6} {a:>9.1f} {b:>9.1f} {b / a:>6.2f}x {c:>5.2f}x {b / a / c:>8.0%}")
    print("ratio: 2 ranks / 1 rank (ideal 2x); bare: two bare processes burning the same work together vs one "
          "after the other (what the cores give); of bare: ratio / bare (target >= 80%)")


if __name__ == "__main__":
    main()
