"""Random-action rollouts of an example environment through the public vectorised API."""
from typing import Callable, Iterator, List, Tuple

import numpy as np

from entmachin.env import EnvList, Environment, ValidatingEnv, VecObs, random_actions


def random_rollout(
    make_env: Callable[[], Environment], n_steps: int, seed: int = 0, action_seed: int = 0
) -> Iterator[VecObs]:
    """Yield ``n_steps`` observations of one validated environment under random allowed actions.

    The environment is ``ValidatingEnv(make_env())`` in an ``EnvList`` seeded with ``seed``
    (finished episodes restart by themselves); the actions come from a generator seeded with
    ``action_seed``, so two calls that differ only in ``seed`` take the same random draws.
    """
    envs = EnvList(lambda: ValidatingEnv(make_env()), 1, seed=seed)
    rng = np.random.default_rng(action_seed)
    obs = envs.reset()
    for _ in range(n_steps):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        yield obs


def trace(rollout: Iterator[VecObs]) -> List[Tuple[bytes, ...]]:
    """Rewards, end flags and every entity type's features of each step, for comparison."""
    return [
        (obs.reward.tobytes(), obs.done.tobytes(), *(f.as_array().tobytes() for f in obs.features.values()))
        for obs in rollout
    ]


def policy_returns(make_env, policy, n_episodes: int, seed: int) -> np.ndarray:
    """Returns of ``policy(observation, action_space, rng)`` over ``n_episodes`` episodes of one seeded environment."""
    env = make_env()
    env.seed(seed)
    rng = np.random.default_rng(seed)
    space = env.action_space()
    returns = []
    for _ in range(n_episodes):
        obs, total = env.reset(), 0.0
        while not obs.done:
            obs = env.act(policy(obs, space, rng))
            total += obs.reward
        returns.append(total)
    return np.array(returns)


def random_returns(make_env, n_episodes: int, seed: int, num_envs: int = 8) -> np.ndarray:
    """Returns of uniformly random allowed actions (``random_actions``: masks and bounds honoured) through
    ``EnvList``, which refuses anything the masks do not allow."""
    envs = EnvList(make_env, num_envs, seed=seed)
    rng = np.random.default_rng(seed)
    obs, running, returns = envs.reset(), np.zeros(num_envs), []
    while len(returns) < n_episodes:
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        running += obs.reward
        returns.extend(running[obs.done].tolist())
        running[obs.done] = 0.0
    return np.array(returns[:n_episodes])
