"""What a run config is: its sections, one frozen dataclass each, every field declared with its
default, bounds and meaning (``setting(...)``); the frames a config can name; the rules a section
checks on its own. Reading YAML into them, overrides and the checks across sections are
:mod:`entmachin.run.config`'s (which also exports these names)."""
from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Literal, Optional, Tuple, Union

from entmachin.frame.config import A2CConfig, BCConfig, DQNConfig, DQNPerConfig, PPOConfig
from entmachin.model.config import RogueNetConfig
from entmachin.run.tune.section import TuneSection
from entmachin.settings import documented, setting

__all__ = ["ConfigError", "EnvSection", "ModelSection", "FrameSection", "RolloutSection", "TrainSection",
           "LogSection", "DistributedSection", "SelfPlaySection", "BCSection", "RunConfig", "FRAMES", "Q_FRAMES",
           "ROGUE_NET_ONLY", "MLP_ONLY", "SAMPLINGS", "SNAPSHOT_ACTIONS", "BUILTIN_CALLBACKS", "parse_callback",
           "update_times"]

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
                  "relpos_encoding", "translation", "q_head", "compile", "memory")
MLP_ONLY = ("d_hidden", "activation", "normalize_inputs")


@documented
@dataclass(frozen=True, kw_only=True)
class ModelSection(RogueNetConfig):
    """The network: RogueNet's config (``kind: rogue_net``) or a dense MLP's (``kind: mlp``, for
    environments with global features and global actions only), plus where the critic lives (one
    layer, two for PPO, and a separate critic unless told: see entmachin.run.defaults). A field of the
    other kind of network is refused unless it keeps its default."""

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
    anneal_auto: bool = setting(False, "set by the loader: the config gave n_anneal_updates: auto (settings hold "
                                       "the count it resolved to; the config is written back with auto)")


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
    rows_per_update: int = setting(4096, "samples per update (what a rollout is to the other frames; with model.memory "
                                         "whole episodes, at least this many samples)")

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
    tune: TuneSection = setting(default_factory=TuneSection,
                                doc="entmachin tune: the metric, the budget per trial and the space searched")

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
