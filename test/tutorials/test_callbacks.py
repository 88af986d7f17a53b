"""Tutorial 11 (callbacks): a figure of one's own at each evaluation, StopWhen from Python and from YAML, and a
callback that raises."""
import re

import pytest

from test.tutorials._load import load_tutorial


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("11_callbacks.py")


def test_smoke_run_logs_its_figure_stops_at_the_threshold_and_names_a_failing_callback(tutorial, tmp_path, capsys):
    result = tutorial["main"](["--smoke", "--run-dir", str(tmp_path)])
    out = capsys.readouterr().out
    # 1 and 2: the figure at the evaluation at 64 steps, where StopWhen (at least 0.0) stops the run; the final one
    assert [(row["env_steps"], row["final"]) for row in result["seen"]] == [(64, False), (64, True)]
    assert all(row["spread"] == pytest.approx(row["random"] - row["scripted"]) for row in result["seen"])
    assert re.search(r"\s+64 steps\s+random \d\.\d{3}  scripted \d\.\d{3}  spread [+-]\d\.\d{3}", out), out
    assert "stopped at 64 environment steps; the trained policy: RogueNet" in out
    # 3: the command with train.callbacks says why it stopped
    assert result["yaml_status"] == 0
    assert "stopped early by StopWhen: win rate against random" in result["yaml_out"]
    # 4: the failing callback is named, with its event and steps; the checkpoint before it is whole
    assert re.match(r"callback FailsAt\.after_update raised at 192 environment steps: KeyError", result["error"])
    assert result["checkpoint"] == 128
