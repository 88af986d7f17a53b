"""Self-play: the learner's seats, opponents swapped only between games, the pool, Elo, checkpoints, bad input."""
import glob
import hashlib
import io
import json
import os
import re

import numpy as np
import pytest
import torch

from entmachin.env import EnvList
from entmachin.frame import RolloutCollector
from entmachin.run.build import make_frame
from entmachin.run.cli import main
from entmachin.run.config import config_from_dict
from entmachin.run.elo import expected, updated
from entmachin.run.logs import RunError
from entmachin.run.runner import Runner
from entmachin.run.selfplay import LATEST, SelfPlay
from entmachin.run.spaces import spaces_record
from test.env.arena import Arena
from test.run.test_cli import scalars
from test.run.test_resume import LOSSES

TINY = ["--set", "model.d_model=16", "--set", "model.n_layer=1", "--set", "rollout.num_envs=4",
        "--set", "rollout.n_steps=16", "--set", "frame.batch_size=32", "--set", "log.eval_episodes=4",
        "--set", "log.eval_opponents=[]", "--set", "log.best=null", "--no-progress"]
MIN_WIN_RATE = {"ConnectFour": 0.7, "Skirmish": 0.7}  # after 10,240 steps (measured 0.92, 0.885; random: about 0.5)
SELFPLAY = ["--set", "selfplay.seats=random", "--set", "selfplay.save_steps=64", "--set", "selfplay.swap_steps=64"]


def arena_selfplay(seats="random", n_seats=2, num_envs=6, **section):
    config = config_from_dict({"model": {"d_model": 16, "n_layer": 1}, "rollout": {"num_envs": num_envs, "n_steps": 8},
                               "frame": {"batch_size": 16, "n_epochs": 1},
                               "selfplay": {"seats": seats, "save_steps": 48, "swap_steps": 48, **section}})
    envs = EnvList(lambda: Arena(n_seats, length=3), num_envs, seed=0)
    obs_space, action_space = envs.obs_space(), envs.action_space()
    frame, _ = make_frame(config, obs_space, action_space, rows_per_env=n_seats)  # a game against itself stores all
    selfplay = SelfPlay(config.selfplay, frame, envs.row_index(), seed=0, spaces=spaces_record(obs_space, action_space))
    return envs, frame, selfplay, RolloutCollector(frame, envs, 8, opponents=selfplay)


class Watch:
    """Records, before every step, each environment's opponent, the snapshot it plays and the learner's seats,
    and after it which environments' games ended."""

    def __init__(self, selfplay):
        self.before, self.done = [], []
        act, observe = selfplay.act, selfplay.observe

        def watched_act(state):
            snapshots = [selfplay.slots[w].snapshot if w != LATEST else LATEST for w in selfplay._opponent]
            self.before.append((selfplay._opponent.copy(), np.array(snapshots), selfplay._seats.copy()))
            return act(state)

        def watched_observe(obs):
            self.done.append(np.bincount(selfplay.rows.env[obs.done], minlength=selfplay.rows.num_envs) > 0)
            return observe(obs)

        selfplay.act, selfplay.observe = watched_act, watched_observe


def test_opponents_and_seats_change_only_when_a_game_ends_and_at_most_m_snapshots_play():
    envs, frame, selfplay, collector = arena_selfplay(max_snapshots=2, play_against_latest=0.3)
    watch = Watch(selfplay)
    steps = 0
    for _ in range(24):
        steps += collector.collect().n_env_steps
        frame.update()
        selfplay.advance(steps)
    assert len(selfplay.snapshots) >= 5 and len(selfplay.window) <= selfplay.section.window
    changes = 0
    for t in range(len(watch.before) - 1):
        for e in range(envs.num_envs):
            same = all(np.array_equal(a[e], b[e]) for a, b in zip(watch.before[t], watch.before[t + 1]))
            assert same or watch.done[t][e], f"environment {e} changed opponent or seat in the middle of a game"
            changes += not same
        playing = {s for s in watch.before[t][1].tolist() if s != LATEST}
        assert len(playing) <= 2
    assert changes > 30
    played = {s for before in watch.before for s in before[1].tolist() if s != LATEST}
    assert len(played) > 2  # the snapshots in play were swapped
    seats = np.concatenate([before[2].reshape(-1) for before in watch.before])
    assert set(seats.tolist()) == {0, 1}  # one random seat per game


def test_the_rows_the_current_parameters_act_are_stored_and_snapshots_rows_are_not():
    envs, frame, selfplay, collector = arena_selfplay(seats=["p1"], n_seats=3, num_envs=4, play_against_latest=0.0)
    acted = []
    act = frame.act

    def recording_act(state, *args, **kwargs):
        acted.append(len(state["entities"]["Unit"]))
        return act(state, *args, **kwargs)

    frame.act = recording_act
    steps = collector.collect().n_env_steps  # no snapshot yet: every game is against the current self
    assert frame.replay_buffer.size() == 8 * 4 * 3 and acted == [12] * 8
    frame.update()
    while not any(slot.snapshot >= 0 for slot in selfplay.slots):
        steps += collector.collect().n_env_steps
        frame.update()
        selfplay.advance(steps)
    acted.clear()
    collector.collect()
    assert frame.replay_buffer.size() == sum(acted)  # one forward pass a step over exactly the stored rows
    assert min(acted) == 4  # games against snapshots: the learner's seat p1 alone
    np.testing.assert_array_equal(selfplay.learner_rows(), [1, 4, 7, 10])


def test_elo_is_zero_sum_and_moves_toward_the_result():
    assert expected(1600, 1200) == pytest.approx(10 / 11)
    a, b = updated(1200, 1200, 1.0, 16)
    assert (a, b) == (1208, 1192)
    a, b = updated(1400, 1200, 0.5, 16)
    assert a < 1400 and b > 1200 and a + b == pytest.approx(2600)


def test_snapshots_start_at_the_learners_rating_and_games_against_them_move_both():
    envs, frame, selfplay, collector = arena_selfplay(play_against_latest=0.0)
    starts, steps = [], 0
    for _ in range(6):
        steps += collector.collect().n_env_steps
        frame.update()
        selfplay.advance(steps)
        starts += [s["elo"] for s in selfplay.snapshots[len(starts):]]  # taken just now: no games yet
        assert starts[-1] == selfplay.learner_elo
        # every rated game moved the learner and one snapshot by the same amount, in opposite directions
        moved = sum(s["elo"] - start for s, start in zip(selfplay.snapshots, starts))
        assert selfplay.learner_elo + moved == pytest.approx(1200.0)
    assert selfplay.snapshots[0]["env_steps"] == 48 and selfplay.learner_elo != 1200.0


def test_the_pool_file_loads_with_weights_only_and_restores_exactly():
    envs, frame, selfplay, collector = arena_selfplay()
    steps = 0
    for _ in range(8):
        steps += collector.collect().n_env_steps
        frame.update()
        selfplay.advance(steps)
    data = selfplay.to_bytes()
    state = torch.load(io.BytesIO(data), weights_only=True)
    assert len(state["snapshots"]) == len(selfplay.snapshots) and state["learner_elo"] == selfplay.learner_elo
    _, _, other, _ = arena_selfplay()
    other.frame = frame
    other.load(other.check_bytes(data, "pool.pt"), games=True)
    assert other.to_bytes() == data
    assert [s.snapshot for s in other.slots] == [s.snapshot for s in selfplay.slots]


def test_a_damaged_pool_or_one_of_other_spaces_is_refused_naming_the_file():
    envs, frame, selfplay, collector = arena_selfplay()
    collector.collect()
    selfplay.advance(48)
    data = selfplay.to_bytes()
    with pytest.raises(RunError, match="pool.pt: the self-play pool cannot be read"):
        selfplay.check_bytes(data[: len(data) // 2], "pool.pt")
    state = torch.load(io.BytesIO(data), weights_only=True)
    state["spaces"]["entities"]["Unit"] = ["x"]
    buffer = io.BytesIO()
    torch.save(state, buffer)
    with pytest.raises(RunError, match="pool.pt: the pool's snapshots were trained on other spaces"):
        selfplay.check_bytes(buffer.getvalue(), "pool.pt")
    state = torch.load(io.BytesIO(data), weights_only=True)
    first = next(iter(state["weights"].values()))
    key = next(iter(first))
    first[key] = torch.zeros(3, 3, 3)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    with pytest.raises(RunError, match="pool snapshot 0 .* does not fit the learner's actor"):
        selfplay.check_bytes(buffer.getvalue(), "pool.pt")


def test_pfsp_draws_the_snapshots_the_learner_loses_to_most():
    _, _, selfplay, _ = arena_selfplay(sampling="pfsp", window=3, max_snapshots=1)
    assert arena_selfplay()[2].draw_weights() is None  # uniform
    selfplay.learner_elo = 1200.0
    selfplay.snapshots = [{"env_steps": 48 * (i + 1), "elo": elo} for i, elo in enumerate((1600.0, 1200.0, 400.0))]
    selfplay.window = [0, 1, 2]
    weights = selfplay.draw_weights()
    p = np.array([expected(1200.0, elo) for elo in (1600.0, 1200.0, 400.0)])
    raw = np.maximum((1 - p) ** 2, 1e-3)
    np.testing.assert_allclose(weights, raw / raw.sum())
    assert weights[0] > 0.75 and weights[2] > 0  # the strongest snapshot most; a sure win keeps a small chance
    selfplay._weights = {i: {k: v.clone() for k, v in selfplay.frame.actor.state_dict().items()} for i in range(3)}
    drawn, selfplay.next_save = [], 10**9  # no new snapshot: draws from these three only
    for step in range(400):
        selfplay.next_swap = step
        selfplay.advance(step)
        drawn.append(selfplay.slots[0].due if selfplay.slots[0].due >= 0 else selfplay.slots[0].snapshot)
    counts = np.bincount(drawn, minlength=3) / len(drawn)
    assert counts[0] > 0.7 and counts[2] < 0.05, counts


def _snapshot_choices(snapshot_actions):
    """The snapshots' actions on one state of a rollout, asked three times."""
    envs, frame, selfplay, collector = arena_selfplay(snapshot_actions=snapshot_actions, play_against_latest=0.0,
                                                      num_envs=12)
    steps = 0
    while not any(slot.snapshot >= 0 for slot in selfplay.slots):
        steps += collector.collect().n_env_steps
        frame.update()
        selfplay.advance(steps)
    states, act = [], selfplay.act
    selfplay.act = lambda state: states.append(state) or act(state)
    collector.collect()
    state = states[-1]
    return [np.concatenate([np.asarray(a["move"].data).reshape(-1) for _, a in act(state)]) for _ in range(3)]


def test_snapshots_play_their_most_likely_choices_when_the_config_says_so():
    most_likely = _snapshot_choices("most_likely")
    assert len(most_likely[0]) > 0 and all(np.array_equal(most_likely[0], c) for c in most_likely[1:])
    sampled = _snapshot_choices("sample")
    assert not all(np.array_equal(sampled[0], c) for c in sampled[1:])  # an untrained policy's draws differ
    with pytest.raises(ValueError, match=r"snapshot_actions: expected one of \['sample', 'most_likely'\], got 'max'"):
        config_from_dict({"selfplay": {"seats": "random", "snapshot_actions": "max"}})
    envs, frame, selfplay, _ = arena_selfplay()
    frame._takes_deterministic = False  # an actor whose forward has no 'deterministic'
    with pytest.raises(RunError, match="snapshot_actions: most_likely needs an actor whose forward takes"):
        SelfPlay(selfplay.section.__class__(seats="random", snapshot_actions="most_likely"), frame,
                 envs.row_index(), seed=0)


def test_an_unknown_sampling_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"sampling: expected one of \['uniform', 'pfsp'\], got 'elo'"):
        config_from_dict({"selfplay": {"seats": "random", "sampling": "elo"}})


@pytest.mark.parametrize("seats, message", [(["p9"], "selfplay.seats: the game has no seat 'p9'"),
                                            (["p0", "p1"], "are all of the game's seats")])
def test_a_selfplay_section_naming_unknown_seats_or_all_of_them_is_refused(seats, message):
    with pytest.raises(RunError, match=message):
        arena_selfplay(seats=seats)


def test_bad_selfplay_configs_stop_before_anything_runs(tmp_path, capsys):
    run_dir = str(tmp_path / "bad")
    assert main(["train", "ConnectFour", "--run-dir", run_dir, *TINY, "--set",
                 "selfplay.seats=[red, '1', purple]"]) == 2
    err = capsys.readouterr().err
    assert "no seat 'red', 'purple' (environment 0 has seats ['0', '1'])" in err and not os.path.exists(run_dir)
    assert main(["train", "MineSweeper", "--run-dir", run_dir, *TINY, "--set", "selfplay.seats=random"]) == 2
    assert "needs a game of several players" in capsys.readouterr().err and not os.path.exists(run_dir)
    with pytest.raises(ValueError, match="selfplay.seats: DQN does not support self-play"):
        config_from_dict({"frame": {"name": "DQN"}, "selfplay": {"seats": "random"}})


def test_torchrun_refuses_self_play_naming_the_missing_piece(tmp_path):
    class TwoRanks:
        rank, world_size, device = 0, 2, "cpu"

        def barrier(self):
            pass

    config = config_from_dict({"env": {"name": "ConnectFour"}, "selfplay": {"seats": "random"}})
    runner = Runner(config, str(tmp_path / "run"), progress=False, distributed=TwoRanks())
    with pytest.raises(RunError, match="under torchrun .* pool and Elo ratings of its own"):
        runner.train()


@pytest.fixture(scope="module")
def selfplay_run(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("selfplay") / "c4")
    assert main(["train", "ConnectFour", "--run-dir", run_dir, *TINY, *SELFPLAY, "--set", "train.total_steps=512",
                 "--set", "log.checkpoint_interval=256", "--set", "log.eval_interval=512",
                 "--set", "log.keep_checkpoints=null"]) == 0
    return run_dir


def test_a_selfplay_run_logs_elo_and_keeps_its_pool_in_checkpoints(selfplay_run):
    found = scalars(selfplay_run)
    for tag in ("selfplay/elo", "selfplay/win_rate", "selfplay/draw_rate", "selfplay/pool_size"):
        assert tag in found, tag
    assert found["selfplay/pool_size"][-1][1] == 8  # a snapshot every 64 of 512 steps (window 10)
    manifest = json.load(open(os.path.join(selfplay_run, "checkpoints", "checkpoint_512.json")))
    pool = os.path.join(selfplay_run, "checkpoints", manifest["files"]["selfplay"]["file"])
    state = torch.load(pool, weights_only=True)
    assert [s["env_steps"] for s in state["snapshots"]] == list(range(64, 513, 64))
    assert found["selfplay/elo"][-1][1] == pytest.approx(state["learner_elo"]) and state["learner_elo"] != 1200


def test_a_selfplay_run_resumes_exactly(selfplay_run, tmp_path):
    import shutil

    run_dir = str(tmp_path / "again")
    shutil.copytree(selfplay_run, run_dir)
    expected_scalars = scalars(run_dir)
    for path in glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint_512.json")):
        os.remove(path)
    assert main(["train", "--resume", run_dir, "--no-progress"]) == 0
    found = scalars(run_dir)
    for tag in (*LOSSES, "selfplay/elo", "selfplay/win_rate"):
        assert found[tag] == expected_scalars[tag], tag


def test_a_resumed_run_whose_pool_file_is_damaged_stops_naming_it_and_changes_nothing(selfplay_run, tmp_path, capsys):
    import shutil

    run_dir = str(tmp_path / "damaged")
    shutil.copytree(selfplay_run, run_dir)
    checkpoints = os.path.join(run_dir, "checkpoints")
    manifest_path = os.path.join(checkpoints, "checkpoint_512.json")
    manifest = json.load(open(manifest_path))
    pool = os.path.join(checkpoints, manifest["files"]["selfplay"]["file"])
    for damage in ("bytes", "content"):
        data = b"not a pool" if damage == "content" else open(pool, "rb").read()[:-7]
        if damage == "content":  # a consistent manifest: only the pool's own check can tell
            manifest["files"]["selfplay"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
            with open(manifest_path, "w") as f:
                json.dump(manifest, f)
        with open(pool, "wb") as f:
            f.write(data)
        before = {p: os.path.getmtime(p) for p in glob.glob(os.path.join(run_dir, "**"), recursive=True)}
        assert main(["train", "--resume", run_dir, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert os.path.basename(pool) in err, err
        assert before == {p: os.path.getmtime(p) for p in glob.glob(os.path.join(run_dir, "**"), recursive=True)}


@pytest.mark.parametrize("extra", [["--set", "rollout.processes=2"], ["--frame", "A2C"]])
def test_selfplay_runs_with_worker_processes_and_with_a2c(tmp_path, extra):
    run_dir = str(tmp_path / "run")
    assert main(["train", "ConnectFour", "--run-dir", run_dir, *TINY, *SELFPLAY, "--set", "train.total_steps=256",
                 *extra]) == 0
    assert scalars(run_dir)["selfplay/pool_size"][-1][1] == 4


def test_init_from_starts_a_run_from_another_runs_networks(selfplay_run, tmp_path, capsys):
    from entmachin.run.config import load_config
    from entmachin.run.evaluation import load_trained

    source, _, _ = load_trained(selfplay_run)
    config = load_config(os.path.join(selfplay_run, "config.yaml"), [f"train.init_from={selfplay_run}"])
    runner = Runner(config, str(tmp_path / "next"), progress=False)
    runner._build()
    try:
        for name in ("actor", "critic"):
            mine, theirs = getattr(runner.frame, name).state_dict(), getattr(source, name).state_dict()
            assert all(torch.equal(mine[k], theirs[k]) for k in theirs), name
        assert runner.frame.actor_optim.state_dict()["state"] == {}  # the optimisers start afresh
    finally:
        runner.envs.close()
    # another game's run, a missing one, and a model of another size: refused by name before training
    other = str(tmp_path / "minesweeper")
    assert main(["train", "MineSweeper", "--run-dir", other, *TINY, "--set", "train.total_steps=64",
                 "--set", "rollout.n_steps=16", "--set", "frame.batch_size=32"]) == 0
    for bad, message in ((other, "train.init_from: .* was trained on other spaces"),
                         (str(tmp_path / "nowhere"), "train.init_from: .*nowhere"),
                         (selfplay_run, "train.init_from: .*'s actor does not fit this config's model")):
        extra = ["--set", "model.d_model=32"] if bad == selfplay_run else []
        assert main(["train", "ConnectFour", "--run-dir", str(tmp_path / "x"), *TINY, "--set",
                     f"train.init_from={bad}", *extra]) == 2
        err = capsys.readouterr().err
        assert re.search(message, err), err
        assert not os.path.exists(tmp_path / "x")


@pytest.mark.slow
@pytest.mark.parametrize("game", ["ConnectFour", "Skirmish"])
def test_a_short_selfplay_run_of_the_bundled_config_beats_random(game, tmp_path):
    run_dir = str(tmp_path / game)
    assert main(["train", game, "--run-dir", run_dir, "--no-progress", "--set", "train.total_steps=10240",
                 "--set", "frame.n_anneal_updates=5", "--set", "selfplay.save_steps=2048",
                 "--set", "selfplay.swap_steps=512", "--set", "log.eval_interval=10240", "--set",
                 "log.eval_episodes=100", "--set", "log.eval_opponents=[random]", "--set", "log.best=random"]) == 0
    assert scalars(run_dir)["selfplay/pool_size"][-1][1] == 5
    final = json.load(open(os.path.join(run_dir, "eval.json")))[-1]
    assert final["win_rate"]["random"] >= MIN_WIN_RATE[game], final


@pytest.mark.slow
def test_selfplay_from_a_rock_thrower_moves_toward_the_uniform_throw(tmp_path):
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import bench_learning

    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import config_to_dict, load_config
    from entmachin.run.evaluation import load_trained

    data = config_to_dict(load_config(bundled_config_path("RockPaperScissorsDuel", "PPO")))
    start = str(tmp_path / "start")
    assert bench_learning.rock_thrower(data, start, 0) >= 0.8
    before = bench_learning.exploitability(bench_learning.throw_distribution(*load_trained(start)[::2]))
    run_dir = str(tmp_path / "rps")
    assert main(["train", "RockPaperScissorsDuel", "--run-dir", run_dir, "--no-progress", "--set",
                 f"train.init_from={start}", "--set", "train.total_steps=32768", "--set", "frame.n_anneal_updates=128",
                 "--set", "log.eval_interval=32768"]) == 0
    frame, _, factory = load_trained(run_dir)
    after = bench_learning.exploitability(bench_learning.throw_distribution(frame, factory))
    assert before > 0.7 and after < 0.35, (before, after)
