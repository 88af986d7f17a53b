"""A study's results: the best trials as a table, ``best.yaml`` (the best trial's config, which ``entmachin
train`` takes as it is), and PNGs of the optimisation history and of the parameters' importances."""
from __future__ import annotations

import os
import warnings
from typing import Any, List

import yaml

from entmachin.files import atomic_write
from entmachin.run.config import config_from_dict
from entmachin.run.tune.space import describe
from entmachin.run.tune.study import STUDY_FILE, TuneError, _optuna, best_config

__all__ = ["report"]


def report(study_dir: str, top: int = 10) -> List[str]:
    """Writes ``best.yaml``, ``history.png`` and ``importances.png`` into ``study_dir`` and returns the lines
    of its table (the ``top`` best finished trials, then how many were pruned, failed or are running).

    Raises:
        TuneError: no study in the directory, or no finished trial yet.
    """
    optuna = _optuna()
    record_path = os.path.join(study_dir, STUDY_FILE)
    if not os.path.exists(record_path):
        raise TuneError(f"{study_dir}: holds no study ({STUDY_FILE}); give the directory `entmachin tune` wrote")
    with open(record_path) as f:
        held = yaml.safe_load(f)
    config = config_from_dict(held["config"], record_path)
    study = optuna.load_study(study_name=held["study"], storage=held["storage"])
    state = optuna.trial.TrialState
    done = [t for t in study.trials if t.state == state.COMPLETE]
    if not done:
        raise TuneError(f"{study_dir}: study {held['study']!r} has no finished trial yet")
    keys = list(config.tune.space)
    sign = -1.0 if config.tune.direction == "maximize" else 1.0
    ranked = sorted(done, key=lambda t: sign * t.value)
    lines = [f"study {held['study']!r} ({held['storage']}): {len(done)} finished, "
             f"{sum(t.state == state.PRUNED for t in study.trials)} pruned, "
             f"{sum(t.state == state.FAIL for t in study.trials)} failed, "
             f"{sum(t.state == state.RUNNING for t in study.trials)} running; {config.tune.metric}, "
             f"{config.tune.direction}, median of {config.tune.seeds} seed(s) per trial",
             f"{'trial':>6}  {'value':>9}  {'steps':>9}  values"]
    for t in ranked[:top]:
        steps = sum(config.tune.steps or config.train.total_steps for _ in t.user_attrs.get("figures", [0]))
        lines.append(f"{t.number:>6}  {t.value:>9.4f}  {steps:>9,}  {describe(t.params, keys)}")
    best = ranked[0]
    atomic_write(os.path.join(study_dir, "best.yaml"),
                 (f"# entmachin tune: trial {best.number} of study {held['study']!r}, {config.tune.metric} "
                  f"{best.value:.4f}\n" + yaml.safe_dump(best_config(config, study), sort_keys=False)).encode())
    lines.append(f"best.yaml: trial {best.number}'s config (entmachin train {os.path.join(study_dir, 'best.yaml')})")
    lines += _plots(optuna, study, study_dir)
    return lines


def _plots(optuna: Any, study: Any, study_dir: str) -> List[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as plots

    out = []
    for name, draw in (("history.png", plots.plot_optimization_history),
                       ("importances.png", plots.plot_param_importances)):
        try:
            with warnings.catch_warnings():  # optuna calls its matplotlib plots experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                axes = draw(study)
        except (ValueError, RuntimeError) as e:  # too few trials for importances, say
            out.append(f"{name}: not drawn ({e})")
            continue
        figure = axes.figure if hasattr(axes, "figure") else axes[0].figure
        path = os.path.join(study_dir, name)
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        out.append(f"{name}: {path}")
    return out
