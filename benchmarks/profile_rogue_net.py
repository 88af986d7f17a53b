"""Profiles of entmachin's RogueNet and rogue-net 0.1.9 on the workloads of ``bench_rogue_net.py``.

Usage::

    python benchmarks/profile_rogue_net.py [--roguenet-python /tmp/roguenet-venv/bin/python]
        [--top 12] [--workloads minesweeper-train,synthetic-infer] [--threads 1] [--device cpu|cuda]

For every workload (and both sides, rogue-net in its own interpreter as in
``bench_rogue_net.py``), one step (every batch of the workload, as that benchmark times it) is
run ``--repeats`` times under ``torch.profiler`` with ``record_shapes``, after the same untimed
preparation; each entry's time is its smallest over the repeats (a busy machine inflates some). It
prints, per side:

* operator counts per step: ``ops`` = every ``aten::`` call the dispatcher saw (nested ones
  included), ``leaf ops`` = the ``aten::`` calls that call no other ``aten::`` op (about one
  kernel each on CPU), in the forward alone and in the whole step (forward + backward for
  ``train`` workloads);
* the top entries by self CPU time, grouped by operator and input shapes.

With ``--device cuda`` both networks and their batches are on the card and the profiler
records CUDA activity too (the table stays by self CPU time: the launch side).

Profiling slows each op down by a roughly constant amount, so the counts matter more than the
absolute times here; ``bench_rogue_net.py`` gives the times.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from typing import Any, Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's entmachin

from _rogue_net_args import add_workload_arguments  # noqa: E402 (after the path set-up)


# CUDA runtime calls the profiler records on the CPU side: kernel launches, copies, and the calls
# that make the CPU wait for the card (a copy to the host waits too)
CUDA_CALLS = {
    "launches": ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"),
    "copies": ("cudaMemcpyAsync", "cudaMemcpy"),
    "syncs": ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"),
}


def _summarise(profs: List[Any], top: int) -> Dict[str, Any]:
    """Op counts (of the first profile) and the top self-CPU entries: each entry's smallest
    self time over the profiles, which drops the steps where another process took the core."""
    prof = profs[0]
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    ids_with_children = set()
    for e in events:
        if e.cpu_parent is not None:
            ids_with_children.add(e.cpu_parent.id)
    leaf = [e for e in events if e.id not in ids_with_children]
    def smallest(group_by_input_shape: bool) -> Dict[Any, List[Any]]:
        best: Dict[Any, List[Any]] = {}
        for p in profs:
            for avg in p.key_averages(group_by_input_shape=group_by_input_shape):
                key = (avg.key, str(avg.input_shapes)[:60] if group_by_input_shape else "")
                ms = avg.self_cpu_time_total / 1e3
                if key not in best or ms < best[key][2]:
                    best[key] = [avg.key, avg.count, ms, key[1]]
        return best

    by_op = sorted(smallest(False).values(), key=lambda r: -r[2])
    total = sum(r[2] for r in by_op)
    rows = sorted(smallest(True).values(), key=lambda r: -r[2])[:top]
    top_ops = [[k, n, ms, 100.0 * ms / max(total, 1e-9)] for k, n, ms, _ in by_op[:top]]
    runtime = Counter(e.name for e in prof.events())
    cuda = {what: sum(runtime[name] for name in names) for what, names in CUDA_CALLS.items()}
    cuda["gpu_ms"] = sum(getattr(avg, "self_device_time_total", 0.0) for avg in prof.key_averages()) / 1e3
    return {"ops": len(events), "leaf_ops": len(leaf), "self_ms": total, "top_shapes": rows, "top_ops": top_ops,
            "cuda": cuda}


def profile_step(step: Callable[[], Any], forward_only: Callable[[], Any], top: int, repeats: int,
                 device: str = "cpu") -> Dict[str, Any]:
    """Profiles ``repeats`` ``forward_only`` calls and ``repeats`` full ``step`` calls, one profile each."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    out = {}
    for name, fn in (("forward", forward_only), ("step", step)):
        profs = []
        for _ in range(repeats):
            with profile(activities=activities, record_shapes=True) as prof:
                fn()
            profs.append(prof)
        out[name] = _summarise(profs, top)
    return out


def _entmachin(stem: str, seed: int, top: int, repeats: int, device: str) -> Dict[str, Any]:
    import torch
    from _rogue_net_workloads import EntmachinWorkload

    from entmachin.model.input_norm import collecting_stats_of

    w = EntmachinWorkload(stem, seed, torch.device(device))
    w.prepare()

    def forward_only() -> None:
        with torch.no_grad():
            for batch in w.batches:
                if w.mode == "train":
                    w.net(batch["entities"], batch["action_masks"], action=batch["action"])
                else:
                    with collecting_stats_of(w.norms):
                        w.net(batch["entities"], batch["action_masks"])

    return profile_step(w.step, forward_only, top, repeats, device)


def _roguenet(stem: str, seed: int, top: int, repeats: int, stub: str, device: str) -> Dict[str, Any]:
    import torch
    from _rogue_net_side import _import_scatter, _ragged_buffer, _Workload

    _import_scatter(stub)
    _ragged_buffer()  # entmachin's stand-in where ragged-buffer has no wheel, as the benchmarks do
    w = _Workload(stem, seed, device)
    w.prepare()

    def forward_only() -> None:
        with torch.no_grad():
            for batch in w.batches:
                w.net.get_action_and_auxiliary(batch["entities"], {}, batch["masks"], w.tracer,
                                               prev_actions=batch["action"] if w.mode == "train" else None)

    return profile_step(w.step, forward_only, top, repeats, device)


def _print(side: str, label: str, result: Dict[str, Any]) -> None:
    f, s = result["forward"], result["step"]
    print(f"\n[{side}] {label}: forward {f['ops']} ops / {f['leaf_ops']} leaf ops; step {s['ops']} ops / "
          f"{s['leaf_ops']} leaf ops; profiled self CPU {s['self_ms']:.1f} ms "
          f"(forward {f['self_ms']:.1f} ms)")
    if s["cuda"]["launches"]:
        for name, r in (("forward", f), ("step", s)):
            c = r["cuda"]
            print(f"  cuda, {name}: {c['launches']} kernel launches, {c['copies']} copies, {c['syncs']} synchronisations; "
                  f"kernels busy {c['gpu_ms']:.2f} ms of the card (profiled)")
    print(f"  {'op':<44}{'calls':>7}{'self ms':>10}{'%':>7}")
    for key, count, ms, pct in s["top_ops"]:
        print(f"  {key[:44]:<44}{count:>7}{ms:>10.2f}{pct:>6.1f}%")
    print(f"  by shape: {'op':<36}{'calls':>7}{'self ms':>10}  shapes")
    for key, count, ms, shapes in s["top_shapes"][:8]:
        print(f"    {key[:44]:<44}{count:>7}{ms:>10.2f}  {shapes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_arguments(parser)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=5, help="profiles per side, workload and pass (min per op)")
    parser.add_argument("--roguenet-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    import torch
    from _device import checked_device, describe

    torch.set_num_threads(args.threads)
    device = checked_device(args.device)
    if args.roguenet_worker:
        stems = json.loads(args.roguenet_worker)
        print(json.dumps({s: _roguenet(s, args.seed, args.top, args.repeats, args.scatter_stub, args.device)
                          for s in stems}))
        return
    from _rogue_net_workloads import build_workloads

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {describe(device)}")
    with tempfile.TemporaryDirectory(prefix="entmachin-profile-") as data_dir:
        wanted = build_workloads(args, data_dir)
        theirs = {}
        if args.roguenet_python:
            stems = [os.path.join(data_dir, w.name) for w in wanted]
            done = subprocess.run([args.roguenet_python, __file__, "--roguenet-worker", json.dumps(stems),
                                   "--scatter-stub", args.scatter_stub, "--threads", str(args.threads),
                                   "--top", str(args.top), "--repeats", str(args.repeats), "--seed", str(args.seed),
                                   "--device", args.device],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"the rogue-net side failed:\n{done.stderr[-3000:]}")
            theirs = json.loads(done.stdout.strip().splitlines()[-1])
        for w in wanted:
            stem = os.path.join(data_dir, w.name)
            _print("entmachin", w.label, _entmachin(stem, args.seed, args.top, args.repeats, args.device))
            if stem in theirs:
                _print("rogue-net", w.label, theirs[stem])


if __name__ == "__main__":
    main()
