"""``entmachin tune``'s own overhead per trial: a study's wall time against the same runs without the tuner.

Side by side in one run, ``--rounds`` times alternately:

* **study**: ``run_study`` on a fresh SQLite study of ``--trials`` trials (no pruner), each trial one run of
  the tiny config below (Count, ``--steps`` environment steps);
* **runs alone**: the same number of runs of the same config through ``Runner`` directly, with the learning
  rate each trial would sample fixed to the config's.

The overhead per trial is (study - runs alone) / trials: opening the study, the sampler, the storage's
writes, the trial's directory and its reports (target: at most 2 s).

``--pruning`` compares the same study with and without the median pruner instead: tutorial 13's
MultiArmedBandit study (12 trials of 8,192 steps over the learning rate and the epochs, seed 0), the
environment steps its trials ran (each trial's last evaluation) and the best value each found.

::

    python benchmarks/bench_tune.py
    python benchmarks/bench_tune.py --pruning
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(steps: int, trials: int) -> Any:
    from entmachin.run.config import config_from_dict

    return config_from_dict({
        "env": {"name": "Count"}, "frame": {"name": "PPO", "batch_size": 32}, "model": {"d_model": 16},
        "rollout": {"num_envs": 8, "n_steps": 8, "processes": 0}, "train": {"total_steps": steps, "seed": 0},
        "log": {"eval_interval": steps, "eval_episodes": 8},
        "tune": {"steps": steps, "trials": trials, "pruner": "none",
                 "space": {"frame.actor_learning_rate": {"log_uniform": [0.0003, 0.01]}}}})


def study_seconds(steps: int, trials: int) -> float:
    from entmachin.run.tune.study import run_study

    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        run_study(_config(steps, trials), os.path.join(root, "study"))
        return time.perf_counter() - start


def runs_seconds(steps: int, trials: int) -> float:
    from entmachin.run.runner import Runner

    config = _config(steps, trials)
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        for k in range(trials):
            Runner(config, os.path.join(root, f"run-{k}"), progress=False).train()
        return time.perf_counter() - start


PRUNING_STUDY = {
    "env": {"name": "MultiArmedBandit"}, "frame": {"name": "PPO"}, "rollout": {"num_envs": 16, "n_steps": 32},
    "train": {"total_steps": 32_000, "seed": 0}, "log": {"eval_interval": 2048, "eval_episodes": 50},
    "tune": {"steps": 8192, "trials": 12, "space": {"frame.actor_learning_rate": {"log_uniform": [0.0001, 0.01]},
                                                   "frame.n_epochs": {"int": [1, 8]}}},
}


def pruning() -> None:
    import json

    from entmachin.run.config import config_from_dict
    from entmachin.run.tune.study import run_study

    steps = {}
    for pruner in ("none", "median"):
        with tempfile.TemporaryDirectory() as root:
            study_dir = os.path.join(root, "study")
            data = {**PRUNING_STUDY, "tune": {**PRUNING_STUDY["tune"], "pruner": pruner}}
            study = run_study(config_from_dict(data), study_dir)
            steps[pruner] = 0
            for name in os.listdir(study_dir):
                if name.startswith("trial-"):
                    with open(os.path.join(study_dir, name, "eval.json")) as f:
                        steps[pruner] += max(r["env_steps"] for r in json.load(f))
            finished = sum(t.state.name == "COMPLETE" for t in study.trials)
            print(f"pruner {pruner:<6}: {len(study.trials)} trials ({finished} finished), {steps[pruner]:,} trial "
                  f"steps, best {study.best_value:.4f} (trial {study.best_trial.number})")
    print(f"trial steps with the median pruner: {1 - steps['median'] / steps['none']:.0%} fewer (target >= 40%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=512, help="environment steps per trial")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pruning", action="store_true", help="the same study with and without the median pruner")
    args = parser.parse_args()
    import logging

    logging.disable(logging.INFO)  # the runs' own lines
    if args.pruning:
        return pruning()
    seconds: Dict[str, List[float]] = {"study": [], "runs alone": []}
    for _ in range(args.rounds):
        seconds["study"].append(study_seconds(args.steps, args.trials))
        seconds["runs alone"].append(runs_seconds(args.steps, args.trials))
    print(f"entmachin tune on Count: {args.trials} trials of {args.steps} environment steps, SQLite, no pruner; "
          f"{args.rounds} alternating rounds; load average {os.getloadavg()[0]:.2f}")
    for side, values in seconds.items():
        print(f"{side:<11} s: median {statistics.median(values):.2f}   (rounds: "
              f"{', '.join(f'{v:.2f}' for v in values)})")
    overhead = (statistics.median(seconds["study"]) - statistics.median(seconds["runs alone"])) / args.trials
    print(f"tuner overhead per trial: {overhead:.3f} s (target <= 2 s)")


if __name__ == "__main__":
    sys.exit(main())
