"""Observation and action spaces as text: for ``entmachin envs`` and for checkpoints of another env."""
from __future__ import annotations

from typing import Any, List, Mapping

from entmachin.env import ObsSpace
from entmachin.env.spaces import spaces_record

__all__ = ["describe_spaces", "spaces_record", "space_differences"]


def describe_spaces(obs_space: ObsSpace, action_space: Mapping[str, Any]) -> List[str]:
    record = spaces_record(obs_space, action_space)
    lines = [f"entity {name}: features {features}" for name, features in record["entities"].items()]
    if record["global_features"]:
        lines.append(f"global features {record['global_features']}")
    for name, action in record["actions"].items():
        choices = f": {action['choices']}" if "choices" in action else ""
        lines.append(f"action {name!r} ({action['kind']}){choices}")
    return lines


def space_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> List[str]:
    """What differs between two :func:`spaces_record` results, one phrase per difference."""
    out: List[str] = []
    for part, what in (("entities", "entity type"), ("actions", "action")):
        a, b = saved.get(part, {}), current.get(part, {})
        for name in sorted(set(a) | set(b)):
            if name not in b:
                out.append(f"{what} {name!r} only in the checkpoint")
            elif name not in a:
                out.append(f"{what} {name!r} only in this environment")
            elif a[name] != b[name]:
                out.append(f"{what} {name!r} is {a[name]} in the checkpoint and {b[name]} here")
    if saved.get("global_features", []) != current.get("global_features", []):
        out.append(f"global features {saved.get('global_features')} in the checkpoint and "
                   f"{current.get('global_features')} here")
    return out
