"""Games between a trained policy and an opponent: ``entmachin eval --opponent``, ``log.eval_opponents``.

A *player* chooses the actions of one seat in many games at once (``choose``: observations in, one
action mapping per observation out). ``PolicyPlayer`` batches a frame's policy over them;
``FunctionPlayer`` calls an opponent function ``(observation, action_space, rng) -> actions`` for
each and checks what it returns against the observation's masks (``checked_choices``), so a
scripted opponent's masked or malformed actions raise ``OpponentError`` naming the opponent, seat
and action before any environment steps.

Opponents are named ``random``, ``scripted`` (the environment's own ``scripted_opponent``), a
module path ``pkg.mod:function`` or a run directory (its latest checkpoint; ``RUN_DIR/checkpoints/best``:
its best); ``load_opponent``
turns a name into a player.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from entmachin.env import Observation, batch_obs, checked_choices, random_actions, to_state
from entmachin.env.env_list import row_choices, to_env_actions
from entmachin.env.multi_agent import RESULTS, check_game_step, game_results, has_actors, is_multi_agent
from entmachin.frame.collector import default_actions
from entmachin.frame.config import resolve
from entmachin.run.build import seeds
from entmachin.run.envs import EnvFactory
from entmachin.frame.entity_memory import EntityIdError, entity_rows
from entmachin.frame.memory import actor_memory_size, memory_rows
from entmachin.run.evaluation import Version, eval_envs, load_trained, run_dir_of
from entmachin.run.logs import RunError

__all__ = ["OpponentError", "MatchResult", "PolicyPlayer", "FunctionPlayer", "RandomPlayer", "load_opponent",
           "play_matches", "match", "match_checkpoint"]

logger = logging.getLogger(__name__)

OPPONENT_KINDS = "random, scripted, a run directory or pkg.mod:function"


class OpponentError(ValueError):
    """An opponent raised, or returned actions that its observation does not allow."""


def _row_actions(actions: Mapping[str, Any], observations: Sequence[Observation], obs_space: Any,
                 action_space: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Ragged choices of a batch of observations -> each observation's ``Action`` objects."""
    return [to_env_actions(obs_space, action_space, choices, obs)
            for choices, obs in zip(row_choices(actions, len(observations)), observations)]


class RandomPlayer:
    """Plays a seat with a uniformly random allowed choice for every actor (the ``random`` opponent)."""

    name = "random"

    def __init__(self, obs_space: Any, action_space: Mapping[str, Any], rng: np.random.Generator) -> None:
        self.obs_space, self.action_space, self.rng = obs_space, action_space, rng

    def choose(self, observations: Sequence[Observation], seats: Sequence[str]) -> List[Dict[str, Any]]:
        vec = batch_obs(list(observations), self.obs_space, self.action_space)
        return _row_actions(random_actions(vec, self.action_space, self.rng), observations, self.obs_space,
                            self.action_space)


class FunctionPlayer:
    """Plays a seat with an opponent function ``(observation, action_space, rng) -> actions``."""

    def __init__(self, fn: Callable[..., Any], obs_space: Any, action_space: Mapping[str, Any],
                 rng: np.random.Generator, name: str) -> None:
        self.fn, self.obs_space, self.action_space, self.rng, self.name = fn, obs_space, action_space, rng, name

    def choose(self, observations: Sequence[Observation], seats: Sequence[str]) -> List[Dict[str, Any]]:
        return [call_policy(self.fn, obs, self.obs_space, self.action_space, self.rng,
                            f"opponent {self.name!r} (seat '{seat}')", OpponentError)[0]
                for obs, seat in zip(observations, seats)]


def call_policy(fn: Callable[..., Any], obs: Observation, obs_space: Any, action_space: Mapping[str, Any],
                rng: np.random.Generator, where: str, error: type) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """``fn(obs, action_space, rng)``'s actions and their choices (``checked_choices``); what it raises,
    or actions its observation does not allow, become ``error`` naming ``where``."""
    try:
        actions = fn(obs, action_space, rng)
    except Exception as e:
        raise error(f"{where} raised {type(e).__name__}: {e}") from e
    try:
        return actions, checked_choices(obs, obs_space, action_space, actions, where)
    except (TypeError, ValueError) as e:
        raise error(str(e)) from None


class PolicyPlayer:
    """Plays a seat with a frame's policy, one batched forward pass for every game's observation.

    A policy with memory (``model.memory``; ``remembers`` is True) keeps a state per game and seat: ``choose``
    then takes ``games``, each observation's game (any hashable; a game it has not seen begins there), and
    :func:`play_matches` shows it every step of its seats, also those where it has no actor, so that the state
    follows the game; ``forget(game)`` drops a finished game's states. With ``model.memory.per_entity`` each
    game and seat also keeps its entities' states by their ids (``Observation.ids``): a batch's rows are
    assembled from them in an :class:`~entmachin.frame.entity_memory.EntityRows` for the pass, and its
    states taken back after it.
    """

    def __init__(self, frame: Any, obs_space: Any, action_space: Mapping[str, Any], deterministic: bool = True,
                 name: str = "agent") -> None:
        self.frame, self.obs_space, self.action_space = frame, obs_space, action_space
        self.deterministic, self.name = deterministic, name
        self.remembers = actor_memory_size(frame) > 0
        # (game, seat) -> that seat's state and its entities' (EntityRows.row; None without per_entity)
        self._states: Dict[Tuple[Any, str], Tuple[Any, Any]] = {}

    def choose(self, observations: Sequence[Observation], seats: Sequence[str],
               games: Optional[Sequence[Any]] = None) -> List[Dict[str, Any]]:
        """Each observation's actions (the actors' most likely choices, or samples); ``games``: each one's game
        (required of a policy with memory).

        Raises:
            OpponentError: a policy with memory without ``games``, or (per-entity memory) an observation whose
                entities lack ids or reuse one, naming the game and seat.
        """
        vec = batch_obs(list(observations), self.obs_space, self.action_space)
        state = to_state(vec, self.action_space)
        keys, entities = None, None
        if self.remembers:
            if games is None:
                raise OpponentError(f"{self.name}: a policy with memory (model.memory) keeps a state per game: "
                                    "choose() needs games=, each observation's game")
            keys = list(zip(games, seats))
            rows, entities = memory_rows(self.frame, len(keys)), entity_rows(self.frame, len(keys))
            for k, key in enumerate(keys):  # games not seen yet begin here (zeros, episode_start)
                if key in self._states:
                    rows.memory[k], rows.episode_start[k] = self._states[key][0], False
                    if entities is not None:
                        entities.put(k, self._states[key][1])
            state = rows.state(state)
            if entities is not None:
                state = {**state, **self._entries(entities, vec, keys)}
        result = self.frame.act(state, self.deterministic, collect_stats=False)
        if keys is not None:
            if entities is not None:
                entities.keep(result)
            for k, (key, memory) in enumerate(zip(keys, result.memory.detach().cpu())):
                self._states[key] = (memory, None if entities is None else entities.row(k))
        return _row_actions(default_actions(result)[1], observations, self.obs_space, self.action_space)

    def _entries(self, entities: Any, vec: Any, keys: List[Tuple[Any, str]]) -> Dict[str, Any]:
        try:
            return entities.entries(vec)
        except EntityIdError as e:
            raise OpponentError("{} (game {!r}, seat '{}'): {}".format(self.name, *keys[e.row], e)) from None

    def forget(self, game: Any) -> None:
        """Drops every seat's state of ``game`` (a policy with memory)."""
        for key in [key for key in self._states if key[0] == game]:
            del self._states[key]


def load_opponent(spec: str, factory: Callable[[], Any], seed: int, deterministic: bool = True) -> Any:
    """The player an opponent name stands for (see the module doc).

    Raises:
        RunError: an unknown name, an environment without a scripted opponent, or a run whose
            spaces differ from the environment's (naming its checkpoint directory).
    """
    env = factory()
    game = getattr(factory, "name", None) or type(env).__name__  # not its time-limit wrapper's
    try:
        if not is_multi_agent(env):
            raise RunError(f"--opponent {spec}: {game} has one player; opponents need a game of several")
        obs_space, action_space, scripted = env.obs_space(), env.action_space(), env.scripted_opponent
    finally:
        env.close()
    rng = np.random.default_rng(seed)
    if spec == "random":
        return RandomPlayer(obs_space, action_space, rng)
    if spec == "scripted":
        if scripted is None:
            raise RunError(f"--opponent scripted: {game} has no scripted_opponent; name another "
                           f"({OPPONENT_KINDS})")
        return FunctionPlayer(scripted, obs_space, action_space, rng, "scripted")
    if os.path.isdir(spec):
        frame, _, _ = load_trained(spec, factory)
        return PolicyPlayer(frame, obs_space, action_space, deterministic, name=_run_name(spec))
    if ":" in spec:
        return FunctionPlayer(resolve_function(spec, "--opponent"), obs_space, action_space, rng, spec)
    raise RunError(f"--opponent {spec!r}: not a run directory, and not one of {OPPONENT_KINDS}")


def _run_name(path: str) -> str:
    """A run directory's name (``<run>@best`` for its ``checkpoints/best``)."""
    run_dir = run_dir_of(path)
    name = os.path.basename(os.path.abspath(run_dir))
    return f"{name}@best" if os.path.normpath(path) != run_dir and os.path.basename(os.path.normpath(path)) == "best" \
        else name


def resolve_function(spec: str, option: str) -> Any:
    """The function ``pkg.mod:function`` names (an opponent's, a recorded policy's, a reward's).

    Raises:
        RunError: it cannot be imported, or is not callable (naming ``option``).
    """
    try:
        fn = resolve(spec, None, option)
    except ValueError as e:
        raise RunError(str(e)) from None
    if not callable(fn):
        raise RunError(f"{option} {spec}: not a function")
    return fn


@dataclass(frozen=True)
class MatchResult:
    """Results of the agent's games (draws count half in ``win_rate``)."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else math.nan

    def interval(self, z: float = 1.96) -> tuple:
        """Wilson's 95% interval of the win rate (draws counting half)."""
        n, p = self.games, self.win_rate
        if not n:
            return math.nan, math.nan
        centre, spread = (p + z * z / (2 * n)) / (1 + z * z / n), \
            z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - spread), min(1.0, centre + spread)

    def line(self) -> str:
        low, high = self.interval()
        return f"win rate {self.win_rate:.3f} (95% CI {low:.3f}-{high:.3f})"


def play_matches(make_env: Callable[[], Any], agent: Any, opponent: Any, games: int, seed: Optional[int] = None, *,
                 num_envs: int = 16, max_game_steps: int = 10_000) -> MatchResult:
    """``games`` games of ``agent`` against ``opponent`` (which plays every other seat), ``num_envs`` at a time.

    The agent's seat alternates: game ``g`` puts it in seat ``g % n_seats``. A seat without actors
    is not asked to choose. A game longer than ``max_game_steps`` ends there, the higher return
    winning.

    Raises:
        OpponentError: an opponent function raised or chose actions its observation forbids.
        ValueError: ``games`` is not a positive int.
    """
    if isinstance(games, bool) or not isinstance(games, int) or games < 1:
        raise ValueError(f"play_matches: games must be an int >= 1, got {games!r}")
    n = min(num_envs, games)
    envs = [make_env() for _ in range(n)]
    seeds = np.random.SeedSequence(seed).generate_state(n, dtype=np.uint64) if seed is not None else [None] * n
    scores: List[float] = []
    try:
        for env, s in zip(envs, seeds):
            env.seed(None if s is None else int(s))
        seats, obs_space = envs[0].seats(), envs[0].obs_space()
        game = list(range(n))  # each environment's game number (its agent sits in seats[game % n_seats])
        started = n
        obs = [env.reset() for env in envs]
        returns = [np.zeros(len(seats)) for _ in envs]
        steps = [0] * n
        live = list(range(n))
        while live:
            moves: List[Dict[str, Dict[str, Any]]] = [{seat: {} for seat in seats} for _ in range(n)]
            for player, mine in ((agent, True), (opponent, False)):
                remembers = getattr(player, "remembers", False)  # sees every step of its seats, actors or not
                asked = [(i, seat) for i in live for k, seat in enumerate(seats) if (k == game[i] % len(seats)) == mine
                         and (remembers or has_actors(obs[i][seat], obs_space))]
                if asked:
                    observed = [obs[i][seat] for i, seat in asked]
                    chosen = player.choose(observed, [seat for _, seat in asked],
                                           **({"games": [game[i] for i, _ in asked]} if remembers else {}))
                    for (i, seat), actions, seen in zip(asked, chosen, observed):
                        if has_actors(seen, obs_space):
                            moves[i][seat] = actions
            for i in list(live):
                stepped = envs[i].act(moves[i])
                done = check_game_step(type(envs[i]).__name__ + ".act()", stepped, seats)
                returns[i] += [stepped[seat].reward for seat in seats]
                steps[i] += 1
                if done or steps[i] >= max_game_steps:
                    stated = [stepped[seat].result for seat in seats] if done else [None] * len(seats)
                    scores.append(game_results(stated, returns[i])[game[i] % len(seats)])
                    for player in (agent, opponent):
                        if getattr(player, "remembers", False):
                            player.forget(game[i])
                    if started < games:
                        game[i], started = started, started + 1
                        stepped, returns[i], steps[i] = envs[i].reset(), np.zeros(len(seats)), 0
                    else:
                        live.remove(i)
                obs[i] = stepped
    finally:
        for env in envs:
            env.close()
    values = np.array(scores)
    return MatchResult(int((values == RESULTS["win"]).sum()), int((values == RESULTS["draw"]).sum()),
                       int((values == RESULTS["loss"]).sum()))


def match_checkpoint(path: str, opponent: str, games: int, deterministic: bool, seed: Optional[int],
                     version: Optional[Version] = None) -> MatchResult:
    """Games of a run's latest checkpoint (or ``version``: its steps, or ``"best"``) against ``opponent`` (see
    ``entmachin.run.matches``)."""
    frame, config, factory = load_trained(path, version=version)
    seed = seeds(config)["eval"] if seed is None else seed
    return match(frame, factory, opponent, games, deterministic, seed)


def match(frame: Any, factory: EnvFactory, opponent: Any, games: int, deterministic: bool, seed: int) -> MatchResult:
    """``games`` games of ``frame``'s policy against ``opponent`` (a name, or a player from ``load_opponent``)."""
    obs_space, action_space = factory.spaces()
    player = load_opponent(opponent, factory, seed + 1, deterministic) if isinstance(opponent, str) else opponent
    agent = PolicyPlayer(frame, obs_space, action_space, deterministic)
    return play_matches(factory, agent, player, games, seed, num_envs=eval_envs(games))
