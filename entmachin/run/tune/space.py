"""The searched keys of a ``tune:`` section, checked against the config's own declarations before any trial,
and a trial's values turned into the config it runs."""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Mapping, NamedTuple, Sequence

from entmachin.run.config import config_from_dict, config_to_dict
from entmachin.run.sections import ConfigError, RunConfig
from entmachin.run.tune.section import SPACE_KINDS
from entmachin.run.typed import _did_you_mean

__all__ = ["Dimension", "check_space", "trial_config", "metric_of", "check_metric"]

#: Keys a study cannot search: they say what a trial is, not how it learns.
NOT_SEARCHED = ("train.seed", "train.total_steps", "env.name")


class Dimension(NamedTuple):
    """One searched key: its dotted ``key``, its ``kind`` (of ``SPACE_KINDS``) and its ``values`` (``[low, high]``
    or the choices)."""

    key: str
    kind: str
    values: List[Any]


def _keys(data: Mapping[str, Any], prefix: str = "") -> List[str]:
    """Every dotted key of plain config data whose value is not a section."""
    out = []
    for name, value in data.items():
        path = f"{prefix}{name}"
        if isinstance(value, Mapping) and prefix == "":
            out.extend(_keys(value, path + "."))
        else:
            out.append(path)
    return out


def _with(data: Mapping[str, Any], key: str, value: Any) -> Dict[str, Any]:
    """Plain config data with ``key`` (dotted: section.field) set to ``value``. With ``model.critic: shared``
    the actor and the critic train with one optimizer, so ``frame.actor_learning_rate`` sets the critic's rate
    too (the config refuses two rates there)."""
    section, field = key.split(".", 1)
    data = {**data, section: {**data.get(section, {}), field: value}}
    if key == "frame.actor_learning_rate" and data.get("model", {}).get("critic") == "shared" \
            and "critic_learning_rate" in data["frame"]:
        data["frame"] = {**data["frame"], "critic_learning_rate": value}
    return data


def check_space(config: RunConfig) -> List[Dimension]:
    """The searched keys of ``config.tune.space``, each checked: a key of the config (not one that says what a
    trial is), one kind with a well-formed range or choices, and each end of a range and every choice accepted by
    the config's own checks.

    Raises:
        ConfigError: naming ``tune.space.<key>`` and what is wrong (an unknown key with the closest known ones).
    """
    space = config.tune.space
    data = config_to_dict(config)
    known = [k for k in _keys(data) if not k.startswith("tune.")]
    out = []
    for key, spec in space.items():
        where = f"tune.space.{key}"
        if key in NOT_SEARCHED:
            raise ConfigError(f"{where}: {key} says what a trial is, not how it learns; it cannot be searched "
                              "(tune.steps and tune.seeds set a trial's budget and seeds)")
        if key not in known:
            raise ConfigError(f"{where}: not a key of this config{_did_you_mean(key, known)}")
        if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in SPACE_KINDS:
            raise ConfigError(f"{where}: expected one of {{log_uniform: [low, high]}}, {{uniform: [low, high]}}, "
                              f"{{int: [low, high]}} or {{choice: [a, b, ...]}}, got {spec!r}")
        kind, values = next(iter(spec.items()))
        values = list(values) if isinstance(values, (list, tuple)) else values
        _check_values(where, kind, values)
        for probe in values:  # the ends of a range, or every choice
            try:
                config_from_dict(_with(data, key, probe), "tune.space")
            except ConfigError as e:
                raise ConfigError(f"{where}: {kind} value {probe!r} is refused by the config: {e}") from None
        out.append(Dimension(key, kind, values))
    return out


def _check_values(where: str, kind: str, values: Any) -> None:
    if kind == "choice":
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: choice needs a non-empty list of values, got {values!r}")
        return
    if not isinstance(values, list) or len(values) != 2:
        raise ConfigError(f"{where}: {kind} needs [low, high], got {values!r}")
    low, high = values
    number = numbers.Integral if kind == "int" else numbers.Real
    for end in values:
        if isinstance(end, bool) or not isinstance(end, number) or not math.isfinite(end):
            raise ConfigError(f"{where}: {kind} needs {'integers' if kind == 'int' else 'finite numbers'} "
                              f"[low, high], got {values!r}")
    if low > high or (kind != "int" and low == high):
        raise ConfigError(f"{where}: {kind} range [{low}, {high}] is empty; give low < high")
    if kind == "log_uniform" and low <= 0:
        raise ConfigError(f"{where}: log_uniform needs 0 < low < high, got {values!r}")


def trial_config(config: RunConfig, values: Mapping[str, Any], seed: int) -> RunConfig:
    """The config one seed of a trial runs: ``values`` (key -> value) set, ``tune.steps`` as
    ``train.total_steps`` and the seed ``train.seed + seed``."""
    data = config_to_dict(config)
    for key, value in values.items():
        data = _with(data, key, value)
    train = dict(data["train"])
    if config.tune.steps is not None:
        train["total_steps"] = config.tune.steps
    train["seed"] = (config.train.seed or 0) + seed
    return config_from_dict({**data, "train": train}, "tune trial")


def check_metric(config: RunConfig) -> None:
    """``tune.metric`` is a figure the runs' evaluations write.

    Raises:
        ConfigError: naming the metric and the figures the runs write.
    """
    metric, opponents = config.tune.metric, list(config.log.eval_opponents)
    if metric != "return" and metric not in opponents:
        named = (f"return or an opponent of log.eval_opponents ({', '.join(opponents)})" if opponents else
                 "return (log.eval_opponents names no opponent whose win rate a trial could score)")
        raise ConfigError(f"tune.metric: {metric!r} is not a figure this config's evaluations write; expected "
                          f"{named}{_did_you_mean(metric, ['return', *opponents])}")


def metric_of(record: Mapping[str, Any], metric: str) -> float:
    """An evaluation record's figure for ``tune.metric`` (nan where it lacks it)."""
    if metric == "return":
        return float(record.get("mean", math.nan))
    return float(record.get("win_rate", {}).get(metric, math.nan))


def describe(values: Mapping[str, Any], keys: Sequence[str]) -> str:
    """A trial's values in the space's order, for tables."""
    return ", ".join(f"{key}={values[key]:.4g}" if isinstance(values.get(key), float) else f"{key}={values.get(key)}"
                     for key in keys)
