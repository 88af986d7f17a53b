"""Evaluating a frame's policy: episodic returns over fresh, seeded environments."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, List, NamedTuple, Optional

import numpy as np

from entmachin.env import EnvList, Environment, to_state
from entmachin.frame.collector import ActionFn, StateFn, default_actions

__all__ = ["EvalResult", "evaluate"]

logger = logging.getLogger(__name__)


class EvalResult(NamedTuple):
    """Undiscounted episodic returns of an evaluation, and the episodes' lengths."""

    mean: float
    min: float
    max: float
    returns: tuple
    lengths: tuple = ()


def evaluate(frame: Any, make_env: Callable[[], Environment], episodes: int, deterministic: bool = True,
             seed: Optional[int] = None, *, num_envs: int = 16, max_steps: int = 10_000,
             state_fn: Optional[StateFn] = None, action_fn: Optional[ActionFn] = None,
             check_finite: bool = True) -> EvalResult:
    """Runs ``episodes`` episodes with ``frame.act`` and returns their returns.

    Episodes are spread evenly over the rows of ``min(num_envs, episodes)`` environments, each running its share
    one after the other, so short episodes are not favoured (a game of several players has one row, and one
    episode per game, for each seat: the policy plays every seat). The policy does not update its input statistics, and nothing
    is stored in the frame's buffer.

    Args:
        frame: an ``A2C`` / ``PPO`` frame.
        make_env: builds one environment (as ``EnvList`` takes).
        episodes: episodes to run, >= 1.
        deterministic: take each actor's most likely action (the actor must accept a ``deterministic``
            keyword); False samples.
        seed: seeds the environments (None: unseeded).
        num_envs: most environments stepped together.
        max_steps: vectorised steps after which unfinished episodes are counted with the return they have so
            far (a warning is logged).
        state_fn / action_fn: as for ``RolloutCollector`` (defaults suit RogueNet).
        check_finite: as for ``EnvList``.

    Raises:
        ValueError: ``episodes``, ``num_envs`` or ``max_steps`` is not a positive int.
    """
    for name, value in (("episodes", episodes), ("num_envs", num_envs), ("max_steps", max_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"evaluate: {name} must be an int >= 1, got {value!r}")
    envs = EnvList(make_env, min(num_envs, episodes), seed=seed, check_finite=check_finite)
    n_rows = len(envs)  # a game of several players: one row, and one episode, per seat
    quota = episodes // n_rows + (np.arange(n_rows) < episodes % n_rows)  # [n_rows]: the first take the remainder
    space = envs.action_space()
    state_fn = state_fn or (lambda obs: to_state(obs, space))
    action_fn = action_fn or default_actions
    running = np.zeros(n_rows, dtype=np.float64)  # [n_rows]: each row's return so far
    steps, finished = np.zeros((2, n_rows), dtype=np.int64)  # [n_rows] each: episode length so far, episodes ended
    returns: List[float] = []
    lengths: List[int] = []
    try:
        obs = envs.reset()
        for _ in range(max_steps):
            obs = envs.act(action_fn(frame.act(state_fn(obs), deterministic, collect_stats=False))[1])
            running += obs.reward
            steps += 1
            counted = np.flatnonzero(obs.done & (finished < quota))  # rows that ended an episode of their quota
            returns += running[counted].tolist()
            lengths += steps[counted].tolist()
            finished[counted] += 1
            running[obs.done], steps[obs.done] = 0.0, 0
            if np.all(finished >= quota):
                break
        else:
            unfinished = np.flatnonzero(finished < quota)
            logger.warning("evaluate: %d episode(s) unfinished after max_steps=%d; counting their returns so far",
                           len(unfinished), max_steps)
            returns += running[unfinished].tolist()
            lengths += steps[unfinished].tolist()
    finally:
        envs.close()
    values = np.array(returns, dtype=np.float64)  # [episodes]
    return EvalResult(float(values.mean()), float(values.min()), float(values.max()), tuple(returns), tuple(lengths))
