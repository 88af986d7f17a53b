"""Tutorial 10 (steer vehicles): the space and its mask, training, one step's values, the comparison, the export."""
import re

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from test.tutorials._load import load_tutorial  # noqa: E402


def test_smoke_run_trains_compares_and_ships_continuous_values(tmp_path, capsys):
    tutorial = load_tutorial("10_steer_vehicles.py")
    figures = tutorial["main"](["--smoke", "--run-dir", str(tmp_path / "vehicles")])
    out = capsys.readouterr().out
    assert "ContinuousActionSpace(low=[-1.0, 0.0], high=[1.0, 1.0], names=['steer', 'throttle'])" in out
    assert re.search(r"its bounds are \[0, 0\]\nhigh\n(\[+[^\n]*\n)*.*\[0\. 0\.\]", out), out
    assert re.search(r"mean evaluation return -?\d\.\d{3} over 8 episodes after 512 environment steps", out)
    assert "deterministic (the squashed mean)" in out and "log-probability of each vehicle's sampled values" in out
    assert figures["scripted"] > 0.8 > figures["random"]
    assert figures["onnx_diff"] < 1e-5
    assert "OnnxPolicy.act -> ContinuousAction(actors=" in out
