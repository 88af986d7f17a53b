"""Tutorial 5: from a YAML config to tensorboard curves with the ``entmachin`` command.

    python tutorials/05_yaml_to_tensorboard.py            # Count's bundled config, then resumed (7 seconds)
    python tutorials/05_yaml_to_tensorboard.py --smoke    # the same on a tiny budget (what the test runs)

Each step below is one ``entmachin`` command; the script runs them in-process through
``entmachin.run.cli.main(argv)``, which takes exactly the arguments of the command line and
returns its exit status, so what you read here is what a shell would print. What you learn:

1. **``entmachin train Count``** trains on the bundled config of an example environment
   (``entmachin train`` alone takes MineSweeper's; ``entmachin train my.yaml`` a file of your
   own). ``--set section.field=value`` overrides any field (the smoke run shrinks the budget
   that way); ``--run-dir`` says where the run goes and ``--force`` starts over in one that
   already holds a run. At the end it prints the mean evaluation return next to a random
   policy's on the same environments.
2. **The run directory** holds the resolved ``config.yaml`` (``entmachin train config.yaml``
   repeats the run), tensorboard event files, ``checkpoints/`` (one version per checkpoint
   interval, published atomically), ``eval.json`` (every evaluation) and ``curve.png``.
3. **Tensorboard curves** have environment steps on the x-axis: ``charts/*`` (episodic return
   and length, steps per second, learning rate), ``losses/*`` (policy and value loss, entropy,
   approximate KL, clip fraction, explained variance), ``entities/<type>`` (mean count per
   observation), ``actions/<action>/<choice>`` (how often each choice was taken) and
   ``eval/mean_return``. ``tensorboard --logdir runs`` shows them; tensorboard's
   ``EventAccumulator`` reads them back in Python, as section 3 does.
4. **``entmachin train --resume RUN_DIR``** continues from the latest checkpoint with the
   run's own config; only ``train.total_steps`` and ``log.*`` may change. The curves continue
   where they stopped, without repeated steps. Ctrl-C stops a run after the current iteration
   with a checkpoint, and says how to resume it.
5. **``entmachin eval RUN_DIR``** evaluates the latest checkpoint again (``--episodes``,
   ``--deterministic`` for the most likely actions, ``--seed``).
6. **``entmachin init ENV > my.yaml``** writes a complete config with a comment on every field,
   the starting point for a config of your own.

Result of the full run (seed 0, one torch thread, 7 seconds on a shared two-core machine):
Count reaches a mean evaluation return of 0.76 at 2,048 steps (a random policy: 0.34), and
0.90 after resuming to 4,096.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
from typing import Dict, List, Optional, Tuple

from entmachin.run.cli import bundled_config_path
from entmachin.run.cli import main as entmachin
from entmachin.run.config import load_config

SMOKE = ["train.total_steps=128", "log.checkpoint_interval=64", "log.eval_interval=64", "log.eval_episodes=8",
         "rollout.num_envs=8", "rollout.n_steps=4", "frame.batch_size=16"]
SHOWN_TAGS = ("charts/episodic_return", "losses/policy_loss", "losses/entropy", "entities/Bean", "eval/mean_return")


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=os.path.join("runs", "count"),
                        help="where the run is written (started over if it holds one)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few seconds, to check it runs")
    return parser.parse_args(argv)


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


def run(argv: List[str]) -> None:
    """One ``entmachin`` command, shown as typed; a failure stops the tutorial with its status."""
    print(f"$ entmachin {' '.join(argv)}")
    status = entmachin(argv)
    if status != 0:
        raise SystemExit(f"entmachin {argv[0]} ended with status {status}")


def scalars(run_dir: str) -> Dict[str, List[Tuple[int, float]]]:
    """Every scalar curve of a run: tag -> [(environment step, value)], read from its event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logging.getLogger("tensorboard").setLevel(logging.WARNING)  # it logs every event file it opens
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})  # 0: keep every point, not a sample
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def show_curves(curves: Dict[str, List[Tuple[int, float]]]) -> None:
    for tag in SHOWN_TAGS:
        points = curves[tag]
        shown = points if len(points) <= 4 else points[:2] + points[-2:]
        text = ", ".join(f"{step}: {value:.3f}" for step, value in shown)
        print(f"  {tag:<24} {len(points):>3} points  {text}{'  (first two, last two)' if len(points) > 4 else ''}")


def main(argv: Optional[List[str]] = None) -> Dict[str, List[Tuple[int, float]]]:
    """Runs the tutorial; returns the curves read back after the resumed run."""
    args = parse_args(argv)
    run_dir = args.run_dir
    smoke = [arg for override in SMOKE for arg in ("--set", override)] if args.smoke else []

    section("1. entmachin train Count")
    print(f"Count's bundled config: {bundled_config_path('Count')}")
    run(["train", "Count", "--run-dir", run_dir, "--force", "--no-progress", *smoke])
    config = load_config(os.path.join(run_dir, "config.yaml"))

    section("2. What the run directory holds")
    for name in sorted(os.listdir(run_dir)):
        path = os.path.join(run_dir, name)
        size = f"{len(os.listdir(path))} files" if os.path.isdir(path) else f"{os.path.getsize(path)} bytes"
        print(f"  {name:<48} {size}")
    print("(one events file per session holds the curves; the small one beside it, the hyperparameters with the "
          "final evaluation, for tensorboard's HPARAMS tab)")
    print(f"config.yaml: env.name={config.env.name}, train.total_steps={config.train.total_steps}, "
          f"rollout.num_envs={config.rollout.num_envs}, frame.batch_size={config.frame.settings.batch_size}")
    checkpoints = sorted(n for n in os.listdir(os.path.join(run_dir, "checkpoints")) if n.endswith(".json"))
    print(f"checkpoints/: versions {checkpoints} (each names its actor, critic, optimizer and environment files)")
    with open(os.path.join(run_dir, "eval.json"), encoding="utf-8") as f:
        print(f"eval.json: {json.load(f)}")

    section("3. The curves, read back from the event files")
    curves = scalars(run_dir)
    by_group: Dict[str, List[str]] = {}
    for tag in sorted(curves):
        by_group.setdefault(tag.split("/")[0], []).append(tag)
    for group, tags in by_group.items():
        print(f"  {group + '/*':<12} {', '.join(tag.split('/', 1)[1] for tag in tags)}")
    show_curves(curves)

    section("4. entmachin train --resume, with a larger train.total_steps")
    total = config.train.total_steps * 2
    run(["train", "--resume", run_dir, "--set", f"train.total_steps={total}", "--no-progress"])
    curves = scalars(run_dir)
    steps = [step for step, _ in curves["losses/policy_loss"]]
    print(f"losses/policy_loss now has {len(steps)} points, steps {steps[0]} to {steps[-1]}; every step once: "
          f"{len(steps) == len(set(steps))}")
    show_curves(curves)

    section("5. entmachin eval")
    episodes = "8" if args.smoke else "100"
    run(["eval", run_dir, "--episodes", episodes])
    run(["eval", run_dir, "--episodes", episodes, "--deterministic"])

    section("6. entmachin init, and where curve.png is")
    my_yaml = os.path.join(os.path.dirname(os.path.abspath(run_dir)), "my_count.yaml")
    text = io.StringIO()
    with contextlib.redirect_stdout(text):  # what `entmachin init Count --frame A2C > my_count.yaml` does
        status = entmachin(["init", "Count", "--frame", "A2C"])
    with open(my_yaml, "w", encoding="utf-8") as f:
        f.write(text.getvalue())
    print(f"$ entmachin init Count --frame A2C > {my_yaml}   (status {status}); its first lines:")
    for line in text.getvalue().splitlines()[:8]:
        print(f"  {line}")
    mine = load_config(my_yaml)
    print(f"it loads as a config: frame.name={mine.frame.name}, env.name={mine.env.name}; train it with "
          f"`entmachin train {my_yaml}`")
    png = os.path.join(run_dir, "curve.png")
    print(f"the learning curve (training return and evaluations vs environment steps): {png}, "
          f"{os.path.getsize(png)} bytes; all curves: tensorboard --logdir {os.path.dirname(os.path.abspath(run_dir))}")
    return curves


if __name__ == "__main__":
    main()
