"""Tutorial 10: continuous actions: vehicles that steer, trained with PPO, beside a scripted driver.

    python tutorials/10_steer_vehicles.py            # trains 100,000 steps (a few minutes), compares, ships
    python tutorials/10_steer_vehicles.py --smoke    # a tiny run: checks that everything runs

``Vehicles`` puts 1 to 5 vehicles on a square, each with a target of its own; every vehicle
outputs two real numbers per step, ``steer`` in [-1, 1] and ``throttle`` in [0, 1], and two
vehicles that come too close are wrecked. What you learn:

1. **The space and the mask.** ``ContinuousActionSpace(low, high, names)`` bounds each value;
   a step's ``ContinuousActionMask`` may narrow the bounds per vehicle: one that has arrived
   (or is wrecked) gets ``[0, 0]`` for both values, so it keeps still whatever the policy wants,
   and its values then add nothing to the log-probability the update trains.
2. **``entmachin train Vehicles``**: the bundled config, PPO and RogueNet with a squashed-Gaussian
   head per continuous action (``model.continuous: squashed_gaussian``: a Gaussian through tanh,
   scaled to each vehicle's bounds; ``beta`` is the other choice, and
   ``benchmarks/bench_continuous_heads.py`` compares them).
3. **What the network outputs for one step**: every vehicle's sampled values (always inside its
   bounds), their log-probability, and the deterministic values evaluation takes (the squashed
   mean).
4. **Against a scripted driver and random play**: the trained policy (most likely values) and
   ``Vehicles.scripted_policy`` on the same 100 seeded episodes, and uniform random values.
5. **Shipped**: ``entmachin export`` writes the distribution's parameters (mean and log standard
   deviation) and the deterministic point per vehicle; ``OnnxPolicy.act`` returns a ``ContinuousAction`` of float32 values, equal to
   PyTorch's deterministic values within 1e-5.

Result of the full run (seed 0, 100,352 steps; 51 s of training and 56 s for the whole script on
a two-core machine): the runner's evaluation (sampled values) reads 0.929 (a random policy:
-0.062); over the same 100 episodes the trained policy's most likely values return 0.942, the
scripted driver 0.955 and uniform random values -0.095; the exported policy's values match
PyTorch's within 6e-8.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from entmachin.deploy import OnnxPolicy
from entmachin.env import EnvList, to_state
from entmachin.env.examples import Vehicles
from entmachin.frame import evaluate
from entmachin.run.cli import main as entmachin
from entmachin.run.evaluation import load_trained, random_policy_return

SMOKE = ["train.total_steps=512", "rollout.num_envs=8", "rollout.n_steps=16", "frame.batch_size=64",
         "log.checkpoint_interval=256", "log.eval_interval=256", "log.eval_episodes=8"]


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=os.path.join("runs", "vehicles"),
                        help="where the run is written (started over if it holds one)")
    parser.add_argument("--episodes", type=int, default=100, help="episodes of section 4")
    parser.add_argument("--seed", type=int, default=0, help="train.seed of the run")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few seconds, to check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.episodes = 10
    return args


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


def run(argv: List[str]) -> float:
    """One ``entmachin`` command, shown as typed; returns the seconds it took."""
    print(f"$ entmachin {' '.join(argv)}")
    started = time.perf_counter()
    if entmachin(argv) != 0:
        raise SystemExit(f"entmachin {argv[0]} failed")
    return time.perf_counter() - started


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Runs the tutorial; returns the figures of sections 4 and 5."""
    args = parse_args(argv)
    with np.printoptions(precision=3, suppress=True):
        space_and_mask()
        train(args)
        frame, _, _ = load_trained(args.run_dir)
        one_step(frame)
        figures = compare(frame, args.episodes)
        figures["onnx_diff"] = ship(args.run_dir, frame)
    return figures


def space_and_mask() -> None:
    """Section 1: the action space, and a mask that fixes the vehicles off the road."""
    section("1. the space and the mask")
    env = Vehicles()
    env.seed(3)
    print(f"action space: {env.action_space()}")
    obs = env.reset()
    mask = obs.actions["drive"]
    print(f"{len(mask.actor_ids)} vehicles; bounds of each (rows: vehicles; columns: steer, throttle)")
    print(f"low\n{np.asarray(mask.low)}\nhigh\n{np.asarray(mask.high)}")
    while obs.actions["drive"].high[:, 1].min() > 0 and not obs.done:  # drive until one leaves the road
        obs = env.act(Vehicles.scripted_policy(obs, env.action_space(), env.rng))
    print(f"a few steps of the scripted driver later, a vehicle has arrived (or crashed): its bounds are [0, 0]\n"
          f"high\n{np.asarray(obs.actions['drive'].high)}")


def train(args: argparse.Namespace) -> None:
    """Section 2: ``entmachin train Vehicles``."""
    section("2. entmachin train Vehicles")
    budget = SMOKE if args.smoke else []
    overrides = [a for o in [f"train.seed={args.seed}", *budget] for a in ("--set", o)]
    seconds = run(["train", "Vehicles", "--run-dir", args.run_dir, "--force", "--no-progress", *overrides])
    print(f"(trained in {seconds:.0f} s)")


def one_step(frame: Any) -> None:
    """Section 3: the network's output for one batch: values within bounds, log-probabilities."""
    section("3. what the network outputs")
    envs = EnvList(Vehicles, 2, seed=5)
    state = to_state(envs.reset(), envs.action_space())
    with torch.no_grad():
        sampled = frame.act(state, collect_stats=False)
        point = frame.act(state, deterministic=True, collect_stats=False)
    for name, values in (("sampled", sampled), ("deterministic (the squashed mean)", point)):
        print(f"{name}: per vehicle [steer, throttle], rows {values.action['drive'].lengths.tolist()} vehicles")
        print(values.action["drive"].data.numpy())
    print(f"log-probability of each vehicle's sampled values (summed over steer and throttle):\n"
          f"{sampled.log_prob['drive'].data[:, 0].numpy()}")


def scripted_return(episodes: int, seed: int) -> float:
    """The scripted driver's mean return over ``episodes`` seeded episodes."""
    envs = EnvList(Vehicles, 1, seed=seed)
    env, rng, returns = envs.envs[0], np.random.default_rng(seed), []
    for _ in range(episodes):
        obs, total = env.reset(), 0.0
        while not obs.done:
            obs = env.act(Vehicles.scripted_policy(obs, env.action_space(), rng))
            total += obs.reward
        returns.append(total)
    return float(np.mean(returns))


def compare(frame: Any, episodes: int) -> Dict[str, float]:
    """Section 4: the trained policy, the scripted driver and random values."""
    section("4. against a scripted driver and random play")
    figures = {"trained": evaluate(frame, Vehicles, episodes, deterministic=True, seed=123).mean,
               "scripted": scripted_return(episodes, 123),
               "random": random_policy_return(Vehicles, episodes, 123).mean}
    for name, value in figures.items():
        print(f"{name:<9} mean return over {episodes} episodes: {value:.3f}")
    return figures


def ship(run_dir: str, frame: Any) -> float:
    """Section 5: export, and the exported policy's values against PyTorch's."""
    section("5. shipped: entmachin export and OnnxPolicy")
    path = os.path.join(run_dir, "policy.onnx")
    run(["export", run_dir, "-o", path])
    policy = OnnxPolicy(path)
    envs = EnvList(Vehicles, 1, seed=7)
    vec = envs.reset()
    action = policy.act(envs.last_obs[0])["drive"]
    print(f"OnnxPolicy.act -> {type(action).__name__}(actors={list(action.actors)}, values float32 "
          f"{action.values.shape})\n{action.values}")
    with torch.no_grad():
        torch_values = frame.act(to_state(vec, envs.action_space()), deterministic=True,
                                 collect_stats=False).action["drive"].data.numpy()
    diff = float(np.abs(action.values - torch_values).max()) if action.values.size else 0.0
    print(f"largest difference from PyTorch's deterministic values: {diff:.1e}")
    return diff


if __name__ == "__main__":
    main()
