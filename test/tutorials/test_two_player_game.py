"""Tutorial 7 (a game of two players): FlagRun, ValidatingEnv per seat, an opponent, self-play and matches."""
import io
import math
import re
import sys

import numpy as np
import pytest
import torch
import yaml

from test.tutorials._load import load_tutorial

LINE = r"win rate (\d\.\d{3}) \(95% CI (\d\.\d{3})-(\d\.\d{3})\)"


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("07_two_player_game.py")  # puts tutorials/ on sys.path


def test_smoke_run_writes_checks_trains_and_matches_a_game(tutorial, tmp_path, capsys):
    threads = torch.get_num_threads()
    run_dir = tmp_path / "runs" / "flag_run"
    figures = tutorial["main"](["--smoke", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert torch.get_num_threads() == threads

    # 1-2: seats, one space for both, each seat's own view; the waiting seat has no actors; results
    assert "seats ['0', '1']; one observation space and one action space for every seat" in out
    assert "action 'tag' (select entity)" in out and "global features ['to_move', 'time_left']" in out
    assert "reset() with seed 0 returns one Observation per seat: ['0', '1']" in out
    assert "seat 0 sees runners [[3, 0], [4, 0]], enemies [[1, 4], [0, 4]], to_move 1, has_actors True" in out
    assert "seat 1 sees runners [[3, 0], [4, 0]], enemies [[1, 4], [0, 4]], to_move 0, has_actors False" in out
    assert "seat 1 gets {}" in out
    assert re.search(r"turn \d+: seat [01]: .*tags \('Enemy', [01]\)", out), out
    assert re.search(r"game over after \d+ turns: results \{'0': '(win|loss|draw)', '1': '(win|loss|draw)'\}, "
                     r".*done \[True, True\], has_actors \[False, False\]", out), out
    # 3: rows per (game, seat), and the mistakes ValidatingEnv catches, naming the seat
    assert "ValidatingMultiAgentEnv; 8 games, 16 rows: games [0, 0, 1, 1," in out
    assert re.search(r"200 random turns of 8 games under ValidatingEnv: no complaint; \d+ games ended: \d+ won by "
                     r"seat 0, \d+ by seat 1, \d+ drawn", out), out
    assert "FlagRun.act(): seat '1': actions['move'] acts, but the observation has no actors for 'move'" in out
    assert "FlagRun.act(): actions omit seat(s) ['1']; give every seat of ['0', '1']" in out
    assert "OnlyTheMover.reset(): observations omit seat(s) ['1']" in out
    # 4: the opponent function against random
    match = re.search(r"flag_rush against random, 20 games \(seats alternating\): (\d+) wins, (\d+) draws, "
                      r"(\d+) losses; " + LINE, out)
    assert match, out
    wins, draws, losses = (int(g) for g in match.groups()[:3])
    assert wins + draws + losses == 20 and wins > losses
    rate, low, high = (float(g) for g in match.groups()[3:])
    assert rate == pytest.approx((wins + 0.5 * draws) / 20, abs=5e-4) and low <= rate <= high
    assert figures["scripted_vs_random"]["win_rate"] == pytest.approx(rate, abs=5e-4)
    # 5: the config names the game by import path and evaluates against two opponents
    assert "  name: flag_run:FlagRun" in out and "eval_opponents: [random, scripted]" in out
    assert re.search(r"evaluation at +256 steps: win rate against random \d\.\d{3}, scripted \d\.\d{3} over 8 games "
                     r"each", out), out
    resolved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert resolved["env"]["name"] == "flag_run:FlagRun"
    assert resolved["log"]["eval_opponents"] == ["random", "scripted"] and resolved["train"]["total_steps"] == 256
    assert list(run_dir.glob("events.out.tfevents.*"))
    # 6: the checkpoint against scripted, the command line's same match, and the play command
    assert re.search(r"trained policy \(most likely actions\) against scripted: \d+ wins, \d+ draws, \d+ losses; "
                     + LINE, out), out
    assert re.search(r"random policy against scripted: \d+ wins, \d+ draws, \d+ losses; " + LINE, out), out
    assert re.search(r"entmachin eval \S+ --opponent scripted --episodes 20 --deterministic\ngames 20  wins \d+  "
                     r"draws \d+  losses \d+\n" + LINE, out), out
    assert f"entmachin play flag_run:FlagRun --checkpoint {run_dir} --seat 1" in out
    assert figures["trained_games"] == 20
    assert all(0.0 <= figures[k] <= 1.0 for k in ("trained_vs_scripted", "random_vs_scripted"))
    # 7: the same config with a pool; the Elo curve and the pool's size from tensorboard
    pool_dir = tmp_path / "runs" / "flag_run_pool"
    assert "selfplay:\n  seats: random" in out
    assert re.search(r"the learner's Elo \(selfplay/elo\) against its pool: 64 steps 1200, .*256 steps \d+", out), out
    assert "pool size at the end (selfplay/pool_size): 4" in out
    resolved = yaml.safe_load((pool_dir / "config.yaml").read_text())
    assert resolved["selfplay"]["seats"] == "random" and resolved["log"]["keep_checkpoints"] is None
    # 8: the league of its four checkpoints and random, written beside the run
    assert re.search(r"flag_run_pool@256 +256 +\d+ +40", out), out
    assert re.search(r"first checkpoint \(64 steps\) Elo \d+, last \(256 steps\) Elo \d+", out), out
    assert (pool_dir / "league.json").exists() and (pool_dir / "league.png").exists()
    # 9: both runs against scripted, and the play command
    assert re.search(r"self-play with a pool, most likely actions, against scripted: " + LINE, out), out
    assert f"entmachin play flag_run:FlagRun --checkpoint {pool_dir} --seat 1" in out
    assert 0.0 <= figures["pool_vs_scripted"] <= 1.0

    # entmachin play on the run, seat 1, with a scripted stdin: the policy moves first, then q quits
    from entmachin.run.cli import main as entmachin

    stdin = sys.stdin
    sys.stdin = io.StringIO("q\n")
    try:
        assert entmachin(["play", "flag_run:FlagRun", "--checkpoint", str(run_dir), "--seat", "1", "--seed", "0"]) == 0
    finally:
        sys.stdin = stdin
    played = capsys.readouterr().out
    assert f"playing flag_run:FlagRun (seed 0) with the agent of {run_dir} as seat 1 against agent" in played
    assert "seat 0 (agent): move" in played and played.rstrip().endswith("quit")


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--games", "1"])
    assert "--games must be >= 2 (one game in each seat), got 1" in capsys.readouterr().err


def test_flag_run_rules(tutorial):
    from entmachin.env import CategoricalAction

    FlagRun = tutorial["FlagRun"]
    with pytest.raises(ValueError, match=r"size must be odd and >= 3, got 4"):
        FlagRun(size=4)
    with pytest.raises(ValueError, match=r"runners must be in \[1, 4\] on a 5x5 grid, got 5"):
        FlagRun(runners=5)
    env = FlagRun(runners=1, time_limit=2)
    env.seed(0)
    obs = env.reset()
    runner = obs["0"].actions["move"].actor_ids
    assert obs["1"].actions["move"].actor_ids == [] and np.isnan(obs["0"].global_features).sum() == 0
    env.pos[0, 0] = (0, 0)  # the left edge: moving left is masked, and act refuses it
    assert env._observe()["0"].actions["move"].mask.tolist() == [[True, True, False, False, True]]
    left = CategoricalAction(runner, np.array([3]), ["stay", "up", "down", "left", "right"])
    with pytest.raises(ValueError, match=r"FlagRun.act: seat '0': actions\['move'\]"):
        env.act({"0": {"move": left}, "1": {}})
    stay = CategoricalAction(runner, np.array([0]), ["stay", "up", "down", "left", "right"])
    obs = env.act({"0": {"move": stay}, "1": {}})
    stay1 = CategoricalAction(obs["1"].actions["move"].actor_ids, np.array([0]), ["stay", "up", "down", "left", "right"])
    obs = env.act({"0": {}, "1": {"move": stay1}})
    assert [o.result for o in obs.values()] == ["draw", "draw"] and all(o.done for o in obs.values())
    with pytest.raises(ValueError, match=r"the game is over; call reset\(\)"):
        env.act({"0": {}, "1": {}})


def test_a_runner_on_the_enemy_flag_wins_and_a_tag_sends_home(tutorial):
    from entmachin.env import CategoricalAction, SelectEntityAction

    FlagRun = tutorial["FlagRun"]
    env = FlagRun(runners=1)
    env.seed(0)
    env.reset()
    env.pos[0, 0], env.pos[1, 0] = (2, 3), (0, 0)  # seat 0 one step below seat 1's flag, seat 1 far away
    obs = env._observe()
    up = CategoricalAction(obs["0"].actions["move"].actor_ids, np.array([1]), ["stay", "up", "down", "left", "right"])
    obs = env.act({"0": {"move": up}, "1": {}})
    assert obs["0"].result == "win" and obs["1"].result == "loss" and obs["0"].reward == 1.0

    env.reset()
    env.pos[0, 0], env.pos[1, 0] = (2, 2), (2, 3)  # adjacent: seat 0's runner must tag
    obs = env._observe()
    assert obs["0"].actions["move"].actor_ids == [] and obs["0"].actions["tag"].actor_ids == [("Runner", 0)]
    obs = env.act({"0": {"tag": SelectEntityAction([("Runner", 0)], [("Enemy", 0)])}, "1": {}})
    assert env.pos[1, 0].tolist() == env.home[1, 0].tolist() and not obs["0"].done


def test_flag_rush_is_an_opponent_the_masks_allow(tutorial):
    from entmachin.env import ValidatingEnv, checked_choices

    FlagRun, flag_rush = tutorial["FlagRun"], tutorial["flag_rush"]
    assert FlagRun.scripted_opponent is flag_rush
    env = ValidatingEnv(FlagRun())
    env.seed(1)
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs = env.reset()
        while not obs["0"].done:
            actions = {seat: flag_rush(o, env.action_space(), rng) for seat, o in obs.items()}
            for seat, o in obs.items():
                checked_choices(o, env.obs_space(), env.action_space(), actions[seat])
            obs = env.act(actions)
        assert {o.result for o in obs.values()} in ({"draw"}, {"win", "loss"})
    assert math.isfinite(float(obs["0"].reward))


@pytest.mark.slow
def test_full_budget_beats_the_scripted_opponent(tutorial, tmp_path, capsys):
    """Seed 0: win rates of 0.600 (one policy) and 0.677 (a pool) against flag_rush; a random player: 0.150."""
    figures = tutorial["main"](["--run-dir", str(tmp_path / "flag_run")])
    summary = capsys.readouterr().out[-900:]
    assert figures["trained_vs_scripted"] > 0.5, summary
    assert figures["trained_vs_scripted"] > figures["random_vs_scripted"] + 0.25, summary
    assert figures["pool_vs_scripted"] > 0.5, summary  # seed 0: 0.677 (one policy for both seats: 0.600)
