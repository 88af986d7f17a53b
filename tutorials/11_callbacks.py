"""Tutorial 11: training from Python with callbacks: a figure of your own, and stopping at a threshold.

    python tutorials/11_callbacks.py            # ConnectFour until 0.9 against random (10-20 minutes)
    python tutorials/11_callbacks.py --smoke    # a tiny run: checks that everything runs

``entmachin train`` is a loop of rollouts and updates; everything else a run does (evaluations,
checkpoints, tensorboard, the progress bar, the self-play pool) is a *callback* that the loop calls
at six events. Your own callbacks run beside them. What you learn:

1. **``entmachin.run.train(config, callbacks=[...])``** runs what ``entmachin train`` runs, from
   Python, and returns the trained frame (``frame.actor`` is the policy, ``frame.act`` acts). The
   config is an environment's name (its bundled config), a YAML file, a mapping or a ``RunConfig``;
   ``overrides`` are ``--set``'s ``KEY=VALUE``s.
2. **A callback** subclasses ``entmachin.run.Callback`` and overrides the events it needs:
   ``on_start(run)``, ``after_rollout(run, stats)``, ``after_update(run, stats)``,
   ``on_evaluation(run, record)``, ``on_checkpoint(run, env_steps)``, ``on_end(run, result)`` and
   ``close(run)``. ``run.state`` holds the counters (``env_steps``, ``iterations``, ``evals``, ...),
   ``run.writer`` is the run's tensorboard writer, ``run.frame`` the algorithm, ``run.config`` the config.
   Section 1's callback writes a figure of its own (``custom/win_rate_spread``: how much better the
   policy does against ``random`` than against ``scripted``) at each evaluation.
3. **Stopping a run.** ``run.stop(reason)`` ends the run after the current iteration as a finished
   run ends: its final evaluation and checkpoint, then ``TrainResult.reason``. ``StopWhen(figure,
   at_least, evaluations=1)`` is entmachin's own: section 2 stops ConnectFour once its evaluations
   win 0.9 of their games against ``random``.
4. **Callbacks in YAML.** ``train.callbacks`` names them (``pkg.mod:Class``, or
   ``{class: pkg.mod:Class, kwargs: {...}}``; entmachin's own by name), so ``entmachin train`` runs them
   too; section 3 gives ``StopWhen`` with ``--set``. A resumed run may change them.
5. **A callback that raises** stops the run with a ``CallbackError`` naming it, the event and the
   steps; the checkpoints already published stay whole and ``--resume`` continues from them
   (section 4).

Result of the full run (seed 0, one torch thread, a two-core machine busy with two other runs; about
16 minutes for the three runs): ConnectFour's bundled config wins 0.78, 0.82, then 0.91 of its games
against random at 10,240, 20,480 and 30,720 steps (0.15, 0.28, 0.37 against scripted), and ``StopWhen``
stops it there instead of at the bundled 1,000,000 steps; the YAML run of section 3 stops at the same step
with the same figures.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
from typing import Any, Dict, List, Optional

from entmachin.run import Callback, CallbackError, StopWhen, train
from entmachin.run.cli import main as entmachin_command

SMOKE = ["train.total_steps=256", "rollout.num_envs=8", "rollout.n_steps=8", "frame.batch_size=64",
         "log.eval_interval=64", "log.checkpoint_interval=128", "log.eval_episodes=8", "model.d_model=16"]
FULL = ["train.total_steps=200000", "log.eval_interval=10240", "log.checkpoint_interval=10240",
        "log.eval_episodes=100"]


class WinRateSpread(Callback):
    """Writes ``custom/win_rate_spread`` (win rate against random minus against scripted) at each evaluation,
    and keeps the evaluations it saw."""

    def __init__(self) -> None:
        self.seen: List[Dict[str, Any]] = []

    def on_evaluation(self, run: Any, record: Dict[str, Any]) -> None:
        rates = record["win_rate"]
        spread = rates["random"] - rates["scripted"]
        run.writer.add_scalar("custom/win_rate_spread", spread, run.state.env_steps)
        self.seen.append({"env_steps": record["env_steps"], "final": record["final"], "spread": spread, **rates})


class FailsAt(Callback):
    """Raises once the run has gone ``steps`` environment steps (a callback with a bug, for section 4)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def after_update(self, run: Any, stats: Any) -> None:
        if run.state.env_steps >= self.steps:
            raise KeyError("a figure the game does not report")


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=os.path.join("runs", "callbacks"), help="where the runs are written")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few seconds, to check it runs")
    return parser.parse_args(argv)


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Runs the tutorial; returns what it measured (for the test)."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    budget = SMOKE if args.smoke else FULL
    threshold = 0.0 if args.smoke else 0.9  # the smoke run's tiny policy stops at its first evaluation
    out: Dict[str, Any] = {}

    section("1 and 2. entmachin.run.train with a figure of our own, stopping at a threshold")
    spread, stop = WinRateSpread(), StopWhen(figure="random", at_least=threshold)
    first = os.path.join(args.run_dir, "spread")
    frame = train("ConnectFour", callbacks=[spread, stop], overrides=budget, run_dir=first,
                                force=True, progress=not args.smoke)
    for row in spread.seen:
        print(f"  {row['env_steps']:>7} steps{' (final)' if row['final'] else '        '}  random {row['random']:.3f}  "
              f"scripted {row['scripted']:.3f}  spread {row['spread']:+.3f}")
    steps = spread.seen[-1]["env_steps"]
    print(f"stopped at {steps:,} environment steps; the trained policy: {type(frame.actor).__name__} with "
          f"{sum(p.numel() for p in frame.actor.parameters()):,} parameters")
    out.update(seen=spread.seen, stopped_at=steps, frame=frame)

    section("3. The same stop from YAML: train.callbacks")
    second = os.path.join(args.run_dir, "yaml")
    spec = f"train.callbacks=[{{class: StopWhen, kwargs: {{figure: random, at_least: {threshold}}}}}]"
    argv_ = ["train", "ConnectFour", "--run-dir", second, "--force", "--no-progress",
             *[a for o in [*budget, spec] for a in ("--set", o)]]
    print(f"$ entmachin {' '.join(argv_[:6])} ... --set '{spec}'")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = entmachin_command(argv_)
    print(printed.getvalue().rstrip())
    out.update(yaml_status=status, yaml_out=printed.getvalue())

    section("4. A callback that raises")
    third = os.path.join(args.run_dir, "raises")
    fail_at = 192 if args.smoke else 25_000  # after the first checkpoint
    try:
        train("ConnectFour", callbacks=[FailsAt(fail_at)], overrides=budget, run_dir=third, force=True,
                            progress=False)
    except CallbackError as e:
        print(f"CallbackError: {e}")
        out["error"] = str(e)
    with open(os.path.join(third, "checkpoints", sorted(n for n in os.listdir(os.path.join(third, "checkpoints"))
                                                        if n.endswith(".json"))[-1]), encoding="utf-8") as f:
        version = json.load(f)["version"]
    print(f"its latest checkpoint ({version} steps) is whole; `entmachin train --resume {third}` continues from it")
    out["checkpoint"] = version
    return out


if __name__ == "__main__":
    main()
