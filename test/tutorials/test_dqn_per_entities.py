"""Tutorial 6 (DQNPer over entities) runs with its tiny budget and prints what it explains."""
import math

import pytest
import torch

from test.tutorials._load import load_tutorial


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("06_dqn_per_entities.py")


def test_smoke_run_shows_masked_q_values_and_trains(tutorial, capsys):
    threads = torch.get_num_threads()
    result = tutorial["main"](["--smoke"])
    out = capsys.readouterr().out
    assert isinstance(result, float) and 0.0 <= result <= 1.0
    part_1 = out.split("Part 2")[0]
    assert "robot at" in part_1 and "-inf" in part_1  # moves off the grid are masked
    assert "Fire Orbital Cannon: one actor (the cannon), 7 actees" in part_1
    assert "2 rollouts of 32 environments x 16 steps, 2 updates of 128 rows after each" in out
    assert "importance weights" in out and "a random policy" in out
    assert torch.get_num_threads() == threads
    assert not math.isnan(result)


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--updates", "0"])
    assert "--updates must be >= 1, got 0" in capsys.readouterr().err
