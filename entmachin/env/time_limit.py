"""``TimeLimit``: cut episodes after a number of steps, marking the cut as truncated."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np
import numpy.typing as npt

from entmachin.env.action import Action, ActionSpace
from entmachin.env.adapters import ensure_environment
from entmachin.env.common import ActionName
from entmachin.env.environment import Environment, Observation, ObsSpace


class TimeLimit(Environment):
    """Ends an episode after ``max_steps`` calls to ``act`` with ``done=True, truncated=True``.

    Some environments (MineSweeper) have no step limit: a policy that learns to survive could
    otherwise wander forever, and only the episodes that end would show in the statistics.
    Truncated rows bootstrap from the critic in GAE, so the cut does not look like a failure.
    An episode that the environment itself ends on the last step stays ``truncated=False``.

    An entity-gym environment that is not ported is wrapped in ``EntityGymAdapter`` first, so
    seeding and stepping go through the adapter as they do without a limit.

    Example:
        >>> envs = EnvList(lambda: TimeLimit(MineSweeper(), 200), 16, seed=0)
    """

    def __init__(self, env: Environment, max_steps: int) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
            raise ValueError(f"TimeLimit: max_steps must be an int >= 1, got {max_steps!r}")
        self.env, self.max_steps, self.t = ensure_environment(env), int(max_steps), 0

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self.env.action_space()

    def seed(self, seed: Optional[int]) -> None:
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
