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

from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from entmachin.data.dataset import plain_ids
from entmachin.env import EnvList, batch_obs, checked_choices
from entmachin.env.action import CONTINUOUS_SPACES
from entmachin.env.multi_agent import has_actors
from entmachin.frame.entity_memory import entity_rows
from entmachin.frame.memory import memory_rows, refuse_memory
from entmachin.ragged.arrays import ragged_from_arrays
from entmachin.run.config import EnvSection
from entmachin.run.envs import EnvFactory, env_class
from entmachin.run.matches import PolicyPlayer, load_opponent
from entmachin.run.prompt import (HELP, HELP_CONTINUOUS, PlayError, Quit, again, ask, describe, entity_lines,
                                  entity_names, recurrent_state, turns_of, with_probs)

__all__ = ["PlayError", "play"]

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
    except Quit:  # q or the end of the input
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
    refuse_memory(frame, "play with the agent in the other seats", PlayError)
    return PolicyPlayer(frame, envs.obs_space(), envs.action_space(), deterministic=True)


def _episodes(envs: EnvList, frame: Any, me: int = 0, others: Any = None, recorder: Any = None) -> None:
    """Plays episodes until the player declines another one (the person plays row ``me``, ``others``
    every other row; ``recorder`` records every step)."""
    obs_space, action_space = envs.obs_space(), envs.action_space()
    carry = None if frame is None else memory_rows(frame, 1)  # the agent's state, kept across the person's moves
    entities = None if frame is None else entity_rows(frame, 1)  # and its entities' (model.memory.per_entity)
    vec = envs.reset()
    step, reward, total = 0, 0.0, 0.0
    games = 0  # the games played so far: the key an opponent with memory keeps this game's states under
    while True:
        obs = envs.last_obs[me]
        mine = vec if others is None else batch_obs([obs], obs_space, action_space)  # the person's row alone
        names = entity_names(obs, mine, obs_space)
        print(f"\nstep {step}  reward {reward:.3f}  return {total:.3f}")
        for line in entity_lines(mine, obs_space, names):
            print(line)
        turns = turns_of(mine, action_space, names)
        if not any(turns.values()):
            print("no actor acts on this step" if others is None else "not your move on this step")
        elif frame is not None:
            turns = with_probs(frame, obs, obs_space, action_space, turns, carry, entities)
        rows = [{name: [ask(turn) for turn in group] for name, group in turns.items()}]
        if others is not None:
            rows = [rows[0] if r == me else _opponent_row(envs, r, others, games) for r in range(len(envs))]
        actions = {name: _ragged_choices(rows, name, action_space[name]) for name in action_space}
        before, ids = vec, [o.ids for o in envs.last_obs]
        if carry is not None:  # the agent's next states: it sees this step whoever chooses the actions
            acted = frame.act(recurrent_state(obs, obs_space, action_space, carry, entities, 1),
                              deterministic=True, collect_stats=False)
        vec = envs.act(actions)
        if carry is not None:
            carry.advance(acted, vec.done[me : me + 1])
            if entities is not None:
                entities.keep(acted)
                entities.end(vec.done[me : me + 1])
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
            if getattr(others, "remembers", False):
                others.forget(games)
            games += 1
            if not again():
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



def _opponent_row(envs: EnvList, row: int, others: Any, game: int) -> Dict[str, List[int]]:
    """The opponent's choices for ``row`` (printed), as indices per action. An opponent with memory sees every
    step of its seat, also those where it has no actor, under the key ``game``."""
    obs, seat = envs.last_obs[row], envs.row_index().seat[row]
    obs_space, action_space = envs.obs_space(), envs.action_space()
    acts = has_actors(obs, obs_space)
    if getattr(others, "remembers", False):
        chosen = others.choose([obs], [seat], games=[game])[0]
        actions = chosen if acts else {}
    else:
        actions = others.choose([obs], [seat])[0] if acts else {}
    choices = checked_choices(obs, obs_space, action_space, actions, f"opponent {others.name!r} (seat '{seat}')")
    for name, action in actions.items():
        if len(choices[name]):
            print(f"seat {seat} ({others.name}): {name} {describe(action)}")
    return {name: list(c) for name, c in choices.items()}
