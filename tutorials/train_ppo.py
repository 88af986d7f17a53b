"""Train PPO with RogueNet on a bundled entity environment.

    python tutorials/train_ppo.py --env MineSweeper --total-steps 30000 --seed 0
    python tutorials/train_ppo.py --smoke            # a few seconds: checks that everything runs

Each iteration collects ``--n-steps`` steps from ``--num-envs`` environments (``EnvList``),
stores them with ``store_rollout`` and runs one ``update()``. The critic is a RogueNet of its
own (``--shared-critic`` makes it ``net.critic()``, sharing the actor's trunk), and entity
types with ``x`` and ``y`` features get relative-position attention. Progress goes to a tqdm
bar and to the log; with ``--log-dir`` every update's losses and the episode returns go to
tensorboard as well. At the end the policy is evaluated on fresh seeded environments and,
with ``--save-dir``, saved.
"""
from __future__ import annotations

import argparse
import logging
import math
from typing import List, Optional

import numpy as np
import torch
from torch import nn
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from entmachin.env import EnvList, Environment, ObsSpace, TimeLimit
from entmachin.env.examples import ENV_REGISTRY
from entmachin.frame.evaluate import evaluate
from entmachin.frame.ppo import PPO
from entmachin.frame.rollout import RolloutCollector
from entmachin.model import RelposEncodingConfig, RogueNet, RogueNetConfig

logger = logging.getLogger("train_ppo")


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="MineSweeper", choices=sorted(ENV_REGISTRY), help="example environment")
    parser.add_argument("--total-steps", type=int, default=30_000, help="environment steps to train for")
    parser.add_argument("--seed", type=int, default=0, help="seeds torch, the frame and the environments")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads; 1 makes a seed's run repeat exactly (more may be faster)")
    parser.add_argument("--num-envs", type=int, default=32, help="environments stepped together")
    parser.add_argument("--n-steps", type=int, default=16, help="steps per environment and iteration")
    parser.add_argument("--max-episode-steps", type=int, default=200, help="episodes are cut (truncated) here")
    parser.add_argument("--batch-size", type=int, default=256, help="rows per minibatch")
    parser.add_argument("--n-epochs", type=int, default=4, help="passes over each rollout")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--entropy-bonus", type=float, default=0.03, help="weight of the entropy bonus")
    parser.add_argument("--shared-critic", action="store_true", help="the critic shares the actor's trunk")
    parser.add_argument("--d-model", type=int, default=32, help="RogueNet width")
    parser.add_argument("--n-layer", type=int, default=1, help="RogueNet transformer blocks")
    parser.add_argument("--eval-episodes", type=int, default=100, help="episodes of the final evaluation")
    parser.add_argument("--log-dir", default=None, help="tensorboard directory (default: none)")
    parser.add_argument("--save-dir", default=None, help="save the trained frame here (default: don't)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few iterations, to check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.total_steps, args.num_envs, args.n_steps, args.eval_episodes = 64, 4, 8, 4
    for name in ("total_steps", "threads", "num_envs", "n_steps", "max_episode_steps", "batch_size", "n_epochs",
                 "eval_episodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def relative_positions(obs_space: ObsSpace) -> Optional[RelposEncodingConfig]:
    """Relative-position attention on ``x``, ``y`` if some entity type has both features."""
    if not any({"x", "y"} <= set(entity.features) for entity in obs_space.entities.values()):
        return None
    return RelposEncodingConfig(extent=(5, 5), position_features=("x", "y"))


def main(argv: Optional[List[str]] = None) -> float:
    """Trains, evaluates and returns the mean evaluation return (torch's thread count is restored)."""
    args = parse_args(argv)
    previous = torch.get_num_threads()
    torch.set_num_threads(args.threads)  # several threads reduce in varying orders: runs drift apart
    try:
        return train(args)
    finally:
        torch.set_num_threads(previous)


def train(args: argparse.Namespace) -> float:
    """The training run of :func:`main` for parsed arguments."""
    torch.manual_seed(args.seed)
    env_class = ENV_REGISTRY[args.env]

    def make_env() -> Environment:
        return TimeLimit(env_class(), args.max_episode_steps)

    envs = EnvList(make_env, args.num_envs, seed=args.seed)
    net_config = RogueNetConfig(d_model=args.d_model, n_layer=args.n_layer, n_head=2, d_qk=16,
                                relpos_encoding=relative_positions(envs.obs_space()))
    net = RogueNet(envs.obs_space(), envs.action_space(), net_config)
    critic = net.critic() if args.shared_critic else RogueNet(envs.obs_space(), {}, net_config).critic()
    rows = args.num_envs * args.n_steps
    n_iterations = max(1, args.total_steps // rows)
    update_times = args.n_epochs * math.ceil(rows / args.batch_size)  # minibatch steps per update
    ppo = PPO(
        net, critic, torch.optim.Adam, nn.MSELoss(),
        batch_size=args.batch_size, actor_update_times=update_times, critic_update_times=update_times,
        actor_learning_rate=args.learning_rate, critic_learning_rate=args.learning_rate,
        entropy_weight=-args.entropy_bonus,  # Machin's sign: negative weights reward entropy
        gae_lambda=0.95, discount=0.99, gradient_max=0.5, replay_size=rows, writer=args.log_dir, seed=args.seed,
    )
    collector = RolloutCollector(ppo, envs, n_steps=args.n_steps)
    recent: List[float] = []
    with logging_redirect_tqdm(), tqdm(total=n_iterations * rows, unit="step", desc=args.env,
                                       disable=args.smoke) as bar:
        for iteration in range(n_iterations):
            stats = collector.collect()
            objective, value_loss = ppo.update()
            recent = (recent + list(stats.episode_returns))[-100:]
            mean_return = float(np.mean(recent)) if recent else math.nan
            if ppo.writer is not None and stats.episode_returns:
                ppo.writer.add_scalar("charts/episodic_return", stats.mean_return, collector.total_env_steps)
            bar.update(stats.n_env_steps)
            bar.set_postfix(mean_return=f"{mean_return:.3f}", value_loss=f"{value_loss:.4f}")
            logger.info("iteration %d/%d: mean return (last 100 episodes) %.3f, objective %.4f, value loss %.4f",
                        iteration + 1, n_iterations, mean_return, objective, value_loss)
    result = evaluate(ppo, make_env, args.eval_episodes, deterministic=False, seed=args.seed + 1)
    logger.info("evaluation over %d episodes: mean %.3f, min %.3f, max %.3f",
                args.eval_episodes, result.mean, result.min, result.max)
    if args.save_dir is not None:
        ppo.save(args.save_dir)
        logger.info("saved to %s", args.save_dir)
    ppo.close()
    envs.close()
    return result.mean


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(f"mean evaluation return: {main():.3f}")
