"""Tutorial 1 (data flow) runs end to end with its tiny budget and prints every step."""
import pytest

from test.tutorials._load import load_tutorial


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("01_data_flow.py")


def test_smoke_run_prints_each_step_with_real_values(tutorial, capsys):
    tutorial["main"](["--smoke"])
    out = capsys.readouterr().out
    for heading in ("1. An environment step as a transition", "2. A ring buffer counts rows",
                    "3. Sampling concatenates the rows", "4. Transitions with your own attributes",
                    "5. safe_call maps buffer keys to forward parameters", "6. A frame builds its own transitions"):
        assert heading in out
    assert "transition.n_rows = 3" in out
    assert "size() = 9 of buffer_size=9" in out  # 4 steps of 3 rows in a 9-row ring
    assert "offsets" in out and "batch_index" in out
    assert "missing required parameter(s) ['entities']" in out
    assert "the on-policy buffer is cleared: size() = 0" in out


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--steps", "2"])
    assert "--steps must be >= 4" in capsys.readouterr().err
