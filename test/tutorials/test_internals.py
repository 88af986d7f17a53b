"""Tutorial 3 (internals): stepping through RogueNet by hand gives what RogueNet.forward gives."""
import pytest
import torch

from test.tutorials._load import load_tutorial


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("03_internals.py")


def test_smoke_run_matches_rogue_net_at_every_step(tutorial, capsys):
    threads = torch.get_num_threads()
    same = tutorial["main"](["--smoke"])
    out = capsys.readouterr().out
    assert same and all(same.values()), same
    assert {"embedding", "attention", "trunk", "value", "Move action", "Fire Orbital Cannon log_prob"} <= set(same)
    assert "stepping by hand gives RogueNet.forward's output: True" in out
    assert "layout.starts" in out and "environment 1.act receives:" in out
    assert torch.get_num_threads() == threads  # one thread for the run only


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--train-iterations", "-1"])
    assert "--train-iterations must be >= 0, got -1" in capsys.readouterr().err
