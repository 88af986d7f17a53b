"""The terminal's side of ``entmachin play``: the tables a person reads (entities, features, the
agent's probabilities), each actor's :class:`Turn`, and reading and checking the person's answer
(a choice's name or number, an actee's id or position, continuous values within bounds, ``a`` for
the agent's choice, ``q`` to quit)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from entmachin.env import GLOBAL_ENTITY, ObsSpace, Observation, VecObs, VecSelectEntityActionMask, batch_obs, to_state
from entmachin.env.vec_env import VecContinuousActionMask
from entmachin.ragged.arrays import ragged_from_arrays
from entmachin.ragged.tensor import RaggedTensor


__all__ = ["PlayError", "Quit", "Turn", "HELP", "HELP_CONTINUOUS", "describe", "entity_names", "entity_lines",
           "turns_of", "with_probs", "recurrent_state", "ask", "again"]

HELP = ("Type a choice's name or number; for a select-entity action the entity's id or #position. "
        "'a' or Enter: the agent's choice (with --checkpoint); q quits.")
HELP_CONTINUOUS = ("For a continuous action type one number per value, in the order shown, within the bounds shown; "
                   "'a' or Enter: the agent's values (with --checkpoint).")


class PlayError(ValueError):
    """``entmachin play`` cannot start or go on (what to play is missing, or no choice is allowed)."""


class Quit(Exception):
    """The player typed ``q`` or the input ended."""


@dataclass(frozen=True)
class Turn:
    """One actor's decision on one step.

    Attributes:
        action: the action's name.
        actor: the actor's id as text (``Type[i]`` for an entity without id, ``global``).
        labels: choice names (categorical) or actee ids as text (select entity), in order.
        allowed: bool ``[n_choices]``: what the mask allows.
        probs: float ``[n_choices]``: the agent's probabilities (None: no agent).
        low, high: float32 ``[n_values]``: a continuous action's bounds for this actor (``labels``
            are then the values' names; None for discrete actions).
        point: float32 ``[n_values]``: the agent's deterministic values (continuous, with an agent).
    """

    action: str
    actor: str
    labels: List[str]
    allowed: np.ndarray
    probs: Optional[np.ndarray] = None
    low: Optional[np.ndarray] = None
    high: Optional[np.ndarray] = None
    point: Optional[np.ndarray] = None

    @property
    def continuous(self) -> bool:
        return self.low is not None


def describe(action: Any) -> str:
    """``label`` (one actor) or ``actor -> label, ...``: what an opponent chose."""
    if hasattr(action, "label"):
        return str(action.label)
    if hasattr(action, "values"):  # continuous
        values = np.asarray(action.values, np.float32).reshape(-1, len(action.names))
        if not hasattr(action, "actors"):
            return _values_text(action.names, values[0])
        chosen = [_values_text(action.names, v) for v in values]
    else:
        chosen = action.actees if hasattr(action, "actees") else [action.index_to_label[int(i)] for i in action.indices]
    pairs = list(zip(action.actors, chosen))
    return str(pairs[0][1]) if len(pairs) == 1 else ", ".join(f"{a} -> {c}" for a, c in pairs)


def _values_text(names: Sequence[str], values: np.ndarray) -> str:
    return " ".join(f"{n}={_number(float(v))}" for n, v in zip(names, values))


def entity_names(obs: Observation, vec: VecObs, obs_space: ObsSpace) -> List[str]:
    """The name of every entity index of the step: its id as text, ``Type[i]`` without id, then ``global``."""
    names: List[str] = []
    for etype in obs_space.entities:
        ids = obs.ids.get(etype)
        n = int(vec.features[etype].size1()[0])
        names += [str(ids[i]) if ids is not None else f"{etype}[{i}]" for i in range(n)]
    return names + ["global"]


def _number(value: float) -> str:
    return f"{value:.4g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    """Rows under a header, indented, in columns two spaces apart."""
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]


def entity_lines(vec: VecObs, obs_space: ObsSpace, names: List[str]) -> List[str]:
    lines, offset = [], 0
    for etype, entity in obs_space.entities.items():
        feats = vec.features[etype].as_array()  # [n_entities, n_features]
        visible = vec.visible[etype].as_array()[:, 0] if etype in vec.visible else None  # [n_entities]
        header = ["id", *entity.features, *(["visible"] if visible is not None else [])]
        rows = [[names[offset + i], *map(_number, feats[i]),
                 *([("yes" if visible[i] else "no")] if visible is not None else [])] for i in range(len(feats))]
        lines.append(f"{etype} ({len(feats)})")
        lines += _table(header, rows) if rows else []
        offset += len(feats)
    if obs_space.global_features:
        values = vec.features[GLOBAL_ENTITY].as_array()[0]  # [n_global_features]
        lines.append("global  " + "  ".join(f"{k}={_number(v)}" for k, v in zip(obs_space.global_features, values)))
    return lines


def turns_of(vec: VecObs, action_space: Mapping[str, Any], names: List[str]) -> Dict[str, List[Turn]]:
    """Every actor's decision of this step, per action (in the action space's order)."""
    turns: Dict[str, List[Turn]] = {}
    for name, space in action_space.items():
        amask = vec.action_masks[name]
        actors = amask.actors.as_array()[:, 0]  # [n_actors] entity indices
        if isinstance(amask, VecContinuousActionMask):
            low, high = amask.bounds(space)  # [n_actors, n_values] each
            turns[name] = [Turn(name, names[a], list(space.names), np.ones(len(space), np.bool_), low=low[i],
                                high=high[i]) for i, a in enumerate(actors)]
            continue
        if isinstance(amask, VecSelectEntityActionMask):
            actees = amask.actees.as_array()[:, 0]  # [n_actees] entity indices
            labels = [names[i] for i in actees]
            shape = (len(actors), len(actees))
        else:
            labels = list(space.index_to_label)
            shape = (len(actors), len(labels))
        allowed = np.ones(shape, np.bool_) if amask.mask is None else amask.mask.as_array().reshape(shape)
        turns[name] = [Turn(name, names[a], labels, allowed[i]) for i, a in enumerate(actors)]
        for turn in turns[name]:
            if not turn.allowed.any():
                raise PlayError(f"action {name!r}: the mask allows actor {turn.actor} no choice")
    return turns


def with_probs(frame: Any, obs: Observation, obs_space: ObsSpace, action_space: Mapping[str, Any],
               turns: Dict[str, List[Turn]], carry: Any = None, entities: Any = None) -> Dict[str, List[Turn]]:
    """The turns with the agent's full distribution of every actor (discrete actions) and its
    deterministic values (continuous ones); ``carry``: the agent's recurrent state
    (``entmachin.frame.memory.MemoryRows`` of one row) where its network has memory, and ``entities``
    its entities' (``entmachin.frame.entity_memory.EntityRows`` of one row) with ``model.memory.per_entity``.

    The continuous values come from one deterministic pass. Then the step is repeated once per
    choice position k; in row k every actor takes choice k where its mask allows it (else its
    first allowed choice; continuous actions their deterministic values), and the actor's
    log-probabilities score them. An actor's choices are independent of the other actors' given
    the step, so row k's log-probability of actor i is the probability that i takes choice k.
    """
    result = dict(turns)
    continuous = [name for name, group in turns.items() if group and group[0].continuous]
    points: Dict[str, np.ndarray] = {}
    if continuous:
        one = recurrent_state(obs, obs_space, action_space, carry, entities, 1)
        with torch.no_grad():
            out = frame.act(one, deterministic=True, collect_stats=False)
        for name in continuous:
            points[name] = out.action[name].data.float().cpu().numpy()  # [n_actors, n_values]
            result[name] = [replace(t, point=points[name][i]) for i, t in enumerate(turns[name])]
    discrete = {name: group for name, group in turns.items() if name not in points and group}
    if not discrete:
        return result
    n_rows = max(len(t.labels) for group in discrete.values() for t in group)
    state = recurrent_state(obs, obs_space, action_space, carry, entities, n_rows)
    action: Dict[str, Any] = {}
    for name, group in turns.items():
        if name in points:
            values = np.tile(points[name], (n_rows, 1))  # [n_rows * n_actors, n_values]
            action[name] = ragged_from_arrays(values, np.full(n_rows, len(group)), np.float32)
            continue
        fallback = np.array([int(np.argmax(t.allowed)) for t in group], np.int64)  # [n_actors]
        k = np.arange(n_rows)[:, None]  # [n_rows, 1]
        ok = np.array([np.pad(t.allowed, (0, n_rows - len(t.allowed))) for t in group], np.bool_)  # [n_actors, n_rows]
        ok = ok.T.reshape(n_rows, len(group))  # [n_rows, n_actors]
        taken = np.where(ok, k, fallback[None, :])  # [n_rows, n_actors]
        action[name] = ragged_from_arrays(taken.reshape(-1, 1), np.full(n_rows, taken.shape[1]))
    with torch.no_grad():
        out = frame.eval_act(state, {"action": action})
    for name, group in discrete.items():
        log_prob = out.log_prob[name].data.float().cpu().numpy().reshape(n_rows, len(group))  # [n_rows, n_actors]
        result[name] = [replace(t, probs=np.where(t.allowed, np.exp(log_prob[: len(t.labels), i]), 0.0))
                        for i, t in enumerate(group)]
    return result


def recurrent_state(obs: Observation, obs_space: ObsSpace, action_space: Mapping[str, Any], carry: Any,
                    entities: Any, n_rows: int) -> Dict[str, Any]:
    """The network's inputs for ``n_rows`` copies of ``obs``, each with the agent's states (``carry``: its
    ``MemoryRows`` of one row, None without memory; ``entities``: its ``EntityRows`` of one row, None without
    per-entity memory); the entities' handles are kept for ``entities.keep``."""
    state = to_state(batch_obs([obs] * n_rows, obs_space, action_space), action_space)
    if carry is None:
        return state
    state = {**state, "memory": carry.memory.expand(n_rows, -1),  # [n_rows, memory_size]
             "episode_start": carry.episode_start.expand(n_rows, -1)}  # [n_rows, 1]
    if entities is None:
        return state
    entries = entities.entries(batch_obs([obs], obs_space, action_space))  # each entry: type -> ragged, one row
    return {**state, **{key: {etype: _repeat_row(r, n_rows) for etype, r in entry.items()}
                        for key, entry in entries.items()}}


def _repeat_row(one: RaggedTensor, n_rows: int) -> RaggedTensor:
    """A ragged tensor of one row as ``n_rows`` copies of that row."""
    data = one.data.repeat(n_rows, *([1] * (one.data.dim() - 1)))  # [n_rows * n, ...]
    return RaggedTensor.from_lengths(data, one.lengths.repeat(n_rows))  # n_rows rows of n items


def _values(turn: Turn, text: str) -> Union[np.ndarray, str]:
    """The continuous values ``text`` gives (float32 ``[n_values]``), or a message saying why not."""
    parts = text.replace(",", " ").split()
    try:
        values = np.array([float(p) for p in parts], np.float64)
    except ValueError:
        return f"{text!r} is not {len(turn.labels)} number(s) for {turn.actor} ({', '.join(turn.labels)}); q quits"
    if len(values) != len(turn.labels):
        return f"{turn.actor} takes {len(turn.labels)} number(s) ({', '.join(turn.labels)}); got {len(values)}"
    for j, v in enumerate(values):
        if not np.isfinite(v) or not turn.low[j] <= np.float32(v) <= turn.high[j]:
            return (f"{turn.labels[j]} = {text.replace(',', ' ').split()[j]} is outside its bounds "
                    f"[{_number(turn.low[j])}, {_number(turn.high[j])}] for {turn.actor}")
    return values.astype(np.float32)


def _ask_values(turn: Turn) -> np.ndarray:
    """Prints a continuous action's values with their bounds (and the agent's), reads numbers until
    they fit."""
    print(f"{turn.action} for {turn.actor}:")
    agent = turn.point is not None
    header = ["value", "low", "high", *(["agent"] if agent else [])]
    rows = [[label, _number(turn.low[j]), _number(turn.high[j]), *([_number(turn.point[j])] if agent else [])]
            for j, label in enumerate(turn.labels)]
    for line in _table(header, rows):
        print(line)
    while True:
        text = _read(f"{turn.action} for {turn.actor}> ")
        if text in ("", "a"):
            if turn.point is None:
                print("no agent to ask (give --checkpoint RUN_DIR); type the numbers")
                continue
            print(f"agent: {_values_text(turn.labels, turn.point)}")
            return np.asarray(turn.point, np.float32)
        values = _values(turn, text)
        if isinstance(values, np.ndarray):
            return values
        print(values)


def _plain(text: str) -> str:
    """Text without brackets, quotes and commas, so that ``Cherry 3`` reads as ``('Cherry', 3)``."""
    return " ".join(re.sub(r"[()\[\]'\",]", " ", text).split()).lower()


def _resolve(turn: Turn, text: str) -> Union[int, str]:
    """The choice ``text`` names, or a message saying why it cannot be taken."""
    found = [k for k, label in enumerate(turn.labels) if label == text] or \
            [k for k, label in enumerate(turn.labels) if _plain(label) == _plain(text)]
    number = text[1:] if text.startswith("#") else text
    if (not found or text.startswith("#")) and number.isdigit() and int(number) < len(turn.labels):
        found = [int(number)]
    if not found:
        return f"no choice {text!r} for {turn.actor}; type a name or number from the list (q quits)"
    if len(found) > 1:
        return f"{text!r} names {len(found)} choices for {turn.actor}; type #N, a position in the list"
    if not turn.allowed[found[0]]:
        allowed = [turn.labels[k] for k in np.flatnonzero(turn.allowed)]
        more = ", ..." if len(allowed) > 12 else ""
        return f"{turn.labels[found[0]]!r} is masked for {turn.actor}; allowed: {', '.join(allowed[:12])}{more}"
    return found[0]


def ask(turn: Turn) -> Union[int, np.ndarray]:
    """Prints the actor's choices (with the agent's probabilities) and reads one until it is allowed
    (continuous: the values, :func:`_ask_values`)."""
    if turn.continuous:
        return _ask_values(turn)
    print(f"{turn.action} for {turn.actor}:")
    agent = turn.probs is not None
    header = ["  #", "choice", *(["agent"] if agent else []), ""]
    rows = [[f"{k:>3}", label, *([f"{turn.probs[k]:.3f}"] if agent else []), "" if turn.allowed[k] else "masked"]
            for k, label in enumerate(turn.labels)]
    for line in _table(header, rows):
        print(line)
    best = int(np.argmax(turn.probs)) if turn.probs is not None else None
    while True:
        text = _read(f"{turn.action} for {turn.actor}> ")
        if text in ("", "a"):
            if best is None:
                print("no agent to ask (give --checkpoint RUN_DIR); type a choice")
                continue
            print(f"agent: {turn.labels[best]}")
            return best
        chosen = _resolve(turn, text)
        if isinstance(chosen, int):
            return chosen
        print(chosen)


def again() -> bool:
    while True:
        answer = _read("play again? [y/N]> ").lower()
        if answer in ("y", "yes", "n", "no", ""):
            return answer.startswith("y")
        print("answer y or n (q quits)")


def _read(prompt: str) -> str:
    """One line of input without surrounding blanks; ``q`` or the end of the input quits."""
    try:
        text = input(prompt).strip()
    except EOFError:
        print()
        raise Quit from None
    if text == "q":
        raise Quit
    return text
