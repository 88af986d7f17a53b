"""A study: Optuna's TPE sampler over a config's ``tune.space``, each trial ordinary runs of the config.

The study lives in a directory: ``study.yaml`` (its name, storage and the config it tunes), ``study.db``
(Optuna's SQLite storage, unless another storage URL is given) and one directory per trial,
``trial-NNNN`` (``seed-K`` inside it when a trial runs several seeds), each an ordinary run directory that
``entmachin eval``, ``play``, ``export`` and ``train --resume`` take. Several processes (``--jobs``, or the same
command on several machines with one storage URL) work on one study: Optuna's storage hands each trial to
one of them, and the count of trials is the study's, not a process's. Running the command again
continues the study. Ctrl-C stops the runs in progress (their checkpoints written), marks their trials
failed and leaves the study whole.

optuna is imported here only (the ``tune`` extra).
"""
from __future__ import annotations

import logging
import math
import multiprocessing
import os
import statistics
from typing import Any, Dict, List, Optional, Tuple

import yaml

from entmachin.files import atomic_write
from entmachin.run.callbacks import Callback
from entmachin.run.config import config_from_dict, config_to_dict
from entmachin.run.logs import RunError
from entmachin.run.sections import ConfigError, RunConfig
from entmachin.run.tune.space import Dimension, check_metric, check_space, metric_of, trial_config

__all__ = ["TuneError", "open_study", "run_study", "best_config"]

logger = logging.getLogger(__name__)
STUDY_FILE = "study.yaml"


class TuneError(RunError):
    """A study that cannot start or continue: its storage, its directory, or optuna missing."""


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as e:
        raise TuneError(f"entmachin tune needs optuna ({e}): pip install 'entmachin[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # each trial's end is one line of ours (_say)
    return optuna


def _pruner(optuna: Any, name: str) -> Any:
    if name == "median":  # from the third trial on, past a trial's first evaluation
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


def open_study(config: RunConfig, study_dir: str, name: Optional[str], storage: Optional[str]) -> Tuple[Any, str]:
    """The study (created, or loaded to continue) and its storage URL; the directory records both.

    Raises:
        TuneError: the directory holds another study, or the storage cannot be reached.
        ConfigError: the space or the metric is wrong (before anything is written).
    """
    optuna = _optuna()
    check_space(config)
    check_metric(config)
    if not config.tune.space:
        raise ConfigError("tune.space: empty; name at least one config key to search, e.g. "
                          "{frame.actor_learning_rate: {log_uniform: [0.0001, 0.003]}}")
    try:  # a trial's own settings (tune.steps as train.total_steps), before any trial
        trial_config(config, {}, 0)
    except ConfigError as e:
        raise ConfigError(f"tune: a trial's config is refused: {e}") from None
    record_path = os.path.join(study_dir, STUDY_FILE)
    tuned = _tuned(config)
    if os.path.exists(record_path):
        with open(record_path) as f:
            held = yaml.safe_load(f) or {}
        if (name is not None and held.get("study") != name) or held.get("config") != tuned:
            what = (f"study {held.get('study')!r}" if name is not None and held.get("study") != name
                    else "a study of another config (its space, metric or settings differ)")
            raise TuneError(f"{study_dir}: holds {what}; give another directory, or the same config and study name "
                            "to continue it")
        name, storage = held["study"], storage or held["storage"]
    elif os.path.isdir(study_dir) and os.listdir(study_dir):
        raise TuneError(f"{study_dir}: exists and holds no study ({STUDY_FILE}); give an empty or new directory")
    name = name or f"{config.env.name}-tune"
    storage = storage or f"sqlite:///{os.path.abspath(os.path.join(study_dir, 'study.db'))}"
    made = not os.path.isdir(study_dir)
    os.makedirs(study_dir, exist_ok=True)
    direction = config.tune.direction
    try:
        study = optuna.create_study(study_name=name, storage=storage, direction=direction, load_if_exists=True,
                                    sampler=optuna.samplers.TPESampler(seed=config.train.seed),
                                    pruner=_pruner(optuna, config.tune.pruner))
    except Exception as e:  # sqlalchemy's and optuna's own errors, for a URL that cannot be reached
        if made and not os.listdir(study_dir):
            os.rmdir(study_dir)
        raise TuneError(f"--storage {storage}: cannot open the study there ({type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else ''})") from None
    if study.direction.name.lower() != direction:
        raise TuneError(f"--storage {storage}: study {name!r} there is a study to {study.direction.name.lower()}; "
                        f"tune.direction is {direction}")
    if not os.path.exists(record_path):
        atomic_write(record_path, yaml.safe_dump({"study": name, "storage": storage, "config": tuned},
                                                 sort_keys=False).encode())
    return study, storage


def _tuned(config: RunConfig) -> Dict[str, Any]:
    """The config a study tunes, as plain data (its trial count left out: a study continues with more)."""
    data = _without_run_dir(config)
    data["tune"] = {k: v for k, v in data["tune"].items() if k != "trials"}
    return data


def _without_run_dir(config: RunConfig) -> Dict[str, Any]:
    """A config as plain data without ``log.run_dir`` (which a study's and a trial's directories decide)."""
    data = config_to_dict(config)
    data["log"] = {k: v for k, v in data["log"].items() if k != "run_dir"}
    return data


class _Report(Callback):
    """Follows one seed's evaluations: its figure so far (``tune.score``), reported to Optuna as it trains when
    it is the seed the pruner follows, the run stopped when the pruner says so."""

    def __init__(self, trial: Any, tune: Any, prune: bool) -> None:
        self.trial, self.metric, self.score, self.prune = trial, tune.metric, tune.score, prune
        self.figures: List[float] = []
        self.pruned = False

    def figure(self) -> float:
        """The seed's figure: its last evaluation's, or the mean of all of them (nan before any)."""
        if not self.figures:
            return math.nan
        return self.figures[-1] if self.score == "final" else float(statistics.fmean(self.figures))

    def on_evaluation(self, run: Any, record: Dict[str, Any]) -> None:
        value = metric_of(record, self.metric)
        if math.isnan(value):
            return
        self.figures.append(value)
        if record.get("final") or not self.prune:
            return
        self.trial.report(self.figure(), step=int(record["env_steps"]))
        if self.trial.should_prune():
            self.pruned = True
            run.stop(f"pruned by entmachin tune at {record['env_steps']} environment steps ({self.metric} {value:.3f})")


def _objective(config: RunConfig, space: List[Dimension], study_dir: str) -> Any:
    from entmachin.run.runner import Runner

    optuna = _optuna()
    tune = config.tune

    def objective(trial: Any) -> float:
        try:
            return run_trial(trial)
        except (RunError, ConfigError) as e:  # the reason the trial's line and the report give
            trial.set_user_attr("fail_reason", f"{type(e).__name__}: {e}")
            raise

    def run_trial(trial: Any) -> float:
        values = {d.key: _suggest(trial, d) for d in space}
        trial_dir = os.path.join(study_dir, f"trial-{trial.number:04d}")
        figures: List[float] = []
        for k in range(tune.seeds):
            run_dir = trial_dir if tune.seeds == 1 else os.path.join(trial_dir, f"seed-{k}")
            report = _Report(trial, tune, prune=k == 0)  # the pruner follows the first seed
            result = Runner(trial_config(config, values, k), run_dir, progress=False, callbacks=[report]).train()
            if result.stopped is not None:  # SIGINT / SIGTERM: the study stops, this trial fails
                raise KeyboardInterrupt(result.stopped)
            if report.pruned:
                trial.set_user_attr("run_dirs", [run_dir])
                raise optuna.TrialPruned()
            figures.append(report.figure())
        trial.set_user_attr("figures", figures)
        trial.set_user_attr("run_dirs", [trial_dir] if tune.seeds == 1 else
                            [os.path.join(trial_dir, f"seed-{k}") for k in range(tune.seeds)])
        return float(statistics.median(figures))

    return objective


def _suggest(trial: Any, d: Dimension) -> Any:
    if d.kind == "log_uniform":
        return trial.suggest_float(d.key, float(d.values[0]), float(d.values[1]), log=True)
    if d.kind == "uniform":
        return trial.suggest_float(d.key, float(d.values[0]), float(d.values[1]))
    if d.kind == "int":
        return trial.suggest_int(d.key, int(d.values[0]), int(d.values[1]))
    return trial.suggest_categorical(d.key, d.values)


class _Say:
    """One line per trial as it ends (its value, where it was pruned, or why it failed); after ``limit`` trials
    in a row that failed, the study stops (they would go on failing: a config or an environment that breaks)."""

    def __init__(self, limit: int = 3) -> None:
        self.limit, self.failed = limit, 0

    def __call__(self, study: Any, trial: Any) -> None:
        _say(trial)
        self.failed = self.failed + 1 if trial.state.name == "FAIL" else 0
        if self.failed >= self.limit:
            logger.error("entmachin tune: %d trials in a row failed; the study stops (the last: %s)", self.failed,
                         _fail_reason(trial))
            study.stop()


def _say(trial: Any) -> None:
    state = trial.state.name
    if state == "COMPLETE":
        values = ", ".join(f"{k}={v}" for k, v in trial.params.items())
        logger.info("trial %d: %.4f (%s)", trial.number, trial.value, values)
    elif state == "PRUNED":
        steps = max(trial.intermediate_values, default=0)
        logger.info("trial %d: pruned at %d environment steps", trial.number, steps)
    else:
        logger.warning("trial %d: %s (%s)", trial.number, state.lower(), _fail_reason(trial))


def _fail_reason(trial: Any) -> str:
    """Why a trial failed: the error its run raised (optuna keeps it in the log only)."""
    return trial.user_attrs.get("fail_reason") or trial.system_attrs.get("fail_reason", "")


def _work(config_data: Dict[str, Any], study_dir: str, name: str, storage: str, trials: int,
          child: bool = False) -> None:
    """One process's share of a study: trials until the study holds ``trials`` finished ones (a ``child``
    process of ``--jobs`` ends quietly at Ctrl-C; the command's own process says it)."""
    if child and not logging.getLogger().handlers:  # a spawned process: its trials' lines as the command's
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    optuna = _optuna()
    config = config_from_dict(config_data, "tune")
    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=optuna.samplers.TPESampler(seed=None), pruner=_pruner(optuna, config.tune.pruner))
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    stop = optuna.study.MaxTrialsCallback(trials, states=states)
    if sum(t.state in states for t in study.trials) >= trials:
        return
    try:
        study.optimize(_objective(config, check_space(config), study_dir), callbacks=[stop, _Say()],
                       catch=(RunError, ConfigError))
    except KeyboardInterrupt:
        if not child:
            raise


def run_study(config: RunConfig, study_dir: str, *, trials: Optional[int] = None, jobs: int = 1,
              storage: Optional[str] = None, name: Optional[str] = None) -> Any:
    """Runs (or continues) the study of ``config.tune`` in ``study_dir`` until it holds ``trials`` finished
    trials (default ``tune.trials``), with ``jobs`` processes; returns the study.

    Raises:
        ConfigError / TuneError: before any trial starts (see :func:`open_study`).
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise TuneError(f"--jobs: expected an int >= 1, got {jobs!r}")
    trials = config.tune.trials if trials is None else trials
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise TuneError(f"--trials: expected an int >= 1, got {trials!r}")
    study, storage = open_study(config, study_dir, name, storage)
    data = config_to_dict(config)
    if jobs == 1:
        _work(data, study_dir, study.study_name, storage, trials)
        return study
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_work, args=(data, study_dir, study.study_name, storage, trials, True))
               for _ in range(jobs)]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.join()
    except KeyboardInterrupt:  # each worker got the signal too: they stop their runs and mark their trials
        for worker in workers:
            worker.join()
        raise
    return study


def best_config(config: RunConfig, study: Any) -> Dict[str, Any]:
    """The best trial's config as plain data (``entmachin train`` takes it as it is): its values, the study's
    budget per trial and the config's own seed, without the ``tune`` section's space."""
    data = _without_run_dir(trial_config(config, study.best_trial.params, 0))
    data.pop("tune")
    return data
