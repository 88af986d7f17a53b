"""Self-play's cost: a game's bundled config with a pool of past selves against one policy acting for every seat.

    python benchmarks/bench_selfplay.py                 # Skirmish's bundled config, 6 rounds
    python benchmarks/bench_selfplay.py --env ConnectFour --previous env.kwargs.choose=drop
    python benchmarks/bench_selfplay.py --rounds 2 --iterations 2 --num-envs 16   # a quick look

The set-ups train on the same environments with the same settings (the bundled config) and alternate, a
few iterations (rollout + update) each per round, so that the machine's noise falls on all alike:

* ``one policy``: no pool; the learner acts for every seat and stores every seat's rows;
* ``pool M=2`` (the default ``max_snapshots``) and ``pool M=1``: the learner plays one random
  seat per game; the pool (filled with snapshots beforehand, so that M of them are in play) or,
  in half the games, the current policy plays the other; the rows the current policy acts are stored;
* with ``--previous KEY=VALUE ...``: ``previous``, the pool of the bundled config as it was before those
  settings changed (the config with them set back).

Printed: environment steps/s of each (the median round), the ratio to one policy (the target is
>= 80% with the default M), and per set-up the seconds per iteration of each phase: env (``VecEnv.act``),
learner act (``frame.act`` on the learner's rows and the conversion of its actions), opponent act
(the pool's and the current self's forward passes on the other rows, merging included), state (observations
-> model inputs), store (``store_rollout``) and update.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any, Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _device import add_device_argument, checked_device, clock, describe  # noqa: E402

PHASES = ("env", "learner act", "opponent act", "state", "store", "update")


class Phases:
    """Seconds per phase; a phase timed inside another counts only there (the outer one excludes it)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now  # the clock (on CUDA it waits for the device)
        self.spent = {phase: 0.0 for phase in PHASES}
        self._stack: List[List[Any]] = []

    def wrap(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._stack and self._stack[-1][0] == "opponent act" and phase == "learner act":
                return fn(*args, **kwargs)  # the current self playing opponent: opponent act
            self._stack.append([phase, self.now()])
            try:
                return fn(*args, **kwargs)
            finally:
                _, start = self._stack.pop()
                elapsed = self.now() - start
                self.spent[phase] += elapsed
                if self._stack:
                    self._stack[-1][1] += elapsed  # the outer phase does not count it

        return call


def build(config: Any, pool: bool, max_snapshots: int) -> Dict[str, Any]:
    """Environments, frame, collector (and pool) of one set-up, timed by phase."""
    import dataclasses

    from entmachin.frame import RolloutCollector
    from entmachin.run.build import make_envs, make_frame, seeds
    from entmachin.run.selfplay import SelfPlay
    from entmachin.run.spaces import spaces_record
    from entmachin.run.tracker import RolloutTracker

    section = dataclasses.replace(config.selfplay, seats="random" if pool else "all", max_snapshots=max_snapshots)
    config = dataclasses.replace(config, selfplay=section)
    envs = make_envs(config, seeds(config)["envs"])
    n_seats = len(envs.row_index().seats[0])
    frame, _ = make_frame(config, envs.obs_space(), envs.action_space(), rows_per_env=n_seats)
    selfplay = None
    if pool:
        selfplay = SelfPlay(section, frame, envs.row_index(), seeds(config)["selfplay"],
                            spaces_record(envs.obs_space(), envs.action_space()))
        for k in range(1, section.window + 1):  # a full pool, M snapshots in play
            selfplay.advance(k * max(section.save_steps, section.swap_steps))
    tracker = RolloutTracker(envs.action_space())
    phases = Phases(clock(checked_device(config.train.device)))
    collector = RolloutCollector(frame, envs, config.rollout.n_steps, state_fn=phases.wrap(tracker.state_fn, "state"),
                                 action_fn=phases.wrap(tracker.action_fn, "learner act"), opponents=selfplay)
    envs.act = phases.wrap(envs.act, "env")
    frame.act = phases.wrap(frame.act, "learner act")
    frame.store_rollout = phases.wrap(frame.store_rollout, "store")
    if selfplay is not None:
        selfplay.act = phases.wrap(selfplay.act, "opponent act")
    return {"envs": envs, "frame": frame, "collector": collector, "selfplay": selfplay, "phases": phases,
            "update": phases.wrap(frame.update, "update"), "steps": 0, "seconds": [], "rates": []}


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--iterations", type=int, default=3, help="rollouts + updates per set-up per round")
    parser.add_argument("--num-envs", type=int, default=None, help="default: the bundled config's")
    parser.add_argument("--env", default="Skirmish", choices=["Skirmish", "ConnectFour"])
    parser.add_argument("--previous", nargs="+", default=[], metavar="KEY=VALUE",
                        help="a 'previous' pool set-up: the bundled config with these settings")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    now = clock(checked_device(args.device))
    import torch

    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import load_config

    torch.set_num_threads(1)
    overrides = [f"train.device={args.device}"]
    if args.num_envs is not None:
        overrides += [f"rollout.num_envs={args.num_envs}", f"frame.batch_size={min(1024, args.num_envs * 16)}"]
    config = load_config(bundled_config_path(args.env, "PPO"), overrides)
    setups = {"one policy": build(config, False, 1),
              f"pool M={config.selfplay.max_snapshots}": build(config, True, config.selfplay.max_snapshots),
              "pool M=1": build(config, True, 1)}
    if args.previous:
        previous = load_config(bundled_config_path(args.env, "PPO"), overrides + args.previous)
        setups["previous (" + " ".join(args.previous) + ")"] = build(previous, True, previous.selfplay.max_snapshots)
    for setup in setups.values():  # warm-up: one iteration each
        setup["collector"].collect()
        setup["update"]()
        setup["phases"].spent = {phase: 0.0 for phase in PHASES}
    for _ in range(args.rounds):
        for name, setup in setups.items():
            start = now()
            steps = 0
            for _ in range(args.iterations):
                steps += setup["collector"].collect().n_env_steps
                setup["update"]()
            elapsed = now() - start
            setup["rates"].append(steps / elapsed)
            setup["steps"] += steps
    n_iterations = args.rounds * args.iterations
    print(f"{args.env}, the bundled config: {config.rollout.num_envs} environments x {config.rollout.n_steps} steps per "
          f"rollout, {args.rounds} rounds x {args.iterations} iterations per set-up, alternating; "
          f"torch {torch.__version__}, 1 thread, {describe(checked_device(args.device))}; load average {os.getloadavg()[0]:.2f}")
    base = statistics.median(setups["one policy"]["rates"])
    print("\n| set-up | env steps/s (median round) | vs one policy |\n|---|---|---|")
    for name, setup in setups.items():
        rate = statistics.median(setup["rates"])
        print(f"| {name} | {rate:,.0f} | {rate / base:.2f} |")
    print("\nseconds per iteration, by phase\n\n| set-up | " + " | ".join(PHASES) + " | total |\n"
          + "|---" * (len(PHASES) + 2) + "|")
    for name, setup in setups.items():
        spent = setup["phases"].spent
        print(f"| {name} | " + " | ".join(f"{spent[p] / n_iterations:.3f}" for p in PHASES)
              + f" | {sum(spent.values()) / n_iterations:.3f} |")
    for setup in setups.values():
        setup["envs"].close()


if __name__ == "__main__":
    main()
