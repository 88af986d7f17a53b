"""The run config: one nested, typed record read from YAML, checked before anything starts. Its sections
are declared in :mod:`entmachin.run.sections`; this module reads them from plain data and YAML, applies
overrides, checks the rules across sections and writes a config back out (each value is checked against its
declared type by :mod:`entmachin.run.typed`).

A run config has ten sections, one line each below. Every field's one-line description is declared with
the field and read from there by ``entmachin.run.describe.field_docs``; ``entmachin init ENV`` prints a
complete config with each description as its comment, and the config reference of the documentation
(``reference/config.md``) lists every field::

    env:         the environment (registry name, ``gymnasium:ID`` or ``package.module:Class``), its kwargs, a time limit
    model:       the network, RogueNet (``kind: rogue_net``) or an MLP (``kind: mlp``); whether the critic shares it
    frame:       the frame (PPO, A2C, DQN, DQNPer or BC) with its settings, Machin's names; n_epochs / n_updates
    rollout:     num_envs, n_steps, processes, workers (this machine or Ray), overlap, symmetries
    train:       total_steps, seed (the one seed everything derives from), device, threads, init_from, callbacks
    log:         run_dir, checkpoint / evaluation intervals and episodes, checkpoints kept, eval_opponents, best
    distributed: the collective backend and timeout of data-parallel ranks (under ``torchrun``)
    selfplay:    games of several players: the learner's seats and the pool of its past selves (Elo ratings)
    bc:          behaviour cloning (``frame.name: BC``): the dataset, the share held out, samples per update
    tune:        ``entmachin tune``: the metric, the budget per trial, the pruner and the space searched

Under ``torchrun``, ``rollout.num_envs`` and ``frame.batch_size`` are per rank. ``rollout.processes`` is 0
(``EnvList``, this process), N (``ParallelEnvList`` with N workers, or N Ray workers) or ``auto`` (chosen from
the cores and the measured costs of a step); ``rollout.workers`` is null (this machine), ``auto`` or
``ray://ADDRESS`` (environment workers on Ray); ``rollout.overlap`` has the policy act on one half of the
workers while the other half steps.

A field left out takes its default: the sections' own, and for the frame section the run
layer's (``entmachin.run.defaults``), not the frame constructors' Machin defaults. Unknown keys
raise with their dotted path, the closest allowed keys and all of them; values of the wrong type
name the field, the expected type and the value; rules across fields are checked at load time.

Example:
    >>> config = load_config("minesweeper.yaml", overrides=["frame.discount=0.995"])
    >>> config.rollout.num_envs
    32
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import yaml

from entmachin.frame.config import A2CConfig
from entmachin.run.defaults import frame_defaults, model_defaults
from entmachin.run.memory_rules import check_memory
from entmachin.run.sections import (_DERIVED, FRAMES, Q_FRAMES, BCSection, ConfigError, DistributedSection,
                                    EnvSection, FrameSection, LogSection, ModelSection, RolloutSection, RunConfig,
                                    SelfPlaySection, TrainSection, TuneSection, update_times)
from entmachin.run.typed import _convert, _dataclass_from, _did_you_mean

__all__ = ["ConfigError", "EnvSection", "ModelSection", "FrameSection", "RolloutSection", "TrainSection",
           "LogSection", "DistributedSection", "SelfPlaySection", "RunConfig", "FRAMES", "config_from_dict",
           "config_to_dict", "load_config", "parse_yaml", "apply_overrides", "update_times", "dump_yaml"]


def anneal_updates(value: Any, rows: int, total_steps: int) -> Any:
    """``frame.n_anneal_updates: auto``: the run's updates, so that the learning rates (and, with
    ``anneal_entropy``, the entropy bonus) reach 0 at ``train.total_steps``: ``ceil(total_steps / (rows x
    ranks))``, ``rows`` the environment steps one update collects and ranks torchrun's ``WORLD_SIZE``
    (every rank loads the config; each collects its own rows, and ``total_steps`` counts them all)."""
    if isinstance(value, str) and value != "auto":
        raise ConfigError(f"frame.n_anneal_updates: expected an int, null or auto, got {value!r}")
    if value != "auto":
        return value
    ranks = int(os.environ.get("WORLD_SIZE", "1") or 1)
    return max(1, math.ceil(total_steps / (rows * ranks)))


def _frame_from(value: Any, rows: int, total_steps: int) -> FrameSection:
    value = dict(value or {})
    name = value.get("name", "PPO")
    if name not in FRAMES:
        raise ConfigError(f"frame.name: expected one of {sorted(FRAMES)}, got {name!r}{_did_you_mean(name, FRAMES)}")
    config_cls = FRAMES[name]
    derived = {"seed": _DERIVED["seed"]} if name in Q_FRAMES else _DERIVED
    for key, source in derived.items():
        if key in value:
            raise ConfigError(f"frame.{key}: set by the runner from {source}; remove it from the frame section")
    own = ["name", "n_updates", "optimizer"] if name in Q_FRAMES else ["name", "n_epochs", "optimizer"]
    allowed = own + [f.name for f in dataclasses.fields(config_cls) if f.name not in derived]
    for key in value:
        if key not in allowed:
            raise ConfigError(f"frame.{key}: unknown key for {name}{_did_you_mean(key, allowed)}; allowed keys are "
                              f"{allowed}")
    if name in Q_FRAMES:
        n_updates = _convert(value.pop("n_updates", 1), int, "frame.n_updates")
        if n_updates < 1:
            raise ConfigError(f"frame.n_updates: expected an int >= 1, got {n_updates}")
        optimizer = _convert(value.pop("optimizer", "Adam"), str, "frame.optimizer")
        value.pop("name", None)
        return FrameSection(name=name, n_epochs=None, optimizer=optimizer, n_updates=n_updates,
                            settings=_dataclass_from(config_cls, value, "frame"))
    value = frame_defaults(value, rows)
    auto = value.get("n_anneal_updates") == "auto"
    if "n_anneal_updates" in value:
        value["n_anneal_updates"] = anneal_updates(value["n_anneal_updates"], rows, total_steps)
    n_epochs = _convert(value.pop("n_epochs"), Optional[int], "frame.n_epochs")
    if n_epochs is not None and n_epochs < 1:
        raise ConfigError(f"frame.n_epochs: expected an int >= 1 or null, got {n_epochs}")
    if n_epochs is not None:
        given = sorted({"actor_update_times", "critic_update_times"} & set(value))
        if given:
            raise ConfigError(f"frame.{given[0]}: give frame.n_epochs or the update times, not both (n_epochs sets "
                              f"actor_update_times and critic_update_times; set n_epochs: null to give them)")
    optimizer = _convert(value.pop("optimizer", "Adam"), str, "frame.optimizer")
    value.pop("name", None)
    settings = _dataclass_from(config_cls, {**value, "replay_size": max(rows, 1)}, "frame")
    return FrameSection(name=name, n_epochs=n_epochs, optimizer=optimizer, settings=settings, anneal_auto=auto)


_SECTIONS = {"env": EnvSection, "model": ModelSection, "rollout": RolloutSection, "train": TrainSection,
             "log": LogSection, "distributed": DistributedSection, "selfplay": SelfPlaySection, "bc": BCSection,
             "tune": TuneSection}


def config_from_dict(data: Any, source: str = "config") -> RunConfig:
    """Builds and checks a :class:`RunConfig` from plain data (as ``yaml.safe_load`` returns).

    Raises:
        ConfigError: an unknown key, a value of the wrong type, or a broken rule across fields.
    """
    if data is None:
        data = {}
    sections = allowed_sections()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with sections {sections}, got {type(data).__name__}")
    for key in data:
        if key not in sections:
            raise ConfigError(f"{key}: unknown section{_did_you_mean(key, sections)}; allowed sections are {sections}")
    name = (data.get("frame") or {}).get("name") if isinstance(data.get("frame"), Mapping) else None
    given = {**data, "model": model_defaults(data.get("model") or {}, name if isinstance(name, str) else "PPO")}
    built = {section: _dataclass_from(cls, given.get(section) or {}, section) for section, cls in _SECTIONS.items()}
    frame = _frame_from(data.get("frame"), built["bc"].rows_per_update if name == "BC" else built["rollout"].rows,
                        built["train"].total_steps)
    config = RunConfig(frame=frame, **built)
    _check_rules(config)
    return config


def _check_rules(config: RunConfig) -> None:
    check_memory(config)
    rows, frame = config.rollout.rows, config.frame
    if frame.name == "BC":
        if config.selfplay.enabled:
            raise ConfigError("selfplay.seats: behaviour cloning plays no games; use selfplay.seats: all")
        rows = config.bc.rows_per_update
        if frame.settings.batch_size > rows:
            raise ConfigError(f"frame.batch_size: {frame.settings.batch_size} is more than bc.rows_per_update ({rows})")
    elif frame.settings.batch_size > rows:
        raise ConfigError(f"frame.batch_size: {frame.settings.batch_size} is more than the {rows} rows one rollout "
                          f"stores (rollout.num_envs x rollout.n_steps = {config.rollout.num_envs} x "
                          f"{config.rollout.n_steps}); lower it or collect more rows")
    if config.rollout.processes != "auto" and config.rollout.processes > config.rollout.num_envs:
        raise ConfigError(f"rollout.processes: {config.rollout.processes} worker processes for "
                          f"{config.rollout.num_envs} environments; use at most rollout.num_envs")
    if isinstance(frame.settings, A2CConfig) and config.model.critic == "shared" and \
            frame.settings.critic_learning_rate != frame.settings.actor_learning_rate:
        raise ConfigError(
            f"frame.critic_learning_rate: with model.critic: shared the actor and critic share one network and "
            f"one optimizer at frame.actor_learning_rate ({frame.settings.actor_learning_rate}); "
            f"critic_learning_rate ({frame.settings.critic_learning_rate}) would be ignored: set it equal, or use "
            "model.critic: separate for separate optimizers"
        )
    if config.model.kind == "mlp" and frame.name not in ("PPO", "A2C"):
        why = "learns Q-values with RogueNet Q-heads" if frame.name in Q_FRAMES else "clones into a RogueNet"
        raise ConfigError(f"model.kind: mlp trains with frame.name PPO or A2C; {frame.name} {why}: use model.kind: "
                          "rogue_net")
    if config.rollout.symmetries and frame.name not in ("PPO", "A2C"):
        raise ConfigError(f"rollout.symmetries: {frame.name} does not train on symmetric images (its rows are not "
                          "rollouts' rows); use frame.name: PPO or A2C, or rollout.symmetries: []")
    if config.selfplay.enabled and frame.name in Q_FRAMES:
        raise ConfigError(f"selfplay.seats: {frame.name} does not support self-play (its replay would mix "
                          "opponents of every age); use frame.name: PPO or A2C, or selfplay.seats: all")
    if config.rollout.overlap is True and (why := overlap_refusal(config)) is not None:
        raise ConfigError(f"rollout.overlap: true, but {why}; set rollout.overlap: auto (or false)")
    if config.train.total_steps < rows:
        raise ConfigError(f"train.total_steps: {config.train.total_steps} is less than one rollout ({rows} steps)")


def overlap_refusal(config: RunConfig) -> Optional[str]:
    """Why this run's steps cannot be taken in overlapped halves (None: they can): the one rule
    ``rollout.overlap: true`` is refused by and ``auto`` falls back to sequential by."""
    rollout = config.rollout
    return ("behaviour cloning collects no rollouts" if config.frame.name == "BC" else
            "Ray workers (rollout.workers) step every row at once" if rollout.workers is not None else
            f"rollout.processes is {rollout.processes}; halves need two or more worker processes"
            if rollout.processes != "auto" and rollout.processes < 2 else
            "self-play's opponents act on the same steps as the learner" if config.selfplay.enabled else
            "the network's memory is carried over every row at once" if config.model.memory is not None else None)


def config_to_dict(config: RunConfig) -> Dict[str, Any]:
    """Plain data (YAML-ready) that :func:`config_from_dict` turns back into ``config``."""
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, float) and math.isinf(value):
            return value
        return value if not hasattr(value, "type") else str(value)  # torch.device

    out: Dict[str, Any] = {}
    for name in allowed_sections():
        section = getattr(config, name)
        if name == "frame" and section.name in Q_FRAMES:
            settings = plain(section.settings)
            settings.pop("seed")
            out[name] = {"name": section.name, "n_updates": section.n_updates, "optimizer": section.optimizer,
                         **settings}
        elif name == "frame":
            settings = plain(section.settings)
            for key in _DERIVED:
                settings.pop(key)
            if section.n_epochs is not None:
                settings.pop("actor_update_times")
                settings.pop("critic_update_times")
            if section.anneal_auto:  # over whatever budget the data gets: a changed total_steps moves it
                settings["n_anneal_updates"] = "auto"
            out[name] = {"name": section.name, "n_epochs": section.n_epochs, "optimizer": section.optimizer,
                         **settings}
        else:
            out[name] = plain(section)
    return out


# ------------------------------------------------------------------------------ YAML and overrides

def parse_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load`` with errors that name the source and line."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}, line {mark.line + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML: {problem}") from None


def apply_overrides(data: Any, overrides: Sequence[str]) -> Dict[str, Any]:
    """A copy of ``data`` with each ``dotted.path=value`` set (values parsed as YAML scalars)."""
    out: Dict[str, Any] = _deep_copy(data or {})
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"--set {item!r}: expected dotted.path=value, e.g. frame.discount=0.995")
        value = parse_yaml(raw, f"--set {key}") if raw.strip() else None
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[: i + 1])} is {child!r}, not a section")
            node = child
        node[parts[-1]] = value
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def load_config(path: str, overrides: Sequence[str] = ()) -> RunConfig:
    """Reads a YAML run config, applies ``--set`` overrides and checks it.

    Raises:
        FileNotFoundError / OSError: the file cannot be read.
        ConfigError: malformed YAML (with its line), unknown keys, bad values or rules.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return config_from_dict(apply_overrides(parse_yaml(text, path), overrides), path)


def dump_yaml(data: Mapping[str, Any]) -> str:
    """YAML text of plain config data, sections in their usual order, lists inline."""
    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
    return yaml.dump(dict(data), Dumper=Dumper, sort_keys=False, default_flow_style=False)


def allowed_sections() -> List[str]:
    return [f.name for f in dataclasses.fields(RunConfig)]
