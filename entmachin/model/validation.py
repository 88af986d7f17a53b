"""Value checks of action masks and given actions against the entities of each row.

All checks are registered with a ``DeferredChecks`` and decided in one device sync; messages
are built only for the check that failed, and name the action, the row and the offending value.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import torch

from entmachin.env.action import CONTINUOUS_SPACES, GLOBAL_SPACES, ActionSpace, SelectEntityActionSpace
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.model.inputs import WHERE, DeferredChecks, ParsedEntities, ParsedMask
from entmachin.ragged.tensor import RaggedTensor


def _first(bad: torch.Tensor) -> int:
    return int(torch.nonzero(bad)[0, 0])


def _range_check(checks: DeferredChecks, values: RaggedTensor, limit: torch.Tensor, where: str, what: str) -> None:
    """Every item of ``values`` (``[n, 1]``) must lie in ``[0, limit[row])``."""
    v = values.data[:, 0]  # [n]
    bound = limit[values.batch_index]  # [n]

    def message() -> str:
        i = _first((v < 0) | (v >= bound))
        row = int(values.batch_index[i])
        return (f"{where} row {row} item {i - int(values.offsets[row])} is {int(v[i])}; expected {what} "
                f"in [0, {int(bound[i])})")

    checks.add_range(v, bound, message)


def pair_actor_index(choices: torch.Tensor) -> torch.Tensor:
    """``[n_pairs]`` actor of each (actor, actee) pair, given ``choices`` ``[n_actors]`` actees per actor."""
    return torch.repeat_interleave(torch.arange(choices.shape[0], device=choices.device), choices)


def check_masks(
    action_space: Mapping[str, ActionSpace],
    masks: Mapping[str, ParsedMask],
    parsed: ParsedEntities,
    global_token: bool,
    checks: DeferredChecks,
) -> None:
    """Actors, actees and masks fit the rows' entities, and every actor has an allowed choice."""
    if not masks:
        return
    lengths = [rt.lengths for rt in parsed.features.values()]
    if lengths:
        n_entities = torch.stack(lengths).sum(dim=0)  # [B]
    else:
        n_entities = torch.zeros(parsed.n_rows, dtype=torch.int64, device=next(iter(masks.values())).actors.device)  # [B]
    n_tokens = n_entities + int(global_token)  # [B]
    for name, mask in masks.items():
        where = f"{WHERE}: action_masks['{name}']"
        actors = mask.actors
        if len(actors) != parsed.n_rows:
            raise ValueError(
                f"{where}['actors'] has {len(actors)} rows, but the entities have {parsed.n_rows}; "
                "every value needs one row per environment step"
            )
        space = action_space[name]
        if isinstance(space, GLOBAL_SPACES):
            a, expected = actors.data[:, 0], n_entities[actors.batch_index]  # [n_actors] each
            bad = a != expected
            checks.add(bad.any(), lambda a=a, e=expected, bad=bad, w=where: (
                f"{w}['actors'] row {int(actors.batch_index[_first(bad)])} names entity {int(a[_first(bad)])}; "
                f"a global action's actor is the {GLOBAL_ENTITY} entity, index {int(e[_first(bad)])} "
                "(after the row's entities)"))
        else:
            _range_check(checks, actors, n_tokens, f"{where}['actors']", "an entity index")
        if mask.low is not None:
            _check_bounds(checks, mask, space, where)
        if mask.mask is not None:
            empty = ~mask.mask.any(dim=1)  # [n_actors]
            checks.add(empty.any(), lambda empty=empty, w=where, a=actors: (
                f"{w}['mask'] row {int(a.batch_index[_first(empty)])} forbids every choice of actor "
                f"{_first(empty) - int(a.offsets[a.batch_index[_first(empty)]])}; every actor needs an allowed choice"))
        if isinstance(space, SelectEntityActionSpace):
            actees = mask.actees
            _range_check(checks, actees, n_entities, f"{where}['actees']", "an entity index")
            choices = actees.lengths[actors.batch_index]  # [n_actors]
            if mask.actee_mask is None:
                allowed = choices  # [n_actors]
            else:
                n_pairs = mask.actee_mask.shape[0]
                pair_actor = pair_actor_index(choices)  # [n_pairs]
                if pair_actor.shape[0] != n_pairs:
                    # Lengths disagree; the registered row-length check reports it.
                    continue
                allowed = torch.zeros_like(choices).index_add(0, pair_actor, mask.actee_mask.long())  # [n_actors]
            none = allowed == 0  # [n_actors]
            checks.add(none.any(), lambda none=none, w=where, a=actors: (
                f"{w}: actor {_first(none) - int(a.offsets[a.batch_index[_first(none)]])} of row "
                f"{int(a.batch_index[_first(none)])} has no allowed actee; every actor needs one"))


def _actor_value(bad: torch.Tensor, actors: RaggedTensor, names: List[str]) -> str:
    """``row r actor a value 'name' (dimension j)`` of the first True of ``bad`` ``[n_actors, n_values]``."""
    i, j = (int(k) for k in torch.nonzero(bad)[0])
    row = int(actors.batch_index[i])
    return f"row {row} actor {i - int(actors.offsets[row])} value '{names[j]}' (dimension {j})"


def _check_bounds(checks: DeferredChecks, mask: ParsedMask, space: Any, where: str) -> None:
    """Each actor's bounds are finite, ordered and within the space's."""
    low, high = mask.low, mask.high  # [n_actors, n_values] each
    space_low = torch.as_tensor(space.low, device=low.device)
    space_high = torch.as_tensor(space.high, device=low.device)
    bad = ~torch.isfinite(low) | ~torch.isfinite(high) | (low > high) | (low < space_low) | (high > space_high)
    checks.add(bad.any(), lambda: (
        f"{where}: bounds [{float(low[bad][0])}, {float(high[bad][0])}] of "
        f"{_actor_value(bad, mask.actors, space.names)} are not finite, crossed or outside the space's "
        f"[{space.low.tolist()}, {space.high.tolist()}]"))


def check_actions(
    action_space: Mapping[str, ActionSpace],
    masks: Mapping[str, ParsedMask],
    given: Optional[Dict[str, torch.Tensor]],
    checks: DeferredChecks,
) -> None:
    """Given actions are in range and allowed by their masks."""
    for name, action in (given or {}).items():
        where = f"{WHERE}: action['{name}']"
        mask = masks[name]
        actors = mask.actors
        if isinstance(action_space[name], CONTINUOUS_SPACES):
            bad = ~torch.isfinite(action)  # [n_actors, n_values]
            checks.add(bad.any(), lambda bad=bad, a=actors, v=action, w=where, s=action_space[name]: (
                f"{w} {_actor_value(bad, a, s.names)} is {float(v[bad][0])}; values must be finite"))
            continue
        values = actors.with_data(action[:, None])  # [n_actors, 1]
        if isinstance(action_space[name], SelectEntityActionSpace):
            limit = mask.actees.lengths  # [B]
            _range_check(checks, values, limit, where, "an actee position")
            if mask.actee_mask is None:
                continue
            choices = limit[actors.batch_index]  # [n_actors]
            pair_start = torch.cumsum(choices, 0) - choices  # [n_actors]
            inside = (action >= 0) & (action < choices)  # [n_actors]
            n_pairs = mask.actee_mask.shape[0]
            index = (pair_start + action.clamp(min=0)).clamp(max=max(n_pairs - 1, 0))  # [n_actors]
            ok = mask.actee_mask[index] if n_pairs else torch.zeros_like(inside)  # [n_actors]
        else:
            n_choices = len(action_space[name].index_to_label)
            limit = torch.full((len(actors),), n_choices, dtype=torch.int64, device=action.device)  # [B]
            _range_check(checks, values, limit, where, "a choice")
            if mask.mask is None:
                continue
            inside = (action >= 0) & (action < n_choices)  # [n_actors]
            ok = mask.mask.gather(1, action.clamp(0, n_choices - 1)[:, None])[:, 0]  # [n_actors]
        forbidden = inside & ~ok  # [n_actors]
        checks.add(forbidden.any(), lambda f=forbidden, a=actors, v=action, w=where: (
            f"{w} row {int(a.batch_index[_first(f)])} actor {_first(f) - int(a.offsets[a.batch_index[_first(f)]])} "
            f"chose {int(v[_first(f)])}, which its mask forbids"))
