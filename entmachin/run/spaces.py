"""Observation and action spaces as text: for ``entmachin envs`` and for checkpoints of another env."""
from __future__ import annotations

from typing import Any, List, Mapping

from entmachin.env import ObsSpace
from entmachin.env.spaces import space_differences, spaces_record  # noqa: F401 - re-exported

__all__ = ["describe_spaces", "spaces_record", "space_differences"]


def describe_spaces(obs_space: ObsSpace, action_space: Mapping[str, Any]) -> List[str]:
    record = spaces_record(obs_space, action_space)
    lines = [f"entity {name}: features {features}" for name, features in record["entities"].items()]
    if record["global_features"]:
        lines.append(f"global features {record['global_features']}")
    for name, action in record["actions"].items():
        if "values" in action:  # continuous: each value with its bounds
            detail = ": " + ", ".join(f"{v} in [{lo:g}, {hi:g}]" for v, lo, hi in
                                      zip(action["values"], action["low"], action["high"]))
        else:
            detail = f": {action['choices']}" if "choices" in action else ""
        lines.append(f"action {name!r} ({action['kind']}){detail}")
    return lines
