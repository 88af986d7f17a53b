"""Tutorial 2 (writing an environment): CoinCollector, ValidatingEnv, and training it from a YAML file."""
import math
import re

import numpy as np
import pytest
import torch
import yaml

from test.tutorials._load import load_tutorial


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("02_writing_an_environment.py")  # puts tutorials/ on sys.path


def test_smoke_run_walks_through_validates_and_trains_from_yaml(tutorial, tmp_path, capsys):
    threads = torch.get_num_threads()
    run_dir = tmp_path / "runs" / "coin_collector"
    figures = tutorial["main"](["--smoke", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert torch.get_num_threads() == threads

    # 1-3: the spaces, the mask and the select-entity action, on seed 0
    assert "entity Coin: features ['x', 'y', 'value']" in out and "action 'pull' (select entity)" in out
    assert "Coin    features [[0.0, 2.0, 0.83], [0.0, 1.0, 0.92], [2.0, 3.0, 0.76]]" in out
    assert "allowed {'up': True, 'down': False, 'left': False, 'right': True}" in out
    assert "a forbidden move raises: CoinCollector.act: the robot at (0, 0) chose 'down', which this step's mask " \
           "forbids" in out
    assert "the policy sees actees as entity indices [1 2 3]" in out
    assert "position 1 -> actees=[('Coin', 1)]" in out
    assert "pulling the most valuable coin (value 0.92) earns twice its value, 1.84" in out
    # 4: ValidatingEnv passes the environment and catches the cornered robot
    assert re.search(r"512 random steps under ValidatingEnv: no complaint; 16 episodes ended", out), out
    assert "CorneredRobot.reset(): actions['move'].mask row 0 allows no choices for actor 'robot'" in out
    assert "the mask [False, False, False, False] goes out" in out
    # 5: the YAML names the environment by import path; the command trains it
    assert "  name: coin_collector:CoinCollector" in out
    assert re.search(r"mean evaluation return \d+\.\d{3} over 8 episodes after 256 environment steps "
                     r"\(a random policy: \d+\.\d{3}\)", out), out
    assert re.search(r"evaluation at +128 steps: mean return \d+\.\d{3} over 8 episodes\n"
                     r"evaluation at +256 steps", out), out
    resolved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert resolved["env"] == {"name": "coin_collector:CoinCollector", "kwargs": {"n_coins": 3, "n_rocks": 3},
                               "max_episode_steps": None, "check_finite": True}
    assert resolved["train"]["total_steps"] == 256 and resolved["frame"]["gae_lambda"] == 0.8
    # 6: the trained and the random policy played the same 16 seeded episodes
    assert figures["trained_episodes"] == figures["random_episodes"] == 16
    assert figures["trained_pulls"] == figures["random_pulls"] == 112  # 7 pulls in each 30-step episode
    assert 0.2 < figures["random_best_pull_share"] < 0.5  # one coin in three
    assert all(math.isfinite(value) for value in figures.values())
    assert re.search(r"random policy: mean return \d+\.\d\d over 16 episodes; the magnet pulled the most valuable "
                     r"coin \d+% of 112 pulls", out), out


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--validate-steps", "10"])
    assert "--validate-steps must be >= 16 (one step of each of 16 environments), got 10" in capsys.readouterr().err


def test_coin_collector_rejects_bad_sizes(tutorial):
    CoinCollector = tutorial["CoinCollector"]
    with pytest.raises(ValueError, match=r"size must be >= 3, got 2"):
        CoinCollector(size=2)
    with pytest.raises(ValueError, match=r"n_rocks must be in \[0, 4\] on a 5x5 grid .* got 5"):
        CoinCollector(n_rocks=5)
    with pytest.raises(ValueError, match=r"n_coins must be in \[1, 21\] on a 5x5 grid with 3 rocks and a robot, got 0"):
        CoinCollector(n_coins=0)
    with pytest.raises(ValueError, match=r"expected cooldown >= 0 and episode_steps >= 1, got -1 and 30"):
        CoinCollector(cooldown=-1)


def test_coin_collector_holds_the_policy_to_its_masks(tutorial):
    from entmachin.env import CategoricalAction, SelectEntityAction

    env = tutorial["CoinCollector"]()
    env.seed(0)
    env.reset()  # robot at (0, 0), magnet charged
    pull = {"pull": SelectEntityAction(actors=["magnet"], actees=[("Coin", 0)])}
    assert env.act(pull).reward == pytest.approx(2 * 0.83)
    with pytest.raises(ValueError, match=r"the magnet pulled with charge 4; it may pull only when its charge is 0"):
        env.act(pull)
    left = CategoricalAction(actors=["robot"], indices=np.array([2]), index_to_label=["up", "down", "left", "right"])
    with pytest.raises(ValueError, match=r"the robot at \(0, 0\) chose 'left', which this step's mask forbids"):
        env.act({"move": left})


@pytest.mark.slow
def test_full_budget_beats_a_random_policy(tutorial, tmp_path, capsys):
    """Seed 0: mean return 13.7 against 8.0, the magnet right 72% of the time against 35%."""
    figures = tutorial["main"](["--run-dir", str(tmp_path / "coin_collector")])
    summary = capsys.readouterr().out[-600:]
    assert figures["trained_mean_return"] > figures["random_mean_return"] + 3, summary
    assert figures["trained_best_pull_share"] > 0.5, summary
    assert figures["trained_walked_per_episode"] > 2 * figures["random_walked_per_episode"], summary
