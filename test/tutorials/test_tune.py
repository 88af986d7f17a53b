"""Tutorial 13 (tune): a refused space, a study of three tiny trials, its report and best.yaml."""
import os

import pytest

from test.tutorials._load import load_tutorial

pytest.importorskip("optuna")


def test_smoke_run_refuses_a_bad_key_runs_a_study_and_reports(tmp_path, capsys):
    result = load_tutorial("13_tune.py")["main"](["--smoke", "--dir", str(tmp_path / "study")])
    assert "did you mean 'frame.actor_learning_rate'" in result["refused"]
    assert result["report"][0].startswith("study 'MultiArmedBandit-tune'")
    assert os.path.exists(tmp_path / "study" / "best.yaml")
    assert "3. The report" in capsys.readouterr().out
