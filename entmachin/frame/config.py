"""The frames' settings, each declared once with its default, description and range; Machin-style dicts.

``A2CConfig`` / ``PPOConfig`` / ``DQNConfig`` hold the frames' scalar settings (Machin 0.4.2's
keywords plus entmachin's own). A field declares everything about itself: ``setting(default,
"description", kind=..., low=...)``; the record checks every field by its declared kind and range
when it is built (and its rules across fields in ``_check_rules``), and the frames' constructors,
``help()`` and ``entmachin init`` read the same declarations. ``generate_config`` /
``init_from_config`` turn a frame into a plain dict and back, Machin's way: ``{"frame": "PPO",
"frame_config": {...}}`` with models, optimizer, criterion and scheduler named by import path.
Unlike Machin, values the user gives override the defaults, and unknown keys raise.
"""
from __future__ import annotations

import dataclasses
import importlib
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Literal, Optional, Tuple, Union

import torch

from entmachin.ragged.device import check_device
from entmachin.settings import setting

__all__ = ["A2CConfig", "BCConfig", "PPOConfig", "DQNConfig", "DQNPerConfig", "SettingsChecks", "generate_config",
           "frame_kwargs_from_config", "resolve"]


class SettingsChecks:
    """Checks each field of a settings record by the ``kind`` (and range) its ``setting`` declares:
    ``int`` (``low``), ``real`` (``low``, ``high``, ``open_low``, ``allow_inf``), ``bool``, ``str``,
    ``choice`` (``choices``) or ``device``; ``optional=True`` also accepts None."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            rule = dict(field.metadata.get("rule", {}))
            value = getattr(self, field.name)
            if rule and not (rule.get("optional") and value is None):
                getattr(self, "_" + rule.pop("kind"))(field.name, value, **rule)
        self._check_rules()

    def _check_rules(self) -> None:
        """Rules across fields (none by default)."""

    def _where(self, name: str) -> str:
        return f"{type(self).__name__[:-6]}: {name}"

    def _int(self, name: str, value: Any, low: int, optional: bool = False) -> None:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"{self._where(name)} must be an int >= {low}{' or None' * optional}, got {value!r}")
        if value < low:
            raise ValueError(f"{self._where(name)} must be >= {low}, got {value!r}")

    def _real(self, name: str, value: Any, low: float, high: float = math.inf, open_low: bool = False,
              allow_inf: bool = False, optional: bool = False) -> None:
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or math.isnan(value) or (
                math.isinf(value) and not allow_inf):
            kind = "a real number" if allow_inf else "a finite real number"
            raise TypeError(f"{self._where(name)} must be {kind}{' or None' * optional}, got {value!r}")
        if (value <= low if open_low else value < low) or value > high:
            raise ValueError(f"{self._where(name)} must be in {'(' if open_low else '['}{low}, {high}], got {value!r}")

    def _bool(self, name: str, value: Any) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"{self._where(name)} must be a bool, got {value!r}")

    def _str(self, name: str, value: Any) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{self._where(name)} must be a str, got {value!r}")

    def _choice(self, name: str, value: Any, choices: Tuple[str, ...]) -> None:
        if value not in choices:
            quoted = f"one of {list(choices)}" if len(choices) > 2 else " or ".join(repr(c) for c in choices)
            raise ValueError(f"{self._where(name)} must be {quoted}, got {value!r}")

    def _device(self, name: str, value: Any) -> None:
        check_device(value, self._where(name))


@dataclass(frozen=True, kw_only=True)
class A2CConfig(SettingsChecks):
    """The scalar settings of an A2C frame.

    Raises:
        TypeError / ValueError: a setting of the wrong type or outside its range; the message
            names the setting, what it accepts and what arrived.
    """

    batch_size: int = setting(100, "rows per minibatch", kind="int", low=1)
    actor_update_times: int = setting(5, "policy gradient steps (minibatches) per update()", kind="int", low=0)
    critic_update_times: int = setting(10, "value gradient steps (minibatches) per update()", kind="int", low=0)
    actor_learning_rate: float = setting(0.001, "learning rate of the actor (of both when they share parameters)",
                                         kind="real", low=0.0, open_low=True)
    critic_learning_rate: float = setting(0.001, "learning rate of a separate critic", kind="real", low=0.0,
                                          open_low=True)
    entropy_weight: Optional[float] = setting(
        None, "weight of the mean entropy in the policy loss, Machin's sign: negative rewards entropy (e.g. -0.01); "
              "None: no entropy term", kind="real", low=-math.inf, optional=True)
    value_weight: float = setting(0.5, "weight of the value loss", kind="real", low=0.0)
    gradient_max: float = setting(math.inf, "each step's gradients are clipped to this total norm (inf: no clipping)",
                                  kind="real", low=0.0, open_low=True, allow_inf=True)
    gae_lambda: float = setting(1.0, "GAE's lambda in [0, 1] (1: discounted returns minus values, 0: one-step TD)",
                                kind="real", low=0.0, high=1.0)
    discount: float = setting(0.99, "discount factor gamma in [0, 1]", kind="real", low=0.0, high=1.0)
    normalize_advantage: bool = setting(True, "normalise advantages per minibatch (over the rows that have actors)",
                                        kind="bool")
    replay_size: int = setting(500000, "rows the on-policy buffer holds before update(); storing more raises",
                               kind="int", low=1)
    replay_device: Union[str, torch.device] = setting("cpu", "device of the rollout buffer", kind="device",
                                                       execution=True)
    visualize: bool = setting(False, "write the autograd graphs of the first losses as actor.dot / critic.dot",
                              kind="bool", execution=True)
    visualize_dir: str = setting("", "where visualize writes them (default: the writer's directory, else the current "
                                     "one)", kind="str", execution=True)
    value_clip: Optional[float] = setting(
        None, "clip each value prediction to this distance from its value when stored; None: no clipping",
        kind="real", low=0.0, open_low=True, optional=True)
    target_kl: Optional[float] = setting(
        None, "stop an update before a minibatch whose approximate KL from the update's start passes this; None: never",
        kind="real", low=0.0, open_low=True, optional=True)
    n_anneal_updates: Optional[int] = setting(
        None, "learning rates fall linearly to 0 over this many update() calls; None: constant (not with lr_scheduler); "
              "a run config's auto: over the whole run",
        kind="int", low=1, optional=True)
    anneal_entropy: bool = setting(False, "entropy_weight falls to 0 with the learning rates (needs n_anneal_updates)",
                                   kind="bool")
    seed: Optional[int] = setting(None, "seeds the minibatch shuffling (None: fresh entropy)", kind="int", low=0,
                                  optional=True)
    sequence_length: Optional[int] = setting(
        None, "a network with memory (model.memory) trains on sequences of this many steps of one environment, "
              "whole ones per minibatch (truncated back-propagation through time); it must divide the rollout's "
              "steps. None: each rollout's steps are one sequence. BC: sequences of one recorded episode (its last "
              "one shorter), None: whole episodes", kind="int", low=1, optional=True, before=None)
    burn_in: int = setting(
        0, "memory: the steps before each sequence (where its rollout has them) replayed without gradient, so that "
           "the sequence starts from a state the current parameters computed; 0: from the state stored when it was "
           "acted", kind="int", low=0, before=0)

    def _check_rules(self) -> None:
        if self.anneal_entropy and (self.n_anneal_updates is None or self.entropy_weight is None):
            raise ValueError(
                f"{self._where('anneal_entropy')} anneals entropy_weight over n_anneal_updates; it needs "
                f"both, got entropy_weight={self.entropy_weight!r}, n_anneal_updates={self.n_anneal_updates!r}"
            )


@dataclass(frozen=True, kw_only=True)
class BCConfig(A2CConfig):
    """The scalar settings of behaviour cloning: A2C's (learning rates, minibatches, value loss)
    plus the weight of the distillation towards recorded probabilities."""

    distill_weight: float = setting(
        1.0, "weight of the cross-entropy from the recorded probabilities, where the data has them (0: off)",
        kind="real", low=0.0)

    #: A2C settings cloning has no use for: it fits recorded choices and returns, with no advantages,
    #: entropy bonus, annealing, KL stop or value clipping. Given, they are refused rather than ignored.
    unused: ClassVar[Tuple[str, ...]] = ("entropy_weight", "gae_lambda", "normalize_advantage", "value_clip",
                                         "target_kl", "n_anneal_updates", "anneal_entropy", "burn_in")

    def _check_rules(self) -> None:
        super()._check_rules()
        defaults = {f.name: f.default for f in dataclasses.fields(A2CConfig)}
        for name in self.unused:
            if getattr(self, name) != defaults[name]:
                why = ("it starts each sequence from the state the network reaches over its episode's earlier steps"
                       if name == "burn_in" else "it fits recorded choices and returns: no advantages, entropy bonus, "
                       "annealing, KL stop or value clipping")
                raise ValueError(f"{self._where(name)} is {getattr(self, name)!r}, but behaviour cloning does not use "
                                 f"it ({why}); remove it")


@dataclass(frozen=True, kw_only=True)
class PPOConfig(A2CConfig):
    """The scalar settings of a PPO frame: A2C's plus ``surrogate_loss_clip``."""

    surrogate_loss_clip: float = setting(0.2, "PPO's clip range c: the ratio counts within [1 - c, 1 + c]",
                                         kind="real", low=0.0, open_low=True)


@dataclass(frozen=True, kw_only=True)
class DQNConfig(SettingsChecks):
    """The scalar settings of a DQN frame.

    Raises:
        TypeError / ValueError: a setting of the wrong type or outside its range, or both
            ``update_rate`` and ``update_steps`` (Machin's rule: one target update scheme).
    """

    model_roles: ClassVar[Tuple[str, str]] = ("qnet", "qnet_target")
    object_defaults: ClassVar[Dict[str, Any]] = {
        "models": ["entmachin.model.MLPQNet", "entmachin.model.MLPQNet"],
        "lr_scheduler_args": None, "lr_scheduler_kwargs": None,
    }

    batch_size: int = setting(100, "rows sampled per update()", kind="int", low=1)
    epsilon_decay: float = setting(
        0.9999, "epsilon is multiplied by this per act_discrete_with_noise call, and per row acted for through act()",
        kind="real", low=0.0, high=1.0)
    update_rate: Optional[float] = setting(
        0.005, "soft target update per update(): target = (1 - rate) target + rate qnet (None: use update_steps)",
        kind="real", low=0.0, high=1.0, open_low=True, optional=True)
    update_steps: Optional[int] = setting(
        None, "copy the Q-network into the target every this many updates (give update_rate=None)", kind="int",
        low=1, optional=True)
    learning_rate: float = setting(0.001, "learning rate of the Q-network", kind="real", low=0.0, open_low=True)
    discount: float = setting(0.99, "discount factor gamma in [0, 1]", kind="real", low=0.0, high=1.0)
    gradient_max: float = setting(math.inf, "each step's gradients are clipped to this total norm (inf: no clipping)",
                                  kind="real", low=0.0, open_low=True, allow_inf=True)
    replay_size: int = setting(500000, "rows the default replay buffer keeps (the oldest are overwritten)",
                               kind="int", low=1)
    replay_device: Union[str, torch.device] = setting("cpu", "device of the default replay buffer", kind="device",
                                                       execution=True)
    mode: Literal["vanilla", "fixed_target", "double"] = setting(
        "double", "double, fixed_target or vanilla: which network picks and which values the target's best choice",
        kind="choice", choices=("vanilla", "fixed_target", "double"))
    visualize: bool = setting(False, "write the autograd graph of the first loss as qnet.dot", kind="bool",
                              execution=True)
    visualize_dir: str = setting("", "where visualize writes it (default: the writer's directory, else the current "
                                     "one)", kind="str", execution=True)
    epsilon: float = setting(1.0, "initial exploration rate", kind="real", low=0.0, high=1.0)
    epsilon_min: float = setting(0.0, "epsilon never decays below this", kind="real", low=0.0, high=1.0)
    n_step: int = setting(1, "rewards summed before bootstrapping (n-step returns)", kind="int", low=1)
    actor_reduction: Literal["sum", "mean"] = setting(
        "sum", "a row's value of an action over its actors: sum or mean", kind="choice", choices=("sum", "mean"))
    seed: Optional[int] = setting(None, "seeds the exploration coins and the default buffer's sampling", kind="int",
                                  low=0, optional=True)

    def _check_rules(self) -> None:
        if (self.update_rate is None) == (self.update_steps is None):
            raise ValueError(f"{self._where('update_rate')} / update_steps: give exactly one target update scheme "
                             f"(Machin's rule), got update_rate={self.update_rate!r}, update_steps="
                             f"{self.update_steps!r}; pass update_rate=None with update_steps")


@dataclass(frozen=True, kw_only=True)
class DQNPerConfig(DQNConfig):
    """The settings of a DQNPer frame: DQN's (its buffer's own settings belong to the buffer)."""


# Keys of ``frame_config`` that are not scalar settings, with their defaults.
_OBJECT_DEFAULTS: Dict[str, Any] = {
    "models": ["entmachin.model.MLPActor", "entmachin.model.MLPCritic"],
    "model_args": [[], []],
    "model_kwargs": [{}, {}],
    "optimizer": "Adam",
    "criterion": "MSELoss",
    "criterion_args": [],
    "criterion_kwargs": {},
    "lr_scheduler": None,
    "lr_scheduler_args": None,
    "lr_scheduler_kwargs": None,
    "replay_buffer": None,
    "writer": None,
}


def default_frame_config(config_cls: type) -> Dict[str, Any]:
    """Every ``frame_config`` key of a frame with its default value (a settings class may
    override the object defaults with an ``object_defaults`` class attribute)."""
    values = {**_OBJECT_DEFAULTS, **getattr(config_cls, "object_defaults", {})}
    values.update({f.name: f.default for f in dataclasses.fields(config_cls)})
    return values


def _check_frame_config(frame_name: str, config_cls: type, values: Any, where: str) -> None:
    if not isinstance(values, Mapping):
        raise TypeError(f"{where}: expected a dict of settings, got {type(values).__name__}")
    allowed = list(default_frame_config(config_cls))
    unknown = sorted(k for k in values if k not in allowed)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key for {frame_name}; allowed keys are {allowed}")


def generate_config(frame_name: str, config_cls: type, config: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``{"frame": frame_name, "frame_config": defaults overridden by config["frame_config"]}``.

    Other top-level keys of ``config`` are kept as they are.
    """
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise TypeError(f"{frame_name}.generate_config: expected a dict or None, got {type(config).__name__}")
    user = config.get("frame_config", {})
    _check_frame_config(frame_name, config_cls, user, "frame_config")
    out = {k: v for k, v in config.items()}
    out["frame"] = frame_name
    out["frame_config"] = {**default_frame_config(config_cls), **dict(user)}
    return out


def resolve(value: Any, default_module: Optional[str], where: str) -> Any:
    """Returns ``value`` if it is not a str, else the object it names.

    A dotted path (``"package.module.Name"`` or ``"package.module:Name"``) is imported; a bare
    name is looked up in ``default_module`` (e.g. ``"Adam"`` in ``torch.optim``).

    Raises:
        ValueError: the name cannot be imported or found.
    """
    if not isinstance(value, str):
        return value
    if ":" in value:
        module_name, _, attr = value.partition(":")
    elif "." in value:
        module_name, _, attr = value.rpartition(".")
    elif default_module is not None:
        module_name, attr = default_module, value
    else:
        raise ValueError(f"{where}: {value!r} is not an import path; expected 'package.module.Name'")
    try:
        module = importlib.import_module(module_name)
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{where}: cannot find {value!r} ({e})") from None
    return obj


def _build(spec: Any, args: Any, kwargs: Any, where: str, device: Any, actor: Any = None) -> Any:
    if isinstance(spec, str) and spec.startswith("@actor."):
        if actor is None:
            raise ValueError(f"{where}: {spec!r} refers to the actor, which only the critic entry may do")
        method = getattr(actor, spec[len("@actor."):], None)
        if not callable(method):
            raise ValueError(f"{where}: the actor has no method {spec[len('@actor.'):]!r}")
        return method(*args, **kwargs)
    factory = resolve(spec, None, where)
    if not callable(factory):
        raise ValueError(f"{where}: {spec!r} is not a class or a callable")
    model = factory(*args, **kwargs)
    return model.to(device) if hasattr(model, "to") else model


def frame_kwargs_from_config(
    frame_name: str, config_cls: type, config: Mapping[str, Any], model_device: Any
) -> Dict[str, Any]:
    """Builds the models, optimizer, criterion and scheduler a config names; returns frame kwargs.

    The result holds the two models under the names of the settings class's ``model_roles``
    (``actor`` and ``critic`` by default; ``qnet`` and ``qnet_target`` for DQN), ``optimizer`` and
    ``criterion`` and every other setting as a keyword of the frame's constructor.
    """
    roles = getattr(config_cls, "model_roles", ("actor", "critic"))
    where = f"{frame_name}.init_from_config"
    if not isinstance(config, Mapping) or "frame_config" not in config:
        raise ValueError(f"{where}: expected a dict with a 'frame_config' entry, as generate_config returns")
    check_device(model_device, f"{where}: model_device")
    if config.get("frame", frame_name) != frame_name:
        raise ValueError(f"{where}: config['frame'] is {config['frame']!r}; expected {frame_name!r}")
    user = config["frame_config"]
    _check_frame_config(frame_name, config_cls, user, "frame_config")
    values = {**default_frame_config(config_cls), **dict(user)}
    models, model_args, model_kwargs = values.pop("models"), values.pop("model_args"), values.pop("model_kwargs")
    for name, entry in (("models", models), ("model_args", model_args), ("model_kwargs", model_kwargs)):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise ValueError(f"frame_config.{name}: expected two entries ({roles[0]}, {roles[1]}), got {entry!r}")
    actor = _build(models[0], model_args[0], model_kwargs[0], "frame_config.models[0]", model_device)
    critic = _build(models[1], model_args[1], model_kwargs[1], "frame_config.models[1]", model_device, actor)
    optimizer = resolve(values.pop("optimizer"), "torch.optim", "frame_config.optimizer")
    criterion_cls = resolve(values.pop("criterion"), "torch.nn", "frame_config.criterion")
    criterion = criterion_cls(*values.pop("criterion_args"), **values.pop("criterion_kwargs"))
    if values["lr_scheduler"] is not None:
        values["lr_scheduler"] = resolve(values["lr_scheduler"], "torch.optim.lr_scheduler", "frame_config.lr_scheduler")
    return {roles[0]: actor, roles[1]: critic, "optimizer": optimizer, "criterion": criterion, **values}


def check_callable(value: Any, where: str, what: str) -> Callable:
    """Raises ``TypeError`` unless ``value`` is callable."""
    if not callable(value):
        raise TypeError(f"{where} must be {what}, got {type(value).__name__} {value!r}")
    return value
