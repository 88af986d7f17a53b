"""The run config: one nested, typed record read from YAML, checked before anything starts.

A run config has eight sections (see :func:`describe` for every field and its meaning)::

    env:      which environment (registry name, ``gymnasium:ID`` or ``package.module:Class``), its kwargs, a time
              limit
    model:    the network: RogueNet (``kind: rogue_net``, its config) or a dense MLP over global features
              (``kind: mlp``), and whether the critic shares the actor's network
    frame:    the frame (PPO / A2C) with its own config's fields, Machin's names, plus n_epochs
    rollout:  num_envs, n_steps, processes (0: EnvList, N: ParallelEnvList with N workers), workers
              (null: this machine; ``auto`` or ``ray://ADDRESS``: environment workers on Ray), overlap
              (the policy acting on one half of the workers while the other half steps)
    train:    total_steps, seed (the one seed everything derives from), device, threads
    log:      run_dir, checkpoint / evaluation intervals, evaluation episodes
    distributed: the collective backend and timeout of data-parallel ranks (under ``torchrun``,
              where ``rollout.num_envs`` and ``frame.batch_size`` are per rank)
    selfplay: games of several players: the seats the learner plays, and the pool of its past
              selves (snapshots, Elo ratings) that plays the others (``entmachin.run.selfplay``)

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
import difflib
import math
import os
import re
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import yaml

from entmachin.frame.config import A2CConfig, BCConfig, DQNConfig, DQNPerConfig, PPOConfig
from entmachin.model.config import RogueNetConfig
from entmachin.run.defaults import frame_defaults
from entmachin.settings import documented, setting

__all__ = ["ConfigError", "EnvSection", "ModelSection", "FrameSection", "RolloutSection", "TrainSection",
           "LogSection", "DistributedSection", "SelfPlaySection", "RunConfig", "FRAMES", "config_from_dict",
           "config_to_dict", "load_config", "parse_yaml", "apply_overrides", "update_times", "dump_yaml"]

FRAMES = {"PPO": PPOConfig, "A2C": A2CConfig, "DQN": DQNConfig, "DQNPer": DQNPerConfig, "BC": BCConfig}
Q_FRAMES = ("DQN", "DQNPer")  # off-policy: their replay_size is the config's, n_updates replaces n_epochs
# Frame settings the runner derives, so a config never states them twice.
_DERIVED = {"seed": "train.seed", "replay_size": "rollout.num_envs x rollout.n_steps"}


class ConfigError(ValueError):
    """A run config that cannot be used; the message starts with the dotted path of the field."""


@documented
@dataclass(frozen=True, kw_only=True)
class EnvSection:
    name: str = setting("MineSweeper", "a name from `entmachin envs`, 'gymnasium:ID' for a registered gymnasium "
                                       "environment, or 'package.module:Class' for your own")
    kwargs: Dict[str, Any] = setting(
        default_factory=dict,
        doc="keyword arguments of the environment's constructor (for gymnasium:ID, of gymnasium.make)")
    max_episode_steps: Optional[int] = setting(
        None, "episodes are cut (truncated, bootstrapped) after this many steps; null: never")
    check_finite: bool = setting(
        True, "stop with an error naming the feature when an observation or reward is NaN or infinite", execution=True)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name: expected a registry name, 'gymnasium:ID' or 'package.module:Class', got ''")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps: expected an int >= 1 or null, got {self.max_episode_steps}")


#: The model section's fields that only one kind of network reads; the other kind refuses them.
ROGUE_NET_ONLY = ("d_model", "n_layer", "n_head", "d_qk", "embd_pdrop", "resid_pdrop", "attn_pdrop", "pooling",
                  "relpos_encoding", "translation", "q_head", "compile")
MLP_ONLY = ("d_hidden", "activation", "normalize_inputs")


@documented
@dataclass(frozen=True, kw_only=True)
class ModelSection(RogueNetConfig):
    """The network: RogueNet's config (``kind: rogue_net``) or a dense MLP's (``kind: mlp``, for
    environments with global features and global actions only), plus where the critic lives (one
    layer and a separate critic unless told: see entmachin.run.defaults). A field of the other kind
    of network is refused unless it keeps its default."""

    n_layer: int = 1  # described by RogueNetConfig; only the default differs
    critic: Literal["separate", "shared"] = setting(
        "separate", "separate: the critic is a network of its own; shared: it shares the actor's network")
    q_head: Literal["plain", "dueling"] = setting(
        "plain", "DQN frames: plain Q-heads, or dueling (value + advantage streams)")
    kind: Literal["rogue_net", "mlp"] = setting(
        "rogue_net", "rogue_net: the entity transformer; mlp: an MLP over the global features (no entity types, "
                     "global actions only), as for gymnasium environments", before="rogue_net")
    d_hidden: Tuple[int, ...] = setting((64, 64), "mlp: widths of the hidden layers")
    activation: Literal["tanh", "relu", "gelu"] = setting("tanh", "mlp: activation of the hidden layers")
    normalize_inputs: bool = setting(
        True, "mlp: normalise the features with running statistics (RogueNet always does; input_clip clips both)")
    compile: Union[bool, Literal["auto"]] = setting(  # type: ignore[assignment]
        "auto", "run RogueNet's per-token arithmetic compiled (torch.compile): auto compiles where it was measured to "
                "pay and a working compiler is found (the log says which it chose and why); true; false. Checkpoints "
                "are the same either way, and --resume may change it", execution=True, before=False)

    COMPILE_VALUES: ClassVar[Tuple[Any, ...]] = (True, False, "auto")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.d_hidden or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in self.d_hidden):
            raise ValueError(f"d_hidden: expected a list of positive ints, got {list(self.d_hidden)}")
        unused = MLP_ONLY if self.kind == "rogue_net" else ROGUE_NET_ONLY
        defaults = {f.name: f.default for f in dataclasses.fields(ModelSection)}
        for name in unused:
            if getattr(self, name) != defaults[name]:
                raise ValueError(f"{name}: a setting of kind: {'mlp' if self.kind == 'rogue_net' else 'rogue_net'}, "
                                 f"which kind: {self.kind} does not read; remove it (or set model.kind)")

    def net_config(self, compile: bool = False) -> RogueNetConfig:
        """RogueNet's config; ``compile`` is what ``model.compile`` resolved to (eager unless told)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(RogueNetConfig)}
        return RogueNetConfig(**{**values, "compile": compile})

    def mlp_options(self) -> Dict[str, Any]:
        """``DenseNet``'s keyword arguments (``kind: mlp``)."""
        return {"d_hidden": self.d_hidden, "activation": self.activation, "normalize_inputs": self.normalize_inputs,
                "clip": self.input_clip, "continuous": self.continuous}


@documented
@dataclass(frozen=True, kw_only=True)
class FrameSection:
    """The frame: its class, its own config record, the optimizer, and ``n_epochs``.

    With ``n_epochs`` set the runner turns it into ``actor_update_times`` and
    ``critic_update_times`` (``n_epochs x ceil(rollout rows / batch_size)`` minibatch steps);
    with ``n_epochs: null`` the config's own update times apply. The DQN frames take
    ``n_updates`` instead: ``update()`` calls (one sampled batch each) per rollout.
    """

    name: Literal["PPO", "A2C", "DQN", "DQNPer", "BC"] = setting(
        "PPO", "PPO, A2C, DQN, DQNPer, or BC (behaviour cloning from bc.data)")
    n_epochs: Optional[int] = setting(
        4, "passes over each rollout; sets actor/critic_update_times (null: give those instead)")
    optimizer: str = setting("Adam", "a torch.optim class name or import path")
    settings: Union[A2CConfig, DQNConfig] = setting(
        default_factory=PPOConfig, doc="the frame's own settings (their fields sit beside these in YAML)")
    n_updates: int = setting(1, "DQN / DQNPer: update() calls (one sampled batch each) per rollout")


@documented
@dataclass(frozen=True, kw_only=True)
class RolloutSection:
    """Environments per rank; ``workers`` puts their workers on Ray (``processes`` of them, at least 1)."""

    num_envs: int = setting(32, "environments stepped together (per rank under torchrun)")
    n_steps: int = setting(16, "steps per environment in each rollout (one update per rollout)")
    processes: Union[int, Literal["auto"]] = setting(  # type: ignore[assignment]
        "auto", "0: step in this process (EnvList); N: N worker processes (ParallelEnvList, or Ray workers); auto: "
                "chosen from the cores and the measured costs of a step (the log says what and why)", execution=True)
    workers: Optional[str] = setting(
        None, "null: workers on this machine; auto: a local Ray; ray://ADDRESS: a Ray cluster (entmachin[ray])",
        execution=True)
    overlap: Union[bool, Literal["auto"]] = setting(  # type: ignore[assignment]
        "auto", "the policy acts on one half of the worker processes while the other half steps (same rows; a seed's "
                "sampled actions differ): auto where it pays (the log says which it chose and why); true; false",
        execution=True, before=False)
    symmetries: Tuple[str, ...] = setting(
        (), "the environment's symmetries (its symmetries() names, e.g. [mirror]) whose images of every stored row "
            "are trained on too (PPO, A2C): more rows per environment step", before=())

    def __post_init__(self) -> None:
        if len(set(self.symmetries)) != len(self.symmetries):
            raise ValueError(f"symmetries: {list(self.symmetries)} names a symmetry twice")
        for name, low in (("num_envs", 1), ("n_steps", 1), ("processes", 0)):
            if getattr(self, name) != "auto" and getattr(self, name) < low:
                raise ValueError(f"{name}: expected an int >= {low}, got {getattr(self, name)}")
        if self.workers is not None and self.workers != "auto" and not re.match(r"^ray://\S+$", self.workers):
            raise ValueError(f"workers: expected null, 'auto' (a local Ray) or 'ray://ADDRESS', got {self.workers!r}")

    @property
    def rows(self) -> int:
        """Environment steps per rollout (per rank): ``num_envs * n_steps``."""
        return self.num_envs * self.n_steps

    @property
    def images(self) -> int:
        """Rows stored per seat's step: the row and its image under each of ``symmetries``."""
        return 1 + len(self.symmetries)


#: entmachin's callbacks a config may name without their module (``train.callbacks``)
BUILTIN_CALLBACKS = {"StopWhen": "entmachin.run.callbacks.stop:StopWhen"}


def parse_callback(spec: Any, where: str) -> Tuple[str, Dict[str, Any]]:
    """``(pkg.mod:Class, kwargs)`` of one ``train.callbacks`` entry (``pkg.mod:Class``, ``{class: ..., kwargs:
    {...}}`` or a name of :data:`BUILTIN_CALLBACKS`), refused with ``where`` if malformed."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"class", "kwargs"})
        if unknown or "class" not in spec:
            raise ValueError(f"{where}: expected keys class and kwargs, got {sorted(spec)}")
        target, kwargs = spec["class"], spec.get("kwargs") or {}
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise ValueError(f"{where}.kwargs: expected a mapping of keyword arguments, got {kwargs!r}")
    else:
        target, kwargs = spec, {}
    module, _, attr = target.partition(":") if isinstance(target, str) else ("", "", "")
    reference = bool(module) and bool(attr) and all(p.isidentifier() for p in (*module.split("."), *attr.split(".")))
    if not isinstance(target, str) or (target not in BUILTIN_CALLBACKS and not reference):
        raise ValueError(f"{where}: expected pkg.mod:Class or one of entmachin's {sorted(BUILTIN_CALLBACKS)}, "
                         f"got {target!r}")
    return BUILTIN_CALLBACKS.get(target, target), dict(kwargs)


@documented
@dataclass(frozen=True, kw_only=True)
class TrainSection:
    total_steps: int = setting(100_000, "environment steps to train for")
    seed: int = setting(0, "the one seed: torch's, the frame's, the environments' and evaluation's derive from it")
    device: str = setting("cpu", "device of the networks (cpu, cuda, cuda:1, ...)", execution=True)
    threads: int = setting(1, "torch CPU threads; 1 makes a seed's run repeat exactly", execution=True)
    init_from: Optional[str] = setting(
        None, "a run directory: start from its latest checkpoint's networks (not its optimisers or counters)")
    callbacks: Tuple[Union[str, Dict[str, Any]], ...] = setting(
        (), "the user's callbacks (entmachin.run.callbacks): pkg.mod:Class, {class: pkg.mod:Class, kwargs: {...}}, "
            "or entmachin's by name (StopWhen)", before=())

    def __post_init__(self) -> None:
        for name, low in (("total_steps", 1), ("seed", 0), ("threads", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"{name}: expected an int >= {low}, got {getattr(self, name)}")
        for i, spec in enumerate(self.callbacks):
            parse_callback(spec, f"callbacks[{i}]")
        import torch

        try:
            torch.device(self.device)
        except (RuntimeError, TypeError):
            raise ValueError(f"device: expected a torch device such as 'cpu' or 'cuda:0', got {self.device!r}") from None


@documented
@dataclass(frozen=True, kw_only=True)
class LogSection:
    run_dir: Optional[str] = setting(None, "where the run lives; null: runs/<env>-<date>-<time>", execution=True)
    checkpoint_interval: int = setting(
        50_000, "environment steps between checkpoints (one is also written at the end)", execution=True)
    eval_interval: int = setting(
        50_000, "environment steps between evaluations (one also runs at the end)", execution=True)
    eval_episodes: int = setting(100, "episodes per evaluation")
    eval_deterministic: bool = setting(False, "evaluate the most likely actions instead of sampling")
    eval_max_steps: Optional[int] = setting(
        None, "an evaluation episode still running after this many steps counts as it stands; "
              "null: env.max_episode_steps, or 1000 without one", before=None)
    keep_checkpoints: Optional[int] = setting(
        5, "the latest checkpoints kept (older ones are deleted; the final one is the latest); null: keep all",
        execution=True)
    eval_opponents: Tuple[str, ...] = setting(
        (), "games of several players: at each evaluation, eval_episodes games against each (random, scripted, "
            "a run directory or pkg.mod:function); eval/win_rate/<opponent> in tensorboard", before=())
    best: Optional[str] = setting(
        None, "keep checkpoints/best/, the networks of the evaluation with the highest figure so far: return (its "
              "mean return, one player) or an opponent of eval_opponents (the win rate against it); null: none",
        execution=True)

    def __post_init__(self) -> None:
        for name in ("checkpoint_interval", "eval_interval", "eval_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {getattr(self, name)}")
        for name in ("eval_max_steps", "keep_checkpoints"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an int >= 1 or null, got {getattr(self, name)}")
        if self.best not in (None, "return", *self.eval_opponents):
            raise ValueError(f"best: {self.best!r} is not one of eval_opponents {list(self.eval_opponents)}; expected "
                             "null, return or one of them (a figure the run's evaluations measure)")


@documented
@dataclass(frozen=True, kw_only=True)
class DistributedSection:
    """Data-parallel ranks started by ``torchrun``: ``auto`` picks gloo on CPU and nccl on CUDA;
    ``timeout`` is how long (seconds) a rank waits for the others before stopping with an error."""

    backend: Literal["auto", "gloo", "nccl"] = setting(
        "auto", "auto: gloo on CPU, nccl on CUDA; or gloo / nccl", execution=True)
    timeout: float = setting(
        300.0, "seconds a rank waits for the others before stopping with an error naming the failed rank",
        execution=True)

    def __post_init__(self) -> None:
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise ValueError(f"timeout: expected a number of seconds > 0, got {self.timeout}")


SAMPLINGS = ("uniform", "pfsp")  # selfplay.sampling
SNAPSHOT_ACTIONS = ("sample", "most_likely")  # selfplay.snapshot_actions


@documented
@dataclass(frozen=True, kw_only=True)
class SelfPlaySection:
    """Games of several players: with ``seats`` other than ``all`` the learner plays those seats and
    frozen snapshots of its past selves (or, with probability ``play_against_latest``, its current
    self, whose rows are trained on too) play the others; a game keeps its opponents until it ends."""

    seats: Union[str, Tuple[str, ...]] = setting(
        "all", "all: the learner plays every seat (no pool); random: one random seat per game; or a list of seats",
        before="all")
    save_steps: int = setting(20_000, "environment steps between snapshots of the learner put in the pool")
    window: int = setting(10, "the pool holds the latest this many snapshots")
    play_against_latest: float = setting(
        0.5, "chance that a new game's opponents are the current policy instead of a snapshot in play")
    swap_steps: int = setting(
        2_000, "environment steps between draws of the snapshots in play (games in progress keep theirs)")
    max_snapshots: int = setting(2, "snapshots in play at once (M); each acts in one batched forward pass per step")
    sampling: str = setting(
        "uniform", "how the snapshots in play are drawn from the pool: uniform; or pfsp, prioritised fictitious "
        "self-play: weight (1 - p)^2, p the learner's expected score against the snapshot from their Elo ratings",
        before="uniform")
    snapshot_actions: str = setting(
        "sample", "how the snapshots in play choose: sample, as the learner does; or most_likely, each actor's most "
        "likely allowed choice (a sharper opponent, which takes the wins it sees)", before="sample")
    elo_initial: float = setting(
        1200.0, "the learner's Elo rating at the start (a snapshot starts at the learner's rating when taken)")
    elo_k: float = setting(16.0, "Elo K-factor: the most a rating moves after one game")

    def __post_init__(self) -> None:
        if isinstance(self.seats, str) and self.seats not in ("all", "random"):
            raise ValueError(f"seats: expected 'all', 'random' or a list of seat names, got {self.seats!r}")
        if not isinstance(self.seats, str) and (not self.seats or len(set(self.seats)) != len(self.seats)):
            raise ValueError(f"seats: expected a list of distinct seat names, got {list(self.seats)!r}")
        for name in ("save_steps", "window", "swap_steps", "max_snapshots"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {getattr(self, name)}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling: expected one of {list(SAMPLINGS)}, got {self.sampling!r}")
        if self.snapshot_actions not in SNAPSHOT_ACTIONS:
            raise ValueError(f"snapshot_actions: expected one of {list(SNAPSHOT_ACTIONS)}, "
                             f"got {self.snapshot_actions!r}")
        if not 0.0 <= self.play_against_latest <= 1.0:
            raise ValueError(f"play_against_latest: expected a probability in [0, 1], got {self.play_against_latest}")
        if not (self.elo_k > 0 and math.isfinite(self.elo_k) and math.isfinite(self.elo_initial)):
            raise ValueError(f"elo_k: expected a finite number > 0 (and a finite elo_initial), got {self.elo_k}")

    @property
    def enabled(self) -> bool:
        """Whether a pool plays some seats (``seats`` is not ``all``)."""
        return self.seats != "all"


@documented
@dataclass(frozen=True, kw_only=True)
class BCSection:
    """Behaviour cloning (``frame.name: BC``): the dataset (``entmachin record``) it learns from.
    Progress counts samples (dataset rows trained on) where other frames count environment steps."""

    data: Optional[str] = setting(None, "a dataset directory written by entmachin record (frame.name: BC needs one)")
    validation: float = setting(
        0.1, "share of the dataset's episodes held out: validation loss and action accuracy, never trained on")
    rows_per_update: int = setting(4096, "samples per update (what a rollout is to the other frames)")

    def __post_init__(self) -> None:
        if not 0.0 <= self.validation < 1.0:
            raise ValueError(f"validation: expected a share in [0, 1), got {self.validation}")
        if self.rows_per_update < 1:
            raise ValueError(f"rows_per_update: expected an int >= 1, got {self.rows_per_update}")


@documented
@dataclass(frozen=True, kw_only=True)
class RunConfig:
    env: EnvSection = setting(default_factory=EnvSection, doc="the environment")
    model: ModelSection = setting(
        default_factory=ModelSection, doc="the network (actor): RogueNet, the entity transformer, or an MLP; and its "
                                          "critic")
    frame: FrameSection = setting(default_factory=FrameSection, doc="the algorithm (Machin's keyword names)")
    rollout: RolloutSection = setting(default_factory=RolloutSection, doc="how experience is collected")
    train: TrainSection = setting(default_factory=TrainSection, doc="the training run")
    log: LogSection = setting(default_factory=LogSection, doc="the run directory and what goes in it")
    distributed: DistributedSection = setting(
        default_factory=DistributedSection, doc="data-parallel ranks under torchrun (one process: unused)")
    selfplay: SelfPlaySection = setting(
        default_factory=SelfPlaySection,
        doc="games of several players: the learner's seats and its pool of past selves")
    bc: BCSection = setting(default_factory=BCSection, doc="behaviour cloning: the dataset (frame.name: BC)")

    @property
    def rows_per_update(self) -> int:
        """Rows one update trains on: a rollout's (``rollout.rows``), or ``bc.rows_per_update``."""
        return self.bc.rows_per_update if self.frame.name == "BC" else self.rollout.rows

    def rows_per_update_source(self) -> str:
        """Where :attr:`rows_per_update` comes from, for messages: ``"bc.rows_per_update"`` or
        ``"rollout.num_envs 32 x rollout.n_steps 16"``."""
        if self.frame.name == "BC":
            return "bc.rows_per_update"
        return f"rollout.num_envs {self.rollout.num_envs} x rollout.n_steps {self.rollout.n_steps}"


def update_times(config: RunConfig, rows: Optional[int] = None) -> Tuple[int, int]:
    """``(actor_update_times, critic_update_times)`` the frame will run per update of ``rows`` rows
    (default ``rollout.rows``; a game of several players stores one row per seat)."""
    frame = config.frame
    if frame.n_epochs is None:
        return frame.settings.actor_update_times, frame.settings.critic_update_times
    steps = frame.n_epochs * math.ceil((rows or config.rows_per_update) / frame.settings.batch_size)
    return steps, steps


# ------------------------------------------------------------------------------ typed loading

def _describe_type(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union:
        return " or ".join("null" if a is type(None) else _describe_type(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (tuple, Tuple):
        return f"a list of {_describe_type(args[0])}" if len(args) == 2 and args[1] is Ellipsis else \
            f"a list of {len(args)} values"
    if origin in (dict, Dict, Mapping):
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} fields"
    return {int: "an int", float: "a number", bool: "true or false", str: "a string"}.get(tp, getattr(tp, "__name__", str(tp)))


def _convert(value: Any, tp: Any, path: str) -> Any:
    """``value`` checked against the annotation ``tp`` (lists become tuples where declared)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    bad = ConfigError(f"{path}: expected {_describe_type(tp)}, got {value!r}")
    if tp is Any:
        return value
    if origin is Union:
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, path)
            except ConfigError as e:
                if dataclasses.is_dataclass(arg) and isinstance(value, Mapping):
                    raise e
        raise bad
    if origin is Literal:
        if value in args and type(value) in {type(a) for a in args}:
            return value
        raise bad
    if origin in (tuple, Tuple):
        if not isinstance(value, (list, tuple)):
            raise bad
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise bad
        return tuple(_convert(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin in (dict, Dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise bad
        return dict(value)
    if dataclasses.is_dataclass(tp):
        return _dataclass_from(tp, value, path)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise bad
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise bad
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise bad
    return value


def _did_you_mean(word: Any, options: Sequence[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``options`` to ``word``, or ``""``."""
    lowered = {str(o).lower(): o for o in options}
    text = str(word).lower()
    close = [lowered[c] for c in difflib.get_close_matches(text, list(lowered), n=2, cutoff=0.6)]
    close = close or [o for low, o in lowered.items() if len(low) >= 3 and (text.startswith(low) or
                                                                         low.startswith(text) and len(text) >= 3)][:2]
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _check_keys(cls: type, value: Any, path: str, extra: Sequence[str] = ()) -> None:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: expected a mapping of {cls.__name__} fields, got {value!r}")
    allowed = [f.name for f in dataclasses.fields(cls)] + list(extra)
    for key in value:
        if key not in allowed:
            raise ConfigError(f"{path}.{key}: unknown key{_did_you_mean(key, allowed)}; allowed keys are {allowed}")


def _dataclass_from(cls: type, value: Any, path: str) -> Any:
    _check_keys(cls, value, path)
    hints = typing.get_type_hints(cls)
    kwargs = {k: _convert(v, hints[k], f"{path}.{k}") for k, v in value.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        message = str(e)
        # "RogueNetConfig.n_layer: ...", "PPO: batch_size must ...", "n_steps: ..." -> "<path>.<field>..."
        names = {f.name for f in dataclasses.fields(cls)}
        for pattern in (r"^(\w+)(?=[: [])", r"^\w+[.:] ?(\w+)(?=[: ])"):
            match = re.match(pattern, message)
            if match and match.group(1) in names:
                raise ConfigError(f"{path}.{message[match.start(1):]}") from None
        raise ConfigError(f"{path}: {message}") from None


def _anneal_updates(value: Any, rows: int, total_steps: int) -> Any:
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
    if "n_anneal_updates" in value:
        value["n_anneal_updates"] = _anneal_updates(value["n_anneal_updates"], rows, total_steps)
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
    return FrameSection(name=name, n_epochs=n_epochs, optimizer=optimizer, settings=settings)


_SECTIONS = {"env": EnvSection, "model": ModelSection, "rollout": RolloutSection, "train": TrainSection,
             "log": LogSection, "distributed": DistributedSection, "selfplay": SelfPlaySection, "bc": BCSection}


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
    built = {name: _dataclass_from(cls, data.get(name) or {}, name) for name, cls in _SECTIONS.items()}
    name = (data.get("frame") or {}).get("name") if isinstance(data.get("frame"), Mapping) else None
    frame = _frame_from(data.get("frame"), built["bc"].rows_per_update if name == "BC" else built["rollout"].rows,
                        built["train"].total_steps)
    config = RunConfig(frame=frame, **built)
    _check_rules(config)
    return config


def _check_rules(config: RunConfig) -> None:
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
            "self-play's opponents act on the same steps as the learner" if config.selfplay.enabled else None)


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
