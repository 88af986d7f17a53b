"""Tutorial 13: ``entmachin tune``: a hyperparameter study whose trials are ordinary runs.

    python tutorials/13_tune.py            # MultiArmedBandit: 12 trials of 8,192 steps (a few minutes)
    python tutorials/13_tune.py --smoke    # 3 tiny trials: checks that everything runs

What you learn:

1. **The ``tune:`` section** of a run config: the ``metric`` (``return``, or an opponent of
   ``log.eval_opponents``: the win rate against it), its ``direction``, the budget of a trial (``steps``
   environment steps, ``seeds`` seeds whose median is the trial's value), the number of ``trials``, a
   ``pruner`` (``median``, ``halving`` or ``none``, fed by the evaluations each trial's run makes as it
   trains) and the ``space``: config keys with ``{log_uniform: [low, high]}``, ``{uniform: ...}``,
   ``{int: ...}`` or ``{choice: [...]}``. ``entmachin init`` prints it with the rest of the config.
2. **Checked before any trial**: a key the config does not have (with the closest ones), a range of the
   wrong type or empty, a value the config's own checks refuse, a metric the runs never write, a
   directory holding another study or a storage that cannot be reached (section 1 shows one).
3. **The study** (``entmachin tune CONFIG``, or ``run_study`` from Python): Optuna's TPE sampler, each
   trial an ordinary run directory under the study's (``trial-0003``: ``entmachin eval``, ``play``,
   ``export`` and ``train --resume`` take it), the study in ``study.db`` (SQLite) beside them. The same
   command again continues the study; ``--jobs J`` runs J trials at once; ``--storage
   postgresql://...`` lets several machines work on one study.
4. **The report** (``entmachin tune --report STUDY_DIR``): the best trials as a table, ``best.yaml`` (a
   complete config ``entmachin train`` takes as it is) and ``history.png`` and ``importances.png``.

Result of the full run (seed 0, one torch thread, a two-core machine, a few minutes): 12 trials, 4 finished
and 8 stopped early by the median pruner; the best, trial 11 (actor_learning_rate 0.0015, n_epochs 5),
returned 0.985 after 8,192 steps.
"""
from __future__ import annotations

import argparse
import logging
import os
import tempfile
from typing import Any, Dict, List, Optional

from entmachin.run.config import ConfigError, config_from_dict
from entmachin.run.tune.report import report
from entmachin.run.tune.study import run_study

STUDY = {
    "env": {"name": "MultiArmedBandit"},
    "frame": {"name": "PPO"},
    "rollout": {"num_envs": 16, "n_steps": 32},
    "train": {"total_steps": 32_000, "seed": 0},
    "log": {"eval_interval": 2048, "eval_episodes": 50},
    "tune": {"steps": 8192, "trials": 12, "pruner": "median",
             "space": {"frame.actor_learning_rate": {"log_uniform": [0.0001, 0.01]},
                       "frame.n_epochs": {"int": [1, 8]}}},
}
SMOKE = {"steps": 512, "trials": 3}  # one rollout of 16 x 32 steps


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="3 tiny trials")
    parser.add_argument("--dir", default=None, help="the study directory (default: a temporary one)")
    args = parser.parse_args(argv)
    logging.getLogger("entmachin.run.runner").setLevel(logging.WARNING)  # one line per trial, not per evaluation
    data = {**STUDY, "tune": {**STUDY["tune"], **(SMOKE if args.smoke else {})}}
    if args.smoke:
        data["log"] = {"eval_interval": 256, "eval_episodes": 8}
    study_dir = args.dir or os.path.join(tempfile.mkdtemp(prefix="entmachin-tune-"), "study")
    out: Dict[str, Any] = {}

    print("1. A space the config refuses, before any trial:")
    bad = {**data, "tune": {**data["tune"], "space": {"frame.actor_lerning_rate": {"log_uniform": [0.0001, 0.01]}}}}
    try:
        run_study(config_from_dict(bad), study_dir)
    except ConfigError as e:
        out["refused"] = str(e)
        print(f"   {e}")

    print(f"2. The study: {data['tune']['trials']} trials of {data['tune']['steps']:,} steps in {study_dir}")
    run_study(config_from_dict(data), study_dir)

    print("3. The report (entmachin tune --report STUDY_DIR):")
    out["report"] = report(study_dir)
    for line in out["report"]:
        print(f"   {line}")
    out["study_dir"] = study_dir
    return out


if __name__ == "__main__":
    main()
