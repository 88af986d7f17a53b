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


def test_a_run_directory_loads_as_an_opponent_for_an_environment_class(duel_run):
    from entmachin.env.examples import RockPaperScissorsDuel
    from entmachin.run.matches import PolicyPlayer, load_opponent

    player = load_opponent(duel_run, RockPaperScissorsDuel, seed=0)  # a class, not the runner's EnvFactory
    assert isinstance(player, PolicyPlayer)
    match = play_matches(RockPaperScissorsDuel, player, load_opponent("random", RockPaperScissorsDuel, seed=1),
                         games=10, seed=0)
    assert match.games == 10


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


def _per_entity_agent(env):
    import torch
    from torch import nn

    from entmachin.frame import PPO
    from entmachin.model import RogueNet
    from entmachin.model.config import MemoryConfig, RogueNetConfig
    from entmachin.run.matches import PolicyPlayer

    torch.manual_seed(0)
    net = RogueNet(env.obs_space(), env.action_space(),
                   RogueNetConfig(d_model=16, n_layer=1, memory=MemoryConfig(size=4, per_entity=True)))
    for core in (net.memory, net.entity_memory):  # zero at first: make the states move the choices
        for p in core.out.parameters():
            nn.init.normal_(p, std=0.5)
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss())
    return ppo, PolicyPlayer(ppo, env.obs_space(), env.action_space())


def test_a_policy_with_per_entity_memory_keeps_each_games_and_seats_entity_states_apart():
    """Two Skirmish games, both seats played by one agent, its batches made of the (game, seat)s asked in a
    changing order and number: every choice and kept state equals a step-by-step call of the network on that
    seat alone, carrying its row state (MemoryRows) and its units' states by id (EntityRows); a forgotten game
    begins again from zeros although its units' ids come back."""
    import torch

    from entmachin.env import batch_obs, checked_choices, to_state
    from entmachin.env.examples import Skirmish
    from entmachin.env.multi_agent import has_actors
    from entmachin.frame.collector import default_actions
    from entmachin.frame.entity_memory import EntityRows
    from entmachin.frame.memory import MemoryRows
    from entmachin.run.matches import _row_actions

    env = Skirmish()
    obs_space, space = env.obs_space(), env.action_space()
    ppo, agent = _per_entity_agent(env)
    games = {g: Skirmish() for g in (0, 1)}
    for g, game in games.items():
        game.seed(g)
    obs = {g: game.reset() for g, game in games.items()}
    reference = {}
    rng = np.random.default_rng(0)
    other = RandomPlayer(obs_space, space, np.random.default_rng(1))

    def by_hand(key, o):
        rows, entities = reference.setdefault(key, (MemoryRows(ppo.actor.memory_size, 1),
                                                    EntityRows(ppo.actor.entity_memory_size, 1, ["Unit", "Enemy"])))
        vec = batch_obs([o], obs_space, space)
        vec.ids = [o.ids]
        with torch.no_grad():
            out = ppo.act({**rows.state(to_state(vec, space)), **entities.entries(vec)}, True, collect_stats=False)
        rows.advance(out, np.array([False]))
        entities.keep(out)
        return _row_actions(default_actions(out)[1], [o], obs_space, space)[0]

    def step(asked):
        keys = [(g, seat) for g, seat in asked]
        chosen = agent.choose([obs[g][seat] for g, seat in keys], [seat for _, seat in keys], [g for g, _ in keys])
        moves = {g: {seat: {} for seat in ("0", "1")} for g in games}
        for (g, seat), actions in zip(keys, chosen):
            o = obs[g][seat]
            mine, theirs = (checked_choices(o, obs_space, space, a, "test") for a in (actions, by_hand((g, seat), o)))
            for name in space:
                np.testing.assert_array_equal(mine[name], theirs[name])
            kept, (rows, entities) = agent._states[(g, seat)], reference[(g, seat)]
            torch.testing.assert_close(kept[0], rows.memory[0], atol=1e-5, rtol=0)
            assert kept[1][0] == entities.row(0)[0]
            torch.testing.assert_close(kept[1][1], entities.row(0)[1], atol=1e-5, rtol=0)
            if has_actors(o, obs_space):
                moves[g][seat] = actions
        for g in {g for g, _ in keys}:
            for seat in ("0", "1"):  # a seat the agent is not asked for plays at random
                if (g, seat) not in keys and has_actors(obs[g][seat], obs_space):
                    moves[g][seat] = other.choose([obs[g][seat]], [seat])[0]
            obs[g] = games[g].act(moves[g])
            assert not obs[g]["0"].done, "a game ended early; the test wants games that go on"

    every = [(g, seat) for g in games for seat in ("0", "1")]
    for t in range(5):
        step([every[i] for i in rng.permutation(4)] if t != 2 else [(1, "1"), (1, "0")])
    assert {len(agent._states[key][1][0]) for key in every} != {0}  # units numbered, states kept
    agent.forget(0)
    assert sorted(agent._states) == [(1, "0"), (1, "1")]
    obs[0] = games[0].reset()
    for key in [(0, "0"), (0, "1")]:
        del reference[key]  # the game begins again: its units' states from zeros, numbered afresh
    step([(0, "1"), (1, "0"), (0, "0")])
    assert {handle for _, handle in agent._states[(0, "0")][1][0].values()} == \
        set(range(len(obs[0]["0"].ids["Unit"]) + len(obs[0]["0"].ids["Enemy"])))


def test_per_entity_memory_plays_whole_matches_and_entities_without_ids_are_named():
    from entmachin.env.examples import Skirmish

    env = Skirmish()
    _, agent = _per_entity_agent(env)
    result = play_matches(lambda: Skirmish(time_limit=6), agent,
                          RandomPlayer(env.obs_space(), env.action_space(), np.random.default_rng(0)), 3, seed=0,
                          num_envs=2)
    assert result.games == 3 and agent._states == {}  # every finished game's states dropped
    o = env.reset()["1"]
    o.ids = {"Unit": o.ids["Unit"]}
    with pytest.raises(OpponentError, match=r"agent \(game 'g', seat '1'\): entity memory: row 0: .* 'Enemy' entities "
                                            r"but 0 ids"):
        agent.choose([o], ["1"], ["g"])
