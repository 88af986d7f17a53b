"""Observation and action spaces as plain data (JSON-ready), and back.

Checkpoints record the spaces a run was trained on, and exported policies carry them in their
metadata; ``entmachin.deploy`` rebuilds the spaces from that record without importing torch.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from entmachin.env.action import (
    CONTINUOUS_SPACES,
    ActionSpace,
    CategoricalActionSpace,
    ContinuousActionSpace,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionSpace,
    SelectEntityActionSpace,
)
from entmachin.env.environment import Entity, ObsSpace

__all__ = ["spaces_record", "spaces_from_record", "space_differences"]

_KINDS = {"global categorical": GlobalCategoricalActionSpace, "categorical": CategoricalActionSpace,
          "select entity": SelectEntityActionSpace, "continuous": ContinuousActionSpace,
          "global continuous": GlobalContinuousActionSpace}


def spaces_record(obs_space: ObsSpace, action_space: Mapping[str, Any]) -> Dict[str, Any]:
    """Plain data naming every entity type with its features and every action with its choices."""
    actions: Dict[str, Any] = {}
    for name, space in action_space.items():
        if isinstance(space, GlobalCategoricalActionSpace):
            actions[name] = {"kind": "global categorical", "choices": list(space.index_to_label)}
        elif isinstance(space, CategoricalActionSpace):
            actions[name] = {"kind": "categorical", "choices": list(space.index_to_label)}
        elif isinstance(space, SelectEntityActionSpace):
            actions[name] = {"kind": "select entity"}
        elif isinstance(space, CONTINUOUS_SPACES):
            kind = "global continuous" if isinstance(space, GlobalContinuousActionSpace) else "continuous"
            actions[name] = {"kind": kind, "values": list(space.names), "low": space.low.tolist(),
                             "high": space.high.tolist()}
        else:
            actions[name] = {"kind": type(space).__name__}
    return {"entities": {name: list(entity.features) for name, entity in obs_space.entities.items()},
            "global_features": list(getattr(obs_space, "global_features", []) or []),
            "actions": actions}


def spaces_from_record(record: Mapping[str, Any], where: str = "spaces") -> Tuple[ObsSpace, Dict[str, ActionSpace]]:
    """The spaces :func:`spaces_record` wrote.

    Raises:
        ValueError: the record is not one (a missing part, an unknown kind of action), named
            with ``where``.
    """
    try:
        obs_space = ObsSpace(global_features=[str(f) for f in record["global_features"]],
                             entities={str(name): Entity([str(f) for f in features])
                                       for name, features in record["entities"].items()})
        actions: Dict[str, ActionSpace] = {}
        for name, action in record["actions"].items():
            kind = _KINDS.get(action["kind"])
            if kind is None:
                raise ValueError(f"action {name!r} is of unknown kind {action['kind']!r}; expected one of {list(_KINDS)}")
            if kind is SelectEntityActionSpace:
                actions[name] = kind()
            elif kind in CONTINUOUS_SPACES:
                actions[name] = kind(low=action["low"], high=action["high"], names=[str(v) for v in action["values"]])
            else:
                actions[name] = kind([str(c) for c in action["choices"]])
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{where}: not a record of spaces ({type(e).__name__}: {e})") from None
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return obs_space, actions


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
