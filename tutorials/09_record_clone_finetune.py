"""Tutorial 9: record a scripted expert, clone it, fine-tune the clone with PPO, and compare curves.

    python tutorials/09_record_clone_finetune.py            # the whole story (about four minutes)
    python tutorials/09_record_clone_finetune.py --smoke    # a tiny budget: checks that everything runs

Reinforcement learning from scratch spends its first steps finding out what a person (or a
script) could have shown it. When a good policy exists, record it playing, clone it by
supervised learning, and let PPO continue from the clone. MoveToOrigin (steer a spaceship to
the origin with two thrusters; a return of 1 brings it exactly there) has such a policy: a
scripted expert that, on each axis, takes the thrust closest to the speed from which full
braking stops at the origin. What you learn:

1. **``entmachin record MoveToOrigin --policy scripted``** plays the environment's own scripted
   policy (``MoveToOrigin.scripted_policy``, ``entmachin.env.examples.move_to_origin
   .move_to_origin_expert``; ``--policy`` also takes a run directory or ``pkg.mod:function``)
   and writes a *dataset*: ``dataset.json`` (format, spaces, seats, how it was recorded) and
   Parquet parts, each published whole. ``entmachin.data.Dataset(dir)`` reads it back:
   ``.recorded``, ``.seats`` (``None``: one player), ``.paths`` (the parts), and ``.read()``
   gives ``Rows``, one row per step: ``.episode``, ``.step``, the observation's entities
   (ragged ``[n_entities, n_features]`` per type), each action's choice (ragged int64
   ``[n_actors, 1]``), the ``.reward`` that followed, and ``.final``: every episode ends with a
   row holding its last observation and no actions. ``.state()`` is what the networks take.
   Nothing is pickled: pyarrow (pandas, DuckDB, polars) reads a part as it is, one column per
   field (``features/Spaceship``, ``action/horizontal_thruster``, ``reward``, ...). The
   demonstrator's return is each episode's summed rewards.
2. **``entmachin train MoveToOrigin --frame BC --set bc.data=DIR``** runs the bundled
   ``movetoorigin-bc.yaml``: the same network as the PPO config, trained to give the
   recorded actions high probability (and its critic the recorded discounted returns). A tenth
   of the episodes is held out: ``bc/validation_loss`` and ``bc/validation_accuracy`` (the
   share of held-out actions that are the clone's most likely choice) go to tensorboard after
   every update. A BC run counts *samples* (rows learned from) where PPO counts environment
   steps: its ``train.total_steps``, evaluation interval, progress bar and x-axis are samples.
   It is evaluated on the environment like any run (``eval.json``, here with the most likely
   actions: the expert is deterministic), checkpointed, and exported like any.
3. **``--set train.init_from=DIR/clone``** starts a PPO run from the clone's latest checkpoint:
   its networks and input statistics (the clone learned them from its training rows, so PPO
   normalises its inputs as the clone did), not its optimisers or counters. The same run
   without it starts from scratch; both have the same seed, budget, environments and
   evaluation episodes. The fine-tuned run's step 0 *is* the clone: ``entmachin eval
   DIR/clone`` on the same evaluation episodes, with sampled actions as PPO's evaluations take
   them, gives the level it starts from. The script prints both evaluation curves side by side
   and draws them, with the clone's and the expert's levels, into ``DIR/curves.png``.

Result of the full run (recording seed 1, train.seed 0, one torch thread; 232 and 240 seconds in
two runs on a shared two-core machine, which gave the same figures: recording 0.6 s, cloning 12 s,
each PPO run of 524,288 steps 108 to 114 s).
The 200 expert episodes (6,600 rows, 200 of them final) return 0.996 on average (min 0.990).
The clone's most likely actions return 0.989 after 81,920 samples and 0.996, the expert's
level, from 245,760 on, although they are the expert's on only 82.6% of the held-out actions
(validation loss 1.39 after the first update, 0.42 at the end): a neighbouring thrust is often
as good. Sampled, as PPO evaluates, the clone returns 0.993 (a random policy: -0.335).

PPO from the clone keeps that level from the start: its first rollout's training return is
0.991 and it never falls below 0.969. Its evaluations dip to 0.981 at 65,536 steps, then stay
between 0.983 and 0.993 and end at 0.993: on a clone this close to the expert's ceiling
fine-tuning keeps the level, it does not improve it. PPO from scratch starts at -0.46 (first
rollout); its training return passes 0.93 at 16,384 steps, and it evaluates 0.969 at 32,768
and 0.980 at 65,536. From there on the two evaluation curves are indistinguishable (within
0.009 of each other, either one above); scratch first evaluates within 0.01 of the clone at
131,072 steps and ends at 0.990. Here the clone (13 seconds of recording and cloning) saves
PPO its first 65,000 to 130,000 steps (15 to 30 seconds); the bundled PPO config trains
1,000,000 steps to reach 0.993.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import re
import shutil
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from entmachin.data import Dataset
from entmachin.run.cli import main as entmachin
from entmachin.run.config import load_config

EPISODES = 200  # recorded expert episodes: 6,400 acting rows
PPO_STEPS = 524_288  # budget of each PPO run: 512 rollouts of 32 environments x 32 steps
PPO_EVAL_INTERVAL = 32_768
EVAL_EPISODES = 100
SMOKE_EPISODES = 10
SMOKE_BC = ["train.total_steps=8192", "bc.rows_per_update=1024", "log.eval_interval=4096",
            "log.checkpoint_interval=8192", "log.eval_episodes=8"]
SMOKE_PPO = ["rollout.num_envs=8", "rollout.n_steps=32", "frame.batch_size=64", "log.checkpoint_interval=1024",
             "log.eval_episodes=8"]
SMOKE_PPO_STEPS, SMOKE_PPO_EVAL_INTERVAL = 1024, 512


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=os.path.join("runs", "move_to_origin_clone"),
                        help="where the dataset and the three runs are written (started over if they exist)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few seconds, to check it runs")
    return parser.parse_args(argv)


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


def run(argv: List[str]) -> Tuple[str, float]:
    """One ``entmachin`` command, shown as typed; returns what it printed and the seconds it took.
    A failure stops the tutorial."""
    print(f"$ entmachin {' '.join(argv)}")
    started = time.perf_counter()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = entmachin(argv)
    print(printed.getvalue(), end="")
    if status != 0:
        raise SystemExit(f"entmachin {argv[0]} ended with status {status}")
    return printed.getvalue(), time.perf_counter() - started


def sets(overrides: List[str]) -> List[str]:
    return [arg for override in overrides for arg in ("--set", override)]


def scalars(run_dir: str, tags: Tuple[str, ...]) -> Dict[str, List[Tuple[int, float]]]:
    """Scalar curves of a run read from its event files: tag -> [(step, value)] (as tutorial 5)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logging.getLogger("tensorboard").setLevel(logging.WARNING)
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    found = events.Tags()["scalars"]
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in tags if tag in found}


def evals(run_dir: str) -> List[Tuple[int, float]]:
    """``eval.json``: every evaluation of a run, (steps, mean return)."""
    with open(os.path.join(run_dir, "eval.json"), encoding="utf-8") as f:
        return [(e["env_steps"], e["mean"]) for e in json.load(f)]


def shown(points: List[Tuple[int, float]]) -> str:
    """A curve in one line: every point, or the first two and the last two."""
    picked = points if len(points) <= 4 else points[:2] + points[-2:]
    text = ", ".join(f"{step}: {value:.3f}" for step, value in picked)
    return f"{len(points)} points  {text}{'  (first two, last two)' if len(points) > 4 else ''}"


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Runs the tutorial; returns the figures of every section."""
    args = parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # what train.threads=1 sets: the runs repeat exactly
    started = time.perf_counter()
    try:
        with np.printoptions(precision=3, suppress=True):
            figures = record(args)
            figures.update(clone(args, figures["expert_dir"]))
            figures.update(finetune(args, figures))
    finally:
        torch.set_num_threads(previous_threads)
    figures["seconds"] = time.perf_counter() - started
    print(f"\n(the whole tutorial: {figures['seconds']:.0f} s)")
    return figures


def record(args: argparse.Namespace) -> Dict[str, Any]:
    """Section 1: ``entmachin record`` with the scripted expert, and what the dataset holds."""
    section("1. entmachin record MoveToOrigin --policy scripted")
    expert_dir = os.path.join(args.dir, "expert")
    if os.path.exists(expert_dir):  # record writes a new dataset only: start over
        shutil.rmtree(expert_dir)
    episodes = SMOKE_EPISODES if args.smoke else EPISODES
    _, seconds = run(["record", "MoveToOrigin", "--policy", "scripted", "--episodes", str(episodes), "-o", expert_dir,
                      "--seed", "1", "--no-progress"])
    print(f"(recorded in {seconds:.1f} s)")

    dataset = Dataset(expert_dir)
    print(f"\n{dataset!r}: seats {dataset.seats} (one player), parts {[os.path.basename(p) for p in dataset.paths]}")
    print(f"recorded: {dataset.recorded}")
    rows = dataset.read()
    labels = {name: space.index_to_label for name, space in dataset.action_space.items()}
    n_episodes = len(np.unique(rows.episode))
    print(f"rows = dataset.read(): {len(rows)} rows of {n_episodes} episodes, {int(rows.final.sum())} of them final")
    print("the first episode's first two rows and its final row:")
    last = int(np.flatnonzero((rows.episode == rows.episode[0]) & rows.final)[0])
    for i in (0, 1, last):
        ship = rows.entities["Spaceship"].take(np.array([i])).as_array()  # [1 spaceship, 5 features]
        chosen = {name: rows.action[name].take(np.array([i])).as_array()[:, 0].tolist() for name in rows.action}
        named = ", ".join(f"{name} {[labels[name][k] for k in ks]}" for name, ks in chosen.items())
        print(f"  row {i}: episode {rows.episode[i]}, step {rows.step[i]}, final {rows.final[i]}, "
              f"Spaceship (x, y, vx, vy, step) {ship[0]}")
        print(f"         actions {named or 'none'}; reward {rows.reward[i]:.4f}, terminal {rows.terminal[i]}")
    print(f"rows.action['horizontal_thruster']: {rows.action['horizontal_thruster']!r}  (the final rows: no actors)")
    state = rows.state()
    print(f"rows.state(), what the networks take: {sorted(state)}; action_masks['vertical_thruster']: "
          f"{sorted(state['action_masks']['vertical_thruster'])}")

    import pyarrow.parquet as pq

    table = pq.read_table(dataset.paths[0])  # no entmachin needed to read the data
    print(f"\npyarrow.parquet.read_table({os.path.basename(dataset.paths[0])!r}): {table.num_rows} rows, "
          f"{len(table.schema)} columns; a few of them (schema):")
    for name in ("episode", "step", "final", "features/Spaceship", "mask/horizontal_thruster",
                 "action/horizontal_thruster", "reward", "terminal"):
        print(f"  {name:<28} {table.schema.field(name).type}")
    print(f"  table.column('action/horizontal_thruster')[:3].to_pylist() = "
          f"{table.column('action/horizontal_thruster')[:3].to_pylist()}")

    returns = np.bincount(rows.episode, weights=rows.reward)[np.unique(rows.episode)]  # summed rewards per episode
    print(f"\nthe demonstrator's return, summed rewards per episode: mean {returns.mean():.3f} over {len(returns)} "
          f"episodes (min {returns.min():.3f}, max {returns.max():.3f})")
    final_per_episode = np.bincount(rows.episode[rows.final], minlength=int(rows.episode.max()) + 1)
    return {"expert_dir": expert_dir, "episodes": n_episodes, "rows": len(rows),
            "final_rows_per_episode": final_per_episode[np.unique(rows.episode)].tolist(),
            "expert_mean": float(returns.mean()), "columns": table.schema.names, "record_seconds": seconds}


def clone(args: argparse.Namespace, expert_dir: str) -> Dict[str, Any]:
    """Section 2: behaviour cloning of the dataset, its evaluations and held-out figures."""
    section("2. entmachin train MoveToOrigin --frame BC")
    clone_dir = os.path.join(args.dir, "clone")
    budget = SMOKE_BC if args.smoke else []
    _, seconds = run(["train", "MoveToOrigin", "--frame", "BC", *sets([f"bc.data={expert_dir}", "train.seed=0",
                                                                       *budget]),
                      "--run-dir", clone_dir, "--force", "--no-progress"])
    print(f"(cloned in {seconds:.0f} s)")
    config = load_config(os.path.join(clone_dir, "config.yaml"))
    print(f"config.yaml: frame.name={config.frame.name}, bc.data={config.bc.data}, bc.validation="
          f"{config.bc.validation}, bc.rows_per_update={config.bc.rows_per_update}, train.total_steps="
          f"{config.train.total_steps} (samples), log.eval_deterministic={config.log.eval_deterministic}")
    clone_evals = evals(clone_dir)
    print(f"eval.json (samples, mean return of the most likely actions): {shown(clone_evals)}")
    curves = scalars(clone_dir, ("bc/validation_loss", "bc/validation_accuracy", "losses/policy_loss"))
    for tag, points in curves.items():
        print(f"  {tag:<24} {shown(points)}")
    accuracy = curves["bc/validation_accuracy"]
    print(f"after {accuracy[-1][0]} samples the clone's most likely action is the expert's on "
          f"{accuracy[-1][1]:.1%} of the held-out actions")
    return {"clone_dir": clone_dir, "clone_evals": clone_evals, "validation_accuracy": accuracy,
            "validation_loss": curves["bc/validation_loss"], "clone_seconds": seconds}


def finetune(args: argparse.Namespace, figures: Dict[str, Any]) -> Dict[str, Any]:
    """Section 3: PPO from the clone and from scratch on one budget; both curves, side by side and drawn."""
    section("3. PPO from the clone, and from scratch")
    clone_dir = figures["clone_dir"]
    episodes = 8 if args.smoke else EVAL_EPISODES
    total, interval = (SMOKE_PPO_STEPS, SMOKE_PPO_EVAL_INTERVAL) if args.smoke else (PPO_STEPS, PPO_EVAL_INTERVAL)
    print("The level the fine-tuned run starts from: the clone's actions, sampled (as PPO's evaluations take them) "
          "and most likely, on the evaluation episodes of train.seed=0:")
    printed, _ = run(["eval", clone_dir, "--episodes", str(episodes)])
    clone_sampled = float(re.search(r"return mean (-?\d+\.\d+)", printed).group(1))
    printed, _ = run(["eval", clone_dir, "--episodes", str(episodes), "--deterministic"])
    clone_deterministic = float(re.search(r"return mean (-?\d+\.\d+)", printed).group(1))

    budget = [f"train.total_steps={total}", f"log.eval_interval={interval}", "train.seed=0",
              *(SMOKE_PPO if args.smoke else [])]
    runs = {}
    for name, start in (("finetuned", [f"train.init_from={clone_dir}"]), ("scratch", [])):
        run_dir = os.path.join(args.dir, name)
        print()
        _, seconds = run(["train", "MoveToOrigin", *sets(start + budget), "--run-dir", run_dir, "--force",
                          "--no-progress"])
        print(f"({name}: {seconds:.0f} s)")
        curve = scalars(run_dir, ("charts/episodic_return",)).get("charts/episodic_return", [])
        runs[name] = {"dir": run_dir, "evals": evals(run_dir), "train": curve, "seconds": seconds,
                      "init_from": load_config(os.path.join(run_dir, "config.yaml")).train.init_from}

    fine, scratch = runs["finetuned"], runs["scratch"]
    print(f"\nmean evaluation return ({episodes} episodes, sampled actions) after each number of environment steps:")
    print(f"  {'steps':>7}  {'fine-tuned':>10}  {'scratch':>8}")
    print(f"  {0:>7}  {clone_sampled:>10.3f}  {'':>8}  (the clone itself)")
    by_step = dict(scratch["evals"])
    for step, value in fine["evals"]:
        other = by_step.get(step)
        print(f"  {step:>7}  {value:>10.3f}  {'' if other is None else f'{other:.3f}':>8}")
    print(f"the expert's return {figures['expert_mean']:.3f}; the clone's {clone_sampled:.3f} sampled, "
          f"{clone_deterministic:.3f} most likely")
    marks = [step for step in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288) if step <= total]
    print(f"training return (charts/episodic_return: the episodes that ended in the rollout) at {marks} steps:")
    for name in ("finetuned", "scratch"):
        train = dict(runs[name]["train"])
        print(f"  {name:<10}{''.join('      -' if train.get(m) is None else f'{train[m]:>7.3f}' for m in marks)}")
    near = next((step for step, value in scratch["evals"] if value >= clone_sampled - 0.01), None)
    level = next((step for (step, value), (_, other) in zip(scratch["evals"], fine["evals"]) if value >= other), None)
    print(f"scratch first evaluates within 0.01 of the clone {'never' if near is None else f'at {near} steps'}, "
          f"first as high as the fine-tuned run (same step) {'never' if level is None else f'at {level} steps'}")

    png = os.path.join(args.dir, "curves.png")
    plot(png, fine, scratch, clone_sampled, figures["expert_mean"])
    print(f"\nthe curves: {png}, {os.path.getsize(png)} bytes")
    return {"clone_sampled": clone_sampled, "clone_deterministic": clone_deterministic, "png": png,
            "finetuned": fine, "scratch": scratch, "scratch_near_clone": near, "scratch_level": level}


def plot(path: str, fine: Dict[str, Any], scratch: Dict[str, Any], clone_level: float, expert: float) -> None:
    """Two panels: the training returns on a log scale of steps (where scratch starts far below), and
    the evaluations near the top (the fine-tuned run from the clone's level at step 0); both with the
    clone's and the expert's levels."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    runs = ((fine, "tab:blue", "PPO from the clone"), (scratch, "tab:orange", "PPO from scratch"))
    for run_, color, label in runs:
        if run_["train"]:
            left.plot(*zip(*run_["train"]), color=color, label=label)
        points = ([(0, clone_level)] if run_ is fine else []) + run_["evals"]
        right.plot(*zip(*points), marker="o", markersize=4, color=color, label=label)
    lowest = min(value for run_, _, _ in runs for _, value in run_["evals"] + [(0, clone_level)])
    for ax in (left, right):
        ax.axhline(clone_level, color="tab:green", linestyle="--", label=f"the clone, sampled ({clone_level:.3f})")
        ax.axhline(expert, color="gray", linestyle=":", label=f"the expert ({expert:.3f})")
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    left.set_xscale("log", base=2)
    left.set_ylabel("mean return")
    left.set_title("training return (episodes ended in each rollout)", fontsize=10)
    right.set_ylim(lowest - 0.1 * (1.0 - lowest) - 0.002, 1.0 + 0.002)
    right.set_title("evaluations (sampled actions); the clone at step 0", fontsize=10)
    fig.suptitle("MoveToOrigin: PPO fine-tuning a behaviour clone vs PPO from scratch")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
