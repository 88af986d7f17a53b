"""Games against opponents: seats alternate, results count, opponents are checked, `entmachin eval --opponent`."""
import contextlib
import io
import re

import numpy as np
import pytest

from entmachin.env.examples import ConnectFour, RockPaperScissorsDuel
from entmachin.env.examples.connect_four import connect_four_opponent
from entmachin.run.cli import main
from entmachin.run.matches import FunctionPlayer, MatchResult, OpponentError, RandomPlayer, play_matches

TINY = ["--set", "train.total_steps=256", "--set", "log.checkpoint_interval=128", "--set", "log.eval_interval=128",
        "--set", "log.eval_episodes=4", "--set", "rollout.num_envs=8", "--set", "rollout.n_steps=8",
        "--set", "frame.batch_size=64", "--set", "model.d_model=16", "--set", "model.n_layer=1", "--no-progress"]


def players(env, *fns):
    rng = np.random.default_rng(0)
    return [FunctionPlayer(fn, env.obs_space(), env.action_space(), rng, getattr(fn, "__name__", "fn")) for fn in fns]


class Recorder:
    """Plays like the random opponent, recording the seats it is asked to play."""

    name = "recorder"

    def __init__(self, env):
        self.inner, self.seats = RandomPlayer(env.obs_space(), env.action_space(), np.random.default_rng(1)), []

    def choose(self, observations, seats):
        self.seats.extend(seats)
        return self.inner.choose(observations, seats)


def test_seats_alternate_and_every_game_counts():
    env = RockPaperScissorsDuel()
    agent = Recorder(env)
    result = play_matches(RockPaperScissorsDuel, agent, RandomPlayer(env.obs_space(), env.action_space(),
                                                                     np.random.default_rng(2)), 11, seed=0, num_envs=4)
    assert result.games == 11
    assert sorted(agent.seats) == ["0"] * 6 + ["1"] * 5  # game g puts the agent in seat g % 2


def test_the_scripted_connect_four_opponent_beats_random_and_the_interval_holds_its_rate():
    env = ConnectFour()
    scripted, = players(env, connect_four_opponent)
    result = play_matches(ConnectFour, scripted, RandomPlayer(env.obs_space(), env.action_space(),
                                                              np.random.default_rng(3)), 60, seed=1)
    assert result.win_rate >= 0.85, result
    low, high = result.interval()
    assert low <= result.win_rate <= high


def test_match_result_counts_draws_half_and_gives_wilson_intervals():
    result = MatchResult(wins=6, draws=2, losses=2)
    assert result.games == 10 and result.win_rate == pytest.approx(0.7)
    low, high = result.interval()
    assert low == pytest.approx(0.3968, abs=1e-3) and high == pytest.approx(0.8922, abs=1e-3)
    assert result.line() == "win rate 0.700 (95% CI 0.397-0.892)"
    assert MatchResult(10, 0, 0).interval()[1] == 1.0


def masked_column(obs, action_space, rng):
    from entmachin.env import CategoricalAction

    allowed = np.asarray(obs.actions["drop"].mask)[0]
    full = np.flatnonzero(~allowed)
    column = int(full[0]) if len(full) else 7
    return {"drop": CategoricalAction(actors=[0], indices=np.array([column]), index_to_label=[str(c) for c in range(7)])}


def raises(obs, action_space, rng):
    raise KeyError("no idea")


def test_an_opponent_that_breaks_the_rules_is_named_with_its_seat_before_the_game_moves():
    env = ConnectFour()
    bad, broken = players(env, masked_column, raises)
    agent = RandomPlayer(env.obs_space(), env.action_space(), np.random.default_rng(0))
    with pytest.raises(OpponentError, match=r"opponent 'masked_column' \(seat '1'\): actions\['drop'\] chose 7; "
                                            r"expected a choice in \[0, 7\)"):
        play_matches(ConnectFour, agent, bad, 1, seed=0)
    with pytest.raises(OpponentError, match=r"opponent 'raises' \(seat '1'\) raised KeyError"):
        play_matches(ConnectFour, agent, broken, 1, seed=0)


DUEL_OUTPUT = []  # what training the duel printed


@pytest.fixture(scope="module")
def duel_run(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("runs") / "duel")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["train", "RockPaperScissorsDuel", "--run-dir", directory, "--set", "log.eval_opponents=[random]",
                     *TINY]) == 0
    DUEL_OUTPUT.append(printed.getvalue())
    return directory


def test_a_games_final_line_gives_its_win_rates_not_a_mean_return_of_zero(duel_run):
    final = DUEL_OUTPUT[-1].strip().splitlines()[-1]
    assert re.match(r"win rate \d\.\d{3} against random over \d+ games each after \d+ environment steps", final), final
    assert "mean evaluation return" not in final and "random policy" not in final


def test_eval_against_each_kind_of_opponent(duel_run, capsys):
    for opponent in ("random", "scripted", duel_run, "entmachin.env.examples.rock_paper_scissors_duel:uniform_throw"):
        assert main(["eval", duel_run, "--opponent", opponent, "--episodes", "20"]) == 0
        out = capsys.readouterr().out
        assert "games 20  wins" in out and "win rate" in out and "(95% CI" in out, out


def test_training_evaluates_against_eval_opponents(duel_run):
    from test.run.test_cli import scalars

    tags = scalars(duel_run)
    assert [step for step, _ in tags["eval/win_rate/random"]] == [128, 256]


def error_of(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_bad_opponents_are_refused_in_one_line(duel_run, tmp_path, capsys):
    assert "not a run directory, and not one of random, scripted" in error_of(
        capsys, ["eval", duel_run, "--opponent", "nobody"])
    assert "cannot find 'no.such:fn'" in error_of(capsys, ["eval", duel_run, "--opponent", "no.such:fn"])
    other = str(tmp_path / "c4")
    assert main(["train", "ConnectFour", "--run-dir", other, *TINY]) == 0
    capsys.readouterr()
    err = error_of(capsys, ["eval", duel_run, "--opponent", other])
    assert "c4/checkpoints' was trained on other spaces than RockPaperScissorsDuel's" in err, err
    assert "has one player; opponents need a game of several" in error_of(
        capsys, ["train", "Count", "--set", "log.eval_opponents=[random]", "--run-dir", str(tmp_path / "count")])


def test_a_policy_with_memory_keeps_a_state_per_game_and_seat_and_sees_every_step_of_its_seat():
    """ConnectFour's seats move in turn: the agent with memory is shown its seat's observation at every step
    (the opponent's moves included), begins each game from a fresh state, and drops it when the game ends."""
    import torch
    from torch import nn

    from entmachin.frame import PPO
    from entmachin.model import RogueNet
    from entmachin.model.config import MemoryConfig, RogueNetConfig
    from entmachin.run.matches import PolicyPlayer

    env = ConnectFour()
    net = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=16, memory=MemoryConfig(size=4)))
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss())
    agent = PolicyPlayer(ppo, env.obs_space(), env.action_space())
    assert agent.remembers
    calls, act = [], ppo.act

    def spy(state, *args, **kwargs):
        calls.append(state["episode_start"][:, 0].tolist())
        return act(state, *args, **kwargs)

    ppo.act = spy
    steps = []

    class Counted(ConnectFour):
        def act(self, actions):
            steps.append(1)
            return super().act(actions)

    result = play_matches(Counted, agent, RandomPlayer(env.obs_space(), env.action_space(),
                                                       np.random.default_rng(0)), 4, seed=0, num_envs=2)
    assert result.wins + result.draws + result.losses == 4
    assert sum(sum(flags) for flags in calls) == 4  # each game began once from a fresh state
    assert sum(len(flags) for flags in calls) == len(steps)  # every step of its seat, the opponent's moves too
    assert agent._states == {}  # every finished game's states dropped
    with pytest.raises(OpponentError, match="choose\\(\\) needs games="):
        agent.choose([env.reset()["0"]], ["0"])
