"""Learning tests: PPO learns the example environments (RogueNet) and CartPole (MLPs).

Seeded and marked ``slow``. "Return" is the mean undiscounted episodic return over the last 100
training episodes, with sampled actions. Each test states its budget; together they take a
few minutes on two cores.
"""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from entmachin.env import EnvList
from entmachin.env.examples import Count, MineSweeper, MultiArmedBandit, NotHotdog, RockPaperScissors
from entmachin.frame.evaluate import evaluate
from entmachin.frame.ppo import PPO
from entmachin.frame.collector import RolloutCollector
from entmachin.model import MLPActor, MLPCritic, RelposEncodingConfig, RogueNet, RogueNetConfig
from entmachin.env import TimeLimit
from test.frame._frames import cartpole_episode, random_policy_returns

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


def train(make_env, iterations, *, n_envs=16, n_steps=4, seed=0, separate_critic=False, relpos=None, **ppo_kwargs):
    """PPO + RogueNet through safe_call; returns (frame, every episode's return).

    The critic is ``net.critic()`` (shared trunk) unless ``separate_critic``, which gives it a
    RogueNet of its own; ``relpos`` adds relative positions on ``x``, ``y`` with that extent.
    """
    torch.manual_seed(seed)
    envs = EnvList(make_env, n_envs, seed=seed)
    positions = None if relpos is None else RelposEncodingConfig(extent=relpos, position_features=("x", "y"))
    config = RogueNetConfig(d_model=32, n_layer=1, n_head=2, d_qk=16, relpos_encoding=positions)
    net = RogueNet(envs.obs_space(), envs.action_space(), config)
    critic = RogueNet(envs.obs_space(), {}, config).critic() if separate_critic else net.critic()
    settings = dict(batch_size=128, actor_update_times=8, critic_update_times=8, actor_learning_rate=3e-3,
                    critic_learning_rate=3e-3, entropy_weight=-0.01, gae_lambda=0.95, discount=0.99,
                    gradient_max=0.5, seed=seed)
    settings.update(ppo_kwargs)
    ppo = PPO(net, critic, torch.optim.Adam, nn.MSELoss(), **settings)
    collector = RolloutCollector(ppo, envs, n_steps=n_steps)
    returns = []
    for _ in range(iterations):
        returns.extend(collector.collect().episode_returns)
        ppo.update()
    return ppo, returns


def last_100(returns):
    assert len(returns) >= 100
    return float(np.mean(returns[-100:]))


def test_multi_armed_bandit():
    _, returns = train(MultiArmedBandit, 50, n_steps=16, entropy_weight=-0.001)
    assert last_100(returns) >= 0.99


def test_count_with_two_masked_choices():
    _, returns = train(lambda: Count(masked_choices=2), 30, entropy_weight=None)
    assert last_100(returns) >= 0.99


def test_not_hotdog():
    _, returns = train(NotHotdog, 30, entropy_weight=None)
    assert last_100(returns) >= 0.99


def test_rock_paper_scissors_hidden_opponent_gives_nothing_away():
    # Always throwing paper earns 1.0 on average; seeing the opponent would earn 2.0.
    _, returns = train(lambda: RockPaperScissors(cheat=False), 20)
    assert 0.8 <= last_100(returns) <= 1.2


def test_rock_paper_scissors_visible_opponent_is_beaten():
    # Once every throw wins, all advantages are ~0 and normalising them would turn their noise
    # into unit-sized policy steps that knock the policy off its optimum; raw advantages do not.
    _, returns = train(lambda: RockPaperScissors(cheat=True), 30, normalize_advantage=False)
    assert last_100(returns) > 1.9


MINESWEEPER_MARGIN = 0.3  # a random policy wins about 0.08 of its episodes under the same cut


def test_minesweeper_beats_a_random_policy():
    """Trained vs uniformly random policy over 200 episodes each, cut at 200 steps (truncated).

    MineSweeper has no time limit of its own: without one, a policy that has learnt to keep its
    robots alive can wander forever, so training and evaluation both cut episodes at 200 steps.
    Relative positions and a critic of its own make learning reliable across seeds.
    """
    make_env = lambda: TimeLimit(MineSweeper(), 200)  # noqa: E731
    ppo, _ = train(make_env, 60, n_envs=32, n_steps=16, batch_size=256, actor_learning_rate=1e-3,
                   critic_learning_rate=1e-3, entropy_weight=-0.03, separate_critic=True, relpos=(5, 5))
    trained = evaluate(ppo, make_env, 200, deterministic=False, seed=100, num_envs=50).mean
    random = random_policy_returns(make_env, 200, seed=100)
    assert trained >= random + MINESWEEPER_MARGIN, (trained, random)


def solve_cartpole(gae_lambda, seed=0, max_episodes=1000):
    """Machin's protocol: one store_episode + update per episode; solved when the smoothed
    return (0.8 s + 0.2 r) stays above 150 for 5 episodes. Returns the episode it was solved at."""
    torch.manual_seed(seed)
    actor = MLPActor(4, 2, d_hidden=(16, 16), activation="relu")
    critic = MLPCritic(4, d_hidden=(32, 32), activation="relu")
    ppo = PPO(actor, critic, torch.optim.Adam, nn.MSELoss(reduction="sum"), gae_lambda=gae_lambda,
              replay_size=10000, seed=seed)
    env = gym.make("CartPole-v0").unwrapped  # no time-limit wrapper: the loop cuts at 200 steps
    env.reset(seed=seed)
    smoothed, fulfilled = 0.0, 0
    for episode in range(1, max_episodes + 1):
        transitions, total, _ = cartpole_episode(env, lambda state: ppo.act({"state": state})[0])
        ppo.store_episode(transitions)
        ppo.update()
        smoothed = 0.8 * smoothed + 0.2 * total
        fulfilled = fulfilled + 1 if smoothed > 150 else 0
        if fulfilled >= 5:
            return episode
    return math.inf


@pytest.mark.filterwarnings("ignore:.*CartPole-v0 is out of date")
@pytest.mark.parametrize("gae_lambda", [0.0, 0.5, 1.0])
def test_cartpole_with_mlps(gae_lambda):
    assert solve_cartpole(gae_lambda) <= 1000
