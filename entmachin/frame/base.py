"""What every frame shares: its keywords, setup, storing, counters, save / load and configs.

A frame class names its settings record (``_config_cls``, from :mod:`entmachin.frame.config`, whose fields
carry their defaults, descriptions and ranges) and its two networks (``network_names``: the constructor's first
two arguments and their checkpoint file names). :class:`Frame` gives it Machin's constructor,
``Frame(first, second, optimizer, criterion, *, lr_scheduler=None, ..., <every setting>=<its default>)``,
generated from the record: ``inspect.signature``, ``help()`` and IPython show every keyword with its default,
unknown keywords are refused, and the settings are checked before ``_init`` builds the frame.

The rest is what A2C, PPO and DQN share besides their algorithm: optimizers, schedulers, the buffer, the
writer and the generator (:meth:`Frame._setup`), ``store_episode`` / ``store_rollout`` and appending the
checked rows, the training counters a checkpoint holds, ``save`` / ``load`` and the Machin-style configs.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import nn

from entmachin.buffer import TransitionBase
from entmachin.frame.config import check_callable, frame_kwargs_from_config, generate_config
from entmachin.frame.rollout import Steps, read_episode, read_rollout
from entmachin.frame.stepping import non_finite_error
from entmachin.frame.summary import log_update, make_writer, write_graph
from entmachin.model.input_norm import InputNorm
from entmachin.settings import field_lines

__all__ = ["Frame"]

# The keyword arguments every frame takes besides its settings (Machin's names), with their meaning.
OBJECT_KEYWORDS: Dict[str, str] = {
    "lr_scheduler": "scheduler class called as ``lr_scheduler(optimizer, *args, **kwargs)`` per optimizer; "
                    "stepped by ``update_lr_scheduler()``",
    "lr_scheduler_args": "the schedulers' positional arguments, one tuple per optimizer",
    "lr_scheduler_kwargs": "the schedulers' keyword arguments, one dict per optimizer",
    "replay_buffer": "a buffer to use instead of the default one (``replay_size`` and ``replay_device`` unused)",
    "writer": "a tensorboard ``SummaryWriter`` or a log directory; each ``update()`` logs there "
              "(``entmachin.frame.summary``)",
}


def _scheduler_arguments(value: Any, default: Any, n: int, where: str) -> List[Any]:
    """Machin's per-optimizer scheduler args / kwargs: a tuple of ``n`` tuples (dicts); None or ()
    means defaults."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return [default] * n
    kind = dict if isinstance(default, dict) else (tuple, list)
    if not isinstance(value, (tuple, list)) or len(value) != n or not all(isinstance(v, kind) for v in value):
        noun = "dict" if isinstance(default, dict) else "tuple"
        what = f"a pair (for the actor's and the critic's scheduler) of {noun}s" if n == 2 else \
            f"a one-element tuple holding a {noun}"
        raise TypeError(f"{where} must be {what}, got {value!r}")
    return list(value)


class Frame:
    """The base of every frame; see the module docstring. Subclasses define ``_init`` (called by the
    generated constructor with the checked settings record), ``update()`` and their storing."""

    _config_cls: type
    network_names: Tuple[str, str] = ("actor", "critic")
    _n_scheduler_args = 2  # Machin's (actor, critic) pairs; DQN takes one-element tuples
    _trained_names: Tuple[str, ...] = ("actor", "critic")  # the networks update() puts in train mode

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_config_cls" in cls.__dict__ and "__init__" not in cls.__dict__:  # a class's own __init__ stays
            _generate_constructor(cls)

    def _init(self, first: Any, second: Any, optimizer: Any, criterion: Any, config: Any, **objects: Any) -> None:
        raise NotImplementedError

    def _setup(self, config: Any, criterion: Any, optimizer: Any, replay_buffer: Any, writer: Any, **networks: Any
               ) -> None:
        """Checks the networks, optimizer and criterion; sets the config, networks (in eval mode
        until ``update()`` trains them), buffer, writer, shuffling generator and counters."""
        name = type(self).__name__
        for label, model in networks.items():
            if not isinstance(model, nn.Module):
                raise TypeError(f"{name}: {label} must be an nn.Module, got {type(model).__name__}")
        check_callable(optimizer, f"{name}: optimizer", "an optimizer class such as torch.optim.Adam")
        check_callable(criterion, f"{name}: criterion", "a loss such as nn.MSELoss()")
        self.config, self.criterion = config, criterion
        for label, model in networks.items():
            setattr(self, label, model)
            # Eval mode outside update() from the start: acting, storing and old log-probabilities
            # never see dropout, and a resumed run acts alike.
            model.eval()
        if replay_buffer is None:
            replay_buffer = self._default_buffer()
        self._check_buffer(replay_buffer)
        self.replay_buffer = replay_buffer
        self.writer = make_writer(writer, name)
        self._owns_writer = self.writer is not None and self.writer is not writer  # made from a log dir
        self._rng = np.random.default_rng(config.seed)
        self._n_updates = 0
        self._skipped_updates: Dict[str, int] = {}  # optimizer -> updates in a row that skipped all its steps
        self._visualized: set = set()
        self.last_update: Any = None
        modules = list(dict.fromkeys(m for n in self._trained_names for m in networks[n].modules()))  # shared once
        self._trained_modules = modules if all(type(m).train is nn.Module.train for m in modules) else None

    def _set_training(self, mode: bool) -> None:
        """Train (or eval) mode for the networks ``update()`` trains. ``train()`` / ``eval()`` recurse in Python:
        when every module keeps ``nn.Module.train``, the flags are set from the list ``_setup`` read instead (the
        same result: ``nn.Module.__setattr__`` stores a bool as a plain attribute, as ``object.__setattr__`` does)."""
        if self._trained_modules is None:
            for name in self._trained_names:
                getattr(self, name).train(mode)
        else:
            for module in self._trained_modules:
                object.__setattr__(module, "training", mode)

    @contextmanager
    def _training(self, guard: Any) -> Iterator[None]:
        """The trained networks in train mode for the block, switched whole inside the interrupt guard's critical
        section, and back in eval mode however the block ends."""
        with guard.step:
            self._set_training(True)
        try:
            yield
        finally:
            with guard.step:
                self._set_training(False)

    def _visualize(self, loss: Optional[torch.Tensor], graph: str) -> None:
        """With ``visualize``, writes the autograd graph of the first ``loss`` of each ``graph`` (``<graph>.dot``)."""
        if loss is not None and graph not in self._visualized:
            self._visualized.add(graph)
            directory = self.config.visualize_dir or getattr(self.writer, "log_dir", "") or ""
            write_graph(loss, graph, directory, self.writer)

    def _update_name(self, concatenate_samples: bool) -> str:
        """``"<Frame>.update"``, for messages; refuses Machin's ``concatenate_samples=False``."""
        name = f"{type(self).__name__}.update"
        if concatenate_samples is not True:
            raise ValueError(f"{name}: concatenate_samples must be True, got {concatenate_samples!r}")
        return name

    def _report(self, stats: Any, log_step: Optional[int], failing: List[str], non_finite: Sequence[str]) -> None:
        """An update's end: its scalars to the writer, then the failure rule's error (``entmachin.frame.stepping``)
        when ``failing`` names optimizers."""
        if self.writer is not None:
            log_update(self.writer, stats, self._n_updates if log_step is None else log_step)
        if failing:
            raise non_finite_error(self, tuple(non_finite), failing)

    def _setup_schedulers(self, lr_scheduler: Any, args: Any, kwargs: Any) -> None:
        name, n = type(self).__name__, self._n_scheduler_args
        args = _scheduler_arguments(args, (), n, f"{name}: lr_scheduler_args")
        kwargs = _scheduler_arguments(kwargs, {}, n, f"{name}: lr_scheduler_kwargs")
        self._schedulers: List[Any] = []
        if lr_scheduler is None:
            return
        check_callable(lr_scheduler, f"{name}: lr_scheduler", "a scheduler class or None")
        if getattr(self.config, "n_anneal_updates", None) is not None:
            raise ValueError(f"{name}: give lr_scheduler or n_anneal_updates, not both")
        self._schedulers = [lr_scheduler(opt, *a, **k) for opt, a, k in zip(self.optimizers, args, kwargs)]

    def _default_buffer(self) -> Any:
        raise NotImplementedError

    def _check_buffer(self, buffer: Any) -> None:
        for method in ("append", "size", "clear", "sample_batch"):
            if not callable(getattr(buffer, method, None)):
                raise TypeError(f"{type(self).__name__}: replay_buffer has no {method}() method; pass an entmachin "
                                "Buffer")

    @staticmethod
    def _input_norms(model: nn.Module, but: Tuple[InputNorm, ...] = ()) -> List[InputNorm]:
        """The model's running input statistics, less those of ``but``."""
        return [m for m in model.modules() if isinstance(m, InputNorm) and not any(m is b for b in but)]

    # -------------------------------------------------------------------------- storing

    def store_episode(self, episode: Sequence[Any]) -> None:
        """Stores one environment's transitions (dicts or ``Transition``s, one row each).

        Each transition has ``state``, ``action``, ``next_state``, ``reward``, ``terminal`` and optionally
        ``truncated``. The episode may be complete (last row terminal) or cut short: a last row that is not
        terminal, and every truncated row, bootstraps from its ``next_state``. The caller's transitions are not
        modified.

        Transitions that ``update()`` could not train on are refused here with nothing stored and the frame as
        it was (``entmachin.frame.store_checks``): a state that lacks what the network needs, actions that do
        not match the state's actors, NaN or infinity in rewards, states or the critic's values. ``update()``
        trusts what was stored and checks it no more.

        Raises:
            TypeError / ValueError: malformed transitions (the message names the position, key and, in a
                rollout, the row), or more rows than an on-policy buffer holds before ``update()``.
        """
        name = f"{type(self).__name__}.store_episode"
        self._store(read_episode(episode, name), name)

    def store_rollout(self, steps: Sequence[Any]) -> None:
        """Stores ``T`` vectorised steps, each a transition of ``B`` rows (one per environment).

        ``reward``, ``terminal`` and ``truncated`` are ``[B]`` or ``[B, 1]``; the rows of step ``t + 1``
        continue those of step ``t`` unless terminal or truncated. Rows of the last step that are not terminal
        bootstrap from their ``next_state``, as do truncated rows. Rows are stored step-major; otherwise as
        :meth:`store_episode`.
        """
        name = f"{type(self).__name__}.store_rollout"
        self._store(read_rollout(steps, name), name)

    def _store(self, steps: Steps, name: str) -> None:
        raise NotImplementedError

    def _append(self, data: Dict[str, Any], majors: Tuple[str, ...]) -> None:
        """Appends rows that ``store_checks.check_steps`` already cleared (``majors``: the
        attributes that are dicts of values), without a second check when the buffer takes
        trusted rows."""
        trusted = getattr(self.replay_buffer, "append_trusted", None)
        if trusted is not None:
            trusted(data, majors)
        else:
            self.replay_buffer.append(TransitionBase.from_data(data, majors))

    # ------------------------------------------------------------------ Machin surface

    @property
    def optimizers(self) -> List[torch.optim.Optimizer]:
        """The optimizers, built on first use (``entmachin.frame.stepping.LazyOptimizers``): a frame that
        only acts never imports what torch's optimizers import."""
        return self._optimizers.get()

    @property
    def lr_schedulers(self) -> List[Any]:
        """The learning-rate schedulers, one per optimizer (empty without ``lr_scheduler``)."""
        return list(self._schedulers)

    @property
    def n_updates(self) -> int:
        """``update()`` calls so far (restored by ``load``)."""
        return self._n_updates

    def _read_initial_lrs(self, optimizers: List[torch.optim.Optimizer]) -> None:
        """The learning rates annealing starts from, read from the optimizers as built."""
        self._initial_lrs = [[g["lr"] for g in opt.param_groups] for opt in optimizers]

    def _set_learning_rates(self, lrs: List[List[float]]) -> None:
        for opt, values in zip(self.optimizers, lrs):
            for group, lr in zip(opt.param_groups, values):
                group["lr"] = lr

    def update_lr_scheduler(self) -> None:
        """Steps every learning-rate scheduler once."""
        for scheduler in self._schedulers:
            scheduler.step()

    def close(self) -> None:
        """Flushes and closes a writer the frame created from a log directory."""
        if self.writer is not None and self._owns_writer:
            self.writer.close()

    # ------------------------------------------------------------ counters of a checkpoint

    def training_counters(self) -> Dict[str, Any]:
        """The frame's own training state besides networks and optimizers, as a checkpoint holds it:
        ``n_updates``, ``skipped_updates`` (per optimizer, updates in a row whose every step was
        skipped) and ``shuffle_rng`` (the frame's generator's state)."""
        return {"n_updates": self._n_updates, "skipped_updates": dict(self._skipped_updates),
                "shuffle_rng": self._rng.bit_generator.state}

    def set_training_counters(self, counters: Mapping[str, Any]) -> None:
        """Restores ``counters``, a dict :meth:`training_counters` returned (``skipped_updates`` may be absent:
        zero)."""
        self._n_updates = int(counters["n_updates"])
        self._skipped_updates = dict(counters.get("skipped_updates", {}))
        self._rng.bit_generator.state = counters["shuffle_rng"]

    # ---------------------------------------------------------------- saving / configs

    def save(self, model_dir: str, network_map: Optional[Mapping[str, str]] = None, version: int = 0) -> None:
        """Saves networks, optimizers, schedulers, normalisation statistics and RNG states.

        The version is published atomically: a process killed at any instant of a save leaves
        the previous version or the new one, complete and loadable
        (:mod:`entmachin.frame.checkpoint`). ``network_map`` names the networks' files (keys:
        ``network_names``); the replay buffer is not saved (``replay_buffer.save`` saves one).
        """
        from entmachin.frame.checkpoint import save_frame

        save_frame(self, model_dir, network_map, version)

    def load(self, model_dir: str, network_map: Optional[Mapping[str, str]] = None, version: int = -1) -> None:
        """Restores what :meth:`save` wrote (``version=-1``: the highest saved), torch's global RNG
        state included.

        Every file is read and checked before anything is assigned: on any error the frame is
        left exactly as it was. Files are read with ``torch.load(weights_only=True)``.

        Raises:
            FileNotFoundError: the directory, the version or one of its files is missing.
            CheckpointError: (a ``ValueError``) a file is not a checkpoint, is damaged, or was
                saved by another frame class or for other networks / optimizers.
        """
        from entmachin.frame.checkpoint import load_frame

        load_frame(self, model_dir, network_map, version)

    @classmethod
    def generate_config(cls, config: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Machin-style ``{"frame": ..., "frame_config": {...}}``: defaults overridden by ``config``.

        Raises:
            ValueError: ``config["frame_config"]`` has a key the frame does not know (the
                message lists the allowed keys).
        """
        return generate_config(cls.__name__, cls._config_cls, config)

    @classmethod
    def init_from_config(cls, config: Mapping[str, Any], model_device: Union[str, torch.device] = "cpu") -> "Frame":
        """Builds a frame from :meth:`generate_config`'s dict; models, optimizer, criterion and
        scheduler are import paths (bare names: ``torch.optim``, ``torch.nn``,
        ``torch.optim.lr_scheduler``); a second model entry ``"@actor.critic"`` calls that method
        of the first model (shared parameters)."""
        kwargs = frame_kwargs_from_config(cls.__name__, cls._config_cls, config, model_device)
        first, second = cls.network_names
        return cls(kwargs.pop(first), kwargs.pop(second), kwargs.pop("optimizer"), kwargs.pop("criterion"),
                   **kwargs)


def _generate_constructor(cls: type) -> None:
    """Gives ``cls`` Machin's constructor, its signature and the ``Keyword Args`` of its docstring,
    all from ``cls._config_cls``'s fields (see the module docstring)."""
    P = inspect.Parameter
    fields = dataclasses.fields(cls._config_cls)
    positional = [P(n, P.POSITIONAL_OR_KEYWORD) for n in (*cls.network_names, "optimizer", "criterion")]
    keywords = [P(n, P.KEYWORD_ONLY, default=None) for n in OBJECT_KEYWORDS]
    keywords += [P(f.name, P.KEYWORD_ONLY, default=f.default, annotation=f.type) for f in fields]
    signature = inspect.Signature([P("self", P.POSITIONAL_OR_KEYWORD), *positional, *keywords])
    names = [f.name for f in fields]

    def __init__(self: Frame, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as e:
            unknown = [k for k in kwargs if k not in signature.parameters]
            close = difflib.get_close_matches(unknown[0], list(signature.parameters), n=1) if unknown else []
            raise TypeError(f"{type(self).__name__}() {e}" + (f"; did you mean {close[0]!r}?" if close else "")
                            ) from None
        bound.apply_defaults()
        values = dict(bound.arguments)
        del values["self"]
        config = cls._config_cls(**{n: values.pop(n) for n in names})
        first, second = cls.network_names
        self._init(values.pop(first), values.pop(second), values.pop("optimizer"), values.pop("criterion"),
                   config, **values)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = f"Builds a {cls.__name__}; the class docstring describes every argument."
    cls.__init__ = __init__  # type: ignore[assignment]
    cls.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    lines = [f"    {n}: {d}." for n, d in OBJECT_KEYWORDS.items()] + field_lines(cls._config_cls)
    cls.__doc__ = _with_args(cls, inspect.cleandoc(cls.__doc__ or "")) + "\n\nKeyword Args:\n" + "\n".join(lines) + "\n"


def _with_args(cls: type, doc: str) -> str:
    """``doc`` with an ``Args`` section: its own, or (a frame that keeps its base's networks, optimizer and
    criterion, as PPO keeps A2C's) its nearest frame base's, put before ``doc``'s first section. The positional
    arguments are thus described once, by the frame that introduces them, as the settings are by their record."""
    lines = doc.splitlines()
    if "Args:" in lines:
        start = lines.index("Args:")
        end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
        cls._args_doc = "\n".join(lines[start:end])  # type: ignore[attr-defined]
        return doc
    inherited = getattr(cls, "_args_doc", "")
    if not inherited:
        return doc
    first = next((i for i, line in enumerate(lines) if re.fullmatch(r"[A-Z][A-Za-z ]*:", line)), len(lines))
    return "\n".join([*lines[:first], *([""] if first == len(lines) else []), inherited, "", *lines[first:]]).rstrip()
