"""RogueNet against rogue-net 0.1.9 (the network it replaces) and against a padded trunk.

Usage::

    python benchmarks/bench_rogue_net.py [--roguenet-python /tmp/roguenet-venv/bin/python]
        [--rows 256] [--infer-rows 128] [--n-envs 128] [--n-steps 16] [--batch-size 1024]
        [--repeats 15] [--fixed 32] [--max-entities 64] [--threads 1] [--device cpu|cuda]
        [--compile off|on|both] [--workloads minesweeper-train,synthetic-infer] [--json PATH]

Two sections, both fp32 unless said, ``--threads`` torch threads (default one), the sides
alternating step by step so that machine load hits both alike, each figure the median over
``--repeats`` steps (at least 5 for a figure worth quoting). The load average is printed
before and after. Rates come from wall-clock times; the ``cpu ratio`` column divides the
sides' median CPU times (``time.process_time``) instead, which a busy machine disturbs far
less (it leaves out the time another process held the core). ``--device cuda`` puts both
networks (rogue-net's too, where its venv's torch sees the card) and their batches on the
card; every time is then wall clock after ``torch.cuda.synchronize()``, and the ``cpu ratio``
repeats the wall-clock one.

``--compile on`` times entmachin's ``RogueNet`` built with ``RogueNetConfig(compile=True)``
instead of the eager one, ``both`` times the two side by side (alternating step by step with
the other sides). A compiled network compiles in its first calls: the untimed warm-up steps
less as many steady steps is printed as its compile time, with the number of training steps
after which it is repaid (compile time / (eager step - compiled step); "never" where the
compiled step is not faster).

**entmachin vs rogue-net 0.1.9.** rogue-net runs in its own interpreter (a worker process of
this script, kept running and answering one JSON line per step: ``_rogue_net_side.py``).
Every workload is built once here and written to a temporary folder as flat arrays + lengths
(``_ragged_batches.py``); each side reads it back into its ragged arrays (entmachin's
``RaggedArray``s; ragged-buffer's ``RaggedBuffer``s on rogue-net's side), so they see the same
observations and actions, and the script stops if they report different numbers of tokens
or actors. Timing starts from those ragged inputs on both sides (as entmachin's ``RogueNet`` and
rogue-net's ``get_action_and_auxiliary`` take them): the conversion to tensors is timed. Both networks
get rogue-net's defaults, set explicitly: d_model 32, 2 layers, 2 heads, d_qk 16, no dropout,
no relative positions, no auxiliary (value) heads. Workloads:

* forward + backward (tokens/s), as a PPO minibatch re-evaluates: given actions -> log-probs,
  backward of their sum; input statistics frozen after one collecting pass on both sides:

  - synthetic: ``--rows`` rows, type A with U[1, ``--max-entities``] entities and 4 features,
    type B with 0-8 entities and 3 features, one categorical action (5 choices) for every A;
  - MineSweeper: ``MineSweeper(orbital_cannon=True)`` played with random actions for
    ``--n-steps`` steps of ``--n-envs`` environments in entmachin's ``EnvList``, states as PPO
    stores them (``to_state(obs, action_space)``); one step is one epoch: the rollout's rows
    shuffled into minibatches of ``--batch-size`` rows;
  - CherryPick (select-entity): the same on ``CherryPick(num_cherries=32)``, one actor (the
    player) choosing among up to 32 cherries.

* inference (rows/s): entmachin's ``RogueNet.forward`` under ``torch.no_grad()`` inside
  ``collecting_stats()``, sampling (as ``PPO.act`` calls it), against rogue-net's
  ``get_action_and_auxiliary`` under ``torch.no_grad()`` in train mode (sampling, statistics
  updated, as enn-trainer's rollout calls it; its figure includes turning the sampled actions
  into ``RaggedBufferI64``); synthetic batches of ``--infer-rows`` rows and one rollout step
  (``--n-envs`` rows) of each environment.

entmachin's states carry what ``to_state(obs, action_space)`` adds for PPO's buffer: all-True
select-entity ``actee_mask``s, which entity-gym 0.1.10's masks cannot express (rogue-net gets
the same actors, actees and categorical masks without them).

Setting up rogue-net's interpreter (a throwaway venv; entity-gym and rogue-net declare
Python < 3.11 but are pure Python; pip brings ragged-buffer and the rest)::

    python3 -m venv /tmp/roguenet-venv
    /tmp/roguenet-venv/bin/pip install torch==2.13.0
    /tmp/roguenet-venv/bin/pip install --ignore-requires-python entity-gym==0.1.10 rogue-net==0.1.9 'numpy<2'
    python benchmarks/bench_rogue_net.py --roguenet-python /tmp/roguenet-venv/bin/python

rogue-net imports ``torch_scatter``, a long compile. If that venv has none, the worker appends
``--scatter-stub`` (default ``../shared/tools/torch_scatter_stub`` beside the checkout: a
stand-in for ``torch_scatter.scatter``) to its ``sys.path``; a real ``torch_scatter``
installed in the venv wins. The output says which one ran and how often it was called (none
of these workloads calls it: no pooling, no auxiliary heads). Without ``--roguenet-python`` the
rogue-net column reads "skipped".

**Ragged vs padded trunk** (``_padded_trunk.py``). Both models share the same embedding and
action heads; only the trunk differs. The reference trunk pads every row to the longest one
and runs ``n_layer`` x ``nn.TransformerEncoderLayer(d_model, n_head, 4 * d_model, dropout=0,
activation="gelu", batch_first=True, norm_first=True)`` with ``src_key_padding_mask``. One
step is a PPO minibatch (forward with given actions, backward of the summed log-probs);
inputs are converted to ``RaggedTensor`` once, outside the timed region. Cases: entity counts
drawn from U[1, 64] per row, and every row with ``--fixed`` entities; each in float32 and under
``torch.autocast("cpu", dtype=torch.bfloat16)``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's entmachin

from _rogue_net_args import (  # noqa: E402 (after the path set-up)
    add_compile_argument,
    add_json_argument,
    add_workload_arguments,
    entmachin_sides,
)


def _load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _check_same_work(label: str, ours: Dict[str, Any], theirs: Optional[Dict[str, Any]], n_entities: int) -> None:
    """Raises if the sides did not process the same tokens and actors (the figures would lie)."""
    if ours["tokens"] != n_entities:
        raise RuntimeError(f"{label}: entmachin's trunk saw {ours['tokens']} tokens, the inputs hold {n_entities} "
                           "entities")
    if theirs is not None and (theirs["tokens"] != ours["tokens"] or theirs["actors"] != ours["actors"]):
        raise RuntimeError(f"{label}: the sides saw different work: entmachin {ours}, rogue-net {theirs}")


def compare_with_roguenet(args: argparse.Namespace, device: Any) -> None:
    """Prints the entmachin vs rogue-net table (see the module docstring)."""
    from _competitor import CompetitorWorker
    from _device import describe, wall_and_cpu
    from _rogue_net_workloads import CONFIG, EntmachinWorkload, build_workloads, compile_summary

    with tempfile.TemporaryDirectory(prefix="entmachin-roguenet-") as data_dir:
        workloads = build_workloads(args, data_dir)
        worker = None
        if args.roguenet_python:
            worker = CompetitorWorker(args.roguenet_python, __file__,
                                      ["--roguenet-worker", "--data", data_dir, "--scatter-stub", args.scatter_stub,
                                       "--threads", str(args.threads), "--seed", str(args.seed),
                                       "--device", args.device], "rogue-net")
        sides = entmachin_sides(args.compile)
        with worker if worker is not None else contextlib.nullcontext():
            ours_defaults = {k: getattr(type(CONFIG)(), k) for k in ("d_model", "n_layer", "n_head", "d_qk")}
            used = {k: getattr(CONFIG, k) for k in ours_defaults}
            print(f"\nentmachin vs rogue-net 0.1.9 on {describe(device)}: fp32, {args.threads} thread(s), median of "
                  f"{args.repeats} alternating steps each, timed from ragged inputs; config {used} on both sides")
            print(f"  defaults: entmachin {ours_defaults}", end="")
            if worker is not None:
                hello = worker.hello
                print(f", rogue-net {hello['defaults']}")
                print(f"  rogue-net {hello['rogue_net']}, entity-gym {hello['entity_gym']}, ragged_buffer "
                      f"{hello.get('ragged_buffer', 'real')}, torch {hello['torch']}, {hello['threads']} thread(s), "
                      f"{hello['device']}")
            else:
                print()
            results, compiles = [], {}
            for w in workloads:
                ours = {name: EntmachinWorkload(os.path.join(data_dir, w.name), args.seed, device, compiled)
                        for name, compiled in sides.items()}
                for side in ours.values():
                    seen = side.prepare()
                    _check_same_work(w.label, seen, None, side.n_entities)
                theirs_seen = worker.request(op="prepare", workload=w.name) if worker is not None else None
                first = next(iter(ours.values()))
                _check_same_work(w.label, seen, theirs_seen, first.n_entities)
                t_ours: Dict[str, List[Tuple[float, float]]] = {name: [] for name in ours}
                t_theirs: List[Tuple[float, float]] = []
                scatter_calls = 0
                for i in range(args.repeats):
                    if worker is not None and i % 2:
                        reply = worker.request(op="step")
                        t_theirs.append((reply["seconds"], reply["cpu_seconds"]))
                    for name in (list(ours) if i % 2 else list(ours)[::-1]):
                        t_ours[name].append(wall_and_cpu(ours[name].step, device))
                    if worker is not None and not i % 2:
                        reply = worker.request(op="step")
                        t_theirs.append((reply["seconds"], reply["cpu_seconds"]))
                    if worker is not None:
                        scatter_calls = reply["scatter_calls"]
                amount = seen["tokens"] if w.unit == "tokens" else first.n_rows
                rate_ours = {name: [amount / statistics.median(t[k] for t in ts) for k in (0, 1)]
                             for name, ts in t_ours.items()}
                rate_theirs = [amount / statistics.median(t[k] for t in t_theirs) for k in (0, 1)] \
                    if t_theirs else None
                results.append((w, amount, seen["actors"], rate_ours, rate_theirs))
                if "compiled" in ours:
                    eager = statistics.median(t[0] for t in t_ours["entmachin"]) if "entmachin" in ours else None
                    compiles[w.name] = compile_summary(
                        ours["compiled"].warmup_s, statistics.median(t[0] for t in t_ours["compiled"]), eager)
                del ours
            _print_table(results, list(sides))
            if compiles:
                print("compiled side (RogueNetConfig(compile=True)): compile time = untimed warm-up steps less as "
                      "many steady steps; break-even in steps of the workload")
                print("\n".join(f"  {w.label:<38}{compiles[w.name]}" for w, *_ in results if w.name in compiles))
            if args.json:
                records = [{"name": w.name, "label": w.label, "unit": w.unit, "per_step": amount,
                            "rates": {n: r[0] for n, r in rates.items()},
                            "rogue-net": theirs[0] if theirs is not None else None, "compile": compiles.get(w.name)}
                           for w, amount, _, rates, theirs in results]
                with open(args.json, "w", encoding="utf-8") as f:
                    json.dump({"device": describe(device), "workloads": records}, f, indent=1)
            if worker is None:
                print("rogue-net side: skipped (pass --roguenet-python PATH to measure it)")
            else:
                kind = "torch_scatter stub" if worker.hello["torch_scatter"] == "stub" else \
                    f"real torch_scatter {worker.hello['torch_scatter_version']}"
                print(f"rogue-net side: {kind} ({worker.hello['torch_scatter_path']}), "
                      f"scatter called {scatter_calls} times in all its steps; both sides saw the same tokens "
                      "and actors per action (checked)")


def _print_table(results: List[Any], names: List[str]) -> None:
    """Rates from wall-clock medians, and the ratio of CPU-time medians beside them: on a
    shared machine a step's CPU time leaves out the time another process held the core. The
    ratios are those of the first entmachin side (``names[0]``) against rogue-net."""
    print(f"{'workload':<40}{'per step':>16}{'actors':>10}" + "".join(f"{n + '/s':>14}" for n in names)
          + f"{'rogue-net/s':>14}{'ratio':>8}{'cpu ratio':>11}")
    sections = (("train", "forward + backward (tokens/s)"), ("infer", "inference, no_grad + sampling (rows/s)"))
    for mode, title in sections:
        if any(w.mode == mode for w, *_ in results):
            print(f"  {title}")
        for w, amount, actors, rates, rate_theirs in results:
            if w.mode != mode:
                continue
            rate_ours = rates[names[0]]
            theirs = f"{rate_theirs[0]:>14,.0f}" if rate_theirs is not None else f"{'skipped':>14}"
            ratio = f"{rate_ours[0] / rate_theirs[0]:>7.2f}x{rate_ours[1] / rate_theirs[1]:>10.2f}x" \
                if rate_theirs is not None else f"{'-':>8}{'-':>11}"
            print(f"  {w.label:<38}{f'{amount:,} {w.unit}':>16}{sum(actors.values()):>10,}"
                  + "".join(f"{rates[n][0]:>14,.0f}" for n in names) + f"{theirs}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_arguments(parser)
    parser.add_argument("--repeats", type=int, default=15, help="timed steps per side and workload (median)")
    parser.add_argument("--fixed", type=int, default=32, help="entities per row in the padded section's fixed case")
    add_compile_argument(parser)
    add_json_argument(parser)
    parser.add_argument("--roguenet-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.roguenet_worker:
        from _rogue_net_side import serve

        serve(args.data, args.scatter_stub, args.threads, args.seed, args.device)
        return
    import torch
    from _device import checked_device, describe
    from _padded_trunk import run_padded

    device = checked_device(args.device)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {describe(device)}; load average "
          f"{_load_average()}")
    run_padded(args, device)
    compare_with_roguenet(args, device)
    print(f"load average {_load_average()} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
