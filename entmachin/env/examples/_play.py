"""Playing games of several players: a uniformly random opponent and whole games between opponents.

Example:
    >>> env = ConnectFour()
    >>> final = play_game(env, {"0": connect_four_opponent, "1": random_opponent}, rng)
    >>> final["0"].result
    'win'
"""
from __future__ import annotations

from typing import Dict, Mapping

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    ContinuousAction,
    ContinuousActionMask,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    SelectEntityAction,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Observation
from entmachin.env.multi_agent import MultiAgentEnvironment, Opponent, Seat


def random_opponent(
    observation: Observation, action_space: Mapping[ActionName, ActionSpace], rng: np.random.Generator
) -> Dict[ActionName, Action]:
    """A uniformly random allowed choice for every actor of every action (masks honoured;
    continuous values uniform within each actor's bounds).

    Actions without actors are left out, so a seat without actors gets ``{}``.
    """
    out: Dict[ActionName, Action] = {}
    for name, amask in observation.actions.items():
        space = action_space[name]
        if isinstance(amask, GlobalContinuousActionMask):
            out[name] = GlobalContinuousAction(_uniform(space, amask, 1, rng)[0], list(space.names))  # type: ignore[union-attr]
            continue
        if isinstance(amask, GlobalCategoricalActionMask):
            labels = action_space[name].index_to_label  # type: ignore[union-attr]
            allowed = np.ones(len(labels), bool) if amask.mask is None else np.asarray(amask.mask, bool).reshape(-1)
            index = int(rng.choice(np.flatnonzero(allowed)))
            out[name] = GlobalCategoricalAction(index, labels[index])
            continue
        actors = list(amask.actor_ids) if amask.actor_ids is not None else [None]
        if not actors:
            continue
        if isinstance(amask, ContinuousActionMask):
            out[name] = ContinuousAction(actors, _uniform(space, amask, len(actors), rng), list(space.names))  # type: ignore[union-attr]
        elif isinstance(amask, CategoricalActionMask):
            labels = action_space[name].index_to_label  # type: ignore[union-attr]
            allowed = np.ones((len(actors), len(labels)), bool) if amask.mask is None else np.asarray(amask.mask, bool)
            choices = np.array([rng.choice(np.flatnonzero(row)) for row in allowed], dtype=np.int64)
            out[name] = CategoricalAction(actors, choices, list(labels))
        else:
            actees = list(amask.actee_ids or [])
            allowed = np.ones((len(actors), len(actees)), bool) if amask.mask is None else np.asarray(amask.mask, bool)
            out[name] = SelectEntityAction(actors, [actees[rng.choice(np.flatnonzero(row))] for row in allowed])
    return out


def _uniform(space: ActionSpace, amask: object, n: int, rng: np.random.Generator) -> np.ndarray:
    """float32 ``[n, n_values]`` uniform within the mask's bounds (the space's where it has none)."""
    bounds = []
    for side in ("low", "high"):
        given = getattr(amask, side)
        bounds.append(np.broadcast_to(getattr(space, side) if given is None else np.asarray(given, np.float64)
                                      .reshape(n, -1), (n, len(space))).astype(np.float64))  # type: ignore[arg-type]
    low, high = bounds
    return np.clip(low + rng.random(low.shape) * (high - low), low, high).astype(np.float32)


def play_game(
    env: MultiAgentEnvironment, opponents: Mapping[Seat, Opponent], rng: np.random.Generator
) -> Dict[Seat, Observation]:
    """Play one game of ``env`` from ``reset()``, each seat's actions chosen by its opponent
    function; return the final observations (``result`` holds each seat's result).

    Raises:
        ValueError: ``opponents`` does not name exactly ``env.seats()``.
    """
    seats = env.seats()
    if set(opponents) != set(seats):
        raise ValueError(f"play_game: opponents name seats {sorted(opponents)}; the game's seats are {seats}")
    space = env.action_space()
    obs = env.reset()
    while not obs[seats[0]].done:
        obs = env.act({seat: opponents[seat](obs[seat], space, rng) for seat in seats})
    return obs
