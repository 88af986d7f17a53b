"""The run config's JSON Schema (``entmachin schema``), read from the same declarations the loader checks.

Editors that speak JSON Schema (VS Code's YAML extension, JetBrains IDEs, ``yaml-language-server``) then
complete the keys of a run config, show each field's description and default, and flag an unknown key or a
value of the wrong type as you type. Every section refuses keys it does not declare; the frame section lists
the fields of the frame its ``name`` says (PPO without one). Rules across fields (``frame.batch_size`` at
most a rollout's rows, ...) stay with the loader, which names them when a run starts.

Point an editor at it with a first line in the YAML file::

    # yaml-language-server: $schema=entmachin-config.schema.json

after ``entmachin schema > entmachin-config.schema.json``.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Dict, List, Literal, Mapping, Tuple, Union

from entmachin.run.config import _SECTIONS
from entmachin.run.sections import _DERIVED, FRAMES, Q_FRAMES, FrameSection, RunConfig
from entmachin.run.defaults import GENERIC, GENERIC_MODEL
from entmachin.settings import default_of, doc_of

__all__ = ["json_schema"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> Dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a run config."""
    properties = {name: _object(cls) for name, cls in _SECTIONS.items()}
    properties["frame"] = _frame()
    for frame, fields in GENERIC_MODEL.items():  # the model section's defaults that depend on the frame
        for name, value in fields.items():
            field = properties["model"]["properties"][name]
            field["description"] = f"{field.get('description', '')} ({frame}'s default: {value})".lstrip()
    order = [f.name for f in dataclasses.fields(RunConfig)]
    return {"$schema": DIALECT, "title": "entmachin run config",
            "description": "A run of `entmachin train`: see `entmachin init ENV` for a complete, commented one.",
            "type": "object", "additionalProperties": False,
            "properties": {name: properties[name] for name in order}}


def _object(cls: type, skip: Tuple[str, ...] = (), defaults: Mapping[str, Any] = {}) -> Dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        schema = {**_type(hints[f.name]), **_rule(f.metadata.get("rule", {}))}
        doc = doc_of(cls, f.name)
        if doc:
            schema["description"] = doc
        default = defaults.get(f.name, default_of(f))
        if default is not dataclasses.MISSING and not dataclasses.is_dataclass(default) and _json_safe(default):
            schema["default"] = _plain(default)
        properties[f.name] = schema
    return {"type": "object", "additionalProperties": False, "properties": properties}


def _frame() -> Dict[str, Any]:
    """The frame section: one set of fields per ``name``, chosen by it (PPO when it is left out)."""
    own = {f.name: f for f in dataclasses.fields(FrameSection)}
    branches: List[Dict[str, Any]] = []
    for name, config_cls in FRAMES.items():
        derived = ("seed",) if name in Q_FRAMES else tuple(_DERIVED)
        keys = ("name", "n_updates", "optimizer") if name in Q_FRAMES else ("name", "n_epochs", "optimizer")
        # the run layer's defaults, but the batch size (at most GENERIC's: it divides a rollout's rows evenly)
        defaults = {k: v for k, v in GENERIC.get(name, {}).items() if k != "batch_size"}
        fields = _object(config_cls, skip=derived + tuple(getattr(config_cls, "unused", ())), defaults=defaults)
        if name in GENERIC and "batch_size" in fields["properties"]:  # left out: split from the rollout's rows
            batch = fields["properties"]["batch_size"]
            batch.pop("default", None)
            batch["description"] += (f"; left out: the rollout's rows split into minibatches of at most "
                                     f"{GENERIC[name]['batch_size']} and of (nearly) equal size")
        if "n_anneal_updates" in fields["properties"]:  # the run layer also takes auto: over the whole run
            fields["properties"]["n_anneal_updates"]["anyOf"].append({"const": "auto"})
        header = _object(FrameSection, skip=tuple(k for k in own if k not in keys))["properties"]
        header["name"] = {**header["name"], "const": name}
        test: Dict[str, Any] = {"properties": {"name": {"const": name}}, "required": ["name"]}
        if name == "PPO":
            test = {"anyOf": [test, {"not": {"required": ["name"]}}]}
        branches.append({"if": test, "then": {**fields, "properties": {**header, **fields["properties"]}}})
    names = list(FRAMES)
    return {"type": "object", "description": doc_of(RunConfig, "frame"),
            "properties": {"name": {"enum": names, "default": "PPO", "description": doc_of(FrameSection, "name")}},
            "allOf": branches}


def _type(tp: Any) -> Dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return {}
    if origin is Union:
        options = [{"type": "null"} if a is type(None) else _type(a) for a in args]
        return {"anyOf": options}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (tuple, Tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _type(args[0])}
        return {"type": "array", "prefixItems": [_type(a) for a in args], "minItems": len(args),
                "maxItems": len(args)}
    if origin in (dict, Mapping) or tp is dict:
        return {"type": "object"}
    if dataclasses.is_dataclass(tp):
        return _object(tp)
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return {"type": simple[tp]} if tp in simple else {}


def _rule(rule: Mapping[str, Any]) -> Dict[str, Any]:
    """``setting(..., low=, high=, open_low=)`` as JSON Schema bounds."""
    out: Dict[str, Any] = {}
    if "low" in rule and math.isfinite(rule["low"]):  # an infinite bound bounds nothing (and is not JSON)
        out["exclusiveMinimum" if rule.get("open_low") else "minimum"] = rule["low"]
    if "high" in rule and math.isfinite(rule["high"]):
        out["exclusiveMaximum" if rule.get("open_high") else "maximum"] = rule["high"]
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _json_safe(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (tuple, list)):
        return all(_json_safe(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_safe(v) for k, v in value.items())
    return value is None or isinstance(value, (bool, int, str))
