"""The sweep behind the run config's defaults: candidate settings x example environments x seeds.

    python benchmarks/sweep_defaults.py --stage screen --jobs 2     # every candidate on the quick environments
    python benchmarks/sweep_defaults.py --stage full --candidate generic --jobs 2
    python benchmarks/sweep_defaults.py --table-only

Each job trains an example environment with its bundled config *replaced*: the environment
section (name, kwargs, step limit: they define the task) is kept, and everything else is what
``entmachin init`` / ``entmachin train package.module:Class`` give an environment without a
bundled config (``entmachin.run.defaults.default_config``), plus the candidate's changes. Budgets and targets are the learning table's
(``bench_learning.TARGETS``). Each finished job appends one JSON line to
``benchmarks/results/sweep.jsonl`` (candidate, its changes, environment, seed, the resolved config and
its fingerprint, returns), and jobs already there (by today's fingerprint rule) are skipped, so a sweep fills over several
sittings. A job runs one torch thread; ``--jobs 2`` runs two at once (the returns do not depend
on it: a seed's run repeats exactly on one thread).

Stages: ``screen`` runs the environments whose budget is at most 64k steps (seconds to a minute a
job) for every candidate; ``full`` runs every learning-table environment for the candidates
named. ``--budget-scale`` shrinks budgets (the smoke test).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_learning import TARGETS, fingerprint, read_results, settings_of, train_and_evaluate  # noqa: E402

# Candidate -> changes to the defaults (``--set`` style). "generic" is the defaults as they are. The other
# candidates were screened against the defaults before PPO's annealed bonus and two layers (2026-11), and
# state those earlier defaults (_BEFORE: A2C's are unchanged by it), so their records keep their meaning;
# "generic-before-anneal" is those defaults themselves. The screen's candidates each change one thing of
# "shared-critic", the defaults it started from.
_BEFORE = ("model.n_layer=1", "frame.entropy_weight=-0.01", "frame.anneal_entropy=false", "frame.n_anneal_updates=null")
_SHARED = _BEFORE + ("model.critic=shared",)
CANDIDATES: Dict[str, Tuple[str, ...]] = {
    "generic": (),
    "generic-before-anneal": _BEFORE,
    "shared-critic": _SHARED,
    "two-layers": _SHARED + ("model.n_layer=2",),
    "d64": _SHARED + ("model.d_model=64",),
    "small-rollout": _SHARED + ("rollout.num_envs=16", "rollout.n_steps=8", "frame.batch_size=64"),
    "lr-3e-4": _SHARED + ("frame.actor_learning_rate=0.0003", "frame.critic_learning_rate=0.0003"),
    "entropy-0.03": _SHARED + ("frame.entropy_weight=-0.03",),
    "8-epochs": _SHARED + ("frame.n_epochs=8",),
    "short-rollout": _SHARED + ("rollout.n_steps=4",),  # 128 rows: four times the updates (A2C: one step each)
    "lr-3e-3": _SHARED + ("frame.actor_learning_rate=0.003", "frame.critic_learning_rate=0.003"),
    # A2C's defaults take one gradient step per rollout of 512 rows: 8 in Count's 4,096-step budget.
    "a2c-minibatch-64": _BEFORE + ("frame.batch_size=64",),  # eight steps per rollout, still one pass over it
    "a2c-minibatch-64-no-entropy": _BEFORE + ("frame.batch_size=64", "frame.entropy_weight=null"),
    "a2c-minibatch-128": _BEFORE + ("frame.batch_size=128",),  # four steps per rollout
    # PPO's generic defaults miss Xor and PickMatchingBalls (constant learning rates). Both budgets are 500k steps
    # of 512-row rollouts: 977 updates, so these anneal to 0 at the end of those two rows only.
    "anneal-977": _BEFORE + ("frame.n_anneal_updates=977",),
    "two-layers-anneal-977": _BEFORE + ("model.n_layer=2", "frame.n_anneal_updates=977"),
    # enn-trainer's generic choice: a ten times larger entropy bonus, annealed to 0 with the learning rates.
    "entropy-0.1-anneal-977": _BEFORE + ("frame.entropy_weight=-0.1", "frame.anneal_entropy=true",
                                         "frame.n_anneal_updates=977"),
    "entropy-0.3-anneal-977": _BEFORE + ("frame.entropy_weight=-0.3", "frame.anneal_entropy=true",
                                         "frame.n_anneal_updates=977"),
    # The annealed bonus fixed Xor and hurt PickMatchingBalls (0.75, seed 0), whose bundled config also learns from
    # rollouts twice as large and a wider trunk: each beside it, annealed over whatever budget a run has (auto).
    "entropy-0.1-anneal-1024-rows": _BEFORE + ("frame.entropy_weight=-0.1", "frame.anneal_entropy=true",
                                     "frame.n_anneal_updates=auto", "rollout.num_envs=64"),
    "entropy-0.1-anneal-d64": _BEFORE + ("frame.entropy_weight=-0.1", "frame.anneal_entropy=true",
                                         "frame.n_anneal_updates=auto", "model.d_model=64"),
    # Each of those stalls on a plateau within 100k steps: whether a much larger bonus (PickMatchingBalls' own)
    # lifts it.
    "entropy-0.5-anneal": _BEFORE + ("frame.entropy_weight=-0.5", "frame.anneal_entropy=true",
                                     "frame.n_anneal_updates=auto"),
    # PickMatchingBalls' bundled config has two layers beside that bonus (two layers alone hurt Xor: 0.55).
    # Now the defaults ("generic"): the same configs, the same fingerprints, the same records.
    "two-layers-entropy-0.5-anneal": _BEFORE + ("model.n_layer=2", "frame.entropy_weight=-0.5",
                                                "frame.anneal_entropy=true", "frame.n_anneal_updates=auto"),
    # ... and gradients clipped at 2 instead of 0.5: with a bonus that large, the entropy's gradient fills most of
    # a 0.5 norm, and clipping to it shrinks the policy's share.
    "entropy-0.5-anneal-clip-2": _BEFORE + ("frame.entropy_weight=-0.5", "frame.anneal_entropy=true",
                                            "frame.n_anneal_updates=auto", "frame.gradient_max=2.0"),
}
SCREEN_BUDGET = 64_000


def job_config(env: str, frame: str, changes: Sequence[str], budget: Optional[int] = None) -> Dict[str, Any]:
    """Plain config data: the bundled environment section, the defaults, the candidate's changes, and the
    budget (``train.total_steps``): read before ``auto`` settings resolve, so that ``n_anneal_updates: auto``
    anneals over the steps the job trains (None: the defaults' own total_steps)."""
    from entmachin.run.envs import EnvFactory
    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import apply_overrides, config_from_dict, config_to_dict, load_config
    from entmachin.run.defaults import default_config

    bundled = load_config(bundled_config_path(env, frame))
    data = default_config(config_to_dict(bundled)["env"], frame, EnvFactory(bundled.env).spaces()[0])
    budgeted = [] if budget is None else [f"train.total_steps={budget}"]
    return config_to_dict(config_from_dict(apply_overrides(data, [*changes, *budgeted])))


def run_one(candidate: str, changes: Sequence[str], env: str, frame: str, seed: int, budget: int,
            runs_dir: str) -> Dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    data = job_config(env, frame, changes, budget)
    run_dir = os.path.join(runs_dir, f"{candidate}-{env}-{frame}-{seed}")
    record = {"candidate": candidate, "changes": list(changes), "env": env, "frame": frame, "seed": seed,
              "budget": budget, **settings_of(data)}
    return {**record, **train_and_evaluate(data, seed, budget, run_dir)}


def jobs_to_run(stage: str, candidates: Sequence[str], envs: Optional[Sequence[str]], frames: Sequence[str],
                seeds: Sequence[int], scale: float, done: List[Dict[str, Any]]) -> List[Tuple]:
    todo = []
    for (env, frame), (budget, _, _) in TARGETS.items():
        if frame not in frames or (envs and env not in envs) or (stage == "screen" and budget > SCREEN_BUDGET):
            continue
        scaled = max(int(budget * scale), 1)
        for candidate in candidates:
            config = fingerprint_by_env(candidate, scale)[(env, frame)]
            for seed in seeds:
                if not any(print_of(r) == config and r["env"] == env and r["frame"] == frame and r["seed"] == seed
                           and r["budget"] == scaled for r in done):
                    todo.append((candidate, CANDIDATES[candidate], env, frame, seed, scaled))
    return todo


def met(record_best: float, target: Optional[float]) -> Optional[bool]:
    return None if target is None else record_best >= target - 1e-9


def table(records: List[Dict[str, Any]], candidates: Sequence[str], scale: float = 1.0) -> str:
    """Environments x candidates: the median over seeds of the better of sampled and deterministic
    final return, with the number of seeds, and whether the target (or the random policy) is beaten;
    the records of budgets scaled by ``scale`` (a candidate's ``auto`` schedule depends on its budget)."""
    current = {c: fingerprint_by_env(c, scale) for c in candidates}
    header = "| env | frame | budget | target | random | " + " | ".join(candidates) + " |"
    lines = [header, "|" + "---|" * (5 + len(candidates))]
    met_counts = {c: [0, 0] for c in candidates}
    beats = {c: [0, 0] for c in candidates}
    for (env, frame), (budget, target, _) in TARGETS.items():
        cells, randoms, any_rows = [], [], False
        for c in candidates:
            rows = [r for r in records if r["env"] == env and r["frame"] == frame
                    and print_of(r) == current[c].get((env, frame))]
            if not rows:
                cells.append("")
                continue
            any_rows = True
            budgets = {r["budget"] for r in rows}
            best = statistics.median(max(r["sampled"], r["deterministic"]) for r in rows)
            random = statistics.mean(r["random"] for r in rows)
            randoms.append(random)
            ok = met(best, target)
            scaled = "" if budgets == {budget} else f" @{max(budgets):,}"
            mark = "" if ok is None else (" met" if ok else " -")
            cells.append(f"{best:.3f} ({len(rows)}){mark}{scaled}")
            if budgets == {budget} and len(rows) >= 3:
                if ok is not None:
                    met_counts[c][0] += ok
                    met_counts[c][1] += 1
                beats[c][0] += best > random
                beats[c][1] += 1
        if any_rows:
            target_text = "-" if target is None else f"{target:g}"
            lines.append(f"| {env} | {frame} | {budget:,} | {target_text} | {statistics.mean(randoms):.3f} | "
                         + " | ".join(cells) + " |")
    lines.append("| targets met (3 seeds, full budget) | | | | | "
                 + " | ".join(f"{m}/{n}" for m, n in met_counts.values()) + " |")
    lines.append("| beats random (3 seeds, full budget) | | | | | "
                 + " | ".join(f"{m}/{n}" for m, n in beats.values()) + " |")
    return "\n".join(lines)


_PRINTS: Dict[Tuple[str, float], Dict[Tuple[str, str], str]] = {}
_RECORD_PRINTS: Dict[str, str] = {}


def print_of(record: Dict[str, Any]) -> str:
    """A record's fingerprint by today's rule: of the settings and code revisions it keeps (a record without
    ``revisions`` was made at revision 1 of every feature), else the fingerprint it was written with."""
    if "settings" not in record:
        return record["config"]
    key = json.dumps([record["settings"], record.get("revisions", {})], sort_keys=True)
    if key not in _RECORD_PRINTS:
        _RECORD_PRINTS[key] = fingerprint(record["settings"], revised=record.get("revisions", {}))
    return _RECORD_PRINTS[key]


def fingerprint_by_env(candidate: str, scale: float = 1.0) -> Dict[Tuple[str, str], str]:
    """The fingerprint each (env, frame) job of ``candidate`` has with the defaults as they are now, at its
    budget (scaled by ``scale``)."""
    if (candidate, scale) not in _PRINTS:
        _PRINTS[candidate, scale] = {key: fingerprint(job_config(*key, CANDIDATES[candidate],
                                                                 max(int(budget * scale), 1)))
                                     for key, (budget, _, _) in TARGETS.items()}
    return _PRINTS[candidate, scale]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=["screen", "full"], default="screen")
    parser.add_argument("--candidate", action="append", choices=sorted(CANDIDATES), default=None,
                        help="only these candidates (repeatable; default: all)")
    parser.add_argument("--env", action="append", default=None, help="only these environments (repeatable)")
    parser.add_argument("--frame", action="append", choices=["PPO", "A2C"], default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1, help="jobs at once, one torch thread each")
    parser.add_argument("--budget-scale", type=float, default=1.0)
    parser.add_argument("--results", default=os.path.join(HERE, "results", "sweep.jsonl"))
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    candidates = args.candidate or list(CANDIDATES)
    frames = args.frame or ["PPO", "A2C"]
    done = read_results(args.results)
    if not args.table_only:
        todo = jobs_to_run(args.stage, candidates, args.env, frames, args.seeds, args.budget_scale, done)
        print(f"{len(todo)} jobs, {args.jobs} at a time", flush=True)
        os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="entmachin-sweep-") as runs_dir, \
                concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_one, *job, runs_dir) for job in todo]
            for future in concurrent.futures.as_completed(futures):
                record = future.result()
                with open(args.results, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
                done.append(record)
                print(f"{record['candidate']} {record['env']} {record['frame']} seed {record['seed']}: "
                      f"{record['sampled']:.3f} / {record['deterministic']:.3f} (random {record['random']:.3f}) "
                      f"in {record['wall_s']:.0f} s", flush=True)
    shown = [c for c in candidates if any(print_of(r) in fingerprint_by_env(c, args.budget_scale).values()
                                          for r in done)]
    print(table(done, shown, args.budget_scale))


if __name__ == "__main__":
    main()
