"""How far each network is from the bare arithmetic of its workload, and from the machine's.

Usage::

    python benchmarks/bench_rogue_net_bound.py [--roguenet-python /tmp/roguenet-venv/bin/python]
        [--repeats 7] [--device cpu|cuda] [--compile off|on|both] [same workload options as bench_rogue_net.py]

For every workload of ``bench_rogue_net.py`` (same batches, same config, one thread, fp32),
this times side by side, alternating step by step: rogue-net 0.1.9 (its own interpreter),
entmachin's ``RogueNet`` (eager, compiled with ``RogueNetConfig(compile=True)``, or both:
``--compile``), and the bare arithmetic of the step in three attention variants
(``_bare_arithmetic.py``: ``exact`` unpadded per-length calls, entmachin's ``buckets``,
rogue-net's ``padpack``). The bound is the fastest variant; each network's time divided by
it says how much of its step is not arithmetic. Where rogue-net's time is under twice the
bound, twice rogue-net's speed is out of reach without changing the arithmetic itself.
Figures: medians of ``--repeats`` steps, in CPU ms per step (every batch of the workload;
process CPU time, which leaves out the time another process held the core); with ``--device
cuda``, wall ms after ``torch.cuda.synchronize()``.

The second table says how far every figure is from the arithmetic the machine can do. A
workload's FLOPs per step are counted once, untimed, on entmachin's eager network with
``torch.utils.flop_counter.FlopCounterMode`` (forward + backward for training workloads,
forward for inference; it counts matrix products and attention, not elementwise work); each
side's GFLOP/s is those FLOPs over its median time. Beside them, timed in the same
alternation, the same core's ``torch.mm`` at the workload's shapes: ``[n_tokens, d_model] x
[d_model, 3 * d_model]`` (the qkv projection) and ``[n_tokens, d_model] x [d_model, 4 *
d_model]`` (the MLP's up projection), ``n_layer`` times per batch with each batch's
``n_tokens``. ``of mm`` is the first entmachin side's rate as a share of the faster of the two.

A compiled side compiles in its untimed warm-up steps: their wall time less as many steady
steps is printed as its compile time, with the training steps after which it is repaid.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's entmachin

from _rogue_net_args import (  # noqa: E402 (after the path set-up)
    add_compile_argument,
    add_json_argument,
    add_workload_arguments,
    entmachin_sides,
)

SHORT = {"entmachin": "em", "compiled": "cp"}


def _ms(fn: Callable[[], Any], now: Callable[[], float]) -> float:
    """Milliseconds of ``fn()`` on the clock ``now``."""
    start = now()
    fn()
    return (now() - start) * 1e3


class _NoModules:
    """Stands in for ``FlopCounterMode``'s module tracker, whose hooks fail on a view of a parameter
    taken under ``no_grad`` (a featureless entity type's embedding); only the total is wanted."""

    parents = ("Global",)

    def __enter__(self) -> "_NoModules":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _flops(workload: Any) -> int:
    """FLOPs of one step of ``workload`` (untimed; matrix products and attention)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    counter.mod_tracker = _NoModules()
    with counter:
        workload.step()
    return counter.get_total_flops()


def _matmuls(n_tokens: List[int], d_model: int, n_layer: int, width: int, device: Any
             ) -> Tuple[Callable[[], None], int]:
    """``torch.mm`` of ``[n, d_model] x [d_model, width * d_model]``, ``n_layer`` times per batch of
    ``n`` tokens; returns the call and its FLOPs."""
    import torch

    xs = [torch.randn(n, d_model, device=device) for n in n_tokens]  # [n, d_model] each
    w = torch.randn(d_model, width * d_model, device=device)  # [d_model, width * d_model]

    def run() -> None:
        for _ in range(n_layer):
            for x in xs:
                torch.mm(x, w)  # [n, width * d_model]

    return run, 2 * n_layer * sum(n_tokens) * d_model * width * d_model


def _print_rates(rates: List[Tuple[str, int, int, Dict[str, float]]], names: List[str]) -> None:
    """The second table: FLOPs per step and GFLOP/s of each side, the bound and the matmuls."""
    print("\nGFLOP/s = FLOPs per step (FlopCounterMode, entmachin's eager network) / median time; mm 3d, mm 4d: "
          "torch.mm [n_tokens, d_model] x [d_model, 3 or 4 x d_model] on the same core")
    cols = ["bound", "rogue-net", *names, "mm 3d", "mm 4d"]
    print(f"{'workload':<40}{'MFLOP/step':>11}{'tokens/batch':>13}" + "".join(f"{c:>10}" for c in cols)
          + f"{'of mm':>7}")
    for label, flops, tokens, g in rates:
        share = g[names[0]] / max(g["mm 3d"], g["mm 4d"])
        print(f"{label[:39]:<40}{flops / 1e6:>11.2f}{tokens:>13,}" + "".join(f"{g[c]:>10.2f}" for c in cols)
              + f"{share:>7.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_arguments(parser)
    parser.add_argument("--repeats", type=int, default=7)
    add_compile_argument(parser)
    add_json_argument(parser)
    args = parser.parse_args()
    import torch
    from _bare_arithmetic import VARIANTS, bare_step
    from _competitor import CompetitorWorker
    from _device import checked_device, clock, describe
    from _ragged_batches import load_workload, n_items
    from _rogue_net_workloads import CONFIG, RAGGED_CLASSES, EntmachinWorkload, build_workloads, compile_summary

    device = checked_device(args.device)
    now = clock(device, cpu_time=True)
    sides = entmachin_sides(args.compile)
    names = list(sides)
    unit = "wall ms (synchronised)" if device.type == "cuda" else "CPU ms"
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {describe(device)}; load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="entmachin-bound-") as data_dir:
        workloads = build_workloads(args, data_dir)
        worker = None
        if args.roguenet_python:
            worker = CompetitorWorker(args.roguenet_python, os.path.join(HERE, "bench_rogue_net.py"),
                                      ["--roguenet-worker", "--data", data_dir, "--scatter-stub", args.scatter_stub,
                                       "--threads", str(args.threads), "--seed", str(args.seed),
                                       "--device", args.device], "rogue-net")
        print(f"median of {args.repeats} alternating steps, {unit} per step; bound = fastest bare variant")
        head = f"{'workload':<40}" + "".join(f"{v:>9}" for v in VARIANTS) + f"{'bound':>8}{'rogue-net':>10}"
        print(head + "".join(f"{n:>10}" for n in names) + f"{'rn/bound':>9}"
              + "".join(f"{SHORT[n] + '/bound':>9}" for n in names) + f"{SHORT[names[0]] + '/rn':>7}")
        rates, compiles, records = [], [], []
        with worker if worker is not None else contextlib.nullcontext():
            for w in workloads:
                stem = os.path.join(data_dir, w.name)
                spaces, mode, batches = load_workload(stem, RAGGED_CLASSES)
                bare = {v: bare_step(spaces, batches, mode, v, CONFIG.d_model, CONFIG.n_layer, CONFIG.n_head,
                                     CONFIG.d_qk, device) for v in VARIANTS}
                ours = {n: EntmachinWorkload(stem, args.seed, device, compiled) for n, compiled in sides.items()}
                for side in ours.values():
                    side.prepare()
                flops = _flops(ours["entmachin"] if "entmachin" in ours else EntmachinWorkload(stem, args.seed, device))
                n_tokens = [n_items(b["entities"]) for b in batches]
                mm = {f"mm {k}d": _matmuls(n_tokens, CONFIG.d_model, CONFIG.n_layer, k, device) for k in (3, 4)}
                if worker is not None:
                    worker.request(op="prepare", workload=w.name)
                for step in [*bare.values(), *(run for run, _ in mm.values())]:
                    step()
                timed = {**bare, **{k: run for k, (run, _) in mm.items()}, **{n: o.step for n, o in ours.items()}}
                times: Dict[str, List[float]] = {k: [] for k in (*timed, "rogue-net")}
                for i in range(args.repeats):
                    if worker is not None:
                        times["rogue-net"].append(worker.request(op="step")["cpu_seconds"] * 1e3)
                    for k in (list(timed) if i % 2 else list(timed)[::-1]):
                        times[k].append(_ms(timed[k], now))
                med = {k: statistics.median(t) if t else float("nan") for k, t in times.items()}
                bound = min(med[v] for v in VARIANTS)
                rn = med["rogue-net"]
                print(f"{w.label[:39]:<40}" + "".join(f"{med[v]:>9.2f}" for v in VARIANTS) + f"{bound:>8.2f}{rn:>10.2f}"
                      + "".join(f"{med[n]:>10.2f}" for n in names) + f"{rn / bound:>9.2f}"
                      + "".join(f"{med[n] / bound:>9.2f}" for n in names) + f"{rn / med[names[0]]:>7.2f}")
                gflops = {k: flops / med[k] / 1e6 for k in ("rogue-net", *names)}
                gflops["bound"] = flops / bound / 1e6
                gflops.update({k: f / med[k] / 1e6 for k, (_, f) in mm.items()})
                rates.append((w.label, flops, sum(n_tokens) // len(n_tokens), gflops))
                compiled = None
                if "compiled" in ours:
                    eager = med["entmachin"] / 1e3 if "entmachin" in ours else None
                    compiled = compile_summary(ours["compiled"].warmup_s, med["compiled"] / 1e3, eager)
                    compiles.append(f"  {w.label[:38]:<38}{compiled}")
                records.append({"name": w.name, "label": w.label, "ms": med, "bound_ms": bound, "mflop": flops / 1e6,
                                "gflops": gflops, "compile": compiled})
        _print_rates(rates, names)
        if compiles:
            print("compiled side: compile time = untimed warm-up steps (wall) less as many steady steps; break-even "
                  "in steps of the workload")
            print("\n".join(compiles))
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"device": describe(device), "workloads": records}, f, indent=1)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
