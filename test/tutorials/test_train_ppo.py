"""The PPO tutorial runs end to end with its tiny budget."""
import math
import pathlib
import runpy

import pytest
import torch

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "train_ppo.py"


@pytest.fixture(scope="module")
def tutorial():
    return runpy.run_path(str(SCRIPT), run_name="tutorial")


def test_smoke_run_trains_evaluates_and_saves(tutorial, tmp_path):
    threads = torch.get_num_threads()
    mean = tutorial["main"](["--smoke", "--env", "NotHotdog", "--save-dir", str(tmp_path / "ppo")])
    assert math.isfinite(mean)
    assert (tmp_path / "ppo" / "checkpoint_0.json").exists()
    assert torch.get_num_threads() == threads  # --threads (default 1) applies to the run only


def test_a_seed_repeats_exactly_on_one_thread(tutorial, tmp_path):
    runs = []
    for name in ("a", "b"):
        argv = ["--smoke", "--env", "MineSweeper", "--seed", "3", "--save-dir", str(tmp_path / name)]
        mean = tutorial["main"](argv)
        runs.append((mean, torch.load(next((tmp_path / name).glob("actor_0.*.pt")), weights_only=True)))
    (mean_a, weights_a), (mean_b, weights_b) = runs
    assert mean_a == mean_b and weights_a.keys() == weights_b.keys()
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--total-steps", "0"])
    assert "--total-steps must be >= 1, got 0" in capsys.readouterr().err
