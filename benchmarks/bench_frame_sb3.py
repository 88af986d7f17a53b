"""PPO speed on CartPole-v1: entmachin against Stable-Baselines3 2.9.2, in the same run.

Workload (as in the frame issue): 8 environments, n_steps 256, batch 256, 4 epochs, 16,384
environment steps, one torch thread, SB3's ``MlpPolicy`` sizes on both sides (separate 64-64
tanh actor and critic), learning rate 3e-4, GAE lambda 0.95, clip 0.2, gradient norm 0.5.
entmachin collects through ``RolloutCollector`` (``store_rollout``) on ``GymnasiumVecEnv``
(the vectorised ``from_gymnasium``) of CartPole; SB3 learns on its ``DummyVecEnv``. The figure is environment
steps per second of the whole training loop (collection + updates); the mean return of the
last episodes is printed as a sanity check.

SB3 runs in its own interpreter (``--sb3-python``, a venv with ``stable-baselines3==2.9.2``
beside torch 2.13), as a subprocess of this script::

    python benchmarks/bench_frame_sb3.py --sb3-python /tmp/sb3-venv/bin/python

Without ``--sb3-python`` the SB3 column reads "skipped".
"""

import argparse
import json
import sys
import time
from typing import Dict, List, Optional

import numpy as np
import torch
from torch import nn
from _competitor import best_alternating, run_competitor

N_ENVS, N_STEPS, BATCH, EPOCHS = 8, 256, 256, 4


def _sb3(args: argparse.Namespace) -> Dict[str, float]:
    """Runs inside SB3's interpreter: one ``learn`` on a fresh model."""
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    envs = make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=0, vec_env_cls=DummyVecEnv)
    model = PPO("MlpPolicy", envs, n_steps=N_STEPS, batch_size=BATCH, n_epochs=EPOCHS, seed=0, device="cpu",
                verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=args.total_steps)
    seconds = time.perf_counter() - start
    returns = [info["r"] for info in model.ep_info_buffer]
    del gym
    return {"rate": model.num_timesteps / seconds, "return": float(np.mean(returns)) if returns else float("nan")}


def _entmachin(args: argparse.Namespace) -> Dict[str, float]:
    import gymnasium as gym

    from entmachin.env import GymnasiumVecEnv
    from entmachin.frame import PPO, RolloutCollector, global_actions, global_state
    from entmachin.model import MLPActor, MLPCritic

    torch.manual_seed(0)
    envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), N_ENVS, seed=0)
    actor = MLPActor(4, 2, d_hidden=(64, 64), activation="tanh")
    critic = MLPCritic(4, d_hidden=(64, 64), activation="tanh")
    n_minibatches = EPOCHS * (N_ENVS * N_STEPS // BATCH)
    ppo = PPO(actor, critic, torch.optim.Adam, nn.MSELoss(), batch_size=BATCH, actor_update_times=n_minibatches,
              critic_update_times=n_minibatches, actor_learning_rate=3e-4, critic_learning_rate=3e-4,
              gae_lambda=0.95, discount=0.99, gradient_max=0.5, seed=0)
    collector = RolloutCollector(ppo, envs, n_steps=N_STEPS, state_fn=global_state, action_fn=global_actions())
    returns: List[float] = []
    start = time.perf_counter()
    while collector.total_env_steps < args.total_steps:
        returns.extend(collector.collect().episode_returns)
        ppo.update()
    seconds = time.perf_counter() - start
    return {"rate": collector.total_env_steps / seconds, "return": float(np.mean(returns[-100:]))}


def _run_sb3(args: argparse.Namespace) -> Optional[Dict[str, float]]:
    if not args.sb3_python:
        return None
    return run_competitor(args.sb3_python, __file__, ["--sb3-worker", "--total-steps", str(args.total_steps)], "SB3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sb3-python", default=None, help="interpreter of a venv with stable-baselines3==2.9.2")
    parser.add_argument("--total-steps", type=int, default=16_384, help="environment steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side, alternating; the best is kept")
    parser.add_argument("--sb3-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.sb3_worker:
        print(json.dumps(_sb3(args)))
        return

    # alternate the two sides, keep the best run of each
    ours, theirs = best_alternating(lambda: _entmachin(args), lambda: _run_sb3(args), args.repeats)
    print(f"PPO on CartPole-v1: {N_ENVS} envs, n_steps {N_STEPS}, batch {BATCH}, {EPOCHS} epochs, "
          f"{args.total_steps} steps, 64-64 tanh actor and critic, torch threads 1, best of {args.repeats}")
    print(f"{'side':<12} {'steps/s':>10} {'mean return (last episodes)':>29}")
    for side, figures in (("entmachin", ours), ("sb3", theirs)):
        if figures is None:
            print(f"{side:<12} {'skipped':>10}")
        else:
            print(f"{side:<12} {figures['rate']:>10,.0f} {figures['return']:>29.1f}")
    if theirs is None:
        print("sb3: skipped (pass --sb3-python PATH to measure it)")
    else:
        print(f"ratio: {ours['rate'] / theirs['rate']:.2f}x (target >= 1.5x)")


if __name__ == "__main__":
    sys.exit(main())
