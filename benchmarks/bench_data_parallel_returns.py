"""Returns parity of data-parallel ranks: 2 ranks x 64 environments against 1 rank x 128.

Runs ``entmachin train`` on the bundled Count and MultiArmedBandit configs, as a user would:
1 rank with ``rollout.num_envs=128`` (``python -m entmachin train``) and 2 ranks with
``rollout.num_envs=64`` (``torchrun --standalone --nproc-per-node 2 -m entmachin train``), the
same total environment steps and evaluations (rank 0's, 100 episodes) at the same steps,
for each seed, and prints the evaluation returns side by side.

``rollout.num_envs`` and ``frame.batch_size`` are per rank, so the 2-rank run halves the
batch size too: each update then takes as many minibatch steps as the 1-rank run, each over a
minibatch of the same size in all (half on each rank). ``--same-batch`` adds a third column,
2 ranks keeping the config's batch size per rank (minibatches twice as large in all, half as
many steps per update), to show what forgetting that costs.

    python benchmarks/bench_data_parallel_returns.py [--envs Count MultiArmedBandit] [--seeds 0 1 2]
        [--same-batch] [--num-envs 128] [--steps S]

``--num-envs`` (the 1-rank run's; each of 2 ranks gets half) scales the batch sizes with it, and
``--steps`` replaces the budget (one evaluation, at the end): both only to check the script runs.
``--device`` sets ``train.device`` (``cuda``: each rank takes ``cuda:LOCAL_RANK``, a card per rank).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _device import add_device_argument, checked_device, describe  # noqa: E402

# env -> (total environment steps, evaluation interval, the bundled config's batch size)
BUDGETS: Dict[str, Tuple[int, int, int]] = {
    "Count": (2048, 512, 64),
    "MultiArmedBandit": (32768, 4096, 128),
}


def train(env: str, seed: int, n_ranks: int, num_envs: int, batch_size: int, total: int, interval: int,
          run_dir: str, device: str = "cpu") -> List[Tuple[int, float]]:
    """``(environment steps, mean evaluation return)`` of every evaluation of one run."""
    launcher = [sys.executable, "-m", "entmachin"] if n_ranks == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n_ranks}", "-m", "entmachin"]
    overrides = [f"rollout.num_envs={num_envs}", f"frame.batch_size={batch_size}", f"train.total_steps={total}",
                 f"train.seed={seed}", f"log.eval_interval={interval}", f"log.checkpoint_interval={10 ** 9}",
                 f"train.device={device}"]
    command = launcher + ["train", env, "--no-progress", "--force", "--run-dir", run_dir]
    for override in overrides:
        command += ["--set", override]
    environ = {**os.environ, "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run(command, cwd=REPO, env=environ, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    with open(os.path.join(run_dir, "eval.json")) as f:
        evals = json.load(f)
    return [(int(e["env_steps"]), float(e["mean"])) for e in evals]


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(BUDGETS), choices=list(BUDGETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--same-batch", action="store_true",
                        help="also run 2 ranks with the config's batch size per rank")
    parser.add_argument("--num-envs", type=int, default=128, help="environments of the 1-rank run")
    parser.add_argument("--steps", type=int, default=None, help="environment steps in all (default: per env)")
    add_device_argument(parser)
    args = parser.parse_args(list(argv) or None)
    print(f"train.device: {describe(checked_device(args.device))}")

    n, half = args.num_envs, args.num_envs // 2
    sides = [(f"1x{n}", 1, n, 1), (f"2x{half}", 2, half, 2)] + (
        [(f"2x{half} same batch", 2, half, 1)] if args.same_batch else [])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for env in args.envs:
            total, interval, batch = BUDGETS[env]
            batch = max(2, batch * n // 128)
            if args.steps is not None:
                total = interval = args.steps
            curves: Dict[str, List[List[Tuple[int, float]]]] = {name: [] for name, *_ in sides}
            for seed in args.seeds:
                for name, n_ranks, num_envs, divisor in sides:
                    run_dir = os.path.join(tmp, f"{env}-{seed}-{name.replace(' ', '-')}")
                    curves[name].append(train(env, seed, n_ranks, num_envs, batch // divisor, total, interval, run_dir,
                                               args.device))
            print(f"\n{env}: {total} environment steps in all, evaluation every {interval} (100 episodes, rank 0); "
                  f"batch_size {batch} on 1 rank, {batch // 2} per rank on 2"
                  + (f" ({batch} per rank in 'same batch')" if args.same_batch else ""))
            header = f"{'seed':>4} {'steps':>6} " + " ".join(f"{name:>16}" for name, *_ in sides)
            print(header)
            for i, seed in enumerate(args.seeds):
                for j, (steps, _) in enumerate(curves[sides[0][0]][i]):
                    row = " ".join(f"{curves[name][i][j][1]:>16.3f}" for name, *_ in sides)
                    print(f"{seed:>4} {steps:>6} {row}")
            for label, pick in (("final", lambda c: c[-1][1]), ("mean over evaluations", lambda c: statistics.mean(
                    v for _, v in c))):
                means = {name: statistics.mean(pick(c) for c in curves[name]) for name, *_ in sides}
                print(f"{label} (mean over seeds): " + ", ".join(f"{name} {v:.3f}" for name, v in means.items()))
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
