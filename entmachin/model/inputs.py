"""Validation and conversion of RogueNet's inputs: the canonical entity state, masks and actions.

Values may be ragged array (converted onto the model's device) or ``RaggedTensor`` (moved
there). Checks that depend on tensor values are gathered and decided with one device sync;
given a disabled :class:`DeferredChecks` (inputs a caller has already checked, see
``RogueNet.trusted_inputs``), the parsers compute none of them. The structural checks (types,
entity and action names, widths, dtypes, numbers of rows and items: what the shapes alone tell)
run either way.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

import torch

from entmachin.env.action import CONTINUOUS_SPACES, ActionSpace, SelectEntityActionSpace
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.ragged.tensor import RaggedTensor, to_ragged_tensor

WHERE = "RogueNet.forward"


class DeferredChecks:
    """Collects value checks (bool scalar tensors) and raises for the first failed one.

    Each check is decided only at :meth:`raise_first`, in one device-to-host copy. Range
    checks (:meth:`add_range`) are decided together, in one comparison over all of them.

    Args:
        enabled: False for inputs the caller has already checked: nothing is registered,
            :meth:`raise_first` never syncs, and code that builds a check's tensors looks at
            :attr:`enabled` first so that it computes nothing either.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        # (failed, message) for a plain check; (None, message, values, bound) for a range check.
        self._checks: List[Tuple[Any, ...]] = []

    def add(self, failed: torch.Tensor, message: Callable[[], str]) -> None:
        """Registers ``failed`` (a bool scalar tensor) with a lazily built error message."""
        if not self.enabled:
            return
        if failed.dtype != torch.bool:
            failed = failed.to(torch.bool)
        self._checks.append((failed if failed.dim() == 0 else failed.reshape(()), message))

    def add_range(self, values: torch.Tensor, bound: torch.Tensor, message: Callable[[], str]) -> None:
        """Registers the check that every ``values[i]`` lies in ``[0, bound[i])`` (int64 ``[n]`` each)."""
        if not self.enabled:
            return
        self._checks.append((None, message, values, bound))

    def raise_first(self) -> None:
        """Raises ``ValueError`` with the message of the first failed check, if any."""
        if not self._checks:
            return
        self._checks, checks = [], self._checks
        ranges = [c for c in checks if c[0] is None]
        flags_in = [c[0] for c in checks if c[0] is not None]
        if ranges:
            values = torch.cat([c[2] for c in ranges])  # [n]
            bound = torch.cat([c[3] for c in ranges])  # [n]
            flags_in.append(((values < 0) | (values >= bound)).any())
        flags = torch.stack(flags_in).tolist() if flags_in else []  # the one sync
        range_failed = bool(flags.pop()) if ranges else False
        plain = iter(flags)
        for check in checks:
            if check[0] is None:
                if not range_failed:
                    continue
                values, bound = check[2], check[3]
                failed = bool(((values < 0) | (values >= bound)).any())  # only once one failed
            else:
                failed = bool(next(plain))
            if failed:
                raise ValueError(check[1]())


def _check_width(rt: RaggedTensor, width: int, where: str, declared: str) -> None:
    if rt.data.dim() != 2 or rt.data.shape[1] != width:
        raise ValueError(
            f"{where} has items of shape {rt.trailing_shape}; {declared} declares {width} per item"
        )


def _check_rows(rt: RaggedTensor, n_rows: int, where: str, reference: str) -> None:
    if len(rt) != n_rows:
        raise ValueError(
            f"{where} has {len(rt)} rows, but {reference} has {n_rows}; every value needs one row "
            "per environment step"
        )


def _check_finite(checks: DeferredChecks, rt: RaggedTensor, name: str, declared: List[str]) -> None:
    """Registers the check that every feature of ``entities[name]`` is finite.

    Decided in the forward's one sync, before any running statistics see the batch: a NaN
    would make every output of its row NaN and, inside ``collecting_stats()``, the statistics.
    """
    if not checks.enabled:
        return
    finite = torch.isfinite(rt.data)  # [n_entities, n_features]

    def message() -> str:
        item, column = (int(k) for k in torch.nonzero(~finite)[0])
        row = int(rt.batch_index[item])
        what = "" if name == GLOBAL_ENTITY else f" entity {item - int(rt.offsets[row])}"
        return (f"{WHERE}: entities['{name}'] row {row}{what} has {float(rt.data[item, column])} in feature "
                f"'{declared[column]}' (column {column}); features must be finite: find where the value came "
                "from (the environment's observation or the code that built the state)")

    checks.add(~finite.all(), message)


class ParsedEntities(NamedTuple):
    """Entity features on the model's device.

    Attributes:
        n_rows: batch size ``B``.
        features: real entity type -> float ``[n_entities, n_features]`` per row (absent types
            are zero-length), in ``ObsSpace`` order.
        global_features: ``[B, n_global_features]`` or ``None`` without global features.
        visible: entity type -> bool ``[n_entities]`` (types without visibility are absent);
            ``None`` when nothing is invisible-capable.
    """

    n_rows: int
    features: Dict[str, RaggedTensor]
    global_features: Optional[torch.Tensor]
    visible: Optional[Dict[str, torch.Tensor]]


def parse_entities(
    obs_space: ObsSpace,
    entities: Mapping[str, Any],
    visible: Optional[Mapping[str, Any]],
    device: torch.device,
    checks: DeferredChecks,
    n_rows_hint: Optional[int] = None,
    dtype: torch.dtype = torch.float32,
) -> ParsedEntities:
    """Validates ``entities`` / ``visible`` against ``obs_space`` and converts them.

    Features are cast to ``dtype`` (the model's parameter dtype) when they differ.
    """
    if not isinstance(entities, Mapping):
        raise TypeError(f"{WHERE}: entities must map entity type -> ragged features, got {type(entities).__name__}")
    allowed = list(obs_space.entities) + ([GLOBAL_ENTITY] if obs_space.global_features else [])
    converted: Dict[str, RaggedTensor] = {}
    for name, value in entities.items():
        if name == GLOBAL_ENTITY and not obs_space.global_features:
            # A global pseudo-entity without features exists only for global actions.
            continue
        if name not in allowed:
            raise ValueError(
                f"{WHERE}: entities['{name}'] is not an entity type of the observation space; "
                f"expected some of {allowed}"
            )
        rt = to_ragged_tensor(value, device, f"{WHERE}: entities['{name}']")
        if name == GLOBAL_ENTITY:
            declared = obs_space.global_features
            _check_width(rt, len(declared), f"{WHERE}: entities['{GLOBAL_ENTITY}']",
                         f"ObsSpace.global_features ({declared})")
        else:
            declared = obs_space.entities[name].features
            _check_width(rt, len(declared), f"{WHERE}: entities['{name}']",
                         f"ObsSpace.entities['{name}'] ({declared})")
        if not rt.data.is_floating_point():
            raise TypeError(f"{WHERE}: entities['{name}'] holds {rt.dtype}; expected floating-point features")
        converted[name] = rt = rt.to(dtype)
        _check_finite(checks, rt, name, declared)
    if converted:
        first = next(iter(converted))
        n_rows = len(converted[first])
    elif n_rows_hint is not None:
        first, n_rows = "action_masks", n_rows_hint
    else:
        raise ValueError(
            f"{WHERE}: cannot tell the number of rows: entities is empty and there are no action masks; "
            f"give entities for some of {allowed}"
        )
    for name, rt in converted.items():
        _check_rows(rt, n_rows, f"{WHERE}: entities['{name}']", f"entities['{first}']" if converted else first)

    global_features = None
    if obs_space.global_features:
        if GLOBAL_ENTITY not in converted:
            raise ValueError(
                f"{WHERE}: ObsSpace.global_features is {obs_space.global_features}, but entities has no "
                f"'{GLOBAL_ENTITY}' entry; to_state(vec_obs) puts the global features there"
            )
        glob = converted.pop(GLOBAL_ENTITY)
        if checks.enabled:
            checks.add(
                (glob.lengths != 1).any(),
                lambda: f"{WHERE}: entities['{GLOBAL_ENTITY}'] must hold exactly one item per row, got row lengths "
                f"{glob.lengths.tolist()}",
            )
        global_features = glob.data  # [B, n_global_features] once the check holds

    features: Dict[str, RaggedTensor] = {}
    for name, entity in obs_space.entities.items():
        if name in converted:
            features[name] = converted[name]
        else:
            empty = torch.zeros((0, len(entity.features)), dtype=dtype, device=device)  # [0, n_features]
            features[name] = RaggedTensor.from_lengths(empty, torch.zeros(n_rows, dtype=torch.int64, device=device))

    parsed_visible = None
    if visible:
        if not isinstance(visible, Mapping):
            raise TypeError(f"{WHERE}: visible must map entity type -> ragged bool, got {type(visible).__name__}")
        parsed_visible = {}
        for name, value in visible.items():
            if name not in features:
                raise ValueError(
                    f"{WHERE}: visible['{name}'] names no entity type; expected some of {list(features)}"
                )
            rt = to_ragged_tensor(value, device, f"{WHERE}: visible['{name}']")
            _check_width(rt, 1, f"{WHERE}: visible['{name}']", "the canonical state")
            _check_rows(rt, n_rows, f"{WHERE}: visible['{name}']", f"entities['{name}']")
            if checks.enabled:
                checks.add(
                    (rt.lengths != features[name].lengths).any(),
                    lambda name=name, rt=rt: f"{WHERE}: visible['{name}'] has row lengths {rt.lengths.tolist()}, "
                    f"but entities['{name}'] has {features[name].lengths.tolist()}",
                )
            parsed_visible[name] = rt.data[:, 0].to(torch.bool)  # [n_entities]
    return ParsedEntities(n_rows, features, global_features, parsed_visible)


class ParsedMask(NamedTuple):
    """One action's actors and masks on the model's device.

    Attributes:
        actors: int64 ``[n_actors, 1]`` entity indices, one sequence per row.
        mask: bool ``[n_actors, n_choices]`` (categorical) or ``None`` (all allowed).
        actees: int64 ``[n_actees, 1]`` per row (select-entity) or ``None``.
        actee_mask: bool ``[n_pairs]`` row-major actor x actee (select-entity) or ``None``.
        low, high: float32 ``[n_actors, n_values]`` each actor's bounds (continuous; the space's
            where the state gave none) or ``None``.
    """

    actors: RaggedTensor
    mask: Optional[torch.Tensor]
    actees: Optional[RaggedTensor]
    actee_mask: Optional[torch.Tensor]
    low: Optional[torch.Tensor] = None
    high: Optional[torch.Tensor] = None


def _int_ragged(value: Any, device: torch.device, where: str) -> RaggedTensor:
    rt = to_ragged_tensor(value, device, where)
    if rt.dtype != torch.int64:
        raise TypeError(f"{where} holds {rt.dtype}; expected int64 entity indices")
    _check_width(rt, 1, where, "the canonical state")
    return rt


def parse_action_masks(
    action_space: Mapping[str, ActionSpace],
    action_masks: Mapping[str, Any],
    device: torch.device,
    checks: DeferredChecks,
) -> Dict[str, ParsedMask]:
    """Validates and converts ``{action_name: {"actors", "mask" | "actees", "actee_mask"}}``."""
    if not isinstance(action_masks, Mapping):
        raise TypeError(f"{WHERE}: action_masks must map action name -> masks, got {type(action_masks).__name__}")
    parsed: Dict[str, ParsedMask] = {}
    for name, entry in action_masks.items():
        where = f"{WHERE}: action_masks['{name}']"
        if name not in action_space:
            raise ValueError(f"{where}: unknown action; the action space has {list(action_space)}")
        if not isinstance(entry, Mapping) or "actors" not in entry:
            raise ValueError(f"{where}: expected a mapping with an 'actors' entry, got {entry!r:.80}")
        space = action_space[name]
        select = isinstance(space, SelectEntityActionSpace)
        continuous = isinstance(space, CONTINUOUS_SPACES)
        allowed = {"actors", "actees", "actee_mask"} if select else {"actors", "low", "high"} if continuous \
            else {"actors", "mask"}
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise ValueError(
                f"{where}: unknown key '{unknown[0]}' for a {type(space).__name__}; allowed: {sorted(allowed)}"
            )
        actors = _int_ragged(entry["actors"], device, f"{where}['actors']")
        mask = actees = actee_mask = None
        if continuous:
            parsed[name] = ParsedMask(actors, None, None, None, *_bounds(space, entry, actors, device, checks, where))
            continue
        if not select and entry.get("mask") is not None:
            rt = to_ragged_tensor(entry["mask"], device, f"{where}['mask']")
            n_choices = len(space.index_to_label)
            _check_width(rt, n_choices, f"{where}['mask']", f"the action space ({n_choices} choices)")
            _check_rows(rt, len(actors), f"{where}['mask']", f"{where}['actors']")
            def message(rt: RaggedTensor = rt, a: RaggedTensor = actors, w: str = where) -> str:
                return (f"{w}['mask'] has row lengths {rt.lengths.tolist()}, but ['actors'] has "
                        f"{a.lengths.tolist()}; one mask row per actor")

            if rt.n_items != actors.n_items:
                raise ValueError(message())
            if checks.enabled:
                checks.add((rt.lengths != actors.lengths).any(), message)
            mask = rt.data.to(torch.bool)  # [n_actors, n_choices]
        if select:
            if "actees" not in entry:
                raise ValueError(f"{where}: a SelectEntityActionSpace needs an 'actees' entry")
            actees = _int_ragged(entry["actees"], device, f"{where}['actees']")
            _check_rows(actees, len(actors), f"{where}['actees']", f"{where}['actors']")
            if entry.get("actee_mask") is not None:
                rt = to_ragged_tensor(entry["actee_mask"], device, f"{where}['actee_mask']")
                _check_width(rt, 1, f"{where}['actee_mask']", "the canonical state")
                _check_rows(rt, len(actors), f"{where}['actee_mask']", f"{where}['actors']")
                if checks.enabled:
                    pairs = actors.lengths * actees.lengths  # [B]
                    checks.add((rt.lengths != pairs).any(),
                               lambda rt=rt, p=pairs, w=where: f"{w}['actee_mask'] has row lengths "
                               f"{rt.lengths.tolist()}; expected n_actors * n_actees = {p.tolist()} (row-major "
                               "actor x actee)")
                actee_mask = rt.data[:, 0].to(torch.bool)  # [n_pairs]
        parsed[name] = ParsedMask(actors, mask, actees, actee_mask)
    return parsed


def _bounds(space: Any, entry: Mapping[str, Any], actors: RaggedTensor, device: torch.device,
            checks: DeferredChecks, where: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """A continuous action's per-actor ``(low, high)``, float32 ``[n_actors, n_values]`` each: the
    entry's, or the space's repeated for every actor."""
    n_values = len(space)
    out = []
    for side, default in (("low", space.low), ("high", space.high)):
        if entry.get(side) is None:
            out.append(torch.as_tensor(default, device=device).expand(actors.n_items, n_values))
            continue
        rt = to_ragged_tensor(entry[side], device, f"{where}['{side}']")
        _check_width(rt, n_values, f"{where}['{side}']", f"the action space ({n_values} values)")
        _check_rows(rt, len(actors), f"{where}['{side}']", f"{where}['actors']")

        def message(rt: RaggedTensor = rt, a: RaggedTensor = actors, w: str = f"{where}['{side}']") -> str:
            return f"{w} has row lengths {rt.lengths.tolist()}, but ['actors'] has {a.lengths.tolist()}; one row per actor"

        if rt.n_items != actors.n_items:
            raise ValueError(message())
        if checks.enabled:
            checks.add((rt.lengths != actors.lengths).any(), message)
        out.append(rt.data.float())
    return out[0], out[1]


def parse_actions(
    action: Mapping[str, Any],
    masks: Mapping[str, ParsedMask],
    device: torch.device,
    checks: DeferredChecks,
) -> Dict[str, torch.Tensor]:
    """Validates given actions against the actors; returns ``{name: int64 [n_actors]}`` (continuous:
    float32 ``[n_actors, n_values]``)."""
    if not isinstance(action, Mapping):
        raise TypeError(f"{WHERE}: action must map action name -> ragged int64, got {type(action).__name__}")
    if set(action) == {"action"} and "action" not in masks and isinstance(action["action"], Mapping):
        action = action["action"]  # the stored form {"action": {name: ...}}
    if set(action) != set(masks):
        raise ValueError(
            f"{WHERE}: action has entries {sorted(action)}, but action_masks has {sorted(masks)}; "
            "give one entry per masked action"
        )
    out: Dict[str, torch.Tensor] = {}
    for name, value in action.items():
        where = f"{WHERE}: action['{name}']"
        continuous = masks[name].low is not None
        if continuous:
            rt = to_ragged_tensor(value, device, where)
            if not rt.dtype.is_floating_point:
                raise TypeError(f"{where} holds {rt.dtype}; a continuous action's values are float32")
            _check_width(rt, masks[name].low.shape[1], where, "the action space")
        else:
            rt = _int_ragged(value, device, where)
        actors = masks[name].actors
        _check_rows(rt, len(actors), where, f"action_masks['{name}']['actors']")
        def message(rt: RaggedTensor = rt, a: RaggedTensor = actors, w: str = where) -> str:
            return (f"{w} has row lengths {rt.lengths.tolist()}, but the actors have {a.lengths.tolist()}; "
                    "one choice per actor")

        if rt.n_items != actors.n_items:
            raise ValueError(message())
        if checks.enabled:
            checks.add((rt.lengths != actors.lengths).any(), message)
        out[name] = rt.data.float() if continuous else rt.data[:, 0]  # [n_actors, n_values] or [n_actors]
    return out
