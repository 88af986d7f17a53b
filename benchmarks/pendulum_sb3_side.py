"""Stable-Baselines3's side of ``bench_pendulum.py``: one PPO run on gymnasium's Pendulum-v1.

Runs in a virtual environment with ``stable-baselines3==2.9.2`` (not entmachin's); ``bench_pendulum.py``
starts it as a subprocess::

    /path/to/sb3-venv/bin/python benchmarks/pendulum_sb3_side.py --seed 0 --budget 300000 --eval-interval 30000 \
        --eval-episodes 20 [--no-gsde]

Settings: rl-baselines3-zoo's tuned Pendulum-v1 PPO (``hyperparams/ppo.yml``): 4 environments, ``MlpPolicy``,
n_steps 1024, gae_lambda 0.95, gamma 0.9, 10 epochs, ent_coef 0.0, learning rate 1e-3, clip 0.2, gSDE with
sde_sample_freq 4 (``--no-gsde``: a state-independent Gaussian instead); batch size SB3's default 64. One torch
thread. An evaluation runs between rollouts once ``--eval-interval`` steps have passed since the last one was
due (as entmachin's runner does) and once at the end: ``evaluate_policy`` over ``--eval-episodes`` episodes,
deterministic, on 4 separate environments seeded ``seed + 1000`` anew each time. Prints one JSON line: the
evaluations, the final mean return, seconds of training (``learn`` less the evaluations in it) and of
evaluation, and the versions used.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Dict, List

import gymnasium
import stable_baselines3
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

EVAL_SEED_OFFSET = 1000  # the evaluation environments' seed is the run's seed plus this
N_EVAL_ENVS = 4


class Evaluations(BaseCallback):
    """Evaluates between rollouts (after the update of the rollout that crossed the due step), timing itself."""

    def __init__(self, eval_env: Any, interval: int, episodes: int, eval_seed: int) -> None:
        super().__init__()
        self.eval_env, self.interval, self.episodes, self.eval_seed = eval_env, interval, episodes, eval_seed
        self.next_eval = interval
        self.evals: List[List[float]] = []
        self.eval_s = 0.0

    def evaluate(self) -> float:
        started = time.perf_counter()
        self.eval_env.seed(self.eval_seed)  # the same episodes at every evaluation
        mean, _ = evaluate_policy(self.model, self.eval_env, n_eval_episodes=self.episodes, deterministic=True)
        self.evals.append([int(self.model.num_timesteps), float(mean)])
        self.eval_s += time.perf_counter() - started
        return float(mean)

    def _on_rollout_start(self) -> None:
        steps = self.model.num_timesteps
        if steps >= self.next_eval:
            self.evaluate()
            # the first of next_eval + k * interval after steps, as entmachin's runner schedules them
            self.next_eval += self.interval * max(1, -(-(steps - self.next_eval + 1) // self.interval))

    def _on_step(self) -> bool:
        return True


def run(seed: int, budget: int, eval_interval: int, eval_episodes: int, gsde: bool) -> Dict[str, Any]:
    """Trains one PPO for ``budget`` environment steps and returns its record."""
    torch.set_num_threads(1)
    started = time.perf_counter()
    env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
    eval_env = make_vec_env("Pendulum-v1", n_envs=N_EVAL_ENVS, seed=seed + EVAL_SEED_OFFSET)
    sde = {"use_sde": True, "sde_sample_freq": 4} if gsde else {"use_sde": False}
    model = PPO("MlpPolicy", env, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                learning_rate=1e-3, clip_range=0.2, batch_size=64, seed=seed, verbose=0, device="cpu", **sde)
    callback = Evaluations(eval_env, eval_interval, eval_episodes, seed + EVAL_SEED_OFFSET)
    learn_started = time.perf_counter()
    model.learn(total_timesteps=budget, callback=callback)
    train_s = time.perf_counter() - learn_started - callback.eval_s  # the evaluations during learn left out
    callback.evaluate()  # the final evaluation
    return {"env_steps": int(model.num_timesteps), "evals": callback.evals, "final": callback.evals[-1][1],
            "train_s": round(train_s, 2), "eval_s": round(callback.eval_s, 2),
            "wall_s": round(time.perf_counter() - started, 1), "sps": model.num_timesteps / train_s,
            "versions": {"stable-baselines3": stable_baselines3.__version__, "gymnasium": gymnasium.__version__,
                         "torch": torch.__version__}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--budget", type=int, required=True)
    parser.add_argument("--eval-interval", type=int, required=True)
    parser.add_argument("--eval-episodes", type=int, required=True)
    parser.add_argument("--no-gsde", action="store_true", help="a state-independent Gaussian instead of gSDE")
    args = parser.parse_args()
    record = run(args.seed, args.budget, args.eval_interval, args.eval_episodes, not args.no_gsde)
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
