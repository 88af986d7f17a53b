"""Every benchmark runs end to end on a tiny budget (competitor sides skipped), so none rots.

The figures themselves are never checked here: timing assertions have no place in tests on
shared machines. What is checked is that each script finishes and prints its table.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayF32, RaggedArrayI64

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the benchmarks' helper modules (_competitor, _ragged_batches, ...)

TINY = {
    "bench_buffer.py": (["--n-transitions", "2000", "--ragged-rows", "2000", "--seconds", "0.02", "--repeats", "1"],
                        "machin"),
    "bench_continuous_heads.py": (["--env", "Vehicles", "--seeds", "0", "--budget", "1024", "--distributions", "beta",
                                   "--results", os.path.join(tempfile.mkdtemp(prefix="entmachin-bench-"),
                                                             "heads.jsonl")], "| Vehicles | 1,024 | beta | 1 |"),
    "bench_data.py": (["--rounds", "1", "--steps", "8", "--updates", "1", "--episodes", "4", "--device", "cpu"],
                      "(BC store + update)"),
    "bench_data_parallel.py": (["--steps", "2048", "--repeats", "1", "--work-ms", "5"], "of bare"),
    "bench_data_parallel_returns.py": (["--envs", "Count", "--seeds", "0", "--num-envs", "8", "--steps", "64"],
                                       "final (mean over seeds)"),
    "bench_end_to_end.py": (["--steps", "2048", "--repeats", "1", "--sides", "eager,auto"], "median steps/s"),
    "bench_dqn.py": (["--rows", "2048", "--distinct-rows", "512", "--n-envs", "8", "--n-steps", "8", "--batch-size",
                      "32", "--cartpole-rows", "200", "--length", "20", "--updates", "3", "--ms-updates", "2", "--repeats",
                      "1", "--device", "cpu"], "machin: skipped"),
    "bench_env_list.py": (["--num-envs", "4", "--steps", "5", "--repeats", "1"], "batching"),
    "bench_export.py": (["--rounds", "1", "--seconds", "0.01", "--pool", "4", "--batch", "8", "--batches", "2"],
                        "rogue-net side: skipped"),
    "bench_frame_machin.py": (["--episodes", "2", "--length", "20", "--repeats", "1", "--device", "cpu"], "machin"),
    "bench_frame_minesweeper.py": (["--n-envs", "8", "--n-steps", "4", "--batch-size", "16", "--epochs", "1",
                                    "--iterations", "1", "--rounds", "1", "--device", "cpu"], "entmachin / plain loop"),
    "bench_integrity.py": (["--megabytes", "0.5", "--rounds", "1", "--envs", "CherryPick"], "| CherryPick |"),
    "bench_learning.py": (["--env", "Count", "--frame", "PPO", "--seeds", "0", "--budget-scale", "0.05", "--results",
                           os.path.join(tempfile.mkdtemp(prefix="entmachin-bench-"), "learning.jsonl")],
                          "| Count | PPO | 102 |"),
    "bench_frame_sb3.py": (["--total-steps", "2048", "--repeats", "1", "--device", "cpu"], "plain PyTorch"),
    "bench_pendulum.py": (["--trainers", "entmachin", "--seeds", "0", "--budget", "4096", "--results",
                           os.path.join(tempfile.mkdtemp(prefix="entmachin-bench-"), "pendulum.jsonl")],
                          "| entmachin | 0 |"),
    "bench_memory.py": (["--n-envs", "4", "--n-steps", "4", "--batch-size", "8", "--epochs", "1", "--size", "4",
                         "--sequence-length", "2", "--iterations", "1", "--rounds", "1", "--seeds"],
                        "memory / feed-forward update cost per row"),
    "bench_tune.py": (["--trials", "2", "--steps", "64", "--rounds", "1"], "tuner overhead per trial"),
    "bench_tune_targets.py": (["--env", "MultiArmedBandit", "--trials", "2", "--smoke"], "| MultiArmedBandit | 1.0 |"),
    "bench_overlap.py": (["--workloads", "bundled", "--num-envs", "4", "--rounds", "1", "--warmup", "1"],
                         "overlapped / sequential"),
    "bench_parallel_env_list.py": (["--num-envs", "3", "--env-steps", "12", "--block-env-steps", "6",
                                    "--work-ms", "0.05", "--warmup", "1"], "EnvList"),
    "bench_runner.py": (["--steps", "2048", "--repeats", "1", "--processes", "0", "--device", "cpu"], "runner cost"),
    "bench_selfplay.py": (["--rounds", "1", "--iterations", "1", "--num-envs", "4", "--device", "cpu"], "| pool M=1 |"),
    "bench_ray_env_list.py": (["--num-envs", "4", "--steps", "4", "--block", "2", "--store-repeats", "1"],
                              "RayEnvList"),
    "bench_rogue_net.py": (["--rows", "8", "--repeats", "1", "--fixed", "4", "--max-entities", "8", "--infer-rows", "4",
                            "--n-envs", "4", "--n-steps", "4", "--batch-size", "8", "--device", "cpu", "--compile",
                            "off"], "rogue-net side: skipped"),
    "bench_rogue_net_bound.py": (["--rows", "8", "--repeats", "1", "--max-entities", "8", "--infer-rows", "4",
                                  "--n-envs", "4", "--n-steps", "4", "--batch-size", "8", "--device", "cpu",
                                  "--json", os.path.join(tempfile.mkdtemp(prefix="entmachin-bench-"), "bound.json")],
                                 "mm 3d"),
    "bench_safe_call.py": (["--calls", "10", "--repeats", "1", "--device", "cpu"], "safe_call"),
    "bench_startup.py": (["--runs", "1"], "networks and frame (the workers boot meanwhile)"),
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


@pytest.mark.slow
def test_compare_checkouts_runs_this_checkout_against_itself():
    """Both sides on this checkout: the figure is found on each, and the ratio printed."""
    root = BENCHMARKS.parent
    done = subprocess.run([sys.executable, str(BENCHMARKS / "compare_checkouts.py"), "--old-root", str(root),
                           "--old-python", sys.executable, "--rounds", "1", "--only", "-"],
                          capture_output=True, text=True, timeout=300, cwd=root, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"ragged append of MineSweeper states, rows/s\s+[\d,.]+\s+[\d,.]+\s+[\d.]+x", done.stdout), done.stdout


def test_a_sweep_job_anneals_auto_over_the_steps_it_trains():
    """A candidate's ``n_anneal_updates: auto`` resolves at the job's budget, not at the defaults' 100,000 steps
    (which froze every such screen at 100k: learning rates 0 from there)."""
    import sweep_defaults

    from entmachin.run.config import config_from_dict

    changes = sweep_defaults.CANDIDATES["entropy-0.5-anneal"]
    data = sweep_defaults.job_config("Xor", "PPO", changes, 500_000)
    assert data["train"]["total_steps"] == 500_000 and data["frame"]["n_anneal_updates"] == "auto"
    assert config_from_dict(data).frame.settings.n_anneal_updates == 977  # ceil(500k / 512)
    at_100k = config_from_dict(sweep_defaults.job_config("Xor", "PPO", changes))
    assert at_100k.frame.settings.n_anneal_updates == 196  # the defaults' 100k
    # records of the 100k schedule no longer pass for the job's own
    stale = sweep_defaults.fingerprint(sweep_defaults.job_config("Xor", "PPO", changes))
    assert sweep_defaults.fingerprint_by_env("entropy-0.5-anneal")[("Xor", "PPO")] != stale


@pytest.mark.slow
def test_the_defaults_sweep_runs_and_prints_its_table(tmp_path):
    results = str(tmp_path / "sweep.jsonl")
    args = ["--candidate", "generic", "--candidate", "shared-critic", "--env", "Count", "--frame", "PPO",
            "--seeds", "0", "--budget-scale", "0.25", "--results", results]
    done = subprocess.run([sys.executable, str(BENCHMARKS / "sweep_defaults.py"), *args], capture_output=True,
                          text=True, timeout=300, cwd=BENCHMARKS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"\| Count \| PPO \| 2,048 \| 1 \| [\d.]+ \| [\d.]+ \(1\)( met| -) @512 \| [\d.]+ \(1\)", done.stdout), \
        done.stdout
    assert len(open(results).read().splitlines()) == 2
    again = subprocess.run([sys.executable, str(BENCHMARKS / "sweep_defaults.py"), *args], capture_output=True,
                           text=True, timeout=300, cwd=BENCHMARKS, check=False)
    assert "0 jobs" in again.stdout and len(open(results).read().splitlines()) == 2  # done jobs are not run again


@pytest.mark.slow
def test_the_selfplay_candidates_record_best_final_and_held_out_figures(tmp_path):
    results = str(tmp_path / "candidates.jsonl")
    args = ["--candidate", "pointer", "--seeds", "0", "--budget", "4096", "--fresh-games", "20", "--results", results]
    done = subprocess.run([sys.executable, str(BENCHMARKS / "selfplay_candidates.py"), *args], capture_output=True,
                          text=True, timeout=600, cwd=BENCHMARKS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(open(results).read())
    assert record["changes"] == ["env.kwargs.choose=column", "frame.entropy_weight=-0.01", "frame.anneal_entropy=false"]
    assert record["env_steps"] >= 4096 and record["settings"]["env"]["kwargs"] == {"choose": "column"}
    for which in ("best", "final"):
        assert set(record[which]["win_rate"]) == {"random", "scripted"}
        assert 0.0 <= record["held_out"]["win_rate"][which] <= 1.0
    assert re.search(r"\| ConnectFour \| pointer \| 4,096 \| 0 \| [\d,]+ \| [\d.]+ / [\d.]+ / [\d.]+ \|", done.stdout), done.stdout
    again = subprocess.run([sys.executable, str(BENCHMARKS / "selfplay_candidates.py"), *args], capture_output=True,
                           text=True, timeout=300, cwd=BENCHMARKS, check=False)
    assert "already recorded" in again.stdout and len(open(results).read().splitlines()) == 1


def test_a_promoted_candidates_runs_become_the_bundled_configs_records(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import selfplay_candidates as sc

    results, learning = tmp_path / "candidates.jsonl", tmp_path / "learning.jsonl"
    bundled = sc.fingerprint(sc.bundled_data("ConnectFour", "PPO"))
    prints = {c: sc.fingerprint(sc.candidate_data("ConnectFour", c, 1_000_000)) for c in sc.CANDIDATES["ConnectFour"]}
    promoted = next(c for c, p in prints.items() if p == bundled)  # the candidate the bundled config is
    run = {"env": "ConnectFour", "candidate": promoted, "budget": 1_000_000, "seed": 1, "held_out": {},
           "config": bundled, "best": {}, "final": {}}
    results.write_text("\n".join(json.dumps(r) for r in (run, {**run, "seed": 2, "stopped": "at 5 steps"},
                                                          {**run, "candidate": "drop"})) + "\n")
    added = sc.promote("ConnectFour", promoted, str(results), str(learning))
    assert [r["seed"] for r in added] == [1]  # a stopped run and another candidate's are not the bundled config's
    assert added[0]["settings"] == sc.bundled_data("ConnectFour", "PPO") and added[0]["frame"] == "PPO"
    assert sc.promote("ConnectFour", promoted, str(results), str(learning)) == []  # once
    with pytest.raises(SystemExit, match="the bundled ConnectFour config is not the candidate's"):
        sc.promote("ConnectFour", "drop", str(results), str(learning))


@pytest.mark.slow
def test_the_tactics_probe_trains_on_labelled_positions_and_records_its_figures(tmp_path):
    results = str(tmp_path / "tactics.jsonl")
    done = subprocess.run([sys.executable, str(BENCHMARKS / "probe_connect_four_tactics.py"), "--train", "300",
                           "--epochs", "1", "--set", "env.kwargs.choose=column", "--results", results],
                          capture_output=True, text=True, timeout=300, cwd=BENCHMARKS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(open(results).read())
    assert record["changes"] == ["env.kwargs.choose=column"] and record["test"] == 100
    assert 0.0 <= record["win"] <= 1.0 and 0.0 <= record["block"] <= 1.0 and record["test_nll"] > 0
    assert re.search(r"picks the winning drop [\d.]+, the blocking drop [\d.]+ of the time", done.stdout)


def test_ragged_batches_round_trip(tmp_path):
    """What one side of bench_rogue_net writes, the other reads back unchanged (dtypes, widths, lengths)."""
    from _ragged_batches import load_workload, n_items, save_workload

    lengths = np.array([2, 0, 1], dtype=np.int64)
    batch = {
        "entities": {"Orbital Cannon": RaggedArrayF32.from_flattened(np.arange(6, dtype=np.float32).reshape(3, 2),
                                                                     lengths),
                     "Player": RaggedArrayF32.from_flattened(np.zeros((3, 0), np.float32), lengths)},
        "action_masks": {"a.b": {"actors": RaggedArrayI64.from_flattened(np.array([[0], [1], [0]]), lengths),
                                 "mask": RaggedArrayBool.from_flattened(np.array([[True, False]] * 3), lengths)}},
    }
    spaces = {"entities": {"Orbital Cannon": ["x", "y"], "Player": []},
              "actions": {"a.b": {"kind": "categorical", "choices": ["l", "r"]}}}
    stem = str(tmp_path / "w")
    save_workload(stem, spaces, "infer", [batch, batch])
    got_spaces, mode, batches = load_workload(stem, (RaggedArrayF32, RaggedArrayI64, RaggedArrayBool))
    assert (got_spaces, mode, len(batches)) == (spaces, "infer", 2)
    for got in batches:
        for name, buf in batch["entities"].items():
            assert type(got["entities"][name]) is type(buf)
            np.testing.assert_array_equal(got["entities"][name].as_array(), buf.as_array())
            np.testing.assert_array_equal(got["entities"][name].size1(), lengths)
        mask = got["action_masks"]["a.b"]["mask"]
        assert type(mask) is RaggedArrayBool and mask.as_array().tolist() == [[True, False]] * 3
        assert n_items(got["entities"]) == 6


def test_competitor_worker_answers_and_reports_failures():
    """A persistent competitor answers line by line; an error reply raises naming the side and the cause."""
    from _competitor import CompetitorWorker

    echo = ("import json, sys\nprint(json.dumps({'ready': 1}), flush=True)\nfor line in sys.stdin:\n"
            "    m = json.loads(line)\n    if m['op'] == 'quit': break\n"
            "    print(json.dumps({'error': 'boom'} if m['op'] == 'bad' else {'got': m['op']}), flush=True)\n")
    with CompetitorWorker(sys.executable, "-c", [echo], "echo") as worker:
        assert worker.hello == {"ready": 1}
        assert worker.request(op="step") == {"got": "step"}
        with pytest.raises(RuntimeError, match="the echo side failed: boom"):
            worker.request(op="bad")
    with pytest.raises(RuntimeError, match="the dying side failed: it ended with status 3"):
        CompetitorWorker(sys.executable, "-c", ["import sys; sys.exit(3)"], "dying")


def test_rogue_net_comparison_refuses_different_work():
    """Figures of two sides that processed different tokens or actors would compare nothing."""
    import bench_rogue_net

    ours = {"tokens": 10, "actors": {"Move": 4}}
    bench_rogue_net._check_same_work("w", ours, {"tokens": 10, "actors": {"Move": 4}}, 10)
    with pytest.raises(RuntimeError, match="w: the sides saw different work"):
        bench_rogue_net._check_same_work("w", ours, {"tokens": 10, "actors": {"Move": 3}}, 10)
    with pytest.raises(RuntimeError, match="w: entmachin's trunk saw 10 tokens, the inputs hold 12 entities"):
        bench_rogue_net._check_same_work("w", ours, None, 12)


@pytest.mark.slow
def test_one_ppo_iteration_runs_at_most_nine_files_of_the_frames():
    """The reading budget of the frames: collect + update enter at most nine files of entmachin/frame/
    (a tensorboard writer adds summary.py)."""
    import count_update_files

    for name, setting in count_update_files.SETTINGS.items():
        result = count_update_files.count(setting)
        assert result["files"] <= (10 if setting.get("writer") else 9), (name, result["file_names"])


def test_cuda_without_a_card_ends_the_benchmark_with_one_line(capsys, monkeypatch):
    """``--device cuda`` where torch sees no card: one line naming the cause, exit status 2."""
    import torch
    from _device import checked_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        checked_device("cuda")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--device cuda" in err and "is_available() is False" in err
    assert checked_device("cpu").type == "cpu"


def test_compile_summary_repays_the_compile_or_says_never():
    """Compile time = warm-up steps less as many steady steps; break-even = that / the step saved."""
    from _rogue_net_workloads import compile_summary

    assert compile_summary([10.5, 0.5, 0.5], 0.5, 1.0) == "compile 10.0 s, break-even after 20 steps"
    assert compile_summary([3.0, 1.0, 1.0], 1.0, 0.5).endswith("never (not faster)")
    assert compile_summary([3.0, 1.0, 1.0], 1.0, None).endswith("- (no eager side)")


def test_gpu_check_falls_back_to_the_cpu_and_prints_its_table(tmp_path):
    """``gpu_check.sh --cpu``: every stage runs (eager, tiny sizes), leaves its status, and the table is printed."""
    stages = ("tests", "rogue_net", "bound", "minesweeper")
    env = {**os.environ, "PYTHON": sys.executable, "ENTMACHIN_SKIP_INSTALL": "1"}
    env.pop("OUT", None)
    done = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh"), "--cpu", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=240, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| stage | status | seconds | figures |" in done.stdout, done.stdout
    for stage in stages:
        assert (tmp_path / f"{stage}.status").read_text().startswith("ok\t"), (tmp_path / f"{stage}.log").read_text()
        assert re.search(rf"^\| {stage} \| ok \| \d+ \| .+ \|$", done.stdout, re.M), done.stdout
    assert "(cpu)" in done.stdout and "compiled" not in done.stdout  # eager only on the CPU
    assert "| minesweeper | ok |" in (tmp_path / "table.md").read_text()


def test_every_learning_row_has_its_current_seeds():
    """Each bundled config with a row in the learning table has ``CURRENT_SEEDS`` seeds recorded with the config
    as it is now (a config edited in a way that changes learning needs its rows run again), unless it is listed
    in ``AWAITING`` with the reason; and a listed row really waits."""
    import bench_learning

    records = bench_learning.current(bench_learning.read_results(str(BENCHMARKS / "results" / "learning.jsonl")))
    seeds = {key: {r["seed"] for r in records if (r["env"], r["frame"]) == key and "warm" not in r}
             for key in bench_learning.TARGETS}
    short = {f"{env} {frame}": sorted(s) for (env, frame), s in seeds.items()
             if len(s) < bench_learning.CURRENT_SEEDS and (env, frame) not in bench_learning.AWAITING}
    assert not short, f"rows with fewer than {bench_learning.CURRENT_SEEDS} current seeds (seeds they have): {short}"
    done = [key for key in bench_learning.AWAITING if len(seeds.get(key, ())) >= bench_learning.CURRENT_SEEDS]
    assert not done, f"AWAITING lists rows that have their seeds: {done}"


def _position(mine, theirs):
    """A ConnectFour observation of the seat to move, its pieces and the other's as (row, col) pairs."""
    from entmachin.env.environment import Observation

    def pieces(cells):
        return np.array(cells, dtype=np.float32).reshape(-1, 2)

    return Observation(features={"Mine": pieces(mine), "Theirs": pieces(theirs)}, actions={}, reward=0.0, done=False)


def test_the_mistakes_classifier_names_a_missed_win_a_missed_block_and_a_move_under_a_threat():
    from connect_four_mistakes import classify

    three_up = [(0, 0), (1, 0), (2, 0)]  # rows 0-2 of column 0
    win = _position(three_up, [(0, 1), (0, 2), (1, 1)])
    assert classify(win, 0) == "sound" and classify(win, 3) == "missed win"
    block = _position([(0, 1), (0, 2)], three_up)
    assert classify(block, 0) == "sound" and classify(block, 4) == "missed block"
    # Theirs: row 1 at columns 1-3 (on a row 0 of mine, theirs, mine); columns 0 and 4 are empty, so a drop into
    # either lets them complete row 1 on top of it.
    threat = _position([(0, 1), (0, 3)], [(0, 2), (1, 1), (1, 2), (1, 3)])
    assert classify(threat, 4) == classify(threat, 0) == "under a threat" and classify(threat, 5) == "sound"
