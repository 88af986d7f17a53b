"""Where an ``EnvList`` step spends its time: the environments' own ``act`` vs batching.

Usage: ``python benchmarks/bench_env_list.py [--env MineSweeper] [--num-envs 128] [--steps 300]``

Every environment is wrapped so that the time spent inside its own ``reset``/``act`` is
measured; the rest of ``EnvList.act`` (turning ragged actions into per-environment actions,
auto-reset bookkeeping and ``batch_obs``) is the batching overhead. Random actions are
precomputed outside the timed region. Figures are microseconds per environment-step.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from entmachin.env import EnvList, Environment, random_actions
from entmachin.env.batch import batch_obs
from entmachin.env.examples import ENV_REGISTRY, SINGLE_AGENT


class Timed(Environment):
    """Forwards to ``inner`` and accumulates the seconds spent in its reset/act."""

    spent = 0.0

    def __init__(self, inner: Environment):
        self.inner = inner

    def obs_space(self):
        return self.inner.obs_space()

    def action_space(self):
        return self.inner.action_space()

    def seed(self, seed):
        self.inner.seed(seed)

    def reset(self):
        t = time.perf_counter()
        obs = self.inner.reset()
        Timed.spent += time.perf_counter() - t
        return obs

    def act(self, actions):
        t = time.perf_counter()
        obs = self.inner.act(actions)
        Timed.spent += time.perf_counter() - t
        return obs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="MineSweeper", choices=SINGLE_AGENT)
    parser.add_argument("--num-envs", type=int, default=128)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    env_cls = ENV_REGISTRY[args.env]
    best = None
    unchecked = []  # EnvList.act without the non-finite check, alternating with the checked runs
    for _ in range(args.repeats):
        plain = EnvList(env_cls, args.num_envs, seed=0, check_finite=False)
        rng = np.random.default_rng(0)
        obs = plain.reset()
        spent = 0.0
        for _ in range(args.steps):
            actions = random_actions(obs, plain.action_space(), rng)
            t = time.perf_counter()
            obs = plain.act(actions)
            spent += time.perf_counter() - t
        unchecked.append(spent)
        envs = EnvList(lambda: Timed(env_cls()), args.num_envs, seed=0)
        rng = np.random.default_rng(0)
        obs = envs.reset()
        Timed.spent = 0.0
        total = batching = 0.0
        for _ in range(args.steps):
            actions = random_actions(obs, envs.action_space(), rng)
            t = time.perf_counter()
            obs = envs.act(actions)
            total += time.perf_counter() - t
            t = time.perf_counter()
            batch_obs(envs.last_obs, envs.obs_space(), envs.action_space())
            batching += time.perf_counter() - t
        run = (total, Timed.spent, batching)
        best = run if best is None or run[0] < best[0] else best
    total, own, batching = best
    per = 1e6 / (args.num_envs * args.steps)
    print(f"{args.env}, EnvList of {args.num_envs} environments, {args.steps} steps (best of {args.repeats})")
    print(f"  EnvList.act total          {total * per:8.2f} us/env-step")
    print(f"  environments' own act      {own * per:8.2f} us/env-step")
    print(f"  everything else (batching) {(total - own) * per:8.2f} us/env-step")
    print(f"    of which batch_obs alone {batching * per:8.2f} us/env-step")
    print(f"  ratio batching / own act   {(total - own) / own:8.2f}x  (target <= 1.5x)")
    plain = min(unchecked)
    print(f"  without the non-finite check {plain * per:6.2f} us/env-step: the check costs "
          f"{(total - plain) / plain:.1%} of the step (target <= 3%)")


if __name__ == "__main__":
    main()
