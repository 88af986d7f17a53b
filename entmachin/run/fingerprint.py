"""What a run config decides about a run's results, and a short fingerprint of it.

Two runs of configs with the same fingerprint (and the same seed and budget) learn the same way and
report the same kind of figures; a field that changes what is learned or what is measured changes it.
The benchmarks' results carry it, so that a record stays valid while its config only gains fields that
keep what runs learn, and goes stale when anything else changes.

The rule, applied to plain config data (:func:`entmachin.run.config.config_to_dict`), field by field, as
each field's declaration (``setting(...)``) says:

* ``execution=True``: left out. Such a field changes where or how fast a run goes and what it logs, not
  its learning: ``model.compile`` (the same arithmetic, compiled: equal up to rounding),
  ``rollout.overlap`` (the same rows from the same policy; a seed draws its random numbers in another
  order, as another seed would, and input statistics equal the sequential loop's after each step up to
  rounding), ``rollout.processes`` / ``workers``, ``train.device`` / ``threads``, the run directory,
  checkpoint and evaluation intervals, distributed settings, buffer devices, graph dumps and the
  non-finite check (which only stops a run).
* ``before=VALUE`` (a field added after runs were recorded; VALUE is what those runs did without it):
  left out while the field holds VALUE, and data from before the field counts as holding it. Adding a
  field whose default keeps what runs learned therefore keeps every fingerprint; changing its default
  later changes the fingerprints of the configs that do not state it, as it should.
* a field the run does not read: the other kind of network's fields (``ROGUE_NET_ONLY`` /
  ``MLP_ONLY``), ``model.q_head`` outside the DQN frames, ``model.continuous`` where the environment has
  no continuous action, the ``selfplay`` section while ``seats: all`` (no pool), the ``bc`` section
  outside behaviour cloning.
* every other field is kept, the evaluation settings included (episodes, deterministic, step limit,
  opponents: they decide the figures a record reports). A field missing from the data that declares no
  ``before`` is kept as ``"<absent>"``, so that data from before such a field never matches a config
  that has it.

A new field must therefore say, when it is declared, whether it is an execution setting or what runs
did before it; a field that says neither counts as changing what is learned.

Code can change what a config learns too. Such a change bumps its feature's entry in :data:`REVISIONS`;
:func:`revisions` gives the revisions a config's runs learn with (the features it uses), and a record
keeps them beside its settings. A record without them was made at revision 1 of every feature.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Dict, Mapping, Optional, Tuple

from entmachin.run.config import anneal_updates
from entmachin.run.sections import (FRAMES, MLP_ONLY, Q_FRAMES, ROGUE_NET_ONLY, FrameSection, RolloutSection, RunConfig,
                                    TrainSection)
from entmachin.settings import NOT_DECLARED, marker_of

__all__ = ["learning_settings", "fingerprint", "revisions", "REVISIONS", "ABSENT"]

ABSENT = "<absent>"  # a field the data lacks and whose declaration gives no ``before``


# Feature -> (its current revision, what the last bump changed). Bump an entry, with a line on what changed,
# when code changes what the configs using the feature learn; every record of such a config goes stale.
REVISIONS: Dict[str, Tuple[int, str]] = {
    "selfplay": (2, "a pool run stores and trains on every row its current parameters act, both seats of a "
                    "game against its current self"),
}


def revisions(data: Mapping[str, Any]) -> Dict[str, int]:
    """``{feature: current revision}`` for the features of :data:`REVISIONS` that plain config ``data`` uses
    (``selfplay``: a pool of past selves, ``selfplay.seats`` other than ``all``)."""
    used = {"selfplay": data.get("selfplay", {}).get("seats", "all") != "all"}
    return {feature: REVISIONS[feature][0] for feature, on in used.items() if on}


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it (tuples as lists), for comparing declared values with data."""
    return json.loads(json.dumps(value, default=str))


def _section_fields(section: str, values: Mapping[str, Any]) -> Dict[str, type]:
    """``{field name: declaring record}`` of a section; the frame section's depend on its frame."""
    if section == "frame":
        settings = FRAMES.get(values.get("name", "PPO"))
        # anneal_auto is not in plain data: auto is, resolved by _anneal_resolved
        names = {f.name: FrameSection for f in dataclasses.fields(FrameSection)
                 if f.name not in ("settings", "anneal_auto")}
        if settings is not None:
            names.update({f.name: settings for f in dataclasses.fields(settings)})
        return names
    cls = RunConfig.__dataclass_fields__[section].default_factory  # the section's record
    return {f.name: cls for f in dataclasses.fields(cls)}


def _unread(data: Mapping[str, Any], continuous_actions: bool) -> Dict[str, Any]:
    """``{section: None (the whole section) or a set of field names}`` the run does not read."""
    model, frame = data.get("model", {}), data.get("frame", {})
    kind = model.get("kind", "rogue_net")
    name = frame.get("name", "PPO")
    unread_model = set(MLP_ONLY if kind == "rogue_net" else ROGUE_NET_ONLY)
    if name not in Q_FRAMES:
        unread_model |= {"q_head"}
        unread_frame = {"n_updates"}
    else:
        unread_frame = {"n_epochs"}
    if not continuous_actions:
        unread_model.add("continuous")
    unread: Dict[str, Any] = {"model": unread_model, "frame": unread_frame}
    if data.get("selfplay", {}).get("seats", "all") == "all":
        unread["selfplay"] = None
    if name != "BC":
        unread["bc"] = None
    unread["tune"] = None  # a study's settings; its trials' own values are in the other sections
    return unread


def _anneal_resolved(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``data`` with ``frame.n_anneal_updates: auto`` as the count it resolves to: a run learns from the count,
    and records written before ``config_to_dict`` kept ``auto`` hold the count."""
    frame = data.get("frame") or {}
    if frame.get("n_anneal_updates") != "auto":
        return data
    rollout, train = data.get("rollout") or {}, data.get("train") or {}
    rows = RolloutSection(**{k: rollout[k] for k in ("num_envs", "n_steps") if k in rollout}).rows
    total = train.get("total_steps", TrainSection().total_steps)
    return {**data, "frame": {**frame, "n_anneal_updates": anneal_updates("auto", rows, total)}}


def learning_settings(data: Mapping[str, Any], *, continuous_actions: bool) -> Dict[str, Dict[str, Any]]:
    """The part of plain config ``data`` that decides what a run learns and reports (the module's rule).

    Args:
        data: plain config data, as ``config_to_dict`` gives (or an older version of it).
        continuous_actions: whether the environment has a continuous action (``model.continuous`` is
            read only then).

    Returns:
        ``{section: {field: value}}``, sections and fields the rule leaves out removed.
    """
    data = _anneal_resolved(data)
    unread = _unread(data, continuous_actions)
    kept: Dict[str, Dict[str, Any]] = {}
    for section in (f.name for f in dataclasses.fields(RunConfig)):
        values = data.get(section, {})
        if section in unread and unread[section] is None:
            continue
        declared = _section_fields(section, values)
        out = {}
        for name in list(declared) + [k for k in values if k not in declared]:
            if name in unread.get(section, ()):
                continue
            cls = declared.get(name)
            if cls is not None and marker_of(cls, name, "execution") is True:
                continue
            before = marker_of(cls, name, "before") if cls is not None else NOT_DECLARED
            if name in values:
                value = _plain(values[name])
            else:
                value = ABSENT if before is NOT_DECLARED else _plain(before)
            if before is not NOT_DECLARED and value == _plain(before):
                continue
            out[name] = value
        kept[section] = out
    return kept


def fingerprint(settings: Mapping[str, Any], revised: Optional[Mapping[str, int]] = None) -> str:
    """A short hash of :func:`learning_settings`' result (with whatever else the caller leaves out) and of
    the code revisions ``revised`` (:func:`revisions`; revision 1, or none, leaves the hash as it was)."""
    later = {feature: n for feature, n in (revised or {}).items() if n != 1}
    hashed = {**settings, "revisions": later} if later else dict(settings)
    return hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:12]
