"""Tutorial 4: PPO on CartPole, written the way a Machin user writes it.

    python tutorials/04_machin_style_cartpole.py             # trains until solved (293 episodes)
    python tutorials/04_machin_style_cartpole.py --smoke     # 3 episodes: checks that everything runs

What you learn:

* entmachin's frames keep Machin 0.4.2's surface: build ``PPO(actor, critic, optimizer,
  criterion, ...)``, call ``ppo.act({"state": state})`` while playing, hand the finished
  episode to ``ppo.store_episode([...])`` and call ``ppo.update()``. A Machin script ports by
  changing its imports.
* A transition is a dict of **major** attributes (``state``, ``action``, ``next_state``: dicts
  whose keys name the model's ``forward`` parameters) and **sub** attributes (``reward``,
  ``terminal``, and entmachin's ``truncated``). ``MLPActor.forward(state, action=None)`` and
  ``MLPCritic.forward(state)`` take ``state``, so the dicts hold ``{"state": tensor [1, 4]}``
  and ``{"action": tensor [1, 1]}``; ``safe_call`` matches the keys to the parameter names
  (tutorial 1 shows how).
* An episode ends two ways: ``terminal`` (the pole fell: no future reward) or ``truncated``
  (the 200-step time limit cut it short: the critic's value of ``next_state`` stands in for
  the rewards that would have followed). Gymnasium reports both; pass both on.

The loop is deliberately plain: one environment, one episode per ``update()``. For many
environments at once, ``from_gymnasium`` (``entmachin.env``) turns a gymnasium environment
into an entity environment with global features, and ``RolloutCollector`` with
``global_state`` / ``global_actions`` (``entmachin.frame``) steps a batch of them.

Result with the defaults (seed 0, one torch thread): the mean return over the last 100
episodes first reaches CartPole's threshold of 195 (out of 200) at episode 293, in about
15 seconds on one CPU core. Seeds 1 to 6 took between 143 and 766 episodes.
"""
from __future__ import annotations

import argparse
from collections import deque
from typing import List, Optional

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from entmachin.frame import PPO
from entmachin.model import MLPActor, MLPCritic

SOLVED_MEAN = 195.0  # CartPole's usual threshold: this mean return over the last 100 episodes
WINDOW = 100
MAX_EPISODE_STEPS = 200


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="stop after this many episodes if not solved")
    parser.add_argument("--seed", type=int, default=0, help="seeds torch, the frame and the environment")
    parser.add_argument("--smoke", action="store_true", help="tiny budget (3 episodes), to check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.episodes = 3
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    return args


def as_state(observation: np.ndarray) -> torch.Tensor:
    """CartPole's observation (4 floats) as a batch of one row, float32 ``[1, 4]``."""
    return torch.as_tensor(observation, dtype=torch.float32).reshape(1, 4)


def main(argv: Optional[List[str]] = None) -> int:
    """Trains PPO on CartPole; returns the episode at which it was solved (0 if it was not)."""
    args = parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks run fastest on one thread, and a seed then repeats exactly
    try:
        return train(args)
    finally:
        torch.set_num_threads(previous_threads)


def train(args: argparse.Namespace) -> int:
    torch.manual_seed(args.seed)  # the networks' initial weights and the sampled actions

    # The models: an actor returning Machin's (action, log_prob, entropy) and a critic [B, 1].
    actor = MLPActor(4, 2, d_hidden=(32, 32))
    critic = MLPCritic(4, d_hidden=(64, 64))
    # Machin 0.4.2's keywords and defaults: batch_size=100, actor_update_times=5,
    # critic_update_times=10, learning rates 1e-3, discount 0.99.
    ppo = PPO(actor, critic, torch.optim.Adam, nn.MSELoss(), gae_lambda=0.95, replay_size=1000, seed=args.seed)

    env = gym.make("CartPole-v1", max_episode_steps=MAX_EPISODE_STEPS)
    recent: deque = deque(maxlen=WINDOW)
    print(f"{'episode':>7} {'return':>6} {'mean of last 100':>16}")
    for episode in range(1, args.episodes + 1):
        observation, _ = env.reset(seed=args.seed if episode == 1 else None)
        state = as_state(observation)
        transitions, episode_return = [], 0.0
        while True:
            action = ppo.act({"state": state})[0]  # [1, 1] int64: the sampled choice
            observation, reward, terminated, truncated, _ = env.step(int(action.item()))
            next_state = as_state(observation)
            transitions.append({
                "state": {"state": state},
                "action": {"action": action},
                "next_state": {"state": next_state},
                "reward": float(reward),
                "terminal": bool(terminated),
                "truncated": bool(truncated),
            })
            episode_return += float(reward)
            state = next_state
            if terminated or truncated:
                break
        ppo.store_episode(transitions)  # values from one critic call, then GAE over the episode
        objective, value_loss = ppo.update()  # trains on the stored rows, then clears the buffer
        recent.append(episode_return)
        mean = float(np.mean(recent))
        if episode <= 3 or episode % 25 == 0:
            print(f"{episode:>7} {episode_return:>6.0f} {mean:>16.1f}   "
                  f"(surrogate objective {objective:+.3f}, value loss {value_loss:.2f})")
        if len(recent) == WINDOW and mean >= SOLVED_MEAN:
            print(f"solved at episode {episode}: mean return {mean:.1f} over the last {WINDOW} episodes")
            env.close()
            return episode
    print(f"not solved in {args.episodes} episodes: mean return {float(np.mean(recent)):.1f} "
          f"over the last {len(recent)}")
    env.close()
    return 0


if __name__ == "__main__":
    main()
