"""Plain data, as ``yaml.safe_load`` returns it, checked against type annotations and built into the config's
dataclasses: each value converted to its declared type (lists to tuples where declared), unknown keys refused
with the closest allowed ones, and every error a :class:`ConfigError` that starts with the value's dotted path.
:mod:`entmachin.run.config` builds a run config's sections with it.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import typing
from typing import Any, Dict, Literal, Mapping, Sequence, Tuple, Union

from entmachin.run.sections import ConfigError


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
    return {int: "an int", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp)))


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


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> Dict[str, Any]:
    """``typing.get_type_hints(cls)``, evaluated once per class: three quarters of a config's load time was
    spent re-evaluating them."""
    return typing.get_type_hints(cls)


def _dataclass_from(cls: type, value: Any, path: str) -> Any:
    _check_keys(cls, value, path)
    hints = _type_hints(cls)
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
