"""Self-play candidates: one change at a time to a game's bundled config, each seed a record.

    python benchmarks/selfplay_candidates.py --candidate pointer --seeds 0 [--budget 1000000]
    python benchmarks/selfplay_candidates.py --env Skirmish --candidate one-policy --seeds 0 1 2 --budget 200000
    python benchmarks/selfplay_candidates.py --table-only
    python benchmarks/selfplay_candidates.py --promote pointer-entropy  # its runs: the bundled config's rows

Each job trains the game's bundled config (ConnectFour unless ``--env``) with the candidate's changes (``--set`` style), as
``bench_learning.py`` trains a row (ten evaluations against ``random`` and ``scripted`` on the way,
``checkpoints/best`` chosen against ``scripted``), then plays the best and the final checkpoints on
fresh games against ``random``, ``scripted`` and the held-out ``centre_opponent`` (win, else block, else
the centre-most column: never used in training or in choosing the best checkpoint; ``bench_learning.HELD_OUT``).
Each finished job appends one JSON line to ``benchmarks/results/selfplay_candidates.jsonl``, kept or not, so the next
person knows what was ruled out; jobs already there (same candidate, seed, budget and config) are skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_learning import bundled_data, fingerprint, read_results, settings_of, train_and_evaluate  # noqa: E402

RESULTS = os.path.join(HERE, "results", "selfplay_candidates.jsonl")
LEARNING = os.path.join(HERE, "results", "learning.jsonl")
FRAME = "PPO"
FRESH_GAMES = 1000

# Candidate -> its changes to the bundled config, each stated in full (the bundled config moves on; a candidate's
# changes keep meaning what they meant when its runs were recorded). Each names what it adds to the one it builds on.
COLUMN = ("env.kwargs.choose=column",)
SMALL_ENTROPY = ("frame.entropy_weight=-0.01", "frame.anneal_entropy=false")  # the bundled bonus before pointer-entropy
ENTROPY = ("frame.entropy_weight=-0.1", "frame.anneal_entropy=true")
MIRROR = ("rollout.symmetries=[mirror]",)
MINIBATCH = ("frame.batch_size=512", "frame.n_epochs=4")
POINTER = COLUMN + SMALL_ENTROPY
CONNECT_FOUR: Dict[str, Tuple[str, ...]] = {
    "drop": ("env.kwargs.choose=drop",) + SMALL_ENTROPY,  # the bundled config before it chose columns
    # The Mover selects a Column entity: each column scored from its own embedding, which sees the pieces a drop there
    # would join, instead of seven logits from the Mover's one embedding.
    "pointer": POINTER,
    "pointer-d64": POINTER + ("model.d_model=64", "model.n_head=4"),
    # Snapshots in play drawn by prioritised fictitious self-play (weights (1 - p)^2 from Elo).
    "pointer-pfsp": POINTER + ("selfplay.sampling=pfsp",),
    # Every stored row and its mirror image (the board reflected left to right) trained on: twice the rows per update.
    "pointer-mirror": POINTER + MIRROR,
    # A ten times larger entropy bonus, annealed to 0 with the learning rates (enn-trainer's generic choice): the
    # pointer runs' entropy fell to 0.06 by 377k steps (the mirror's to 0.001 by 205k), their games then repeat.
    # The bundled config until pointer-entropy-minibatch.
    "pointer-entropy": COLUMN + ENTROPY,
    "pointer-mirror-entropy": COLUMN + MIRROR + ENTROPY,
    # pointer-entropy with its snapshots in play drawn by prioritised fictitious self-play.
    "pointer-entropy-pfsp": COLUMN + ENTROPY + ("selfplay.sampling=pfsp",),
    # pointer-entropy with twice the gradient steps per rollout: minibatches of 512 rows, four epochs (12 steps of
    # ~1,500 stored rows, against 6). The bundled config since.
    "pointer-entropy-minibatch": COLUMN + ENTROPY + MINIBATCH,
    # pointer-entropy against snapshots that play their most likely moves: every loss of its best checkpoints to
    # scripted began with a one-move mistake, most often a missed block (benchmarks/connect_four_mistakes.py); a
    # sampling snapshot often misses the win that would punish it.
    "pointer-entropy-sharp": COLUMN + ENTROPY + ("selfplay.snapshot_actions=most_likely",),
}
# Game -> candidate -> changes. "one-policy": one policy for every seat (no pool), at the same budget.
CANDIDATES: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "ConnectFour": {**CONNECT_FOUR, "one-policy": COLUMN + ENTROPY + MINIBATCH + ("selfplay.seats=all",)},
    "Skirmish": {"bundled": (), "one-policy": ("selfplay.seats=all",)},
}


def candidate_data(env: str, candidate: str, budget: int) -> Dict[str, Any]:
    """The bundled config with ``candidate``'s changes, as plain data; its annealing stretched to ``budget``
    (``frame.n_anneal_updates: auto`` over ``budget`` steps: learning rates reach 0 at its end, as the
    bundled config's do at its own budget)."""
    from entmachin.run.config import apply_overrides, config_from_dict, config_to_dict

    stretch = [f"train.total_steps={budget}", "frame.n_anneal_updates=auto"]
    return config_to_dict(config_from_dict(apply_overrides(bundled_data(env, FRAME),
                                                           [*CANDIDATES[env][candidate], *stretch])))


def run_one(env: str, candidate: str, seed: int, budget: int, runs_dir: str,
            games: int = FRESH_GAMES) -> Dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    data = candidate_data(env, candidate, budget)
    run_dir = os.path.join(runs_dir, f"{env}-{candidate}-{seed}-{budget}")
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                          text=True).stdout.strip()
    record = {"candidate": candidate, "changes": list(CANDIDATES[env][candidate]), "env": env, "frame": FRAME,
              "seed": seed, "budget": budget, **settings_of(data), "code": code, "run_dir": run_dir}
    record.update(train_and_evaluate(data, seed, budget, run_dir, fresh_games=games))  # held_out included
    if record["env_steps"] < budget:  # a stop signal ended it: its figures are of a shorter run
        record["stopped"] = f"at {record['env_steps']:,} of {budget:,} steps, by a stop signal"
    return record


def table(records: List[Dict[str, Any]]) -> str:
    """One row per game, candidate and budget: the best and final checkpoints' fresh-game win rates (medians)."""
    longest: Dict[Tuple[str, str, int, int], Dict[str, Any]] = {}  # a seed run again: its longest run
    for r in records:
        key = (r["env"], r["candidate"], r["budget"], r["seed"])
        if "held_out" in r and (key not in longest or r["env_steps"] > longest[key]["env_steps"]):
            longest[key] = r
    rows: Dict[Tuple[str, str, int], List[Dict[str, Any]]] = {}
    for r in longest.values():
        rows.setdefault((r["env"], r["candidate"], r["budget"]), []).append(r)
    lines = ["| game | candidate | budget | seeds | best at steps | best vs random / scripted / held-out | "
             "final vs random / scripted / held-out | wall s |", "|---|---|---|---|---|---|---|---|"]

    def rates(rs: List[Dict[str, Any]], which: str) -> str:
        columns = [[r[which]["win_rate"][o] for r in rs] for o in ("random", "scripted")]
        columns.append([r["held_out"]["win_rate"][which] for r in rs])
        return " / ".join(f"{statistics.median(c):.3f}" for c in columns)

    for (env, candidate, budget), rs in sorted(rows.items()):
        stopped = "".join(f" (seed {r['seed']} stopped {r['stopped']})" for r in rs if "stopped" in r)
        lines.append(f"| {env} | {candidate} | {budget:,}{stopped} | {','.join(str(r['seed']) for r in rs)} | "
                     f"{' / '.join(format(r['best']['env_steps'], ',') for r in rs)} | {rates(rs, 'best')} | "
                     f"{rates(rs, 'final')} | {statistics.median(r['wall_s'] for r in rs):.0f} |")
    return "\n".join(lines)


def promote(env: str, candidate: str, results: str, learning: str) -> List[Dict[str, Any]]:
    """Once the bundled config is the candidate's (the same fingerprint at the bundled budget), its finished runs are
    the bundled config's: they are appended to the learning table's records (``bench_learning``), where they were
    not already, with the bundled config's settings. Returns the records appended.

    Raises:
        SystemExit: the bundled config is not the candidate's, or the candidate has no finished run.
    """
    bundled = bundled_data(env, FRAME)
    budget = bundled["train"]["total_steps"]
    data = candidate_data(env, candidate, budget)
    if fingerprint(data) != fingerprint(bundled):
        raise SystemExit(f"--promote {candidate}: the bundled {env} config is not the candidate's at its "
                         f"{budget:,} steps (fingerprints {fingerprint(bundled)} and {fingerprint(data)})")
    runs = [r for r in read_results(results) if (r["env"], r["candidate"], r["budget"]) == (env, candidate, budget)
            and "stopped" not in r and "held_out" in r and r.get("config") == fingerprint(data)]
    if not runs:
        raise SystemExit(f"--promote {candidate}: no finished run of it at {budget:,} steps in {results}")
    have = {(r["env"], r["frame"], r["seed"], r["config"]) for r in read_results(learning)}
    added = []
    for r in runs:
        if (env, FRAME, r["seed"], r["config"]) in have:
            continue
        record = {**r, "frame": FRAME, **settings_of(bundled)}
        with open(learning, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        added.append(record)
    return added


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="ConnectFour", choices=sorted(CANDIDATES))
    parser.add_argument("--candidate", help="one of the game's CANDIDATES")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budget", type=int, default=1_000_000)
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--fresh-games", type=int, default=FRESH_GAMES, help="games of each fresh evaluation")
    parser.add_argument("--runs-dir", default=None, help="keep the run directories here (default: a temp dir)")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--promote", metavar="CANDIDATE", help="the candidate the bundled config now is: its finished "
                        "runs become the learning table's records of the game")
    parser.add_argument("--learning", default=LEARNING, help="the learning table's records (for --promote)")
    args = parser.parse_args(argv)
    if args.promote:
        added = promote(args.env, args.promote, args.results, args.learning)
        print(f"{len(added)} runs of {args.promote} added to {args.learning}: seeds {[r['seed'] for r in added]}")
        return
    if not args.table_only:
        if args.candidate not in CANDIDATES[args.env]:
            parser.error(f"--candidate: one of {sorted(CANDIDATES[args.env])} for {args.env}")
        runs_dir = args.runs_dir or tempfile.mkdtemp(prefix="selfplay-candidates-")
        for seed in args.seeds:
            data = candidate_data(args.env, args.candidate, args.budget)
            key = (args.env, args.candidate, seed, args.budget, fingerprint(data))
            if any((r.get("env"), r.get("candidate"), r.get("seed"), r.get("budget"), r.get("config")) == key
                   and "stopped" not in r for r in read_results(args.results)):  # a stopped run is run again
                print(f"{args.env} {args.candidate} seed {seed} at {args.budget:,} steps: already recorded")
                continue
            print(f"running {args.env} {args.candidate} seed {seed} for {args.budget:,} steps", flush=True)
            record = run_one(args.env, args.candidate, seed, args.budget, runs_dir, args.fresh_games)
            with open(args.results, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
    print(table(read_results(args.results)))


if __name__ == "__main__":
    main()
