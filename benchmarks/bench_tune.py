"""``entmachin tune``'s own overhead per trial: a study's wall time against the same runs without the tuner.

Side by side in one run, ``--rounds`` times alternately:

* **study**: ``run_study`` on a fresh SQLite study of ``--trials`` trials (no pruner), each trial one run of
  the tiny config below (Count, ``--steps`` environment steps);
* **runs alone**: the same number of runs of the same config through ``Runner`` directly, with the learning
  rate each trial would sample fixed to the config's.

The overhead per trial is (study - runs alone) / trials: opening the study, the sampler, the storage's
writes, the trial's directory and its reports (target: at most 2 s).

::

    python benchmarks/bench_tune.py
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=512, help="environment steps per trial")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import logging

    logging.disable(logging.INFO)  # the runs' own lines
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
