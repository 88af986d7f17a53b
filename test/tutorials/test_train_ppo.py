"""The PPO tutorial runs end to end with its tiny budget."""
import math
import pathlib
import runpy

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "train_ppo.py"


@pytest.fixture(scope="module")
def tutorial():
    return runpy.run_path(str(SCRIPT), run_name="tutorial")


def test_smoke_run_trains_evaluates_and_saves(tutorial, tmp_path):
    mean = tutorial["main"](["--smoke", "--env", "NotHotdog", "--save-dir", str(tmp_path / "ppo")])
    assert math.isfinite(mean)
    assert (tmp_path / "ppo" / "frame_state_0.pt").exists()


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--total-steps", "0"])
    assert "--total-steps must be >= 1, got 0" in capsys.readouterr().err
