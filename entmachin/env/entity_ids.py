"""Numbering an episode's entities by their ids (the contract ``Observation.ids`` keeps within an episode).

Per-entity memory keeps each entity's state by its id: every id of an episode gets a number (its handle) in
order of first appearance, and keeps it, and its entity type, until the episode ends. Training and
evaluation (``entmachin.frame.entity_memory.EntityRows``) and an exported policy (``entmachin.deploy``)
number them with :func:`number_entities`, so both hold an environment to the same contract and name the
same breaches. The standard library only.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

__all__ = ["number_entities"]


def number_entities(index: Dict[Any, Tuple[str, int]], ids: Mapping[str, Sequence[Any]], counts: Mapping[str, int],
                    types: Sequence[str], where: str) -> Dict[str, List[int]]:
    """Each entity type's handles for one observation's entities, in the observation's order; ids new to the
    episode are numbered after its earlier ones (and added to ``index``).

    Args:
        index: the episode's ids so far, id -> (entity type, handle); updated in place.
        ids: the observation's ids, entity type -> ids in its entities' order (``Observation.ids``).
        counts: entity type -> the observation's entities of that type.
        types: the entity types, in the observation space's order.
        where: starts every message (e.g. ``"entity memory: row 3"``).

    Returns:
        entity type -> the handles of its entities (``counts[t]`` of them).

    Raises:
        ValueError: a type whose ids are not one per entity, an id given twice in the observation, or an id
            that named an entity of another type earlier in the episode.
    """
    seen, handles = set(), {}
    for etype in types:
        given = list(ids.get(etype, ()))
        if len(given) != int(counts.get(etype, 0)):
            raise ValueError(f"{where}: {int(counts.get(etype, 0))} {etype!r} entities but {len(given)} ids; "
                             "per-entity memory keeps states by id, so the environment must give every entity its id "
                             "(Observation ids=...)")
        mine = []
        for eid in given:
            if eid in seen:
                raise ValueError(f"{where}: entity id {eid!r} is given twice in one observation")
            seen.add(eid)
            known = index.get(eid)
            if known is None:
                known = index[eid] = (etype, len(index))
            elif known[0] != etype:
                raise ValueError(f"{where}: entity id {eid!r} names a {etype!r} entity, but earlier in this episode "
                                 f"it named a {known[0]!r} one; an environment must not reuse an id within an episode "
                                 "for another entity")
            mine.append(known[1])
        handles[etype] = mine
    return handles
