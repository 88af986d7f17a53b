"""Tutorial 12 (memory): Recall with and without memory, the exported policy keeping its state, a refusal."""
import pytest

from test.tutorials._load import load_tutorial

pytest.importorskip("onnxruntime")


def test_smoke_run_trains_both_ships_the_memory_and_names_what_is_refused(tmp_path, capsys):
    result = load_tutorial("12_memory.py")["main"](["--smoke", "--run-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert 0.0 <= result["feed_forward"] <= 1.0 and 0.0 <= result["memory"] <= 1.0
    assert 0.0 <= result["deployed"] <= 1.0
    assert out.count("   game ") == 3
    assert 0.0 <= result["conveyor per entity"] <= 1.0 and 0.0 <= result["conveyor per game row"] <= 1.0
    assert 0.0 <= result["conveyor deployed"] <= 1.0
    assert result["refused"].startswith("rollout.overlap: true, but the network's memory is carried over every row")
