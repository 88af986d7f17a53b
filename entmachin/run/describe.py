"""One line of documentation per run-config field, and the commented YAML ``entmachin init`` writes.

The descriptions are those the fields declare (``entmachin.settings.setting``): the run config's
sections, RogueNet's config and the frames' settings records; nothing here restates them. The
model section's fields that only the other kind of network reads (``model.kind``) are written
commented out, so that the file shows them without setting them.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping

import yaml

from entmachin.run.sections import FRAMES, MLP_ONLY, ROGUE_NET_ONLY, RunConfig
from entmachin.settings import docs_of

__all__ = ["FIELD_DOCS", "field_docs", "commented_yaml"]


def field_docs(frame: str = "PPO") -> Dict[str, str]:
    """``{"section": ..., "section.key": ...}``: the description of every section and key of a run
    config whose frame is ``frame`` (the frame section's keys are its own fields and those of the
    frame's settings record)."""
    out: Dict[str, str] = {}
    for section in dataclasses.fields(RunConfig):
        out[section.name] = docs_of(RunConfig)[section.name]
        docs = docs_of(section.default_factory)
        if section.name == "frame":
            del docs["settings"]
            docs.update(docs_of(FRAMES[frame]))
        out.update({f"{section.name}.{key}": doc for key, doc in docs.items()})
    return out


#: Every key's description, for any frame (the on-policy frames' where a key is shared).
FIELD_DOCS: Dict[str, str] = {**field_docs("DQN"), **field_docs("PPO")}


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()


def commented_yaml(data: Mapping[str, Any], header: str = "") -> str:
    """YAML text of plain config data with each field's one-line description as its comment."""
    docs = field_docs(data.get("frame", {}).get("name", "PPO"))
    other = MLP_ONLY if data.get("model", {}).get("kind", "rogue_net") == "rogue_net" else ROGUE_NET_ONLY
    lines = [header.rstrip()] if header else []
    for section, values in data.items():
        lines.append(f"{section}:  # {docs.get(section, '')}".rstrip(" #"))
        for key, value in values.items():
            doc = docs.get(f"{section}.{key}", "")
            unread = section == "model" and key in other  # the other kind of network's field
            lines.append(f"  {'# ' if unread else ''}{key}: {_scalar(value)}" + (f"  # {doc}" if doc else ""))
        lines.append("")
    return "\n".join(lines)
