"""Environments with several players: seats, per-seat observations, game results, opponents.

A ``MultiAgentEnvironment`` has a fixed list of seats (player names) per instance. ``reset()``
and ``act(actions_by_seat)`` return one ``Observation`` per seat, seen from that seat (its own
entities, features and masks; partial visibility allowed). Every seat shares one
``obs_space()`` / ``action_space()``: roles are entities or features, not separate spaces.

* Each seat gets its own reward; the game ends for every seat on the same step (every seat's
  observation has ``done`` set, or none has).
* A seat that is not to move (turn-based games) or has been knocked out has no actors: its
  observation's masks list no actors, and ``act`` receives no actions for it (an empty mapping).
* At the end of a game each seat's observation may state its ``result`` (``"win"``, ``"draw"``
  or ``"loss"``); where the environment states none, the seat with the higher episode return
  wins (``game_results``).

Vectorised lists (``EnvList``, ``ParallelEnvList``, ``RayEnvList``) step such environments with
one row per (environment, seat), in environment order and, within one environment, seat order;
``VecEnv.row_index()`` says which environment and seat each row is. Rows are ordinary rows for
buffers, GAE and RogueNet: one policy can play every seat.

An *opponent* is a function ``(observation, action_space, rng) -> actions`` that chooses one
seat's actions from that seat's ``Observation``; ``MultiAgentEnvironment.scripted_opponent`` is
the environment's own (or ``None``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np
import numpy.typing as npt

from entmachin.env.action import Action, ActionSpace
from entmachin.env.common import ActionName
from entmachin.env.environment import Observation, ObsSpace, filter_observation
from entmachin.env.symmetry import Symmetry

Seat = str
SeatActions = Mapping[ActionName, Action]
Opponent = Callable[[Observation, Mapping[ActionName, ActionSpace], np.random.Generator], Dict[ActionName, Action]]

RESULTS = {"win": 1.0, "draw": 0.5, "loss": 0.0}  # a seat's score, as Elo ratings count it
RESULT_NAMES = {score: name for name, score in RESULTS.items()}


class MultiAgentEnvironment(ABC):
    """Base class of environments with several players (seats).

    Subclasses implement ``seats``, ``obs_space``, ``action_space``, ``reset`` and ``act``, and
    may set ``scripted_opponent``. Randomness should come from ``self.rng``, which ``seed``
    replaces.

    Example:
        >>> env = ConnectFour()
        >>> env.seed(0)
        >>> obs = env.reset()  # {"0": Observation, "1": Observation}
        >>> while not obs["0"].done:
        ...     obs = env.act({seat: choose(o) for seat, o in obs.items()})
        >>> {seat: o.result for seat, o in obs.items()}
        {'0': 'win', '1': 'loss'}
    """

    rng: np.random.Generator
    #: The environment's own opponent, ``(observation, action_space, rng) -> actions`` (or None).
    scripted_opponent: Optional[Opponent] = None

    @abstractmethod
    def seats(self) -> List[Seat]:
        """The players' names, in row order; fixed for the life of the instance."""

    @abstractmethod
    def obs_space(self) -> ObsSpace:
        """The shape of every seat's observations."""

    @abstractmethod
    def action_space(self) -> Dict[ActionName, ActionSpace]:
        """The actions every seat may take, by name."""

    @abstractmethod
    def reset(self) -> Dict[Seat, Observation]:
        """Start a new game; one observation per seat."""

    @abstractmethod
    def act(self, actions: Mapping[Seat, SeatActions]) -> Dict[Seat, Observation]:
        """Apply every seat's ``actions`` (seat -> action name -> action; an empty mapping for a seat
        without actors) and return the next observation of every seat."""

    def seed(self, seed: Optional[int]) -> None:
        """Give this environment its own random stream (``self.rng``), drawn from ``seed`` (``None``: fresh
        entropy)."""
        self.rng = np.random.default_rng(seed)

    def reset_filter(self, obs_filter: ObsSpace) -> Dict[Seat, Observation]:
        """``reset``, keeping only the entity types and features named in ``obs_filter``."""
        return self._filter(self.reset(), obs_filter)

    def act_filter(self, actions: Mapping[Seat, SeatActions], obs_filter: ObsSpace) -> Dict[Seat, Observation]:
        """``act`` with ``actions``, keeping only the entity types and features named in ``obs_filter``."""
        return self._filter(self.act(actions), obs_filter)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """An RGB image of the current state."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render()")

    def symmetries(self) -> Dict[str, Symmetry]:
        """The game's symmetries by name (``entmachin.env.symmetry``): transformations of its observations
        that leave its rules unchanged, which ``rollout.symmetries`` trains on; none unless overridden."""
        return {}

    def close(self) -> None:
        """Release resources held by the environment."""

    def _filter(self, by_seat: Dict[Seat, Observation], obs_filter: ObsSpace) -> Dict[Seat, Observation]:
        return {seat: filter_observation(self, obs, obs_filter) for seat, obs in by_seat.items()}


def has_actors(obs: Observation, obs_space: ObsSpace) -> bool:
    """Whether any action of ``obs`` has an actor (a seat not to move, or knocked out, has none)."""
    return any(len(obs._actor_indices(name, obs_space)) for name in obs.actions)


def is_multi_agent(env: Any) -> bool:
    """Whether ``env`` is a ``MultiAgentEnvironment``."""
    return isinstance(env, MultiAgentEnvironment)


def check_seats(where: str, seats: Any) -> List[Seat]:
    """``seats`` as a list of distinct non-empty strings.

    Raises:
        TypeError, ValueError: naming what is wrong.
    """
    if not isinstance(seats, (list, tuple)) or not seats:
        raise TypeError(f"{where}: seats() must return a non-empty list of seat names, got {seats!r}")
    for seat in seats:
        if not isinstance(seat, str) or not seat:
            raise TypeError(f"{where}: seat names must be non-empty strings, got {seat!r}")
    if len(set(seats)) != len(seats):
        raise ValueError(f"{where}: seats() names a seat twice: {list(seats)}")
    return list(seats)


def check_by_seat(where: str, by_seat: Any, seats: Sequence[Seat], what: str) -> None:
    """Check that ``by_seat`` maps exactly ``seats`` (``what``: "observations" or "actions").

    Raises:
        TypeError: ``by_seat`` is not a mapping.
        ValueError: a seat is missing or unknown (named).
    """
    if not isinstance(by_seat, Mapping):
        raise TypeError(f"{where}: {what} must be a mapping from seat name to {what[:-1]}s, got {type(by_seat).__name__}")
    unknown = [s for s in by_seat if s not in seats]
    if unknown:
        raise ValueError(f"{where}: {what} name unknown seat(s) {unknown}; the seats are {list(seats)}")
    missing = [s for s in seats if s not in by_seat]
    if missing:
        raise ValueError(f"{where}: {what} omit seat(s) {missing}; give every seat of {list(seats)} "
                         f"(an empty mapping for a seat without actors)")


def check_game_step(where: str, by_seat: Mapping[Seat, Observation], seats: Sequence[Seat]) -> bool:
    """Check one step's observations of every seat; return whether the game ended.

    Raises:
        ValueError: a seat is missing or unknown, some seats' games ended and others' not, or a
            result is not ``"win"``, ``"draw"`` or ``"loss"`` (each named).
        TypeError: a value is not an ``Observation``.
    """
    check_by_seat(where, by_seat, seats, "observations")
    done = None
    for seat in seats:
        obs = by_seat[seat]
        if not isinstance(obs, Observation):
            raise TypeError(f"{where}: seat '{seat}': expected an Observation, got {type(obs).__name__}")
        if done is None:
            done = bool(obs.done)
        elif bool(obs.done) != done:
            ended = [s for s in seats if by_seat[s].done]
            raise ValueError(f"{where}: the game ended for seats {ended} but not for the others of {list(seats)}; "
                             f"a game ends for every seat on the same step")
        if obs.result is not None and obs.result not in RESULTS:
            raise ValueError(f"{where}: seat '{seat}': result {obs.result!r}; expected one of {list(RESULTS)}")
    return bool(done)


def game_results(stated: Sequence[Optional[str]], returns: Sequence[float], where: str = "game") -> List[float]:
    """Each seat's score (1 win, 0.5 draw, 0 loss) at the end of a game.

    If the environment gave no results, the seats with the highest episode return share the win: one
    such seat wins, several draw, and the others lose (all equal: every seat draws).

    Args:
        stated: the result (``"win"``, ``"draw"`` or ``"loss"``) the environment gave each seat, in
            seat order; ``None`` where it gave none.
        returns: each seat's episode return, in seat order; read only where no result is stated.
        where: what the error message names (default ``"game"``).

    Returns:
        One score per seat, in seat order.

    Raises:
        ValueError: the environment stated results for some seats only.
    """
    given = [r is not None for r in stated]
    if all(given):
        return [RESULTS[r] for r in stated]  # type: ignore[index]
    if any(given):
        raise ValueError(f"{where}: results were stated for some seats only ({list(stated)}); state every seat's "
                         f"result or none (then the higher episode return wins)")
    best = max(returns)
    top = [r == best for r in returns]
    share = 1.0 if sum(top) == 1 else 0.5
    return [share if t else 0.0 for t in top]


__all__ = [
    "MultiAgentEnvironment", "Seat", "SeatActions", "Opponent", "RESULTS", "RESULT_NAMES", "has_actors", "is_multi_agent", "check_seats",
    "check_by_seat", "check_game_step", "game_results",
]
