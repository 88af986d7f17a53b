"""``entmachin play``: a person plays an environment in the terminal, one actor at a time.

    entmachin play ENV [--seed S]
    entmachin play [ENV] --checkpoint RUN_DIR [--seed S]
    entmachin play GAME [--checkpoint RUN_DIR] [--seat SEAT] [--opponent OPPONENT] [--seed S]

ENV is a registry name (``entmachin envs``) or ``package.module:Class``, built with its defaults
(with ``--checkpoint``: with the run's settings).
Every step prints the step number, the last reward and the return so far, one table per entity
type (each entity's id and features) and the global features. Then each actor of each action
is asked for its choice:

* categorical: the choice's name, or its number in the list shown;
* select entity: the actee's id as the environment reports it (``('Cherry', 3)``, also
  ``Cherry 3`` without the punctuation), or ``#N``, its position in the list shown (a plain
  number too, where no id reads so);
* continuous: one number per value, in the order shown, separated by blanks or commas
  (``0.5 -1``), each within the actor's bounds shown;
* ``a`` or Enter: the agent's most likely choice (with ``--checkpoint``; continuous: the
  distribution's deterministic point, shown beside the bounds);
* ``q``: quit, at any prompt; so does the end of the input (exit status 0).

A masked choice (or a number outside its bounds, or the wrong count of numbers) is refused and
the question repeats. With ``--checkpoint`` (a run directory or
its ``checkpoints/``) the agent's probability of each choice is shown beside it (masked choices:
0) and the run's own environment is played, as it was trained (its ``env`` section: kwargs and
``max_episode_steps`` too); an ENV naming another environment is refused. ``--seed S`` plays the
episodes of ``EnvList(factory, 1, seed=S)``. When an episode ends its return is printed and the
player is asked whether to play again. Output goes to stdout and input comes from stdin, so a
game can be scripted.

In a game of several players (``MultiAgentEnvironment``) the person plays ``--seat`` (default:
the first seat) and sees that seat's view; every other seat is played by ``--opponent``
(``random``, ``scripted``, a run directory or ``pkg.mod:function``), or by the checkpoint's agent
(its most likely actions) when no opponent is named. Each opponent move is printed, and at the
end of a game the seat's result.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from entmachin.data.dataset import plain_ids
from entmachin.env import GLOBAL_ENTITY, EnvList, ObsSpace, Observation, VecObs, VecSelectEntityActionMask, batch_obs
from entmachin.env.action import CONTINUOUS_SPACES
from entmachin.env.vec_env import VecContinuousActionMask
from entmachin.env import checked_choices, to_state
from entmachin.ragged.arrays import ragged_from_arrays
from entmachin.run.envs import EnvFactory, env_class
from entmachin.run.config import EnvSection
from entmachin.env.multi_agent import has_actors
from entmachin.run.matches import PolicyPlayer, load_opponent

__all__ = ["PlayError", "Turn", "play"]

HELP = ("Type a choice's name or number; for a select-entity action the entity's id or #position. "
        "'a' or Enter: the agent's choice (with --checkpoint); q quits.")
HELP_CONTINUOUS = ("For a continuous action type one number per value, in the order shown, within the bounds shown; "
                   "'a' or Enter: the agent's values (with --checkpoint).")


class PlayError(ValueError):
    """``entmachin play`` cannot start or go on (what to play is missing, or no choice is allowed)."""


class _Quit(Exception):
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


def play(env: Optional[str], checkpoint: Optional[str], seed: Optional[int], seat: Optional[str] = None,
         opponent: Optional[str] = None, record: Optional[str] = None) -> int:
    """Plays ENV (or the checkpoint's environment) with stdin and stdout; returns the exit status.

    With ``record``, every finished episode (every seat's rows: the person's and the opponent's)
    goes to that new dataset directory (``entmachin.data``); an episode left unfinished does not.

    Raises:
        PlayError: neither ``env`` nor ``checkpoint``, or an actor without any allowed choice; a
            seat or opponent for a game of one player; an unknown seat; a game without an
            opponent (no ``--opponent`` and no ``--checkpoint``).
        ConfigError: an unknown environment (with close matches).
        RunError: not a run directory, or a checkpoint of other spaces (naming which differ).
    """
    if env is None and checkpoint is None:
        raise PlayError("play: give ENV or --checkpoint RUN_DIR (see `entmachin envs`)")
    frame = None
    if checkpoint is None:
        factory = EnvFactory(EnvSection(name=env))
    else:
        from entmachin.run.evaluation import load_trained

        frame, config, factory = load_trained(checkpoint)
        if env is not None and env_class(env) is not env_class(config.env.name):
            raise PlayError(f"play: {env} is not the environment {checkpoint} was trained on "
                            f"({config.env.name}); leave ENV out to play the run's own")
    envs = EnvList(factory, 1, seed=seed)
    recorder = None
    try:
        others = _others(envs, frame, factory, seat, opponent, seed)
        me = envs.row_index().seat.index(seat or envs.row_index().seat[0]) if others else 0
        if record is not None:
            recorder = _recorder(record, envs, factory, me, seed, checkpoint, opponent)
        print(f"playing {factory.name}{'' if seed is None else f' (seed {seed})'}"
              f"{'' if checkpoint is None else f' with the agent of {checkpoint}'}"
              f"{f' as seat {envs.row_index().seat[me]} against {others.name}' if others else ''}")
        print(HELP)
        if any(isinstance(space, CONTINUOUS_SPACES) for space in envs.action_space().values()):
            print(HELP_CONTINUOUS)
        _episodes(envs, frame, me, others, recorder)
    except _Quit:  # q or the end of the input
        print("quit")
    finally:
        envs.close()
        if recorder is not None:
            recorder.close()
            print(f"recorded {recorder.ended} episode(s) in {record}")
    return 0


def _recorder(directory: str, envs: EnvList, factory: EnvFactory, me: int, seed: Optional[int],
              checkpoint: Optional[str], opponent: Optional[str]) -> Any:
    """A recorder of the person's games into the new dataset ``directory``."""
    from entmachin.data import DatasetError, DatasetWriter
    from entmachin.data.recorder import Recorder

    seats = envs.row_index().seat
    multi = seats[0] is not None
    recorded = {"env": factory.name, "policy": "person", "seat": seats[me], "seed": seed,
                "opponent": opponent or (checkpoint if multi else None)}
    try:
        writer = DatasetWriter(directory, envs.obs_space(), envs.action_space(),
                               seats=list(seats) if multi else None, recorded=recorded)
    except DatasetError as e:
        raise PlayError(f"play --record: {e}") from None
    return Recorder(writer, len(seats), seats=list(seats) if multi else None, flush_every=1)


def _others(envs: EnvList, frame: Any, factory: EnvFactory, seat: Optional[str], opponent: Optional[str],
            seed: Optional[int]) -> Any:
    """The player of the seats the person does not play (None: a game of one player)."""
    seats = envs.row_index().seat
    if seats[0] is None:
        if seat is not None or opponent is not None:
            raise PlayError(f"play: {factory.name} has one player; --seat and --opponent are for games of several")
        return None
    if seat is not None and seat not in seats:
        raise PlayError(f"play: {factory.name} has no seat {seat!r}; its seats are {list(seats)}")
    if opponent is not None:
        return load_opponent(opponent, factory, 0 if seed is None else seed + 1)
    if frame is None:
        raise PlayError(f"play: {factory.name} is a game of {len(seats)} players; name who plays the other seats "
                        "(--opponent random|scripted|RUN_DIR|pkg.mod:function, or --checkpoint RUN_DIR for its agent)")
    return PolicyPlayer(frame, envs.obs_space(), envs.action_space(), deterministic=True)


def _episodes(envs: EnvList, frame: Any, me: int = 0, others: Any = None, recorder: Any = None) -> None:
    """Plays episodes until the player declines another one (the person plays row ``me``, ``others``
    every other row; ``recorder`` records every step)."""
    obs_space, action_space = envs.obs_space(), envs.action_space()
    vec = envs.reset()
    step, reward, total = 0, 0.0, 0.0
    while True:
        obs = envs.last_obs[me]
        mine = vec if others is None else batch_obs([obs], obs_space, action_space)  # the person's row alone
        names = _entity_names(obs, mine, obs_space)
        print(f"\nstep {step}  reward {reward:.3f}  return {total:.3f}")
        for line in _entity_lines(mine, obs_space, names):
            print(line)
        turns = _turns(mine, action_space, names)
        if not any(turns.values()):
            print("no actor acts on this step" if others is None else "not your move on this step")
        elif frame is not None:
            turns = _with_probs(frame, obs, obs_space, action_space, turns)
        rows = [{name: [_ask(turn) for turn in group] for name, group in turns.items()}]
        if others is not None:
            rows = [rows[0] if r == me else _opponent_row(envs, r, others) for r in range(len(envs))]
        actions = {name: _ragged_choices(rows, name, action_space[name]) for name in action_space}
        before, ids = vec, [o.ids for o in envs.last_obs]
        vec = envs.act(actions)
        if recorder is not None:
            plain = plain_ids(ids)
            recorder.step(before, actions, vec, ids=ids if plain else None,
                          final_ids=[o.ids for o in envs.final_observations] if plain else None)
        step, reward = step + 1, float(vec.reward[me])
        total += reward
        if vec.done[me]:
            cut = " (time limit)" if vec.truncated[me] else ""
            result = "" if np.isnan(vec.result[me]) else f", you {_RESULT_WORDS[float(vec.result[me])]}"
            print(f"\n{'game' if others else 'episode'} over after {step} step{'s' if step != 1 else ''}{cut}: "
                  f"reward {reward:.3f}, return {total:.3f}{result}")
            if not _again():
                return
            step, reward, total = 0, 0.0, 0.0


_RESULT_WORDS = {1.0: "win", 0.5: "draw", 0.0: "lose"}


def _ragged_choices(rows: Sequence[Mapping[str, list]], name: str, space: Any) -> Any:
    """Every row's choices of one action as ``VecEnv.act`` takes them: int64 ``[n_actors, 1]``, or
    float32 ``[n_actors, n_values]`` for a continuous action."""
    lengths = [len(row[name]) for row in rows]
    chosen = [c for row in rows for c in row[name]]
    if isinstance(space, CONTINUOUS_SPACES):
        return ragged_from_arrays(np.array(chosen, np.float32).reshape(-1, len(space)), lengths, np.float32)
    return ragged_from_arrays(np.array(chosen, np.int64).reshape(-1, 1), lengths)



def _opponent_row(envs: EnvList, row: int, others: Any) -> Dict[str, List[int]]:
    """The opponent's choices for ``row`` (printed), as indices per action."""
    obs, seat = envs.last_obs[row], envs.row_index().seat[row]
    obs_space, action_space = envs.obs_space(), envs.action_space()
    actions = others.choose([obs], [seat])[0] if has_actors(obs, obs_space) else {}
    choices = checked_choices(obs, obs_space, action_space, actions, f"opponent {others.name!r} (seat '{seat}')")
    for name, action in actions.items():
        if len(choices[name]):
            print(f"seat {seat} ({others.name}): {name} {_describe(action)}")
    return {name: list(c) for name, c in choices.items()}


def _describe(action: Any) -> str:
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


def _entity_names(obs: Observation, vec: VecObs, obs_space: ObsSpace) -> List[str]:
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


def _entity_lines(vec: VecObs, obs_space: ObsSpace, names: List[str]) -> List[str]:
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


def _turns(vec: VecObs, action_space: Mapping[str, Any], names: List[str]) -> Dict[str, List[Turn]]:
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


def _with_probs(frame: Any, obs: Observation, obs_space: ObsSpace, action_space: Mapping[str, Any],
                turns: Dict[str, List[Turn]]) -> Dict[str, List[Turn]]:
    """The turns with the agent's full distribution of every actor (discrete actions) and its
    deterministic values (continuous ones).

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
        one = to_state(batch_obs([obs], obs_space, action_space), action_space)
        with torch.no_grad():
            out = frame.act(one, deterministic=True, collect_stats=False)
        for name in continuous:
            points[name] = out.action[name].data.float().cpu().numpy()  # [n_actors, n_values]
            result[name] = [replace(t, point=points[name][i]) for i, t in enumerate(turns[name])]
    discrete = {name: group for name, group in turns.items() if name not in points and group}
    if not discrete:
        return result
    n_rows = max(len(t.labels) for group in discrete.values() for t in group)
    state = to_state(batch_obs([obs] * n_rows, obs_space, action_space), action_space)
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


def _ask(turn: Turn) -> Union[int, np.ndarray]:
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


def _again() -> bool:
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
        raise _Quit from None
    if text == "q":
        raise _Quit
    return text
