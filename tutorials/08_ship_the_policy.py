"""Tutorial 8: ship the policy: train MineSweeper, export it to ONNX, play 100 games without torch.

    python tutorials/08_ship_the_policy.py            # trains 102,400 steps (about two minutes), exports, plays
    python tutorials/08_ship_the_policy.py --smoke    # a tiny run: checks that everything runs

A trained policy is needed where torch is not: in a game server, a simulator written in C++,
C# or Rust, a test harness. ``entmachin export`` writes the acting network of a run's
checkpoint as one ONNX graph, and ``entmachin.deploy.OnnxPolicy`` runs it with numpy and
onnxruntime only. What you learn:

1. **``entmachin train MineSweeper``** on the bundled config, with ``--set train.total_steps=``
   twice the bundled budget. Why twice: the runner evaluates *sampled* actions, and a policy
   whose samples already defuse every mine can still stall when it always takes its most likely
   action (MineSweeper does not change while the robots stand still, so robots whose most
   likely choice is to defuse where no mine is in reach stand there, defusing nothing, until the
   time limit). A shipped policy usually plays its most likely actions: train until those work.
2. **``entmachin export RUN_DIR -o FILE``** writes the latest checkpoint (``--checkpoint STEPS``:
   another one) and prints the file, its kind, size and the time it took. The file carries its
   own description in the ONNX metadata: the format, the kind (``rogue-net policy``; a DQN run
   gives ``rogue-net q``), entmachin's version, the environment, the frame, the environment
   steps and the observation and action spaces. Its inputs and outputs have *symbolic* sizes
   (``n_obs`` observations, ``n_entities/<type>``, ``n_actors/<action>``, ...): any batch, any
   number of entities, actors and actees, zero included. That list is the contract an engine
   in another language feeds: flat float features per entity type with the number of entities
   of each observation, boolean masks, each actor's index in its observation's entities, and
   one uniform noise value per actor; it reads back probabilities, the most likely choice
   (``argmax/<a>``) and the choice the noise draws (``sample/<a>``).
3. **One step by hand.** ``policy.act(obs)`` takes an environment's ``Observation`` and returns
   the actions its ``act`` takes (the most likely choice of every actor); ``deterministic=False``
   samples with noise from an ``np.random.Generator`` (the same generator state, the same
   actions). ``policy.feeds(vec_obs)`` builds the graph's inputs for a batch made by
   ``batch_obs``, and ``policy.outputs(vec_obs, noise)`` runs the graph and returns every output
   by name: the sampled choice is the first whose cumulative probability exceeds the noise.
4. **100 games in a process without torch.** A script whose first lines make ``import torch``
   fail imports ``entmachin.deploy`` and the environment, and plays with
   ``OnnxPolicy.evaluate``. Given the run's evaluation settings (its environment kwargs and step
   limit, ``seeds(config)["eval"]``, ``eval_options(config, 100)``; a file ``entmachin export``
   wrote carries all but the kwargs, and ``evaluate`` takes them by default) it plays the very episodes
   ``entmachin eval RUN_DIR --episodes 100 --deterministic`` plays, and takes the same actions:
   the returns and lengths agree episode by episode (a near-tie of two actions could flip one
   choice; the tutorial counts the episodes that differ).

Result of the full run (seed 0, one torch thread, one onnxruntime thread; 104 seconds for the
whole script, 98 of them training, on a shared two-core machine): after 102,400 steps the
runner's evaluation (sampled actions) reads 1.000, a random policy's 0.070. The export takes
0.07 s and writes 100 KiB. In the process without torch the policy's most likely actions defuse
every mine in all 100 games (mean return 1.000, mean length 8.3 steps), as ``entmachin eval
--deterministic`` does in PyTorch: 0 of 100 returns and 0 of 100 lengths differ. The 100 games
took 0.11 to 0.17 s with onnxruntime and 0.21 to 0.26 s with PyTorch (two runs); the child's
imports and loading the policy 0.4 s, the whole child process 0.6 to 0.7 s; ``policy.act`` on one
observation 0.6 ms a call. At the bundled budget (51,200 steps) the same seed's sampled actions
reach 0.87, but its most likely actions 0.03 (most games stall until the 200-step limit: mean
length 190); at 76,800 steps they reach 1.00.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch

import entmachin as entmachin_package
from entmachin.deploy import OnnxPolicy
from entmachin.env import TimeLimit, batch_obs
from entmachin.env.examples import MineSweeper
from entmachin.frame import evaluate
from entmachin.run.build import seeds
from entmachin.run.cli import main as entmachin
from entmachin.run.evaluation import eval_options, load_trained, random_policy_return
from entmachin.run.spaces import describe_spaces

TOTAL_STEPS = 102_400  # twice the bundled config's budget: see section 1
SMOKE = ["train.total_steps=256", "rollout.num_envs=8", "rollout.n_steps=16", "frame.batch_size=64",
         "log.checkpoint_interval=128", "log.eval_interval=128", "log.eval_episodes=8",
         "env.max_episode_steps=50"]  # an untrained policy stalls: shorter episodes keep the smoke run quick

# The script of section 4, written into the run directory and run by a fresh Python. Only numpy,
# onnxruntime and entmachin's environment layer are imported; torch could not be.
PLAYER = '''\
"""Plays an exported policy with numpy and onnxruntime: in this process, importing torch fails."""
import json
import sys
import time

sys.modules["torch"] = None  # from here on, `import torch` raises ImportError
started = time.perf_counter()

from entmachin.deploy import OnnxPolicy  # noqa: E402
from entmachin.env import TimeLimit  # noqa: E402
from entmachin.env.examples import MineSweeper  # noqa: E402

args = json.loads(sys.argv[1])


def make_env():
    """The run's environment, as its evaluations build it."""
    env = MineSweeper(**args["kwargs"])
    return TimeLimit(env, args["max_episode_steps"]) if args["max_episode_steps"] else env


policy = OnnxPolicy(args["policy"], threads=1)
loaded = time.perf_counter()
result = policy.evaluate(make_env, args["episodes"], True, args["seed"],
                         num_envs=args["num_envs"], max_steps=args["max_steps"])
played = time.perf_counter()
try:
    import torch  # noqa: F401
    torch_import = "succeeded"
except ImportError as e:
    torch_import = f"ImportError: {e}"
print(json.dumps({"returns": list(result.returns), "lengths": list(result.lengths), "mean": result.mean,
                  "load_seconds": loaded - started, "play_seconds": played - loaded, "torch_import": torch_import,
                  "torch_loaded": [m for m in sys.modules if m.split(".")[0] == "torch" and sys.modules[m]],
                  "onnxruntime": sys.modules["onnxruntime"].__version__}))
'''


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=os.path.join("runs", "minesweeper_ship"),
                        help="where the run is written (started over if it holds one)")
    parser.add_argument("--episodes", type=int, default=100, help="games of section 4")
    parser.add_argument("--seed", type=int, default=0, help="train.seed of the run")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few seconds, to check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.episodes = 20
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    return args


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


def run(argv: List[str]) -> float:
    """One ``entmachin`` command, shown as typed; returns the seconds it took. A failure stops the tutorial."""
    print(f"$ entmachin {' '.join(argv)}")
    started = time.perf_counter()
    status = entmachin(argv)
    if status != 0:
        raise SystemExit(f"entmachin {argv[0]} ended with status {status}")
    return time.perf_counter() - started


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Runs the tutorial; returns the figures of section 4."""
    args = parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core for torch, as for onnxruntime (threads=1): a fair race
    try:
        with np.printoptions(precision=3, suppress=True):
            train(args)
            policy = export(args.run_dir)
            by_hand(policy)
            return play_without_torch(args, policy.path)
    finally:
        torch.set_num_threads(previous_threads)


def train(args: argparse.Namespace) -> None:
    """Section 1: ``entmachin train MineSweeper`` with a budget of its own."""
    section("1. entmachin train MineSweeper")
    budget = SMOKE if args.smoke else [f"train.total_steps={TOTAL_STEPS}"]
    overrides = [arg for override in [f"train.seed={args.seed}", *budget] for arg in ("--set", override)]
    seconds = run(["train", "MineSweeper", "--run-dir", args.run_dir, "--force", "--no-progress", *overrides])
    print(f"(trained in {seconds:.0f} s)")


def export(run_dir: str) -> OnnxPolicy:
    """Section 2: ``entmachin export``, and what the file holds."""
    section("2. entmachin export, and what is inside the file")
    path = os.path.join(run_dir, "policy.onnx")
    run(["export", run_dir, "-o", path])
    policy = OnnxPolicy(path)  # threads=1 by default: one core, predictable inside a game loop
    meta = policy.metadata
    print(f"\n{policy!r}")
    print(f"kind {policy.kind!r}; written by entmachin {meta['version']} ({meta['format']}) from {meta['env']}, "
          f"frame {meta['frame']}, after {meta['env_steps']} environment steps")
    print("the spaces it was trained on (policy.obs_space, policy.action_space, from metadata['spaces']):")
    for line in describe_spaces(policy.obs_space, policy.action_space):
        print(f"  {line}")
    print("\nwhat an engine feeds (policy.session.get_inputs()): name, shape, type")
    for node in policy.session.get_inputs():
        print(f"  {node.name:<36} {str(node.shape):<40} {node.type}")
    print("and what it reads back (policy.session.get_outputs()):")
    for node in policy.session.get_outputs():
        print(f"  {node.name:<36} {str(node.shape):<40} {node.type}")
    return policy


def by_hand(policy: OnnxPolicy) -> None:
    """Section 3: one observation, its actions (most likely and sampled), and a batch through the graph."""
    section("3. One step by hand")
    labels = policy.action_space["Move"].index_to_label
    env = MineSweeper()
    env.seed(0)
    obs = env.reset()
    print(f"MineSweeper seed 0: mines {obs.features['Mine'].astype(int).tolist()}, "
          f"robots {obs.features['Robot'].astype(int).tolist()} (the orbital cannon is off: no actor fires)")
    actions = policy.act(obs)  # the most likely choice of every actor, as env.act takes it
    move = actions["Move"]
    for actor, probs, index in zip(move.actors, move.probs, move.indices):
        print(f"  {actor}: probabilities {probs} over {labels} -> {labels[index]}")
    print(f"policy.act(obs): Move {[labels[i] for i in move.indices]}, "
          f"Fire Orbital Cannon actors {list(actions['Fire Orbital Cannon'].actors)}")
    sampled = policy.act(obs, deterministic=False, rng=np.random.default_rng(0))
    again = policy.act(obs, deterministic=False, rng=np.random.default_rng(0))
    print(f"policy.act(obs, deterministic=False, rng=np.random.default_rng(0)): Move "
          f"{[labels[i] for i in sampled['Move'].indices]}; the same rng again: "
          f"{[labels[i] for i in again['Move'].indices]}")

    game = TimeLimit(MineSweeper(), 200)
    game.seed(0)
    obs, steps, total = game.reset(), 0, 0.0
    while not obs.done:  # the whole game loop of a program that ships the policy
        obs = game.act(policy.act(obs))
        steps, total = steps + 1, total + obs.reward
    print(f"one game played with `while not obs.done: obs = env.act(policy.act(obs))`: return {total:.1f} "
          f"after {steps} steps")
    started = time.perf_counter()
    for _ in range(100):
        policy.act(obs)  # checks the observation, batches it, runs the graph, builds the actions
    print(f"policy.act on one observation: {(time.perf_counter() - started) * 10:.2f} ms a call (100 calls)")

    envs = [MineSweeper() for _ in range(3)]
    observations = []
    for seed, one in enumerate(envs):
        one.seed(seed)
        observations.append(one.reset())
    vec = batch_obs(observations, env.obs_space(), env.action_space())  # what a VecEnv returns
    print("\nthree observations (seeds 0, 1, 2) batched with batch_obs; policy.feeds(vec) gives the graph's inputs:")
    for name, value in policy.feeds(vec).items():
        shown = value.tolist() if value.size <= 8 else f"{value[:2].tolist()} ..."
        print(f"  {name:<36} {value.dtype}{list(value.shape)}  {shown}")
    print("(actors/Move: each robot's index among its observation's entities, the 5 mines first: robots are 5, 6)")
    noise = {"Move": np.random.default_rng(0).random(6, dtype=np.float32)}
    out = policy.outputs(vec, noise)  # every graph output, by name
    print(f"policy.outputs(vec, noise), noise/Move {noise['Move']}:")
    print("  probs/Move, one row per robot, one column per choice:")
    for row in out["probs/Move"]:
        print(f"    {row}")
    print(f"  argmax/Move {out['argmax/Move'].tolist()}, sample/Move {out['sample/Move'].tolist()}")
    drawn = (np.cumsum(out["probs/Move"], axis=1) > noise["Move"][:, None]).argmax(axis=1)
    print(f"the first choice whose cumulative probability exceeds the noise: {drawn.tolist()}; sample/Move agrees: "
          f"{drawn.tolist() == out['sample/Move'].tolist()}")


def play_without_torch(args: argparse.Namespace, path: str) -> Dict[str, Any]:
    """Section 4: the same episodes as ``entmachin eval``, in PyTorch here and in a process without torch."""
    section(f"4. {args.episodes} games in a process without torch")
    n = args.episodes
    frame, config, factory = load_trained(args.run_dir)
    options = eval_options(config, n)  # the environments and step cap of the run's evaluations
    seed = seeds(config)["eval"]
    player = os.path.join(args.run_dir, "play_without_torch.py")
    with open(player, "w", encoding="utf-8") as f:
        f.write(PLAYER)
    print(f"{player}:")
    print(textwrap.indent(PLAYER, "  | ", lambda line: True), end="")
    request = {"policy": path, "kwargs": dict(config.env.kwargs), "max_episode_steps": config.env.max_episode_steps,
               "episodes": n, "seed": seed, "num_envs": options["num_envs"], "max_steps": options["max_steps"]}
    print(f"its argument: {json.dumps(request)}")
    env = dict(os.environ)  # entmachin importable in the child even when it is not installed
    source = os.path.dirname(os.path.dirname(os.path.abspath(entmachin_package.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, player, json.dumps(request)], capture_output=True, text=True, env=env,
                          timeout=600)
    process_seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{player} failed (status {done.returncode}):\n{done.stderr}")
    child = json.loads(done.stdout.splitlines()[-1])
    print(f"\nthe child process: `import torch` -> {child['torch_import']}; torch modules loaded: "
          f"{child['torch_loaded']}; onnxruntime {child['onnxruntime']}")
    print(f"  imports and loading the policy {child['load_seconds']:.2f} s, {n} games {child['play_seconds']:.2f} s "
          f"(the whole process, Python's start included: {process_seconds:.2f} s)")
    print(f"  mean return {child['mean']:.3f}, mean length {np.mean(child['lengths']):.1f} steps")

    print("\nhere, with PyTorch: what `entmachin eval` does (load_trained, then evaluate with the run's settings)")
    started = time.perf_counter()
    result = evaluate(frame, factory, n, deterministic=True, seed=seed, **options)
    torch_seconds = time.perf_counter() - started
    print(f"  {n} games {torch_seconds:.2f} s; mean return {result.mean:.3f}, mean length "
          f"{np.mean(result.lengths):.1f} steps")
    run(["eval", args.run_dir, "--episodes", str(n), "--deterministic"])
    baseline = random_policy_return(factory, n, seed, config)  # the baseline `entmachin train` prints
    returns_differ = sum(a != b for a, b in zip(child["returns"], result.returns))
    lengths_differ = sum(a != b for a, b in zip(child["lengths"], result.lengths))
    print(f"\nepisode by episode, ONNX without torch against PyTorch: {returns_differ} of {n} returns differ, "
          f"{lengths_differ} lengths differ")
    print(f"mean return: exported {child['mean']:.3f}, PyTorch {result.mean:.3f}, a random policy {baseline.mean:.3f}")
    print(f"time for the {n} games: onnxruntime {child['play_seconds']:.2f} s, PyTorch {torch_seconds:.2f} s "
          f"(one thread each)")
    return {"onnx_mean": child["mean"], "torch_mean": result.mean, "random_mean": baseline.mean,
            "returns_differ": returns_differ, "lengths_differ": lengths_differ, "episodes": len(child["returns"]),
            "onnx_seconds": child["play_seconds"], "torch_seconds": torch_seconds,
            "torch_import": child["torch_import"], "torch_loaded": child["torch_loaded"]}


if __name__ == "__main__":
    main()
