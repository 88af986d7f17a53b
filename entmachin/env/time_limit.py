"""``TimeLimit``: cut episodes after a number of steps, marking the cut as truncated."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import numpy.typing as npt

from entmachin.env.action import Action, ActionSpace
from entmachin.env.adapters import ensure_environment
from entmachin.env.common import ActionName
from entmachin.env.environment import Environment, Observation, ObsSpace
from entmachin.env.multi_agent import MultiAgentEnvironment, Seat, SeatActions, is_multi_agent
from entmachin.env.symmetry import Symmetry


class TimeLimit(Environment):
    """Ends an episode after ``max_steps`` calls to ``act`` with ``done=True, truncated=True``.

    Some environments (MineSweeper) have no step limit: a policy that learns to survive could
    otherwise wander forever, and only the episodes that end would show in the statistics.
    Truncated rows bootstrap from the critic in GAE, so the cut does not look like a failure.
    An episode that the environment itself ends on the last step stays ``truncated=False``.

    An entity-gym environment that is not ported is wrapped in ``EntityGymAdapter`` first, so
    seeding and stepping go through the adapter as they do without a limit.

    Given a ``MultiAgentEnvironment`` it returns a ``MultiAgentTimeLimit``, which cuts the game
    for every seat at once.

    Args:
        env: the environment to limit (``seed``, ``render``, ``close`` and ``symmetries`` go to it).
        max_steps: the number of ``act`` calls after which an episode is cut.

    Raises:
        ValueError: ``max_steps`` is not an int >= 1.

    Example:
        >>> envs = EnvList(lambda: TimeLimit(MineSweeper(), 200), 16, seed=0)
    """

    def __new__(cls, env: Any = None, max_steps: int = 1) -> Any:  # no arguments when unpickled
        if is_multi_agent(env):
            return MultiAgentTimeLimit(env, max_steps)
        return super().__new__(cls)

    def __init__(self, env: Environment, max_steps: int) -> None:
        self.env, self.max_steps, self.t = ensure_environment(env), _check_steps(max_steps), 0

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self.env.action_space()

    def symmetries(self) -> Dict[str, Symmetry]:
        return self.env.symmetries()

    def seed(self, seed: Optional[int]) -> None:
        """Seeds the wrapped environment with ``seed``."""
        self.env.seed(seed)

    def reset(self) -> Observation:
        self.t = 0
        return self.env.reset()

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        obs = self.env.act(actions)
        self.t += 1
        if self.t >= self.max_steps and not obs.done:
            obs.done, obs.truncated = True, True
        return obs

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self.env.render(**kwargs)

    def close(self) -> None:
        self.env.close()


def _check_steps(max_steps: Any) -> int:
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"TimeLimit: max_steps must be an int >= 1, got {max_steps!r}")
    return int(max_steps)


class MultiAgentTimeLimit(MultiAgentEnvironment):
    """``TimeLimit`` of a game of several players: after ``max_steps`` calls to ``act`` the game
    ends for every seat, truncated (results, where the game states none, go to the higher return)."""

    def __init__(self, env: MultiAgentEnvironment, max_steps: int) -> None:
        self.env, self.max_steps, self.t = env, _check_steps(max_steps), 0
        self.scripted_opponent = env.scripted_opponent

    def seats(self) -> List[Seat]:
        return self.env.seats()

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self.env.action_space()

    def symmetries(self) -> Dict[str, Symmetry]:
        return self.env.symmetries()

    def seed(self, seed: Optional[int]) -> None:
        """Seeds the wrapped environment with ``seed``."""
        self.env.seed(seed)

    def reset(self) -> Dict[Seat, Observation]:
        self.t = 0
        return self.env.reset()

    def act(self, actions: Mapping[Seat, SeatActions]) -> Dict[Seat, Observation]:
        by_seat = self.env.act(actions)
        self.t += 1
        if self.t >= self.max_steps and not any(obs.done for obs in by_seat.values()):
            for obs in by_seat.values():
                obs.done, obs.truncated = True, True
        return by_seat

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self.env.render(**kwargs)

    def close(self) -> None:
        self.env.close()
