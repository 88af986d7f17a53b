"""Beta or squashed Gaussian: the two bounded distributions of continuous actions, learning side by side.

    python benchmarks/bench_continuous_heads.py                          # every job not in the results file
    python benchmarks/bench_continuous_heads.py --env Vehicles --seeds 0 1 2 --budget 100000
    python benchmarks/bench_continuous_heads.py --table-only

Each (environment, distribution, seed) trains the environment's bundled config with
``model.continuous`` set to the distribution (everything else as bundled) and appends one JSON
line to ``benchmarks/results/continuous_heads.jsonl``: the evaluations along the way (ten), the
final evaluation sampled and deterministic, and the wall time. The table gives, per environment
and distribution, the median over seeds of the final return (the better of sampled and
deterministic), of the area under the evaluation curve (mean of the ten evaluations: how fast it
learns) and the seeds' spread. Jobs already in the file (same config fingerprint) are skipped.
``--device`` sets ``train.device`` (not part of the fingerprint: the returns do not depend on it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from _device import add_device_argument, checked_device, describe  # noqa: E402
from bench_learning import fingerprint, train_and_evaluate  # noqa: E402
from entmachin.run.config import apply_overrides  # noqa: E402

DISTRIBUTIONS = ("beta", "squashed_gaussian")
DEFAULT_ENVS = {"Vehicles": 100_000, "Turrets": 100_000}
RESULTS = os.path.join(HERE, "results", "continuous_heads.jsonl")


def config_data(env: str, distribution: str) -> Dict[str, Any]:
    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import apply_overrides, config_to_dict, load_config

    path = bundled_config_path(env, "PPO")
    if path is None:
        raise SystemExit(f"bench_continuous_heads: {env} has no bundled PPO config")
    return apply_overrides(config_to_dict(load_config(path)), [f"model.continuous={distribution}"])


def read(path: str) -> List[Dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def table(records: List[Dict[str, Any]]) -> str:
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in records:  # records of the bundled configs as they are now
        if r["config"] == fingerprint(config_data(r["env"], r["distribution"])):
            groups.setdefault((r["env"], r["budget"], r["distribution"]), []).append(r)
    lines = ["| environment | budget | distribution | seeds | final return (median; per seed) | mean of the "
             "evaluations (median) | wall s (median) |", "|---|---|---|---|---|---|---|"]
    for (env, budget, dist), rs in sorted(groups.items()):
        finals = [max(r["sampled"], r["deterministic"]) for r in rs]
        area = [statistics.fmean(m for _, m in r["evals"]) for r in rs]
        lines.append(f"| {env} | {budget:,} | {dist} | {len(rs)} | {statistics.median(finals):.3f}; "
                     f"{' / '.join(f'{f:.3f}' for f in finals)} | {statistics.median(area):.3f} | "
                     f"{statistics.median(r['wall_s'] for r in rs):.0f} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", nargs="*", default=list(DEFAULT_ENVS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=None, help="environment steps (default: per environment)")
    parser.add_argument("--distributions", nargs="*", default=list(DISTRIBUTIONS))
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--table-only", action="store_true")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    if not args.table_only:
        print(f"train.device: {describe(checked_device(args.device))}")
        done = {(r["env"], r["distribution"], r["seed"], r["budget"], r["config"]) for r in read(args.results)}
        with tempfile.TemporaryDirectory() as runs:
            for env in args.env:
                budget = args.budget or DEFAULT_ENVS.get(env, 100_000)
                for seed in args.seeds:  # alternating distributions, seed by seed
                    for dist in args.distributions:
                        data = config_data(env, dist)
                        key = (env, dist, seed, budget, fingerprint(data))
                        if budget < 2048:  # a tiny budget (the smoke test): a rollout that fits it
                            data = apply_overrides(data, ["rollout.num_envs=8", "rollout.n_steps=16",
                                                          "frame.batch_size=64", "log.eval_episodes=4"])
                        if key in done:
                            continue
                        result = train_and_evaluate(data, seed, budget, os.path.join(runs, f"{env}-{dist}-{seed}"),
                                                    [f"train.device={args.device}"])
                        record = {"env": env, "distribution": dist, "seed": seed, "budget": budget,
                                  "config": key[-1], **result}
                        os.makedirs(os.path.dirname(args.results), exist_ok=True)
                        with open(args.results, "a", encoding="utf-8") as f:
                            f.write(json.dumps(record) + "\n")
                        print(f"{env} {dist} seed {seed}: sampled {result['sampled']:.3f}, deterministic "
                              f"{result['deterministic']:.3f}, {result['wall_s']:.0f} s", flush=True)
    print(table(read(args.results)))


if __name__ == "__main__":
    main()
