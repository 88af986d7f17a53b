"""Every benchmark runs end to end on a tiny budget (competitor sides skipped), so none rots.

The figures themselves are never checked here: timing assertions have no place in tests on
shared machines. What is checked is that each script finishes and prints its table.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

TINY = {
    "bench_buffer.py": (["--n-transitions", "2000", "--ragged-rows", "2000", "--seconds", "0.02", "--repeats", "1"],
                        "machin"),
    "bench_env_list.py": (["--num-envs", "4", "--steps", "5", "--repeats", "1"], "batching"),
    "bench_frame_machin.py": (["--episodes", "2", "--length", "20", "--repeats", "1"], "machin"),
    "bench_frame_minesweeper.py": (["--n-envs", "8", "--n-steps", "4", "--batch-size", "16", "--epochs", "1",
                                    "--iterations", "1", "--rounds", "1"], "entmachin / plain loop"),
    "bench_learning.py": (["--env", "Count", "--frame", "PPO", "--seeds", "0", "--budget-scale", "0.05", "--results",
                           os.path.join(tempfile.mkdtemp(prefix="entmachin-bench-"), "learning.jsonl")],
                          "| Count | PPO | 102 |"),
    "bench_frame_sb3.py": (["--total-steps", "2048", "--repeats", "1"], "plain PyTorch"),
    "bench_parallel_env_list.py": (["--num-envs", "3", "--env-steps", "12", "--block-env-steps", "6",
                                    "--work-ms", "0.05", "--warmup", "1"], "EnvList"),
    "bench_runner.py": (["--steps", "2048", "--repeats", "1", "--processes", "0"], "runner cost"),
    "bench_rogue_net.py": (["--rows", "8", "--repeats", "1", "--fixed", "4", "--max-entities", "8"], "fp32"),
    "bench_safe_call.py": (["--calls", "10", "--repeats", "1"], "safe_call"),
}


def test_every_benchmark_is_listed():
    assert sorted(p.name for p in BENCHMARKS.glob("bench_*.py")) == sorted(TINY)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(TINY))
def test_benchmark_runs_on_a_tiny_budget(script):
    args, expected = TINY[script]
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                          timeout=300, cwd=BENCHMARKS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected.lower() in done.stdout.lower(), done.stdout[-3000:]
