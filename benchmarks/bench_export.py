"""The exported policy (``entmachin export``, run by onnxruntime) against entmachin's PyTorch acting path.

Usage::

    python benchmarks/bench_export.py [--roguenet-python /tmp/roguenet-venv/bin/python]
        [--rounds 11] [--seconds 0.25] [--pool 128] [--batch 128] [--batches 8] [--seed 0]

For MineSweeper and CherryPick (their bundled PPO configs), a frame is built with the run layer,
acts on the pool's observations (its input statistics learn from them), and its actor is exported
(``export_policy``; the time and the file's size are printed; the very first export imports onnx).
Then the acting rate, in observations per second, of each path on one observation at a time and
on a batch of ``--batch`` observations:

* ``PyTorch``: ``frame.act(to_state(vec_obs, action_space), deterministic=True)``, entmachin's
  acting path (input statistics updated, as in a rollout); it stops at RogueNet's output tensors;
* ``ONNX act_batch``: ``OnnxPolicy.act_batch(vec_obs)`` from the same ``VecObs``: validation,
  conversion to the graph's inputs, ``session.run`` and the ragged actions ``VecEnv.act`` takes;
* ``ONNX run``: the bare ``session.run`` on inputs prepared beforehand (``OnnxPolicy.feeds``),
  so that the share of ``act_batch`` spent outside onnxruntime (``outside run``) is visible;
* ``rogue-net``: rogue-net 0.1.9's ``get_action_and_auxiliary`` under ``torch.no_grad()`` in train
  mode (sampling, input statistics updated, as enn-trainer's rollout acts), with the same config
  (d_model, layers, heads, d_qk, relative positions) on the same observations, read back from files
  (``_ragged_batches``) into ragged-buffer's arrays: its figure starts from ragged inputs, not a VecObs.
  It runs in its own interpreter (a worker process of this script, see ``bench_rogue_net.py`` for
  the venv and ``--scatter-stub``); without ``--roguenet-python`` its column reads "skipped".

Observations come from the environments themselves (``EnvList``, random actions): ``--pool``
steps of one environment for the single-observation workload, ``--batches`` steps of ``--batch``
environments for the batched one; every path cycles through the same pool. Everything runs on one
thread (``torch.set_num_threads(1)``, ``OnnxPolicy(threads=1)``). A round gives each path
``--seconds`` of whole calls, the paths taking turns in an order that rotates from round to round;
a figure is the median over ``--rounds`` rounds. ``ONNX/PyTorch`` divides the wall-clock medians
(the issue's targets: >= 3.0x for one observation, >= 1.0x for a batch); ``cpu ratio`` divides the
medians of process CPU time instead, which another process holding the core disturbs far less.
The deterministic actions of both paths are compared on the pool before timing (PyTorch with
``collect_stats=False``, the statistics the file holds).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's entmachin

from _rogue_net_args import DEFAULT_STUB  # noqa: E402 (after the path set-up)

ENVS = ("MineSweeper", "CherryPick")


def target(batch: int) -> float:
    """The issue's target for ONNX / PyTorch: 3x one observation at a time, 1x batched."""
    return 3.0 if batch == 1 else 1.0


class Timed(NamedTuple):
    """One path's calls for one round: how many, observations, wall-clock and CPU seconds."""

    calls: int
    observations: int
    seconds: float
    cpu_seconds: float


def run_for(seconds: float, call: Callable[[int], int], start: int) -> Timed:
    """Calls ``call(i)`` for ``i = start, start + 1, ...`` (whole calls, at least one) until
    ``seconds`` have passed; ``call`` returns the observations it acted on."""
    n_obs, i = 0, start
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        n_obs += call(i)
        i += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return Timed(i - start, n_obs, elapsed, time.process_time() - c0)


# ------------------------------------------------------------------ rogue-net's side (its own interpreter)


def serve_roguenet(data_dir: str, stub_dir: str, seed: int) -> None:
    """Answers one JSON line per request on stdin: ``prepare`` (a workload and a config),
    ``round`` (``seconds`` of calls), ``quit``. Imports nothing of entmachin."""
    reply_to, sys.stdout = sys.stdout, sys.stderr  # stray prints must not break the protocol
    import entity_gym.env
    import torch
    from _ragged_batches import build_spaces, load_workload
    from _rogue_net_side import _import_scatter
    from entity_gym.env import SelectEntityActionSpace, VecCategoricalActionMask, VecSelectEntityActionMask
    from entity_gym.simple_trace import Tracer
    from importlib.metadata import version
    from ragged_buffer import RaggedBufferBool, RaggedBufferF32, RaggedBufferI64

    torch.set_num_threads(1)
    scatter = _import_scatter(stub_dir)
    from rogue_net.relpos_encoding import RelposEncodingConfig
    from rogue_net.rogue_net import RogueNet, RogueNetConfig

    def answer(message: Dict[str, Any]) -> None:
        reply_to.write(json.dumps(message) + "\n")
        reply_to.flush()

    answer({"rogue_net": version("rogue-net"), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "torch_scatter": scatter["kind"]})
    tracer = Tracer(cuda=False)
    net, batches, cursor = None, [], 0

    def call(i: int) -> int:
        entities, masks = batches[i % len(batches)]
        with torch.no_grad():
            net.get_action_and_auxiliary(entities, {}, masks, tracer)
        return len(next(iter(entities.values())).size1())

    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "quit":
                return
            if request["op"] == "prepare":
                spaces, _, loaded = load_workload(os.path.join(data_dir, request["workload"]),
                                                  (RaggedBufferF32, RaggedBufferI64, RaggedBufferBool))
                cfg = dict(request["config"])
                relpos, note = cfg.pop("relpos_encoding"), ""
                lacking = [t for t, f in spaces["entities"].items()
                           if relpos and not set(relpos["position_features"]) <= set(f)]
                if lacking and all(b["entities"][t].items() == 0 for b in loaded for t in lacking):
                    # rogue-net 0.1.9's relative positions need them on every type (exclude_entities raises
                    # NotImplementedError); these types have no entity here, so leaving them out changes nothing.
                    for t in lacking:
                        del spaces["entities"][t]
                        for b in loaded:
                            del b["entities"][t]
                    note = f"{lacking} (no position features, no entity in these observations) left out"
                elif lacking:
                    relpos, note = None, f"no relative positions ({lacking} have no position features)"
                cfg["relpos_encoding"] = RelposEncodingConfig(**relpos) if relpos else None
                obs_space, action_space = build_spaces(spaces, entity_gym.env)
                torch.manual_seed(seed)
                net = RogueNet(RogueNetConfig(**cfg), obs_space, action_space)
                net.train()  # as enn-trainer's rollout: statistics updated
                batches = []
                for b in loaded:
                    masks = {name: VecSelectEntityActionMask(m["actors"], m["actees"])
                             if isinstance(action_space[name], SelectEntityActionSpace)
                             else VecCategoricalActionMask(m["actors"], m.get("mask"))
                             for name, m in b["action_masks"].items()}
                    batches.append((b["entities"], masks))
                actors: Dict[str, int] = {}
                for entities, masks in batches:  # untimed: fills the statistics, warms up
                    with torch.no_grad():
                        _, log_prob, *_ = net.get_action_and_auxiliary(entities, {}, masks, tracer)
                    for name, lp in log_prob.items():
                        actors[name] = actors.get(name, 0) + int(lp.numel())
                cursor = 0
                answer({"actors": actors, "note": note})
            elif request["op"] == "round":
                timed = run_for(request["seconds"], call, cursor)
                cursor += timed.calls
                answer(timed._asdict())
            else:
                raise ValueError(f"unknown op {request['op']!r}")
        except Exception:  # the driver shows it and stops
            answer({"error": traceback.format_exc()})


# ------------------------------------------------------------------ entmachin's side


def observation_pool(factory: Any, action_space: Any, n_envs: int, n_steps: int, seed: int) -> List[Any]:
    """``n_steps`` VecObs of ``n_envs`` environments played with random actions."""
    import numpy as np

    from entmachin.env import EnvList, random_actions

    envs = EnvList(factory, n_envs, seed=seed)
    rng = np.random.default_rng(seed)
    obs, pool = envs.reset(), []
    for _ in range(n_steps):
        pool.append(obs)
        obs = envs.act(random_actions(obs, action_space, rng))
    envs.close()
    return pool


def compare_actions(frame: Any, policy: Any, pool: Sequence[Any], action_space: Any) -> List[int]:
    """``[equal, actors]``: deterministic actions of PyTorch (statistics frozen) and ONNX on ``pool``."""
    from entmachin.env import to_state

    equal = total = 0
    for vec in pool:
        ours = frame.act(to_state(vec, action_space), deterministic=True, collect_stats=False).action
        theirs = policy.act_batch(vec)
        for name, ragged in theirs.items():
            a, b = ragged.as_array().reshape(-1), ours[name].data.cpu().numpy().reshape(-1)
            equal += int((a == b).sum())
            total += len(a)
    return [equal, total]


def net_settings(config: Any) -> Dict[str, Any]:
    """The network settings rogue-net gets (the bundled config's)."""
    net = config.model.net_config()
    relpos = net.relpos_encoding
    return {"d_model": net.d_model, "n_layer": net.n_layer, "n_head": net.n_head, "d_qk": net.d_qk,
            "relpos_encoding": None if relpos is None else {
                "extent": list(relpos.extent), "position_features": list(relpos.position_features),
                "scale": relpos.scale, "per_entity_values": relpos.per_entity_values}}


def measure_env(name: str, args: argparse.Namespace, data_dir: str, worker: Any) -> Dict[str, Any]:
    """Builds, exports and times one environment's workloads; returns its rows of the tables."""
    import torch
    from _ragged_batches import save_workload
    from _rogue_net_workloads import env_spaces

    from entmachin.deploy import OnnxPolicy
    from entmachin.env import to_state
    from entmachin.run.build import make_frame
    from entmachin.run.envs import EnvFactory
    from entmachin.run.config import load_config
    from entmachin.run.export import export_policy
    from entmachin.run.paths import bundled_config_path

    config = load_config(bundled_config_path(name))
    factory = EnvFactory(config.env)
    obs_space, action_space = factory.spaces()
    torch.manual_seed(args.seed)
    frame, _ = make_frame(config, obs_space, action_space)
    pools = {1: observation_pool(factory, action_space, 1, args.pool, args.seed),
             args.batch: observation_pool(factory, action_space, args.batch, args.batches, args.seed + 1)}
    for pool in pools.values():  # realistic input statistics before the export
        for vec in pool:
            frame.act(to_state(vec, action_space))
    onnx_file = os.path.join(data_dir, f"{name}.onnx")
    cold = "onnx" not in sys.modules
    first = export_policy(frame, onnx_file)
    again = [export_policy(frame, onnx_file).seconds for _ in range(2)]
    policy = OnnxPolicy(onnx_file, threads=1)
    session, outputs = policy.session, policy._outputs
    agree = compare_actions(frame, policy, pools[1] + pools[args.batch], action_space)
    info = {"name": name, "export_first": first.seconds, "cold": cold, "export_again": statistics.median(again),
            "kib": first.size / 1024, "kind": first.kind, "agree": agree, "rows": [],
            "notes": set()}
    for batch, pool in pools.items():
        feeds = [policy.feeds(vec) for vec in pool]
        rows = [len(vec.reward) for vec in pool]

        def pytorch(i: int, pool: List[Any] = pool) -> int:
            vec = pool[i % len(pool)]
            frame.act(to_state(vec, action_space), deterministic=True)
            return len(vec.reward)

        def onnx(i: int, pool: List[Any] = pool) -> int:
            vec = pool[i % len(pool)]
            policy.act_batch(vec)
            return len(vec.reward)

        def bare(i: int, feeds: List[Any] = feeds, rows: List[int] = rows) -> int:
            session.run(outputs, feeds[i % len(feeds)])
            return rows[i % len(rows)]

        calls: Dict[str, Callable[[int], Timed]] = {
            "PyTorch": lambda i, f=pytorch: run_for(args.seconds, f, i),
            "ONNX act_batch": lambda i, f=onnx: run_for(args.seconds, f, i),
            "ONNX run": lambda i, f=bare: run_for(args.seconds, f, i),
        }
        if worker is not None:
            stem = f"{name}-b{batch}"
            save_workload(os.path.join(data_dir, stem), env_spaces(obs_space, action_space), "infer",
                          [{k: v for k, v in to_state(vec, action_space).items() if k in ("entities", "action_masks")}
                           for vec in pool])
            reply = worker.request(op="prepare", workload=stem, config=net_settings(config))
            theirs = reply["actors"]
            if reply["note"]:
                info["notes"].add(f"{name}: {reply['note']}")
            ours = {n: sum(int(vec.action_masks[n].actors.items()) for vec in pool) for n in action_space}
            if {n: theirs.get(n, 0) for n in ours} != ours:
                raise RuntimeError(f"{stem}: the sides saw different actors: entmachin {ours}, rogue-net {theirs}")
            calls["rogue-net"] = lambda i: Timed(**worker.request(op="round", seconds=args.seconds))
        done = {path: calls[path](0).calls for path in calls}  # warm-up; then each path goes on through its pool
        timed: Dict[str, List[Timed]] = {path: [] for path in calls}
        order = list(calls)
        for r in range(args.rounds):
            for path in order[r % len(order):] + order[:r % len(order)]:
                timed[path].append(calls[path](done[path]))
                done[path] += timed[path][-1].calls
        rates = {path: (statistics.median(t.observations / t.seconds for t in ts),
                        statistics.median(t.observations / t.cpu_seconds for t in ts if t.cpu_seconds > 0)
                        if any(t.cpu_seconds > 0 for t in ts) else float("nan"))
                 for path, ts in timed.items()}
        info["rows"].append({"batch": batch, "observations": sum(rows), "rates": rates})
    return info


def print_tables(results: List[Dict[str, Any]], worker: Any) -> None:
    print("\n| workload | PyTorch obs/s | ONNX act_batch obs/s | ONNX run obs/s | outside run | rogue-net obs/s "
          "| ONNX/PyTorch | cpu ratio | target |\n|---|---|---|---|---|---|---|---|---|")
    for info in results:
        for row in info["rows"]:
            rates, batch = row["rates"], row["batch"]
            ours, onnx, bare = rates["PyTorch"], rates["ONNX act_batch"], rates["ONNX run"]
            theirs = f"{rates['rogue-net'][0]:,.0f}" if "rogue-net" in rates else "skipped"
            ratio = onnx[0] / ours[0]
            met = "met" if ratio >= target(batch) else "not met"
            label = f"{info['name']}, {'1 observation' if batch == 1 else f'batch of {batch}'}"
            print(f"| {label} | {ours[0]:,.0f} | {onnx[0]:,.0f} | {bare[0]:,.0f} | {1 - onnx[0] / bare[0]:.0%} "
                  f"| {theirs} | {ratio:.2f}x | {onnx[1] / ours[1]:.2f}x | >= {target(batch):.1f}x: {met} |")
    print("\n| export | seconds (first call) | seconds (again, median of 2) | file KiB | kind "
          "| deterministic actions equal |\n|---|---|---|---|---|---|")
    for info in results:
        equal, total = info["agree"]
        cold = " (imports onnx)" if info["cold"] else ""
        print(f"| {info['name']} | {info['export_first']:.3f}{cold} | {info['export_again']:.3f} | {info['kib']:,.0f} "
              f"| {info['kind']} | {equal:,} of {total:,} actors |")
    if worker is None:
        print("\nrogue-net side: skipped (pass --roguenet-python PATH to measure it)")
    else:
        hello = worker.hello
        print(f"\nrogue-net side: rogue-net {hello['rogue_net']}, torch {hello['torch']}, "
              f"{hello['threads']} thread(s), torch_scatter {hello['torch_scatter']}; the same observations and "
              "actors as entmachin's (checked), timed from ragged inputs, sampling")
        for info in results:
            for note in sorted(info["notes"]):
                print(f"  rogue-net's network, {note}")


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=11, help="alternating rounds (each figure is their median)")
    parser.add_argument("--seconds", type=float, default=0.25, help="seconds of calls per path per round")
    parser.add_argument("--pool", type=int, default=128, help="distinct single observations (steps of one env)")
    parser.add_argument("--batch", type=int, default=128, help="observations per batch")
    parser.add_argument("--batches", type=int, default=8, help="distinct batches (steps of --batch envs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--roguenet-python", default=None,
                        help="interpreter of a venv with rogue-net==0.1.9 (see bench_rogue_net.py)")
    parser.add_argument("--scatter-stub", default=DEFAULT_STUB,
                        help="folder holding the torch_scatter stand-in, used where rogue-net's venv has none")
    parser.add_argument("--roguenet-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.roguenet_worker:
        serve_roguenet(args.data, args.scatter_stub, args.seed)
        return
    import onnxruntime
    import torch
    from _competitor import CompetitorWorker

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, 1 thread; {args.rounds} alternating "
          f"rounds of {args.seconds} s per path, medians; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="entmachin-export-bench-") as data_dir:
        worker = None
        if args.roguenet_python:
            worker = CompetitorWorker(args.roguenet_python, __file__,
                                      ["--roguenet-worker", "--data", data_dir, "--scatter-stub", args.scatter_stub,
                                       "--seed", str(args.seed)], "rogue-net")
        with worker if worker is not None else contextlib.nullcontext():
            results = [measure_env(name, args, data_dir, worker) for name in ENVS]
        print_tables(results, worker)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
