"""Tutorial 9 (record, clone, fine-tune): the dataset, the clone, both PPO runs and the curves."""
import json
import re

import numpy as np
import pytest
import torch

pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")

from test.tutorials._load import load_tutorial  # noqa: E402


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("09_record_clone_finetune.py")


def test_smoke_run_records_clones_and_finetunes(tutorial, tmp_path, capsys):
    from entmachin.data import Dataset
    from entmachin.run.config import load_config

    threads = torch.get_num_threads()
    root = tmp_path / "runs" / "move_to_origin_clone"
    figures = tutorial["main"](["--smoke", "--dir", str(root)])
    out = capsys.readouterr().out
    assert torch.get_num_threads() == threads

    # 1. the dataset: 10 expert episodes, each ending with one final row without actions
    dataset = Dataset(str(root / "expert"))
    assert dataset.seats is None and dataset.recorded["policy"] == "scripted" and dataset.recorded["seed"] == 1
    rows = dataset.read()
    episodes = np.unique(rows.episode)
    assert len(episodes) == 10 and figures["episodes"] == 10
    assert np.bincount(rows.episode[rows.final]).tolist() == [1] * 10 == figures["final_rows_per_episode"]
    assert len(rows) == 10 * 33 == figures["rows"]  # 32 steps and the final observation
    assert (rows.action["horizontal_thruster"].size1()[rows.final] == 0).all()
    returns = np.array([rows.reward[rows.episode == e].sum() for e in episodes])
    assert figures["expert_mean"] == pytest.approx(returns.mean(), abs=1e-5) and figures["expert_mean"] > 0.98
    assert re.search(r"recorded 10 episodes \(330 rows, 1 parts, with entity ids\) in .*; mean return 0\.99\d", out)
    assert "rows = dataset.read(): 330 rows of 10 episodes, 10 of them final" in out
    assert re.search(r"row 32: episode 0, step 32, final True, .*\n +actions horizontal_thruster \[\], "
                     r"vertical_thruster \[\]; reward 0\.0000, terminal True", out), out
    assert {"episode", "features/Spaceship", "action/horizontal_thruster", "reward"} <= set(figures["columns"])
    assert re.search(r"  features/Spaceship +list<element: fixed_size_list<element: float>\[5\]>\n", out), out
    assert f"mean {figures['expert_mean']:.3f} over 10 episodes" in out

    # 2. the clone: its evaluations and its held-out figures
    clone = root / "clone"
    config = load_config(str(clone / "config.yaml"))
    assert config.frame.name == "BC" and config.bc.data == str(root / "expert") and config.train.total_steps == 8192
    evals = json.loads((clone / "eval.json").read_text())
    assert [e["env_steps"] for e in evals] == [4096, 8192] and evals[-1]["final"]
    assert figures["clone_evals"] == [(e["env_steps"], e["mean"]) for e in evals]
    assert [step for step, _ in figures["validation_accuracy"]] == list(range(1024, 8193, 1024))
    assert all(0.0 <= value <= 1.0 for _, value in figures["validation_accuracy"])
    assert len(figures["validation_loss"]) == 8
    assert re.search(r"bc/validation_accuracy +8 points  1024: \d\.\d{3}", out), out
    assert re.search(r"after 8192 samples the clone's most likely action is the expert's on \d+\.\d% of the "
                     r"held-out actions", out), out

    # 3. both PPO runs, the fine-tuned one from the clone; the side-by-side table; the PNG
    fine, scratch = figures["finetuned"], figures["scratch"]
    assert load_config(str(root / "finetuned" / "config.yaml")).train.init_from == str(clone)
    assert fine["init_from"] == str(clone) and scratch["init_from"] is None
    assert load_config(str(root / "scratch" / "config.yaml")).train.init_from is None
    for run in (fine, scratch):
        assert [step for step, _ in run["evals"]] == [512, 1024]
        assert [step for step, _ in run["train"]] == [256, 512, 768, 1024]
        saved = json.loads(open(f"{run['dir']}/eval.json").read())
        assert [(e["env_steps"], e["mean"]) for e in saved] == run["evals"]
    assert re.search(r"\$ entmachin eval \S+clone --episodes 8\nepisodes 8  return mean -?\d\.\d{3}", out), out
    assert re.search(r"--deterministic\nepisodes 8  return mean " + re.escape(f"{evals[-1]['mean']:.3f}"), out), out
    assert figures["clone_deterministic"] == pytest.approx(evals[-1]["mean"], abs=5e-4)  # the same episodes
    value = r" +-?\d\.\d{3}"
    assert re.search(rf"\n +0 +{figures['clone_sampled']:.3f} +\(the clone itself\)\n +512{value}{value}\n"
                     rf" +1024{value}{value}\n", out), out
    png = root / "curves.png"
    assert figures["png"] == str(png) and png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000


def test_the_run_starts_over_in_the_same_directory(tutorial, tmp_path, capsys):
    root = tmp_path / "again"
    first = tutorial["main"](["--smoke", "--dir", str(root)])
    second = tutorial["main"](["--smoke", "--dir", str(root)])
    capsys.readouterr()
    assert second["rows"] == first["rows"] and second["expert_mean"] == first["expert_mean"]
    assert second["clone_evals"] == first["clone_evals"]  # the same seeds: the same clone
    assert second["finetuned"]["evals"] == first["finetuned"]["evals"]
