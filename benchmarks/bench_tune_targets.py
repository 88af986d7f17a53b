"""``entmachin tune`` against the learning table: a study from the generic defaults finds a config that reaches
a row's target in fewer environment steps than the bundled config, and the median pruner's savings on it.

For each row (``--env``, repeatable; default MultiArmedBandit, FloorIsLava and Recall; Vehicles too):

1. **The study**: the generic defaults (what ``entmachin init ENV`` writes; for FloorIsLava with the relative
   positions and for Recall the memory their bundled configs name, structures the space does not choose)
   with a ``tune:`` section over the learning rate, epochs, minibatch, entropy bonus, GAE's lambda, the
   rollout's shape and the width;
   ``tune.score: mean`` (a trial's value is the mean of its evaluations along the way, so a config that gets
   there in fewer steps, and stays, scores higher), ``tune.steps`` near the bundled config's steps to target
   (a trial shows whether it gets there), the median pruner, seed 0.
2. **Steps to target, side by side**: the study's best config and the bundled config, each trained from 3
   fresh seeds (100, 101, 102) with the same evaluations (``--eval-interval`` steps, 100 episodes, sampled
   actions) until an evaluation reaches the row's target or the bundled budget ends; the median seed's steps.
3. **Pruning**: the same study without the pruner; the trial steps both ran (each trial's last evaluation)
   and the best values, against the spread of the value over the 3 fresh seeds of the unpruned study's best
   config.

Every run steps its environments in its own process (``rollout.processes: 0``), so the study takes one core.
Each row's figures go to ``benchmarks/results/tune.jsonl``; ``--table`` prints them.

::

    python benchmarks/bench_tune_targets.py                       # about an hour here, one core
    python benchmarks/bench_tune_targets.py --env MultiArmedBandit --trials 4 --smoke
    python benchmarks/bench_tune_targets.py --table
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench_learning import TARGETS, bundled_data, median_steps  # noqa: E402

RESULTS = os.path.join(HERE, "results", "tune.jsonl")
SMOKE_BUDGET: Dict[str, int] = {}  # --smoke: the steps-to-target runs' budget too
FRESH_SEEDS = (100, 101, 102)
SPACE = {
    "frame.actor_learning_rate": {"log_uniform": [0.0001, 0.01]},
    "frame.n_epochs": {"int": [1, 8]},
    "frame.batch_size": {"choice": [64, 128, 256]},
    "frame.entropy_weight": {"uniform": [-0.02, 0.0]},
    "frame.gae_lambda": {"uniform": [0.8, 1.0]},
    "rollout.num_envs": {"choice": [16, 32, 64]},
    "rollout.n_steps": {"choice": [16, 32]},
    "model.d_model": {"choice": [16, 32, 64]},
}
# What a row's environment needs that is a structure, not a number to search: FloorIsLava's relative positions,
# Recall's memory (sequences of one episode, 5 steps, in rollouts of whole ones).
STRUCTURE: Dict[str, Dict[str, Any]] = {
    "FloorIsLava": {"model": {"relpos_encoding": {"extent": [5, 5], "position_features": ["x", "y"]}}},
    "Recall": {"model": {"memory": {"kind": "gru", "size": 32}, "critic": "shared"}, "frame": {"sequence_length": 5},
               "rollout": {"n_steps": 20}},
}
# A row's own ranges where the shared ones do not fit it: Recall's rollouts are whole sequences of 5 steps.
SPACES: Dict[str, Dict[str, Any]] = {
    "Recall": {"rollout.n_steps": {"choice": [10, 20, 40]}, "frame.batch_size": {"choice": [40, 80, 160]}},
}
# row -> (tune.steps, evaluation interval, trials)
ROWS: Dict[str, Dict[str, int]] = {
    "MultiArmedBandit": {"steps": 8_192, "eval_interval": 1_024, "trials": 30},
    "FloorIsLava": {"steps": 20_480, "eval_interval": 1_024, "trials": 30},
    "Vehicles": {"steps": 40_960, "eval_interval": 4_096, "trials": 20},
    "Recall": {"steps": 10_240, "eval_interval": 1_024, "trials": 30},
}


def _quiet(data: Dict[str, Any], eval_interval: int) -> Dict[str, Any]:
    """A run's config stepping in its own process, evaluating every ``eval_interval`` steps, few checkpoints."""
    return {**data, "rollout": {**data.get("rollout", {}), "processes": 0},
            "log": {**{k: v for k, v in data.get("log", {}).items() if k != "run_dir"},
                    "eval_interval": eval_interval, "eval_episodes": 100, "checkpoint_interval": 10**9,
                    "keep_checkpoints": 1}}


def study_config(env: str, row: Dict[str, int], pruner: str) -> Any:
    from entmachin.run.config import config_from_dict

    budget = TARGETS[(env, "PPO")][0]
    structure = STRUCTURE.get(env, {})
    return config_from_dict(_quiet({
        **structure,
        "env": {"name": env}, "frame": {"name": "PPO", **structure.get("frame", {})},
        "train": {"total_steps": budget, "seed": 0},
        "tune": {"steps": row["steps"], "trials": row["trials"], "score": "mean", "pruner": pruner,
                 "space": space(env)}}, row["eval_interval"]))


def space(env: str) -> Dict[str, Any]:
    """The searched keys of a row's study: the shared ranges, with the row's own where they differ."""
    return {**SPACE, **SPACES.get(env, {})}


def study(env: str, row: Dict[str, int], pruner: str, root: str) -> Dict[str, Any]:
    """Runs one study; its best value and config, and the environment steps its trials ran."""
    from entmachin.run.tune.study import best_config, run_study

    config = study_config(env, row, pruner)
    study_dir = os.path.join(root, f"{env}-{pruner}")
    start = time.perf_counter()
    result = run_study(config, study_dir)
    seconds = time.perf_counter() - start
    steps = 0
    for name in os.listdir(study_dir):
        path = os.path.join(study_dir, name, "eval.json")
        if name.startswith("trial-") and os.path.exists(path):
            with open(path) as f:
                steps += max(r["env_steps"] for r in json.load(f))
    states = [t.state.name for t in result.trials]
    best = best_config(config, result)
    print(f"{env}, pruner {pruner}: {len(states)} trials ({states.count('PRUNED')} pruned), {steps:,} trial steps, "
          f"best {result.best_value:.4f} (trial {result.best_trial.number}), {seconds / 60:.1f} min", flush=True)
    return {"pruner": pruner, "trials": len(states), "pruned": states.count("PRUNED"), "trial_steps": steps,
            "best_value": result.best_value, "best_trial": result.best_trial.number,
            "best_params": result.best_trial.params, "minutes": seconds / 60, "best_config": best}


def steps_to_target(data: Dict[str, Any], env: str, eval_interval: int, seed: int, root: str) -> Optional[int]:
    """Trains ``data`` from ``seed`` until an evaluation reaches the row's target (at most the bundled budget);
    the steps of that evaluation, None: none did."""
    from entmachin.run.callbacks import StopWhen
    from entmachin.run.config import config_from_dict
    from entmachin.run.runner import Runner

    budget, target, _ = TARGETS[(env, "PPO")]
    budget = min(budget, SMOKE_BUDGET.get("steps", budget))
    data = _quiet(data, eval_interval)
    data = {**data, "train": {**data["train"], "total_steps": budget, "seed": seed}}
    run_dir = os.path.join(root, f"run-{seed}")
    Runner(config_from_dict(data), run_dir, progress=False,
           callbacks=[StopWhen("return", at_least=target - 1e-9)]).train()
    with open(os.path.join(run_dir, "eval.json")) as f:
        return next((r["env_steps"] for r in json.load(f) if r["mean"] >= target - 1e-9), None)


def scores(data: Dict[str, Any], row: Dict[str, int], root: str) -> List[float]:
    """The trial value (the mean of the evaluations over ``tune.steps``) of ``data`` at each fresh seed."""
    from entmachin.run.config import config_from_dict
    from entmachin.run.runner import Runner

    values = []
    for seed in FRESH_SEEDS:
        run = {**_quiet(data, row["eval_interval"])}
        run["train"] = {**run["train"], "total_steps": row["steps"], "seed": seed}
        run_dir = os.path.join(root, f"score-{seed}")
        Runner(config_from_dict(run), run_dir, progress=False).train()
        with open(os.path.join(run_dir, "eval.json")) as f:
            values.append(statistics.fmean(r["mean"] for r in json.load(f)))
    return values


def row(env: str, settings: Dict[str, int]) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory() as root:
        pruned = study(env, settings, "median", root)
        sides: Dict[str, List[Optional[int]]] = {}
        for side, data in (("tuned", pruned["best_config"]), ("bundled", bundled_data(env, "PPO"))):
            sides[side] = [steps_to_target(data, env, settings["eval_interval"], seed,
                                           os.path.join(root, side)) for seed in FRESH_SEEDS]
            print(f"{env}, {side}: steps to target at seeds {FRESH_SEEDS}: {sides[side]}", flush=True)
        unpruned = study(env, settings, "none", root)
        spread = scores(unpruned["best_config"], settings, os.path.join(root, "spread"))
    medians = {side: median_steps(steps) for side, steps in sides.items()}
    record = {"env": env, "frame": "PPO", "target": TARGETS[(env, "PPO")][1], "budget": TARGETS[(env, "PPO")][0],
              **settings, "space": space(env), "fresh_seeds": list(FRESH_SEEDS), "steps_to_target": sides,
              "median_steps": medians, "with_pruner": pruned, "without_pruner": unpruned, "spread": spread,
              "time": time.strftime("%Y-%m-%d %H:%M")}
    return record


def _steps(value: Optional[int]) -> str:
    return "never" if value is None else f"{value:,}"


def table(records: List[Dict[str, Any]]) -> str:
    lines = ["| env | target | study (trials, min) | best params | steps to target, tuned (seeds) | bundled (seeds) "
             "| fewer | trial steps: pruner / none | saved | best: pruner / none | spread (3 seeds) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        tuned, bundled = r["median_steps"]["tuned"], r["median_steps"]["bundled"]
        fewer = "yes" if tuned is not None and (bundled is None or tuned < bundled) else "no"
        p, n = r["with_pruner"], r["without_pruner"]
        params = ", ".join(f"{k.split('.')[-1]}={v:.3g}" if isinstance(v, float) else f"{k.split('.')[-1]}={v}"
                           for k, v in p["best_params"].items())
        lines.append(
            f"| {r['env']} | {r['target']} | {p['trials']} ({p['pruned']} pruned), {p['minutes']:.0f} | {params} | "
            f"{_steps(tuned)} ({' / '.join(map(_steps, r['steps_to_target']['tuned']))}) | {_steps(bundled)} "
            f"({' / '.join(map(_steps, r['steps_to_target']['bundled']))}) | {fewer} | {p['trial_steps']:,} / "
            f"{n['trial_steps']:,} | {1 - p['trial_steps'] / n['trial_steps']:.0%} | {p['best_value']:.3f} / "
            f"{n['best_value']:.3f} | {min(r['spread']):.3f}-{max(r['spread']):.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", action="append", choices=sorted(ROWS), help="rows to run (repeatable)")
    parser.add_argument("--trials", type=int, help="trials per study (default: the row's)")
    parser.add_argument("--smoke", action="store_true", help="a tenth of each study's steps (and that budget for "
                        "the steps to target), results not kept")
    parser.add_argument("--table", action="store_true", help="print the kept figures")
    args = parser.parse_args()
    if args.table:
        with open(RESULTS) as f:
            print(table([json.loads(line) for line in f if line.strip()]))
        return
    logging.disable(logging.INFO)  # the runs' own lines
    records = []
    for env in args.env or ["MultiArmedBandit", "FloorIsLava", "Recall"]:
        settings = dict(ROWS[env])
        if args.trials:
            settings["trials"] = args.trials
        if args.smoke:
            settings["steps"] = max(settings["steps"] // 10, 2_048)  # one rollout of the largest shape
            SMOKE_BUDGET["steps"] = settings["steps"]
        record = row(env, settings)
        records.append(record)
        if not args.smoke:
            with open(RESULTS, "a") as f:
                f.write(json.dumps(record) + "\n")
    print(table(records))


if __name__ == "__main__":
    sys.exit(main())
