"""`entmachin league`: every checkpoint of some runs against every other and random, rated by Elo."""
import json
import logging
import os
import shutil

import pytest

from entmachin.frame.checkpoint_files import manifest_versions, remove_version
from entmachin.run.cli import main

TINY = ["--set", "train.total_steps=256", "--set", "log.checkpoint_interval=64", "--set", "log.eval_interval=256",
        "--set", "log.eval_episodes=4", "--set", "log.keep_checkpoints=null", "--set", "rollout.num_envs=8",
        "--set", "rollout.n_steps=8", "--set", "frame.batch_size=64", "--set", "model.d_model=16",
        "--set", "model.n_layer=1", "--no-progress"]
VERSIONS = [64, 128, 192, 256]


@pytest.fixture(scope="module")
def duel_run(tmp_path_factory):
    """A RockPaperScissorsDuel run with a checkpoint every 64 environment steps."""
    directory = str(tmp_path_factory.mktemp("runs") / "duel")
    assert main(["train", "RockPaperScissorsDuel", "--run-dir", directory, *TINY]) == 0
    assert manifest_versions(os.path.join(directory, "checkpoints")) == VERSIONS
    return directory


def copy_run(run_dir, directory, env_name=None):
    shutil.copytree(run_dir, directory)
    if env_name is not None:
        path = os.path.join(directory, "config.yaml")
        text = open(path).read()
        assert "name: RockPaperScissorsDuel" in text
        open(path, "w").write(text.replace("name: RockPaperScissorsDuel", f"name: {env_name}"))
    return directory


def table_of(out):
    """The printed table's rows: player -> (env steps, Elo, games, score)."""
    lines = out.strip().splitlines()
    assert lines[0].split() == ["player", "env", "steps", "Elo", "games", "score"], lines
    return {row[0]: tuple(row[1:]) for row in (line.split() for line in lines[1:-1])}


def test_the_league_prints_its_table_best_first_and_writes_json_and_png(duel_run, tmp_path, capsys):
    other = copy_run(duel_run, str(tmp_path / "again"))
    out = str(tmp_path / "league")
    assert main(["league", duel_run, other, "--games", "6", "--out", out]) == 0
    printed = capsys.readouterr().out
    rows = table_of(printed)
    names = {f"{run}@{v}" for run in ("duel", "again") for v in VERSIONS} | {"random"}
    assert set(rows) == names
    elos = [float(row[1]) for row in rows.values()]
    assert elos == sorted(elos, reverse=True)
    assert rows["random"][:3] == ("-", "1200", str(8 * 6)) and rows["duel@192"][0] == "192"
    assert "36 pairs of players, 6 games each" in printed.splitlines()[-1]

    record = json.load(open(os.path.join(out, "league.json")))
    assert record["settings"] == {"runs": [duel_run, other], "env": "RockPaperScissorsDuel", "games": 6,
                                  "seed": 1_000_003, "deterministic": False}  # train.seed 0's evaluation seed
    players = {p["name"]: p for p in record["players"]}
    assert set(players) == names and players["random"]["elo"] == 1200.0
    assert players["again@128"]["run"] == other and players["again@128"]["env_steps"] == 128
    assert all(p["wins"] + p["draws"] + p["losses"] == 48 for p in players.values())
    assert len(record["pairs"]) == 36 and all(sum(pair[k] for k in ("wins", "draws", "losses")) == 6
                                              for pair in record["pairs"])
    with open(os.path.join(out, "league.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_same_seed_gives_the_same_table_written_in_the_first_run_by_default(duel_run, capsys):
    tables = []
    for _ in range(2):
        assert main(["league", duel_run, "--games", "8", "--seed", "3"]) == 0  # both sides sampling
        tables.append(capsys.readouterr().out)
        with open(os.path.join(duel_run, "league.json")) as f:
            assert json.load(f)["settings"]["seed"] == 3
    assert tables[0] == tables[1]


def test_runs_of_one_name_are_told_apart_and_a_single_checkpoint_is_warned_of(duel_run, tmp_path, capsys, caplog):
    first = copy_run(duel_run, str(tmp_path / "seed0" / "duel"))
    second = copy_run(duel_run, str(tmp_path / "seed1" / "duel"))
    for version in VERSIONS[:-1]:
        remove_version(os.path.join(second, "checkpoints"), version)
    with caplog.at_level(logging.WARNING, logger="entmachin"):
        assert main(["league", first, second, "--games", "2", "--deterministic", "--out", str(tmp_path)]) == 0
    assert set(table_of(capsys.readouterr().out)) == {f"seed0/duel@{v}" for v in VERSIONS} | {"seed1/duel@256",
                                                                                               "random"}
    assert json.load(open(tmp_path / "league.json"))["settings"]["deterministic"] is True
    assert "seed1/duel has one checkpoint (version 256)" in caplog.text
    assert "log.keep_checkpoints checkpoints (null here" in caplog.text


def error_of(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_bad_input_is_refused_in_one_line_naming_the_run(duel_run, tmp_path, capsys):
    empty = str(tmp_path / "empty")
    os.makedirs(empty)
    assert "empty' holds no config.yaml" in error_of(capsys, ["league", empty])
    unsaved = str(tmp_path / "unsaved")
    os.makedirs(unsaved)
    shutil.copy(os.path.join(duel_run, "config.yaml"), unsaved)
    assert "unsaved' holds no checkpoint" in error_of(capsys, ["league", duel_run, unsaved])
    assert "--games: expected an int >= 1, got 0" in error_of(capsys, ["league", duel_run, "--games", "0"])
    connect = copy_run(duel_run, str(tmp_path / "connect"), "ConnectFour")
    err = error_of(capsys, ["league", duel_run, connect])
    assert "connect' trains ConnectFour" in err and "trains RockPaperScissorsDuel" in err, err
    count = copy_run(duel_run, str(tmp_path / "count"), "Count")
    assert "count' trains Count, which has one player" in error_of(capsys, ["league", count, duel_run])
    assert "named twice" in error_of(capsys, ["league", duel_run, os.path.join(duel_run, "checkpoints")])


def test_load_trained_loads_a_given_version_and_names_the_versions_it_holds(duel_run):
    from entmachin.run.evaluation import load_trained
    from entmachin.run.logs import RunError

    frame, _, _ = load_trained(duel_run, version=128)
    assert frame is not None
    with pytest.raises(RunError, match=r"no checkpoint of version 100; it holds \[64, 128, 192, 256\]"):
        load_trained(duel_run, version=100)
