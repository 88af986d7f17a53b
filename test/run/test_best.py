"""``log.best``: a run keeps the networks of its best evaluation in checkpoints/best, resume keeps and checks
it, and eval, export, record, play, league and verify take it."""
import glob
import hashlib
import io
import json
import os
import shutil
import sys

import pytest

from entmachin.run.best import candidate, improves
from entmachin.run.cli import main
from entmachin.run.config import ConfigError, config_from_dict
from entmachin.run.matches import MatchResult

TINY = ["--set", "log.checkpoint_interval=128", "--set", "log.eval_interval=64", "--set", "log.eval_episodes=4",
        "--set", "rollout.num_envs=8", "--set", "rollout.n_steps=8", "--set", "frame.batch_size=64",
        "--set", "model.d_model=16", "--set", "log.eval_opponents=[random, scripted]", "--no-progress"]
BEST = ["--set", "log.best=scripted", "--set", "log.keep_checkpoints=1"]
# The scripted opponent's win rates the evaluations at 64, 128, 192 and 256 steps report (the games are real,
# these figures stand in for theirs so that the choice is known): the best is 128's; 192's tie keeps it.
RATES = {64: 0.5, 128: 0.75, 192: 0.75, 256: 0.25}


def with_rates(monkeypatch, rates):
    """Makes the runner's evaluations against ``scripted`` report ``rates`` (env steps -> win rate)."""
    import entmachin.run.callbacks.evaluations as runner

    real = runner.match
    steps = iter(sorted(rates))

    def match(frame, factory, opponent, games, deterministic, seed):
        if opponent != "scripted":
            return real(frame, factory, opponent, games, deterministic, seed)
        wins = round(rates[next(steps)] * games)
        return MatchResult(wins, 0, games - wins)

    monkeypatch.setattr(runner, "match", match)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("best") / "duel")
    with pytest.MonkeyPatch.context() as monkeypatch:
        with_rates(monkeypatch, RATES)
        assert main(["train", "RockPaperScissorsDuel", "--run-dir", directory, "--set", "train.total_steps=256",
                     *TINY, *BEST]) == 0
    return directory


def files(directory):
    """Every file under ``directory`` with its bytes."""
    return {p: open(p, "rb").read() for p in sorted(glob.glob(os.path.join(directory, "**"), recursive=True))
            if os.path.isfile(p)}


def best_record(run_dir):
    directory = os.path.join(run_dir, "checkpoints", "best")
    manifests = glob.glob(os.path.join(directory, "checkpoint_*.json"))
    assert len(manifests) == 1, manifests
    manifest = json.load(open(manifests[0]))
    return json.load(open(os.path.join(directory, manifest["files"]["runner"]["file"])))["best"]


def test_the_best_is_the_first_strictly_highest_figure():
    records = [{"env_steps": s, "mean": 0.0, "win_rate": {"scripted": r}} for s, r in RATES.items()]
    best = None
    for record in records:
        if improves(new := candidate(record, "scripted"), best):
            best = new
    assert best == {"env_steps": 128, "figure": "scripted", "value": 0.75}
    assert candidate({"env_steps": 1, "mean": float("nan")}, "return") is None  # never chosen
    assert improves(candidate(records[0], "random"), best) is False  # no win rate against random recorded


def test_a_run_keeps_one_best_checkpoint_beside_the_latest(run_dir):
    assert best_record(run_dir) == {"env_steps": 128, "figure": "scripted", "value": 0.75}
    assert sorted(os.listdir(os.path.join(run_dir, "checkpoints", "best")))[0].startswith("actor_128.")
    # keep_checkpoints: 1 kept the latest regular checkpoint only, and left the best alone
    assert glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint_*.json")) == \
        [os.path.join(run_dir, "checkpoints", "checkpoint_256.json")]
    state = json.load(open(glob.glob(os.path.join(run_dir, "checkpoints", "runner_256.*"))[0]))
    assert state["best"] == best_record(run_dir)


def test_a_resumed_run_keeps_its_best_so_far(run_dir, tmp_path, monkeypatch):
    copy = str(tmp_path / "again")
    shutil.copytree(run_dir, copy)
    before = files(os.path.join(copy, "checkpoints", "best"))
    with_rates(monkeypatch, {320: 0.75, 384: 0.5})  # a tie and a worse one: 128's stays
    assert main(["train", "--resume", copy, "--set", "train.total_steps=384", "--no-progress"]) == 0
    assert files(os.path.join(copy, "checkpoints", "best")) == before
    with_rates(monkeypatch, {448: 1.0, 512: 0.5})
    assert main(["train", "--resume", copy, "--set", "train.total_steps=512", "--no-progress"]) == 0
    assert best_record(copy) == {"env_steps": 448, "figure": "scripted", "value": 1.0}


def test_a_damaged_or_missing_best_stops_resume_naming_it_and_changes_nothing(run_dir, tmp_path, capsys):
    copy = str(tmp_path / "damaged")
    shutil.copytree(run_dir, copy)
    best = os.path.join(copy, "checkpoints", "best")
    manifest_path = os.path.join(best, "checkpoint_128.json")
    manifest = json.load(open(manifest_path))
    actor = os.path.join(best, manifest["files"]["actor"]["file"])
    for damage in ("bytes", "content"):
        data = b"not a network" if damage == "content" else open(actor, "rb").read()[:-7]
        if damage == "content":  # a consistent manifest: only decoding the file can tell
            manifest["files"]["actor"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
            with open(manifest_path, "w") as f:
                json.dump(manifest, f)
        with open(actor, "wb") as f:
            f.write(data)
        before = files(copy)
        assert main(["train", "--resume", copy, "--set", "train.total_steps=384", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "the best checkpoint is damaged" in err and os.path.basename(actor) in err, err
        assert files(copy) == before
    shutil.rmtree(best)
    before = files(copy)
    assert main(["train", "--resume", copy, "--set", "train.total_steps=384", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "records a best checkpoint of 128 steps" in err and "checkpoints/best' holds none" in err, err
    assert files(copy) == before


def test_best_must_name_an_evaluation_opponent_or_return():
    with pytest.raises(ConfigError, match=r"log.best: 'scripted' is not one of eval_opponents \['random'\]"):
        config_from_dict({"log": {"eval_opponents": ["random"], "best": "scripted"}})
    assert config_from_dict({"log": {"best": "return"}}).log.best == "return"


def test_opponents_the_game_lacks_are_refused_before_the_run_directory_is_touched(run_dir, tmp_path, capsys):
    new = str(tmp_path / "arena")
    assert main(["train", "test.env.arena:Arena", "--run-dir", new, "--set", "log.eval_opponents=[scripted]",
                 "--set", "log.best=scripted", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "log.eval_opponents and log.best: --opponent scripted: test.env.arena:Arena has no scripted_opponent" in err, err
    assert not os.path.exists(new)
    copy = str(tmp_path / "kept")  # --force over a run: the old run is still there after the refusal
    shutil.copytree(run_dir, copy)
    before = files(copy)
    for opponent, best, message in (("nobody", "nobody", "log.eval_opponents and log.best: --opponent 'nobody': "
                                     "not a run directory"), ("random", "return", "log.best: return is a one-player "
                                                             "figure; RockPaperScissorsDuel is a game")):
        assert main(["train", "RockPaperScissorsDuel", "--run-dir", copy, "--force", "--set",
                     f"log.eval_opponents=[{opponent}]", "--set", f"log.best={best}", "--no-progress"]) == 2
        assert message in capsys.readouterr().err
        assert files(copy) == before


def test_eval_export_record_play_and_league_take_the_best(run_dir, tmp_path, monkeypatch, capsys):
    assert main(["eval", run_dir, "--checkpoint", "best", "--opponent", "scripted", "--episodes", "20",
                 "--seed", "3000017"]) == 0
    out = capsys.readouterr().out
    assert "games 20" in out and "the best checkpoint (128 steps, win rate against scripted 0.750" in out, out
    assert main(["eval", run_dir, "--checkpoint", "best", "--episodes", "4"]) == 0
    assert "the best checkpoint (128 steps" in capsys.readouterr().out
    out_file = str(tmp_path / "best.onnx")
    assert main(["export", run_dir, "--checkpoint", "best", "-o", out_file]) == 0
    from entmachin.deploy import OnnxPolicy

    metadata = OnnxPolicy(out_file).metadata
    assert metadata["env_steps"] == 128 and metadata["checkpoint"] == "best"
    data = str(tmp_path / "data")
    assert main(["record", "--policy", run_dir, "--checkpoint", "best", "--episodes", "2", "-o", data,
                 "--no-progress"]) == 0
    assert json.load(open(os.path.join(data, "dataset.json")))["recorded"]["checkpoint"] == "best"
    monkeypatch.setattr(sys, "stdin", io.StringIO("q\n"))
    assert main(["play", "--checkpoint", os.path.join(run_dir, "checkpoints", "best"), "--seed", "0"]) == 0
    assert "checkpoints/best" in capsys.readouterr().out
    league = str(tmp_path / "league")
    assert main(["league", run_dir, "--best", "--games", "2", "--out", league]) == 0
    players = {p["name"]: p for p in json.load(open(os.path.join(league, "league.json")))["players"]}
    assert players["duel@best"]["env_steps"] == 128 and players["duel@best"]["best"] is True
    assert set(players) == {"random", "duel@256", "duel@best"}


def test_a_run_without_a_best_says_so(run_dir, tmp_path, capsys):
    copy = str(tmp_path / "nobest")
    shutil.copytree(run_dir, copy)
    shutil.rmtree(os.path.join(copy, "checkpoints", "best"))
    assert main(["eval", copy, "--checkpoint", "best"]) == 2
    assert "has no best checkpoint" in capsys.readouterr().err
    assert main(["league", copy, "--best", "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert "--best:" in err and "has no best checkpoint" in err, err
    with pytest.raises(SystemExit, match="2"):  # argparse refuses it
        main(["eval", copy, "--checkpoint", "soon"])
    assert "expected a checkpoint's environment steps or 'best'" in capsys.readouterr().err


def test_verify_checks_the_best_checkpoint(run_dir, tmp_path, capsys):
    assert main(["verify", run_dir]) == 0
    assert os.path.join("checkpoints", "best", "checkpoint_128.json") + ": its 4 files match" in \
        capsys.readouterr().out
    copy = str(tmp_path / "verify")
    shutil.copytree(run_dir, copy)
    critic = glob.glob(os.path.join(copy, "checkpoints", "best", "critic_128.*"))[0]
    data = bytearray(open(critic, "rb").read())
    data[100] ^= 0xFF
    open(critic, "wb").write(bytes(data))
    assert main(["verify", copy]) == 1
    assert f"FAILED  {critic}: the file is damaged" in capsys.readouterr().out
