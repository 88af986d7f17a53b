"""Tutorial 4 (Machin-style CartPole) runs with its tiny budget, and solves CartPole with its full one."""
import pytest
import torch

from test.tutorials._load import load_tutorial


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("04_machin_style_cartpole.py")


def test_smoke_run_plays_and_updates(tutorial, capsys):
    threads = torch.get_num_threads()
    assert tutorial["main"](["--smoke"]) == 0  # three episodes do not solve it
    out = capsys.readouterr().out
    assert "not solved in 3 episodes" in out
    assert out.count("surrogate objective") == 3
    assert torch.get_num_threads() == threads


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--episodes", "0"])
    assert "--episodes must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_full_budget_reaches_the_cartpole_threshold(tutorial, capsys):
    """Mean return >= 195 over 100 consecutive episodes, within the default 1000 (seed 0: 293)."""
    solved_at = tutorial["main"](["--seed", "0"])
    assert 100 <= solved_at <= 1000, capsys.readouterr().out[-2000:]
