"""How far each network is from the bare arithmetic of its workload.

Usage::

    python benchmarks/bench_rogue_net_bound.py [--roguenet-python /tmp/roguenet-venv/bin/python]
        [--repeats 7] [same workload options as bench_rogue_net.py]

For every workload of ``bench_rogue_net.py`` (same batches, same config, one thread, fp32),
this times side by side, alternating step by step: rogue-net 0.1.9 (its own interpreter),
entmachin's ``RogueNet``, and the bare arithmetic of the step in three attention variants
(``_bare_arithmetic.py``: ``exact`` unpadded per-length calls, entmachin's ``buckets``,
rogue-net's ``padpack``). The bound is the fastest variant; each network's time divided by
it says how much of its step is not arithmetic. Where rogue-net's time is under twice the
bound, twice rogue-net's speed is out of reach without changing the arithmetic itself.
Figures: medians of ``--repeats`` steps, in CPU ms per step (every batch of the workload;
process CPU time, which leaves out the time another process held the core).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's entmachin

from _rogue_net_args import add_workload_arguments  # noqa: E402 (after the path set-up)


def _ms(fn: Callable[[], Any]) -> float:
    """CPU milliseconds of this process in ``fn()``."""
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_arguments(parser)
    parser.add_argument("--workloads", default="", help="comma-separated workload names (default: all)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    import torch
    from _bare_arithmetic import VARIANTS, bare_step
    from _competitor import CompetitorWorker
    from _ragged_batches import load_workload
    from _rogue_net_workloads import CONFIG, RAGGED_CLASSES, EntmachinWorkload, build_workloads

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="entmachin-bound-") as data_dir:
        workloads = build_workloads(args, data_dir)
        worker = None
        if args.roguenet_python:
            worker = CompetitorWorker(args.roguenet_python, os.path.join(HERE, "bench_rogue_net.py"),
                                      ["--roguenet-worker", "--data", data_dir, "--scatter-stub", args.scatter_stub,
                                       "--threads", str(args.threads), "--seed", str(args.seed)], "rogue-net")
        print(f"median of {args.repeats} alternating steps, CPU ms per step; bound = fastest bare variant")
        head = f"{'workload':<40}" + "".join(f"{v:>9}" for v in VARIANTS)
        print(head + f"{'bound':>8}{'rogue-net':>10}{'entmachin':>10}{'rn/bound':>9}{'em/bound':>9}{'em/rn':>7}")
        with worker if worker is not None else contextlib.nullcontext():
            for w in workloads:
                if args.workloads and w.name not in args.workloads.split(","):
                    continue
                stem = os.path.join(data_dir, w.name)
                spaces, mode, batches = load_workload(stem, RAGGED_CLASSES)
                bare = {v: bare_step(spaces, batches, mode, v, CONFIG.d_model, CONFIG.n_layer, CONFIG.n_head,
                                     CONFIG.d_qk) for v in VARIANTS}
                ours = EntmachinWorkload(stem, args.seed)
                ours.prepare()
                if worker is not None:
                    worker.request(op="prepare", workload=w.name)
                for step in bare.values():
                    step()
                times: Dict[str, List[float]] = {k: [] for k in (*VARIANTS, "rogue-net", "entmachin")}
                for _ in range(args.repeats):
                    if worker is not None:
                        times["rogue-net"].append(worker.request(op="step")["cpu_seconds"] * 1e3)
                    times["entmachin"].append(_ms(ours.step))
                    for v, step in bare.items():
                        times[v].append(_ms(step))
                med = {k: statistics.median(t) if t else float("nan") for k, t in times.items()}
                bound = min(med[v] for v in VARIANTS)
                rn, em = med["rogue-net"], med["entmachin"]
                print(f"{w.label[:39]:<40}" + "".join(f"{med[v]:>9.2f}" for v in VARIANTS)
                      + f"{bound:>8.2f}{rn:>10.2f}{em:>10.2f}{rn / bound:>9.2f}{em / bound:>9.2f}{rn / em:>7.2f}")
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
