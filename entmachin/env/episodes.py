"""Episodic returns of any policy over fresh, seeded environments (the loop behind ``evaluate``).

It needs no model: ``entmachin.frame.evaluate`` runs it with a frame, ``entmachin.deploy`` with an
exported policy in a process without torch, and both give the same returns for the same actions.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from entmachin.env.action import ActionSpace
from entmachin.env.env_list import EnvList
from entmachin.env.environment import Environment
from entmachin.env.vec_env import VecObs

__all__ = ["EVAL_MAX_ENVS", "EvalResult", "eval_budget", "run_episodes"]

logger = logging.getLogger(__name__)

#: Most environments of an evaluation: one episode each up to this many (wide batches, no length bias).
EVAL_MAX_ENVS = 128


def eval_budget(episodes: int, episode_cap: int) -> Tuple[int, int]:
    """``(num_envs, max_steps)`` of an evaluation of ``episodes`` episodes, each counted as it
    stands after ``episode_cap`` steps (``entmachin eval``'s, and an exported run's by default)."""
    num_envs = min(episodes, EVAL_MAX_ENVS)
    return num_envs, episode_cap * math.ceil(episodes / num_envs)


class EvalResult(NamedTuple):
    """Undiscounted episodic returns of an evaluation, and the episodes' lengths.

    Attributes:
        mean: the mean of ``returns``.
        min: the lowest of ``returns``.
        max: the highest of ``returns``.
        returns: each counted episode's return, in the order the episodes ended; after ``max_steps``, each row
            still running counts one more episode with the return it has so far (so there may be fewer than
            the episodes asked for).
        lengths: each counted episode's steps, in ``returns``' order (empty where not recorded).
    """

    mean: float
    min: float
    max: float
    returns: tuple
    lengths: tuple = ()


def run_episodes(act: Callable[[VecObs, Mapping[str, ActionSpace]], Mapping[str, Any]], make_env: Callable[[], Environment], episodes: int,
                 seed: Optional[int] = None, *, num_envs: int = 16, max_steps: int = 10_000,
                 check_finite: bool = True) -> EvalResult:
    """Runs ``episodes`` episodes, ``act(vec_obs, action_space)`` giving the actions ``VecEnv.act`` takes.

    Episodes are spread evenly over the rows of ``min(num_envs, episodes)`` environments, each running its share
    one after the other, so short episodes are not favoured (a game of several players has one row, and one
    episode per game, for each seat: the policy plays every seat).

    Args:
        act: the policy, on a batch of observations (and the environments' action space).
        make_env: builds one environment (as ``EnvList`` takes).
        episodes: episodes to run, >= 1.
        seed: seeds the environments (None: unseeded).
        num_envs: most environments stepped together.
        max_steps: vectorised steps after which unfinished episodes are counted with the return they have so
            far (a warning is logged).
        check_finite: as for ``EnvList``.

    Raises:
        ValueError: ``episodes``, ``num_envs`` or ``max_steps`` is not a positive int.
    """
    for name, value in (("episodes", episodes), ("num_envs", num_envs), ("max_steps", max_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"evaluate: {name} must be an int >= 1, got {value!r}")
    envs = EnvList(make_env, min(num_envs, episodes), seed=seed, check_finite=check_finite)
    n_rows = len(envs)
    space = envs.action_space()
    quota = episodes // n_rows + (np.arange(n_rows) < episodes % n_rows)  # [n_rows]: the first take the remainder
    running = np.zeros(n_rows, dtype=np.float64)  # [n_rows]: each row's return so far
    steps, finished = np.zeros((2, n_rows), dtype=np.int64)  # [n_rows] each: episode length so far, episodes ended
    returns: List[float] = []
    lengths: List[int] = []
    try:
        obs = envs.reset()
        for _ in range(max_steps):
            obs = envs.act(act(obs, space))
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
