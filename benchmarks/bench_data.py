"""Datasets' costs: what recording adds to stepping and acting, and behaviour cloning's update rate against PPO's.

    python benchmarks/bench_data.py                          # 7 rounds: the figures
    python benchmarks/bench_data.py --rounds 1 --steps 8 --updates 1 --episodes 4   # a quick look

Both of the issue's speed targets, measured in the same run on MineSweeper with its bundled PPO
config's network (d_model 32, one layer, relative positions, a separate critic), one torch thread:

* recording (target: it costs at most 10% of environment stepping plus acting). Two sets of
  ``--num-envs`` environments (``EnvList``, seed 0) are played by the same frame (sampling), in
  rounds of ``--steps`` steps that alternate (the first path changes from round to round):
  ``no recording``: ``frame.act(to_state(obs))``, ``to_vec_actions``, ``envs.act``;
  ``recording``: the same plus what ``entmachin record`` does per step: the entity ids where the
  environment gives ints or strings (MineSweeper's are tuples: none), ``Recorder.step`` (its own
  flush every 64 steps, the ``DatasetWriter`` writing a Parquet part every ``--rows-per-part``
  rows), and ``Recorder.flush()`` at the end of the round, all inside the timed round. The default
  round (256 steps x 32 environments = 8,192 rows) writes about one part. The overhead is the
  ratio of the two median rates minus 1; ``without the flush share`` leaves out the time spent in
  ``Recorder.flush`` (gathering ended episodes and writing parts) from each recording round.
  ``recorder's share, timed directly`` divides the seconds inside the recorder by the rest of the
  same rounds (all rounds together, so that every part written counts); another process holding
  the core disturbs it less than the ratio of two rates.
* behaviour cloning (target: >= 0.8x PPO's update rate in samples per second, same network).
  ``PPO``: the bundled config's frame (``make_frame``), a rollout of 32 environments x 16 steps
  collected by ``RolloutCollector`` (untimed: the collector has stored the rows), then
  ``frame.update()`` timed (n_epochs 4: 8 minibatches of 256 of the 512 rows). ``BC``: a fresh
  RogueNet of the same config and a separate critic, ``BC`` with the same minibatches and
  learning rates, fed from a dataset of ``--episodes`` random-policy episodes recorded beforehand
  (``record``, probabilities included, so the distillation term counts): each update takes 512
  acting rows at random (``Rows.take``, untimed, its seconds printed apart) and times
  ``store_rows`` + ``update()`` (the per-minibatch gathering of rows is BC's own cost). Samples per
  update = actor_update_times x batch_size on both sides; ``--updates`` updates per frame per
  round, alternating.

Printed: one table with both targets (met / not met), then where the recording path's time goes.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's entmachin

from _device import add_device_argument, checked_device, clock, describe  # noqa: E402

NOW: List[Callable[[], float]] = [time.perf_counter]  # the clock; main sets one that waits for a CUDA device

RECORD_TARGET = 0.10  # recording's cost, a share of stepping + acting
BC_TARGET = 0.8  # BC's samples/s over PPO's


class Seconds:
    """Seconds spent inside wrapped calls, by label (inclusive: a call inside another counts in both)."""

    def __init__(self) -> None:
        self.spent: Dict[str, float] = {}

    def wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        self.spent.setdefault(label, 0.0)

        def call(*args: Any, **kwargs: Any) -> Any:
            start = NOW[0]()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[label] += NOW[0]() - start

        return call

    def take(self) -> Dict[str, float]:
        """The seconds so far, reset to zero."""
        out = dict(self.spent)
        self.spent = {label: 0.0 for label in out}
        return out


def _recordable_ids(observations: Any) -> bool:
    """As ``entmachin record``: ids are recorded where every one is an int or a string."""
    ids = [i for obs in observations for values in obs.ids.values() for i in values]
    return all(isinstance(i, (int, np.integer, str)) and not isinstance(i, bool) for i in ids)


# ------------------------------------------------------------------ recording


def measure_recording(args: argparse.Namespace, config: Any, factory: Any, out_dir: str) -> Dict[str, Any]:
    """Alternating rounds of stepping + acting without and with recording; rates and the recorder's seconds."""
    import torch

    from entmachin.data import DatasetWriter
    from entmachin.data.recorder import Recorder
    from entmachin.env import EnvList, to_state, to_vec_actions
    from entmachin.run.build import make_frame

    obs_space, action_space = factory.spaces()
    torch.manual_seed(args.seed)
    frame, _ = make_frame(config, obs_space, action_space)
    plain_envs = EnvList(factory, args.num_envs, seed=args.seed)
    rec_envs = EnvList(factory, args.num_envs, seed=args.seed)
    seconds = Seconds()
    writer = DatasetWriter(out_dir, obs_space, action_space, rows_per_part=args.rows_per_part)
    writer.flush = seconds.wrap(writer.flush, "parts")  # write() and close() call self.flush
    recorder = Recorder(writer, args.num_envs, episodes=None)
    recorder.flush = seconds.wrap(recorder.flush, "flush")  # step() calls self.flush
    record_step = seconds.wrap(recorder.step, "recorder")
    end_flush = seconds.wrap(recorder.flush, "recorder")
    state = {"plain": plain_envs.reset(), "recording": rec_envs.reset()}
    with_ids = _recordable_ids(rec_envs.last_obs)

    def plain(steps: int) -> float:
        obs = state["plain"]
        start = NOW[0]()
        for _ in range(steps):
            out = frame.act(to_state(obs, action_space))
            obs = plain_envs.act(to_vec_actions(out.action))
        elapsed = NOW[0]() - start
        state["plain"] = obs
        return elapsed

    def recording(steps: int) -> float:
        obs = state["recording"]
        start = NOW[0]()
        for _ in range(steps):
            ids = [o.ids for o in rec_envs.last_obs] if with_ids else None
            out = frame.act(to_state(obs, action_space))
            actions = to_vec_actions(out.action)
            nxt = rec_envs.act(actions)
            final_ids = [o.ids for o in rec_envs.final_observations] if with_ids and nxt.done.any() else None
            record_step(obs, actions, nxt, None, ids, final_ids)
            obs = nxt
        end_flush()
        elapsed = NOW[0]() - start
        state["recording"] = obs
        return elapsed

    paths = {"no recording": plain, "recording": recording}
    for fn in paths.values():  # warm-up
        fn(max(1, min(args.steps, 16)))
    seconds.take()
    rows_before, parts_before = writer.rows, writer.parts
    elapsed: Dict[str, List[float]] = {name: [] for name in paths}
    spent: List[Dict[str, float]] = []
    order = list(paths)
    for r in range(args.rounds):
        for name in order[r % 2:] + order[:r % 2]:
            elapsed[name].append(paths[name](args.steps))
            if name == "recording":
                spent.append(seconds.take())
    rows, parts = writer.rows - rows_before, writer.parts - parts_before
    recorder.close()
    plain_envs.close()
    rec_envs.close()
    steps = args.steps * args.num_envs  # environment steps per round
    rec_seconds = elapsed["recording"]
    total = {label: sum(d[label] for d in spent) for label in ("recorder", "flush", "parts")}
    rest = sum(rec_seconds) - total["recorder"]  # the recording rounds' stepping + acting
    n_steps = args.rounds * args.steps
    return {
        "plain": statistics.median(steps / s for s in elapsed["no recording"]),
        "recording": statistics.median(steps / s for s in rec_seconds),
        "no flush": statistics.median(steps / (s - d["flush"]) for s, d in zip(rec_seconds, spent)),
        "direct": total["recorder"] / rest, "direct no flush": (total["recorder"] - total["flush"]) / rest,
        "ms_per_step": {label: 1000 * seconds / n_steps for label, seconds in total.items()},
        "loop_ms_per_step": 1000 * rest / n_steps,
        "rows": rows, "parts": parts, "ids": with_ids,
    }


# ------------------------------------------------------------------ behaviour cloning against PPO


def measure_cloning(args: argparse.Namespace, config: Any, factory: Any, data_dir: str,
                    profile: Optional[str]) -> Dict[str, Any]:
    """Alternating rounds of PPO updates (on a collected rollout) and BC store + updates (on recorded rows)."""
    import torch

    from entmachin.data import Dataset
    from entmachin.env import EnvList
    from entmachin.frame import BC, RolloutCollector
    from entmachin.model import RogueNet
    from entmachin.run.build import make_frame
    from entmachin.run.cloning import discounted_returns
    from entmachin.run.record import record

    obs_space, action_space = factory.spaces()
    torch.manual_seed(args.seed)
    ppo, _ = make_frame(config, obs_space, action_space)
    envs = EnvList(factory, config.rollout.num_envs, seed=args.seed)
    collector = RolloutCollector(ppo, envs, n_steps=config.rollout.n_steps)
    pc = ppo.config
    start = NOW[0]()
    recorded = record("MineSweeper", "random", args.episodes, data_dir, seed=args.seed, progress=False)
    record_seconds = NOW[0]() - start
    rows = Dataset(data_dir).read()
    acting = rows.take(np.flatnonzero(~rows.final))
    returns = discounted_returns(rows, pc.discount)[~rows.final]
    net_config = config.model.net_config()
    net = RogueNet(obs_space, action_space, net_config)
    critic = (net.critic() if config.model.critic == "shared"
              else RogueNet(obs_space, action_space, net_config).critic())
    net.to(config.train.device)
    critic.to(config.train.device)
    bc = BC(net, critic, torch.optim.Adam, torch.nn.MSELoss(), batch_size=pc.batch_size,
            actor_update_times=pc.actor_update_times, critic_update_times=pc.critic_update_times,
            actor_learning_rate=pc.actor_learning_rate, critic_learning_rate=pc.critic_learning_rate,
            gradient_max=pc.gradient_max, discount=pc.discount, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    n_rows = config.rollout.num_envs * config.rollout.n_steps
    take_seconds: List[float] = []

    def ppo_update() -> float:
        collector.collect()  # untimed: the rollout's rows are stored by the collector
        start = NOW[0]()
        ppo.update()
        return NOW[0]() - start

    def bc_update() -> float:
        start = NOW[0]()
        index = rng.choice(len(acting), n_rows, replace=len(acting) < n_rows)
        batch = acting.take(index)
        state, probs = batch.state(), {a: p for a, (p, has) in batch.probs.items()}
        take_seconds.append(NOW[0]() - start)
        start = NOW[0]()
        bc.store_rows(state, batch.action, returns[index], probs)
        bc.update()
        return NOW[0]() - start

    sides = {"PPO": ppo_update, "BC": bc_update}
    for fn in sides.values():  # warm-up
        fn()
    take_seconds.clear()
    samples = {"PPO": pc.actor_update_times * pc.batch_size, "BC": bc.config.actor_update_times * bc.config.batch_size}
    rates: Dict[str, List[float]] = {name: [] for name in sides}
    order = list(sides)
    for r in range(args.rounds):
        for name in order[r % 2:] + order[:r % 2]:
            spent = sum(sides[name]() for _ in range(args.updates))
            rates[name].append(samples[name] * args.updates / spent)
    envs.close()
    top = None
    if profile is not None:
        top = profile_bc(bc_update, args.updates * args.rounds, profile)
    return {"PPO": statistics.median(rates["PPO"]), "BC": statistics.median(rates["BC"]), "samples": samples,
            "updates": (pc.actor_update_times, pc.critic_update_times, pc.batch_size), "rows": n_rows,
            "dataset": (recorded.episodes, len(rows), len(acting), record_seconds),
            "take": statistics.median(take_seconds), "profile": top}


def profile_bc(bc_update: Callable[[], float], n: int, sort: str) -> str:
    """cProfile's top entries (by ``sort``) over ``n`` BC updates."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        bc_update()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats(sort).print_stats(25)
    return text.getvalue()


# ------------------------------------------------------------------ the tables


def print_tables(args: argparse.Namespace, rec: Dict[str, Any], clone: Dict[str, Any]) -> None:
    overhead = rec["plain"] / rec["recording"] - 1
    overhead_nf = rec["plain"] / rec["no flush"] - 1
    ratio = clone["BC"] / clone["PPO"]
    met = (lambda ok: "met" if ok else "not met")
    print("\n| target (the issue's) | figure | baseline | measured | ratio | target | |\n|---|---|---|---|---|---|---|")
    print(f"| recording costs <= 10% of stepping + acting | env steps/s, {args.num_envs} envs (median round) "
          f"| {rec['plain']:,.0f} (no recording) | {rec['recording']:,.0f} (recording) | {overhead:+.1%} time "
          f"| <= {RECORD_TARGET:.0%} | {met(overhead <= RECORD_TARGET)} |\n"
          f"| the same, without the flush share | env steps/s (median round) | {rec['plain']:,.0f} "
          f"| {rec['no flush']:,.0f} | {overhead_nf:+.1%} time | <= {RECORD_TARGET:.0%} "
          f"| {met(overhead_nf <= RECORD_TARGET)} |\n"
          f"| recorder's share, timed directly (same rounds) | recorder s / rest s (all rounds) | - | - "
          f"| {rec['direct']:.1%} ({rec['direct no flush']:.1%} without flush) | <= {RECORD_TARGET:.0%} "
          f"| {met(rec['direct'] <= RECORD_TARGET)} |\n"
          f"| BC trains at >= 0.8x PPO's update rate | samples/s per update (median round) | {clone['PPO']:,.0f} "
          f"(PPO update) | {clone['BC']:,.0f} (BC store + update) | {ratio:.2f}x | >= {BC_TARGET:.1f}x "
          f"| {met(ratio >= BC_TARGET)} |")
    per = rec["ms_per_step"]
    print(f"\nrecording path, milliseconds per step (of all {args.num_envs} environments)\n\n"
          "| step + act (the rest) | recorder (all) | Recorder.step without flush | flush without parts "
          "| Parquet parts | rows written | parts written | ids recorded |\n|---|---|---|---|---|---|---|---|\n"
          f"| {rec['loop_ms_per_step']:.3f} | {per['recorder']:.3f} | {per['recorder'] - per['flush']:.3f} "
          f"| {per['flush'] - per['parts']:.3f} | {per['parts']:.3f} | {rec['rows']:,} | {rec['parts']} "
          f"| {'yes' if rec['ids'] else 'no (not ints or strings)'} |")
    actor, critic, batch = clone["updates"]
    episodes, n_rows, n_acting, rec_s = clone["dataset"]
    print(f"\nupdates: {actor} actor and {critic} critic minibatches of {batch} from {clone['rows']} rows on both "
          f"sides ({clone['samples']['PPO']:,} samples an update); PPO's rows stored by the collector (untimed), "
          f"BC's taken from the dataset (Rows.take + state(), untimed: {clone['take'] * 1000:.1f} ms an update, "
          f"median); dataset: {episodes} random-policy episodes, {n_rows:,} rows ({n_acting:,} acting), "
          f"recorded in {rec_s:.1f} s")
    if clone["profile"] is not None:
        print(f"\ncProfile of {args.updates * args.rounds} BC updates (store + update, and the untimed take):\n")
        print(clone["profile"])


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (each figure is their median)")
    parser.add_argument("--steps", type=int, default=256, help="steps per recording path per round")
    parser.add_argument("--num-envs", type=int, default=32, help="environments of the recording paths")
    parser.add_argument("--rows-per-part", type=int, default=8192, help="the DatasetWriter's part size")
    parser.add_argument("--updates", type=int, default=3, help="updates per frame per round")
    parser.add_argument("--episodes", type=int, default=40, help="random-policy episodes recorded for BC")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", nargs="?", const="tottime", default=None, metavar="SORT",
                        help="profile BC's updates afterwards (cProfile, sorted by SORT: tottime by default)")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    device = checked_device(args.device)
    NOW[0] = clock(device)
    import torch

    from entmachin.run.envs import EnvFactory
    from entmachin.run.config import load_config
    from entmachin.run.paths import bundled_config_path

    torch.set_num_threads(1)
    config = load_config(bundled_config_path("MineSweeper"), [f"train.device={args.device}"])
    factory = EnvFactory(config.env)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="entmachin-data-bench-") as tmp:
        rec = measure_recording(args, config, factory, os.path.join(tmp, "recording"))
        clone = measure_cloning(args, config, factory, os.path.join(tmp, "cloning"), args.profile)
    print(f"MineSweeper, the bundled PPO config's network; {args.rounds} alternating rounds: {args.steps} steps of "
          f"{args.num_envs} environments per recording path, {args.updates} updates per frame; torch "
          f"{torch.__version__}, 1 thread, {describe(device)}; load average {load:.2f} at the start")
    print_tables(args, rec, clone)
    print(f"\nload average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
