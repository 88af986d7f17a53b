"""``entmachin play``: whole episodes driven through stdin, masks, entity ids, the agent's advice, quitting, errors."""
import io
import re
import sys

import numpy as np
import pytest

from entmachin.env import CategoricalActionMask, CategoricalActionSpace, Entity, EnvList, Environment, Observation
from entmachin.env import ObsSpace
from entmachin.run.envs import EnvFactory
from entmachin.run.cli import main
from entmachin.run.config import EnvSection

MINESWEEPER_RUN = ["--set", "env.kwargs.orbital_cannon=true", "--set", "env.kwargs.cooldown_period=0",
                   "--set", "env.max_episode_steps=3",
                   "--set", "train.total_steps=64", "--set", "log.checkpoint_interval=64",
                   "--set", "log.eval_interval=64", "--set", "log.eval_episodes=2", "--set", "rollout.num_envs=8",
                   "--set", "rollout.n_steps=4", "--set", "frame.batch_size=16", "--set", "model.d_model=16",
                   "--no-progress"]
BLOCK = re.compile(r"^(.+) for (.+):$")
ROW = re.compile(r"^\s+(\d+)\s+(.+?)\s+(\d\.\d{3})(\s+masked)?$")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny MineSweeper run: an orbital cannon that fires on every step, episodes cut after 3 steps."""
    directory = str(tmp_path_factory.mktemp("runs") / "minesweeper")
    assert main(["train", "MineSweeper", "--run-dir", directory, *MINESWEEPER_RUN]) == 0
    return directory


def play(monkeypatch, capsys, argv, lines):
    """Runs ``entmachin play ARGV`` with ``lines`` on stdin; returns (status, stdout, stderr)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    status = main(["play", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def first_obs(name, seed):
    """The observation ``play NAME --seed SEED`` starts with, and the environment showing it."""
    envs = EnvList(EnvFactory(EnvSection(name=name)), 1, seed=seed)
    envs.reset()
    return envs.last_obs[0], envs.envs[0]


def blocks(out):
    """Every choice list printed: [(action, actor, [(position, label, probability, masked)])]."""
    found = []
    for line in out.splitlines():
        header = BLOCK.match(line)
        row = ROW.match(line)
        if header:
            found.append((header.group(1), header.group(2), []))
        elif row and found:
            found[-1][2].append((int(row.group(1)), row.group(2), float(row.group(3)), bool(row.group(4))))
    return found


def test_a_whole_count_episode_with_a_masked_choice_refused(monkeypatch, capsys):
    seed = next(s for s in range(100) if not first_obs("Count", s)[0].actions["count"].mask.all())
    obs, env = first_obs("Count", seed)
    masked = str(int(np.flatnonzero(~obs.actions["count"].mask[0])[0]))
    status, out, err = play(monkeypatch, capsys, ["Count", "--seed", str(seed)], [masked, str(env.count), "n"])
    assert status == 0, err
    assert "step 0  reward 0.000  return 0.000" in out
    assert f"Bean ({env.count})" in out and "Player (1)" in out
    assert f"'{masked}' is masked for Player; allowed: " in out
    assert "episode over after 1 step: reward 1.000, return 1.000" in out
    assert out.count("count for Player> ") == 2 and "play again? [y/N]> " in out


def test_choices_by_name_or_index_and_playing_again(monkeypatch, capsys):
    obs, env = first_obs("NotHotdog", 4)
    status, out, err = play(monkeypatch, capsys, ["NotHotdog", "--seed", "4"], ["not_hotdog", "y", "0", "no"])
    assert status == 0, err
    assert "Player (1)\n  id  step\n  0   0\n" in out
    assert "classify for 0:\n    #  choice\n    0  hotdog\n    1  not_hotdog\n" in out
    assert "unused_action" not in out  # no actor takes it
    rewards = [float(r) for r in re.findall(r"episode over after 1 step: reward (\d\.\d{3})", out)]
    assert len(rewards) == 2 and rewards[0] == float(env.is_hotdog == 1)
    assert out.count("play again?") == 2


def test_select_entity_choices_by_id_position_and_plain_id(monkeypatch, capsys):
    obs, env = first_obs("CherryPick", 7)
    quality = dict(zip(obs.ids["Cherry"], np.asarray(obs.features["Cherry"])[:, 0]))
    picks = ["('Cherry', 5)", "Cherry 0", "#2", "3", "('Cherry', 99)"] + ["#0"] * 12
    status, out, err = play(monkeypatch, capsys, ["entmachin.env.examples.cherry_pick:CherryPick", "--seed", "7"],
                            picks + ["n"])
    assert status == 0, err
    assert "Pick Cherry for Player:\n    #  choice\n    0  ('Cherry', 0)\n" in out
    assert re.search(r"step 1  reward (-?\d+\.\d{3})", out).group(1) == f"{quality[('Cherry', 5)]:.3f}"
    assert "no choice \"('Cherry', 99)\" for Player" in out
    assert "episode over after 16 steps: reward " in out
    rewards = [float(r) for r in re.findall(r"step \d+  reward (-?\d+\.\d{3})", out)][1:]
    final = re.search(r"reward (-?\d+\.\d{3}), return (-?\d+\.\d{3})", out)
    assert float(final.group(2)) == pytest.approx(sum(rewards) + float(final.group(1)), abs=0.02)


def test_the_checkpoints_agent_advises_and_plays(run_dir, monkeypatch, capsys):
    status, out, err = play(monkeypatch, capsys, ["--checkpoint", run_dir, "--seed", "0"], [""] * 40)
    assert status == 0, err
    found = blocks(out)
    actions = {action for action, _, _ in found}
    assert actions == {"Move", "Fire Orbital Cannon"}, out  # the run's env kwargs: a cannon, no cooldown
    for action, actor, rows in found:
        probs = [p for _, _, p, _ in rows]
        assert abs(sum(probs) - 1) <= 0.0005 * len(probs) + 1e-9, (action, actor, rows)
        assert all(p == 0 for _, _, p, masked in rows if masked)
    assert any(masked for _, _, rows in found for *_, masked in rows)
    chosen = re.findall(r"> agent: (.+)$", out, re.M)
    assert len(chosen) == len(found)
    for label, (_, _, rows) in zip(chosen, found):  # the most likely choice (ties: as printed)
        assert dict((r[1], r[2]) for r in rows)[label] == max(r[2] for r in rows)
    assert re.search(r"episode over after 3 steps \(time limit\): reward 0\.000, return 0\.000", out)


def test_a_named_env_with_a_checkpoint_is_played_with_the_runs_settings(run_dir, monkeypatch, capsys):
    for name in ("MineSweeper", "entmachin.env.examples.minesweeper:MineSweeper"):
        status, out, err = play(monkeypatch, capsys, [name, "--checkpoint", f"{run_dir}/checkpoints",
                                                      "--seed", "0"], [""] * 40)
        assert status == 0, err
        # the run's env.kwargs (a cannon) and step limit (3), not MineSweeper's defaults
        assert {action for action, _, _ in blocks(out)} == {"Move", "Fire Orbital Cannon"}
        assert "episode over after 3 steps (time limit)" in out


def test_q_and_the_end_of_input_quit_with_status_0(monkeypatch, capsys):
    status, out, _ = play(monkeypatch, capsys, ["Count", "--seed", "0"], ["q"])
    assert status == 0 and out.rstrip().endswith("quit")
    status, out, _ = play(monkeypatch, capsys, ["Count", "--seed", "0"], [])
    assert status == 0 and out.rstrip().endswith("quit")
    obs, env = first_obs("Count", 0)
    status, out, _ = play(monkeypatch, capsys, ["Count", "--seed", "0"], [str(env.count), "q"])
    assert status == 0 and "return 1.000" in out and out.rstrip().endswith("quit")


def test_without_a_checkpoint_the_agent_cannot_be_asked(monkeypatch, capsys):
    status, out, _ = play(monkeypatch, capsys, ["NotHotdog", "--seed", "0"], ["", "a", "hotdog", "n"])
    assert status == 0
    assert out.count("no agent to ask (give --checkpoint RUN_DIR); type a choice") == 2
    assert "episode over" in out


class NoChoice(Environment):
    """Nobody acts on the first step; on the second the mask leaves the player no choice."""

    def obs_space(self):
        return ObsSpace(entities={"Player": Entity(["step"])})

    def action_space(self):
        return {"go": CategoricalActionSpace(["left", "right"])}

    def reset(self):
        self.step = 0
        return self._observe()

    def act(self, actions):
        self.step += 1
        return self._observe()

    def _observe(self):
        actors = [] if self.step == 0 else ["p"]
        mask = CategoricalActionMask(actor_ids=actors, mask=np.zeros((len(actors), 2), bool))  # nothing allowed
        return Observation(features={"Player": np.array([[self.step]], np.float32)}, ids={"Player": ["p"]},
                           actions={"go": mask}, reward=0.0, done=False)


def test_a_step_without_actors_goes_on_and_an_actor_without_choices_is_an_error(monkeypatch, capsys):
    status, out, err = play(monkeypatch, capsys, ["test.run.test_play:NoChoice"], [])
    assert status == 2 and "no actor acts on this step\n\nstep 1  reward 0.000" in out
    assert err.strip() == "entmachin: error: action 'go': the mask allows actor p no choice"


def error_of(monkeypatch, capsys, argv):
    status, _, err = play(monkeypatch, capsys, argv, [])
    assert status == 2
    err = err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_bad_input_is_one_line(run_dir, tmp_path, monkeypatch, capsys):
    assert re.search(r"play: give ENV or --checkpoint RUN_DIR", error_of(monkeypatch, capsys, []))
    assert "unknown environment 'Cout'; did you mean 'Count'?" in error_of(monkeypatch, capsys, ["Cout"])
    assert "cannot find 'nosuch.module:Env'" in error_of(monkeypatch, capsys, ["nosuch.module:Env"])
    assert re.search(r"play: NotHotdog is not the environment .*minesweeper was trained on \(MineSweeper\); leave "
                     r"ENV out", error_of(monkeypatch, capsys, ["NotHotdog", "--checkpoint", run_dir]))
    assert "not an entmachin run directory" in error_of(monkeypatch, capsys, ["--checkpoint", str(tmp_path)])


def test_help_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as e:
        main(["play", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--checkpoint" in out and "'a' or Enter" in out and "q quits" in out


def test_the_shown_distribution_is_the_agents(run_dir):
    """Each actor's probabilities match one eval_act per choice, and peak where the deterministic act chooses."""
    import torch

    from entmachin.env import batch_obs, to_state
    from entmachin.ragged.arrays import ragged_from_arrays
    from entmachin.run.evaluation import load_trained
    from entmachin.run.prompt import entity_names, turns_of, with_probs

    frame, _, factory = load_trained(run_dir)
    envs = EnvList(factory, 1, seed=3)
    vec = envs.reset()
    obs, obs_space, action_space = envs.last_obs[0], envs.obs_space(), envs.action_space()
    turns = turns_of(vec, action_space, entity_names(obs, vec, obs_space))
    assert [len(turns[name]) for name in action_space] == [2, 1]
    shown = with_probs(frame, obs, obs_space, action_space, turns)
    state = to_state(batch_obs([obs], obs_space, action_space), action_space)
    first = {name: [int(np.argmax(t.allowed)) for t in group] for name, group in turns.items()}
    greedy = frame.act(state, deterministic=True, collect_stats=False).action
    for name, group in shown.items():
        for i, turn in enumerate(group):
            expected = np.zeros(len(turn.labels))
            for k in np.flatnonzero(turn.allowed):
                chosen = {n: list(c) for n, c in first.items()}
                chosen[name][i] = int(k)
                action = {n: ragged_from_arrays(np.array(c, np.int64).reshape(-1, 1), [len(c)])
                          for n, c in chosen.items()}
                with torch.no_grad():
                    log_prob = frame.eval_act(state, {"action": action}).log_prob[name].data[i, 0]
                expected[k] = float(log_prob.exp())
            np.testing.assert_allclose(turn.probs, expected, rtol=1e-5, atol=1e-7)
            assert int(np.argmax(turn.probs)) == int(greedy[name].data[i, 0])


def test_how_typed_text_names_a_choice():
    from entmachin.run.prompt import Turn, _resolve

    turn = Turn("Pick", "Player", ["('Cherry', 0)", "7", "Up", "up", "('Cherry', 1)"], np.array([1, 1, 1, 1, 0], bool))
    assert _resolve(turn, "cherry, 0") == 0 and _resolve(turn, "[Cherry 0]") == 0  # punctuation and case aside
    assert _resolve(turn, "7") == 1 and _resolve(turn, "#1") == 1 and _resolve(turn, "3") == 3  # ids first
    assert _resolve(turn, "up") == 3 and _resolve(turn, "Up") == 2  # an exact name wins
    assert _resolve(turn, "UP") == "'UP' names 2 choices for Player; type #N, a position in the list"
    assert _resolve(turn, "#5") == "no choice '#5' for Player; type a name or number from the list (q quits)"
    assert _resolve(turn, "Cherry 1") == "\"('Cherry', 1)\" is masked for Player; allowed: ('Cherry', 0), 7, Up, up"


def test_a_person_plays_a_seat_of_connect_four_against_an_opponent_function(monkeypatch, capsys):
    # Seat 1 against an opponent that always drops in column 0, which moves first and completes
    # four there on its fourth move, before seat 1's three in column 3 become four.
    status, out, _ = play(monkeypatch, capsys, ["ConnectFour", "--seat", "1", "--opponent",
                                                "test.run.test_play:column_zero", "--seed", "0"],
                          ["3", "3", "3", "n"])
    assert status == 0
    assert "playing ConnectFour (seed 0) as seat 1 against test.run.test_play:column_zero" in out
    assert out.count("seat 0 (test.run.test_play:column_zero): drop 0") == 4
    assert "not your move on this step" in out
    assert re.search(r"game over after 7 steps: reward -1\.000, return -1\.000, you lose", out), out


def column_zero(obs, action_space, rng):
    from entmachin.env import CategoricalAction

    return {"drop": CategoricalAction(actors=[0], indices=np.array([0]), index_to_label=[str(c) for c in range(7)])}


def test_a_checkpoint_plays_the_other_seat_and_bad_seats_are_refused(monkeypatch, capsys, tmp_path):
    directory = str(tmp_path / "c4")
    assert main(["train", "ConnectFour", "--run-dir", directory, "--set", "train.total_steps=64",
                 "--set", "log.checkpoint_interval=64", "--set", "log.eval_interval=64", "--set", "log.eval_episodes=2",
                 "--set", "rollout.num_envs=4", "--set", "rollout.n_steps=16", "--set", "frame.batch_size=32",
                 "--set", "model.d_model=16", "--set", "model.n_layer=1", "--no-progress"]) == 0
    capsys.readouterr()
    status, out, _ = play(monkeypatch, capsys, ["--checkpoint", directory, "--seat", "0", "--seed", "1"],
                          ["a"] * 21 + ["n"])
    assert status == 0 and "as seat 0 against agent" in out and "seat 1 (agent): drop" in out
    assert re.search(r"game over after \d+ steps: .*you (win|lose|draw)", out), out
    for argv, message in ((["ConnectFour", "--seat", "2", "--opponent", "random"], "has no seat '2'; its seats are"),
                          (["ConnectFour"], "is a game of 2 players; name who plays the other seats"),
                          (["Count", "--seat", "0"], "Count has one player; --seat and --opponent are for games")):
        status, _, err = play(monkeypatch, capsys, argv, [])
        assert status == 2 and message in err, err


def test_a_persons_games_are_recorded(monkeypatch, capsys, tmp_path):
    pytest.importorskip("pyarrow")
    from entmachin.data import Dataset

    out_dir = str(tmp_path / "games")
    status, out, _ = play(monkeypatch, capsys, ["ConnectFour", "--seat", "1", "--opponent",
                                                "test.run.test_play:column_zero", "--seed", "0", "--record", out_dir],
                          ["3", "3", "3", "y", "3"])  # a second game, left unfinished: not recorded
    assert status == 0 and f"recorded 1 episode(s) in {out_dir}" in out
    dataset = Dataset(out_dir)
    assert dataset.recorded["policy"] == "person" and dataset.recorded["seat"] == "1"
    rows = dataset.read()
    person = [i for i, seat in enumerate(rows.seat) if seat == "1" and not rows.final[i]]
    chosen = [int(c) for i in person for c in rows.action["drop"][i].as_array()[:, 0]]
    assert chosen == [3, 3, 3]  # the person's three drops in column 3
    finals = {rows.seat[i]: rows.result[i] for i in np.flatnonzero(rows.final)}
    assert finals == {"0": "win", "1": "loss"}


def test_continuous_values_are_typed_checked_against_their_bounds_and_advised(monkeypatch, capsys, tmp_path):
    """A person types a continuous action's numbers (refused: the wrong count, text, outside the
    actor's narrowed bounds); with a checkpoint, Enter takes the agent's deterministic values."""
    env = "test.model.test_continuous:Fleet"
    obs, _ = first_obs(env, 0)
    boats = len(obs.features["Boat"])
    answers = ["0.1", "x y", "2 1", "0.5 1"] + ["0.2 0.5"] * (boats - 1) + ["0.3"] + ["red"] * boats
    status, out, err = play(monkeypatch, capsys, [env, "--seed", "0"], answers + ["q"])
    assert status == 0, err
    assert "takes 2 number(s) (turn, speed); got 1" in out
    assert "is not 2 number(s)" in out
    assert "turn = 2 is outside its bounds [-0.5, 1] for boat0" in out
    assert "step 1" in out
    directory = str(tmp_path / "fleet")
    assert main(["train", env, "--run-dir", directory, "--set", "train.total_steps=64", "--set", "rollout.num_envs=4",
                 "--set", "rollout.n_steps=8", "--set", "frame.batch_size=16", "--set", "model.d_model=16",
                 "--set", "log.eval_interval=64", "--set", "log.eval_episodes=2", "--no-progress"]) == 0
    status, out, err = play(monkeypatch, capsys, ["--checkpoint", directory, "--seed", "0"], [""] * (2 * boats + 1) + ["q"])
    assert status == 0, err
    assert out.count("agent: turn=") == boats and "agent: 0=" in out
    assert re.search(r"turn\s+-0\.5\s+1\s+-?\d", out)  # the bounds, then the agent's value



def test_the_agent_with_memory_keeps_its_state_across_the_persons_moves(tmp_path, monkeypatch, capsys):
    """Recall with a run whose network has memory: at the choosing step (the cue long gone) the advice is
    the network's distribution given the state it carried from the cue, not a fresh state's."""
    import torch

    from entmachin.env import batch_obs, to_state
    from entmachin.frame.memory import MemoryRows
    from entmachin.ragged.arrays import ragged_from_arrays
    from entmachin.run.evaluation import load_trained

    run_dir = str(tmp_path / "recall")
    assert main(["train", "Recall", "--run-dir", run_dir, "--set", "train.total_steps=3200", "--set",
                 "log.eval_interval=3200", "--set", "log.eval_episodes=2", "--no-progress"]) == 0
    status, out, err = play(monkeypatch, capsys, ["--checkpoint", run_dir, "--seed", "5"], ["", "n"])
    assert status == 0, err
    shown = [p for _, _, rows in blocks(out) for _, _, p, _ in rows]  # the one choice's four probabilities
    assert len(shown) == 4, out
    frame, _, factory = load_trained(run_dir)
    envs = EnvList(factory, 1, seed=5)
    envs.reset()
    obs_space, space = envs.obs_space(), envs.action_space()
    carried = MemoryRows(frame.actor.memory_size, 1)
    with torch.no_grad():
        for _ in range(4):  # the cue, then the steps without an actor: the state carried by hand
            state = to_state(batch_obs([envs.last_obs[0]], obs_space, space), space)
            acted = frame.act(carried.state(state), deterministic=True, collect_stats=False)
            carried.advance(acted, envs.act({"choose": ragged_from_arrays(np.zeros((0, 1), np.int64), [0])}).done)
        state = to_state(batch_obs([envs.last_obs[0]], obs_space, space), space)

        def probs(rows):
            return [float(frame.eval_act(rows.state(state), {"action": {"choose": ragged_from_arrays(
                np.array([[k]], np.int64), [1])}}).log_prob["choose"].data.exp()) for k in range(4)]

        kept, fresh = probs(carried), probs(MemoryRows(frame.actor.memory_size, 1))
    envs.close()
    np.testing.assert_allclose(shown, kept, atol=6e-4)
    assert np.abs(np.array(kept) - fresh).max() > 2e-3  # the state matters here


def test_the_agent_with_per_entity_memory_keeps_its_items_states_across_the_persons_moves(tmp_path, monkeypatch,
                                                                                           capsys):
    """Conveyor with a policy keeping a state per item: at each sorting step (the items' kinds long gone) the
    advice is the network's distribution given the states carried by hand (the row's, and each item's by id),
    not that of fresh item states; the second episode's items, which take the ids 1 and 2 again, begin from
    zeros."""
    import torch

    from entmachin.env import batch_obs, to_state
    from entmachin.env.examples import Conveyor
    from entmachin.frame import PPO
    from entmachin.frame.entity_memory import EntityRows
    from entmachin.frame.memory import MemoryRows
    from entmachin.model.config import MemoryConfig, RogueNetConfig
    from entmachin.model.rogue_net import RogueNet
    from entmachin.ragged.arrays import ragged_from_arrays
    from entmachin.run import evaluation

    torch.manual_seed(0)
    net = RogueNet(Conveyor().obs_space(), Conveyor().action_space(),
                   RogueNetConfig(d_model=16, n_layer=1, memory=MemoryConfig(size=8, per_entity=True)))
    for module, std in ((net.memory, 1.0), (net.entity_memory, 1.0), (net.heads, 0.3)):
        for p in module.parameters():  # the states move the choices (the cores' projections are zero at first)
            torch.nn.init.normal_(p, std=std)
    frame = PPO(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss())
    factory = EnvFactory(EnvSection(name="Conveyor", kwargs={"n_items": 2}))
    monkeypatch.setattr(evaluation, "load_trained", lambda *args: (frame, None, factory))
    status, out, err = play(monkeypatch, capsys, ["--checkpoint", str(tmp_path), "--seed", "5"],
                            ["", "", "y", "", "", "n"])
    assert status == 0, err
    shown = [p for _, _, rows in blocks(out) for _, _, p, _ in rows]  # two episodes, two sorts each, two choices

    def advice(fresh_items=False, reset=True):
        envs = EnvList(factory, 1, seed=5)
        envs.reset()
        space = envs.action_space()
        carried, items = MemoryRows(net.memory_size, 1), EntityRows(net.entity_memory_size, 1, ["Item"])
        probs = []
        with torch.no_grad():
            for _ in range(8):
                obs = envs.last_obs[0]
                vec = batch_obs([obs], envs.obs_space(), space)
                vec.ids = [obs.ids]
                given = items.entries(vec)
                state = {**carried.state(to_state(vec, space)), **given}
                n = int(vec.action_masks["sort"].actors.size1()[0])
                if n:
                    asked = {**state, **(EntityRows(net.entity_memory_size, 1, ["Item"]).entries(vec)
                                         if fresh_items else {})}
                    probs += [float(frame.eval_act(asked, {"action": {"sort": ragged_from_arrays(
                        np.array([[k]], np.int64), [1])}}).log_prob["sort"].data.exp()) for k in range(2)]
                acted = frame.act(state, deterministic=True, collect_stats=False)
                done = envs.act({"sort": ragged_from_arrays(np.zeros((n, 1), np.int64), [n])}).done
                carried.advance(acted, done)
                items.keep(acted)
                if reset:
                    items.end(done)
        envs.close()
        return np.array(probs)

    kept = advice()
    assert len(shown) == 8, out
    np.testing.assert_allclose(shown, kept, atol=6e-4)
    assert np.abs(kept - advice(fresh_items=True)).max() > 0.05  # the items' states matter here
    assert np.abs(kept[4:] - advice(reset=False)[4:]).max() > 0.05  # and so does dropping them at the episode's end


def test_a_person_plays_against_a_run_with_memory_which_keeps_its_state_through_the_game(monkeypatch, capsys,
                                                                                         tmp_path):
    """``--opponent RUN_DIR`` of a run with memory: the opponent sees every step of its seat under the game's
    key (its moves and the person's), and forgets the game when it ends."""
    from entmachin.run.matches import PolicyPlayer

    directory = str(tmp_path / "c4")
    assert main(["train", "ConnectFour", "--run-dir", directory, "--set", "train.total_steps=64",
                 "--set", "log.checkpoint_interval=64", "--set", "log.eval_interval=64", "--set", "log.eval_episodes=2",
                 "--set", "rollout.num_envs=4", "--set", "rollout.n_steps=16", "--set", "frame.batch_size=32",
                 "--set", "model.d_model=16", "--set", "model.n_layer=1", "--set", "model.critic=shared",
                 "--set", "model.memory={kind: gru, size: 4}", "--set", "frame.sequence_length=8",
                 "--set", "env.kwargs.choose=drop", "--no-progress"]) == 0
    capsys.readouterr()
    seen = []
    original = PolicyPlayer.choose

    def spy(self, observations, seats, games=None):
        seen.append((tuple(seats), None if games is None else tuple(games), dict(self._states)))
        return original(self, observations, seats, games)

    monkeypatch.setattr(PolicyPlayer, "choose", spy)
    status, out, _ = play(monkeypatch, capsys, ["ConnectFour", "--seat", "1", "--opponent", directory, "--seed", "0"],
                          [str(c) for c in range(7)] * 7 + ["n"])  # a full column's drop is asked again
    assert status == 0 and re.search(r"game over after (\d+) steps", out), out
    steps = int(re.search(r"game over after (\d+) steps", out).group(1))
    assert len(seen) == steps and all(games == (0,) for _, games, _ in seen)  # every step of its seat, one game
    assert seen[-1][2]  # the state it kept from the steps before
