"""``entmachin record`` and ``entmachin relabel``: datasets from policies, rewards recomputed."""
import hashlib
import os

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from entmachin.data import Dataset, DatasetError  # noqa: E402
from entmachin.data.relabel import next_rows, relabel  # noqa: E402
from entmachin.run.cli import main  # noqa: E402

TINY = ["--set", "train.total_steps=128", "--set", "log.checkpoint_interval=64", "--set", "log.eval_interval=64",
        "--set", "log.eval_episodes=4", "--set", "rollout.num_envs=8", "--set", "rollout.n_steps=8",
        "--set", "frame.batch_size=32", "--no-progress"]


def episodes_of(rows):
    for e in np.unique(rows.episode):
        yield e, np.flatnonzero(rows.episode == e)


def test_random_play_of_minesweeper_is_recorded_episode_by_episode(tmp_path, capsys):
    out = str(tmp_path / "random")
    assert main(["record", "MineSweeper", "--policy", "random", "--episodes", "20", "-o", out, "--seed", "3",
                 "--no-progress"]) == 0
    assert "recorded 20 episodes" in capsys.readouterr().out
    dataset = Dataset(out)
    assert dataset.recorded["policy"] == "random" and dataset.recorded["seed"] == 3 and dataset.probs
    rows = dataset.read()
    assert sorted(np.unique(rows.episode)) == list(range(20))
    for _, index in episodes_of(rows):
        assert np.array_equal(rows.step[index], np.arange(len(index)))  # every step, in order
        assert rows.final[index[-1]] and not rows.final[index[:-1]].any()  # ends with its final observation
        assert rows.terminal[index[-2]] or rows.truncated[index[-2]]
        assert not (rows.terminal[index[:-2]] | rows.truncated[index[:-2]]).any()
    for name, (probs, has) in rows.probs.items():  # a random policy's probabilities: uniform over the allowed
        assert np.array_equal(has, ~rows.final)
        assert np.allclose([p.sum() for p in np.split(probs.as_array()[:, 0], np.cumsum(probs.size1())[:-1])
                            if len(p)], 1.0)
    again = str(tmp_path / "again")
    assert main(["record", "MineSweeper", "--policy", "random", "--episodes", "20", "-o", again, "--seed", "3",
                 "--no-progress"]) == 0
    assert np.array_equal(Dataset(again).read().reward, rows.reward)  # seeded: the same episodes


def test_a_game_of_two_players_is_recorded_per_seat_with_results_and_ids(tmp_path):
    out = str(tmp_path / "c4")
    assert main(["record", "ConnectFour", "--policy", "scripted", "--episodes", "6", "-o", out, "--no-progress"]) == 0
    dataset = Dataset(out)
    rows = dataset.read()
    assert dataset.seats == ["0", "1"] and not dataset.probs
    assert len(np.unique(rows.episode)) == 6
    for _, index in episodes_of(rows):
        seats = [rows.seat[i] for i in index]
        assert seats.count("0") == seats.count("1")  # one row per seat and step
        finals = [rows.result[i] for i in index if rows.final[i]]
        assert len(finals) == 2 and set(finals) <= {"win", "draw", "loss"}
    assert rows.ids and all(ids is not None for ids in next(iter(rows.ids.values())))


def test_a_runs_policy_is_recorded_with_worker_processes_and_its_probabilities(tmp_path):
    run = str(tmp_path / "run")
    assert main(["train", "MineSweeper", "--run-dir", run, *TINY]) == 0
    out = str(tmp_path / "agent")
    assert main(["record", "--policy", run, "--episodes", "8", "-o", out, "--processes", "2", "--deterministic",
                 "--no-progress"]) == 0
    rows = Dataset(out).read()
    probs, has = rows.probs["Move"]
    chosen = rows.action["Move"].as_array()[:, 0]
    per_actor = np.split(probs.as_array()[:, 0], np.cumsum(probs.size1())[:-1]) if len(chosen) else []
    assert [int(np.argmax(p)) for p in per_actor] == chosen.tolist()  # deterministic: the most likely choice


def test_bad_record_requests_are_one_line(tmp_path, capsys):
    out = str(tmp_path / "x")
    assert main(["record", "MineSweeper", "--policy", "test.data.test_record:stay", "--episodes", "2", "-o", out,
                 "--processes", "2", "--no-progress"]) == 2
    assert "--processes 0" in capsys.readouterr().err
    assert main(["record", "MineSweeper", "--policy", "nobody", "--episodes", "2", "-o", out, "--no-progress"]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert main(["record", "MineSweeper", "--policy", "scripted", "--episodes", "2", "-o", out, "--no-progress"]) == 2
    assert "no scripted policy" in capsys.readouterr().err
    assert main(["record", "MineSweeper", "--policy", "random", "--episodes", "2", "-o", out, "--no-progress"]) == 0
    assert main(["record", "MineSweeper", "--policy", "random", "--episodes", "2", "-o", out, "--no-progress"]) == 2
    assert "already holds a dataset" in capsys.readouterr().err


def stay(observation, action_space, rng):
    """A function policy for the tests (never called with worker processes)."""
    return {}


def mines_left(rows):
    """A reward function: minus the mines left after the step."""
    return -np.array(rows.next_state["entities"]["Mine"].size1(), np.float32)


def infinite(rows):
    return np.full(len(rows.reward), np.inf, np.float32)


def _digest(directory):
    h = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            h.update(name.encode() + f.read())
    return h.hexdigest()


def test_relabel_recomputes_rewards_into_a_new_dataset(tmp_path, capsys):
    source = str(tmp_path / "source")
    assert main(["record", "MineSweeper", "--policy", "random", "--episodes", "10", "-o", source,
                 "--no-progress"]) == 0
    before = _digest(source)
    out = str(tmp_path / "relabelled")
    assert main(["relabel", source, "--reward", "test.data.test_record:mines_left", "-o", out]) == 0
    assert "relabelled" in capsys.readouterr().out
    original, new = Dataset(source).read(), Dataset(out).read()
    mines_after = new.take(next_rows(new)).entities["Mine"].size1()
    assert np.array_equal(new.reward[~new.final], -mines_after[~new.final].astype(np.float32))
    assert (new.reward[new.final] == 0).all()
    assert np.array_equal(new.episode, original.episode) and new.probs.keys() == original.probs.keys()
    assert Dataset(out).recorded["relabelled"]["reward"] == "test.data.test_record:mines_left"
    assert _digest(source) == before  # the original is untouched

    bad = str(tmp_path / "bad")
    with pytest.raises(DatasetError, match=r"part-00000.parquet returned inf for row 0 \(episode \d+, step 0\)"):
        relabel(source, bad, infinite, "infinite")
    assert not os.path.exists(bad)  # nothing half-written stays
    with pytest.raises(DatasetError, match="another directory than the source"):
        relabel(source, source, mines_left)
    assert _digest(source) == before
