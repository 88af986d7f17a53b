"""``entmachin record`` and ``entmachin relabel``: datasets from policies, rewards recomputed."""
import hashlib
import os

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from entmachin.data import Dataset, DatasetError  # noqa: E402
from entmachin.data.relabel import next_rows, relabel  # noqa: E402
from entmachin.run.cli import main  # noqa: E402
from entmachin.run.record import record  # noqa: E402

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


@pytest.mark.usefixtures("one_thread")
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


# ---------------------------------------------------------------------------- continuous actions

def acting_rows(rows):
    return rows.take(np.flatnonzero(~rows.final))


def assert_within_bounds(rows, name, width):
    """Every recorded value is float32, ``width`` a row, inside its actor's bounds; final rows have none."""
    values = rows.action[name]
    assert values.as_array().dtype == np.float32 and values.size2() == width
    assert (values.size1()[rows.final] == 0).all()
    acting = acting_rows(rows)
    assert np.array_equal(acting.action[name].size1(), acting.masks[name]["actors"].size1())  # every actor acted
    v = acting.action[name].as_array()
    assert ((v >= acting.masks[name]["low"].as_array()) & (v <= acting.masks[name]["high"].as_array())).all()


def test_random_and_scripted_steering_is_recorded_as_float_values(tmp_path, capsys):
    returns = {}
    for policy in ("random", "scripted"):
        out = str(tmp_path / policy)
        assert main(["record", "Vehicles", "--policy", policy, "--episodes", "6", "-o", out, "--seed", "1",
                     "--no-progress"]) == 0
        returns[policy] = float(capsys.readouterr().out.rsplit("mean return ", 1)[1].split()[0])
        dataset = Dataset(out)
        rows = dataset.read()
        assert not dataset.probs and rows.probs == {}  # a continuous action has no table of choices
        assert len(np.unique(rows.episode)) == 6
        assert_within_bounds(rows, "drive", 2)
    assert returns["scripted"] > returns["random"] + 0.5
    again = str(tmp_path / "again")
    assert main(["record", "Vehicles", "--policy", "random", "--episodes", "6", "-o", again, "--seed", "1",
                 "--no-progress"]) == 0
    first, second = Dataset(str(tmp_path / "random")).read(), Dataset(again).read()
    assert np.array_equal(first.action["drive"].as_array().view(np.uint32),
                          second.action["drive"].as_array().view(np.uint32))  # seeded: the same values


def test_random_play_of_a_mixed_space_records_the_discrete_actions_probabilities_only(tmp_path):
    out = str(tmp_path / "turrets")
    assert main(["record", "Turrets", "--policy", "random", "--episodes", "5", "-o", out, "--no-progress"]) == 0
    dataset = Dataset(out)
    rows = dataset.read()
    assert dataset.probs and set(rows.probs) == {"trigger"}
    assert_within_bounds(rows, "aim", 1)
    probs, has = rows.probs["trigger"]
    assert np.array_equal(has, ~rows.final)
    per_actor = np.split(probs.as_array()[:, 0], np.cumsum(probs.size1())[:-1])
    assert np.allclose([p.sum() for p in per_actor], 1.0)


@pytest.mark.usefixtures("one_thread")
def test_a_runs_policy_records_continuous_values_from_its_forward_pass(tmp_path):
    import torch

    from entmachin.model.wrappers import unwrap
    from entmachin.run.evaluation import load_trained

    run = str(tmp_path / "run")
    assert main(["train", "Turrets", "--run-dir", run, *TINY]) == 0
    recorded = {}
    for name, extra in (("det", ["--deterministic"]), ("s0", ["--seed", "0"]), ("s0_again", ["--seed", "0"]),
                        ("s1", ["--seed", "1"])):
        out = str(tmp_path / name)
        assert main(["record", "--policy", run, "--episodes", "4", "-o", out, "--num-envs", "4", *extra,
                     "--no-progress"]) == 0
        recorded[name] = Dataset(out)
    assert all(d.probs for d in recorded.values())  # the discrete action's table is recorded
    rows = recorded["det"].read()
    assert set(rows.probs) == {"trigger"}
    assert_within_bounds(rows, "aim", 1)
    acting = acting_rows(rows)
    probs = acting.probs["trigger"][0]
    per_actor = np.split(probs.as_array()[:, 0], np.cumsum(probs.size1())[:-1])
    assert [int(np.argmax(p)) for p in per_actor] == acting.action["trigger"].as_array()[:, 0].tolist()
    net = unwrap(load_trained(run)[0].actor)
    state = acting.state()
    with torch.no_grad():  # deterministic: the head's deterministic point in each actor's bounds
        point = net(state["entities"], {"aim": state["action_masks"]["aim"]}, deterministic=True).action["aim"]
    assert np.allclose(acting.action["aim"].as_array(), point.data.numpy(), atol=1e-5)
    values = {name: recorded[name].read().action["aim"].as_array() for name in ("s0", "s0_again", "s1")}
    assert np.array_equal(values["s0"], values["s0_again"])  # sampled, seeded by --seed
    assert not np.array_equal(values["s0"][:10], values["s1"][:10])


def throttle_reward(rows):
    """A reward function of continuous values: the mean throttle of the step's vehicles."""
    values = rows.action["drive"]
    per_row = np.split(values.as_array()[:, 1], np.cumsum(values.size1())[:-1])
    return np.array([v.mean() if len(v) else 0.0 for v in per_row], np.float32)


def test_relabel_reads_and_keeps_continuous_values(tmp_path):
    source, out = str(tmp_path / "source"), str(tmp_path / "relabelled")
    assert main(["record", "Vehicles", "--policy", "random", "--episodes", "3", "-o", source, "--no-progress"]) == 0
    assert main(["relabel", source, "--reward", "test.data.test_record:throttle_reward", "-o", out]) == 0
    original, new = Dataset(source).read(), Dataset(out).read()
    assert np.array_equal(new.action["drive"].as_array().view(np.uint32),
                          original.action["drive"].as_array().view(np.uint32))
    acting = ~new.final
    assert np.allclose(new.reward[acting], throttle_reward(new.take(np.flatnonzero(acting)))) and not Dataset(out).probs


def test_the_mean_return_is_the_recorded_episodes(tmp_path):
    """Rows that start a second episode while the last recorded ones run are not recorded, and
    their returns are not in the mean either."""
    result = record("MineSweeper", "random", 6, str(tmp_path / "random"), seed=1, progress=False)
    rows = Dataset(str(tmp_path / "random")).read()
    stored = [float(rows.reward[index].sum()) for _, index in episodes_of(rows)]
    assert len(stored) == 6 and len(set(stored)) > 1
    assert result.mean_return == pytest.approx(np.mean(stored))


def _per_entity_frame():
    """A Conveyor policy keeping a state per item id, its states made to move its choices."""
    import torch

    from entmachin.env.examples import Conveyor
    from entmachin.frame import PPO
    from entmachin.model.config import MemoryConfig, RogueNetConfig
    from entmachin.model.rogue_net import RogueNet

    torch.manual_seed(0)
    env = Conveyor()
    net = RogueNet(env.obs_space(), env.action_space(),
                   RogueNetConfig(d_model=16, n_layer=1, memory=MemoryConfig(size=8, per_entity=True)))
    # the cores' projections are zero at first (a fresh network acts as the feed-forward one), and a fresh head's
    # choices are near even: drawn larger, an item's state moves its most likely choice
    for p in [*net.memory.parameters(), *net.entity_memory.parameters(), *net.heads.parameters()]:
        torch.nn.init.normal_(p, std=1.0)
    return PPO(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss())


def test_recording_a_policy_with_per_entity_memory_carries_each_rows_entity_states_through_its_episodes(
        tmp_path, monkeypatch):
    """The recorded probabilities of a Conveyor policy keeping a state per item are those of a step-by-step
    replay of each episode from its start, carrying its row state and its items' states by the recorded ids (three
    rows recorded together; each episode's items reuse the ids 1, 2, ..., so a state not dropped at an episode's
    end would show)."""
    from types import SimpleNamespace

    import torch

    from entmachin.frame.entity_memory import EntityRows
    from entmachin.frame.memory import MemoryRows
    from entmachin.run import evaluation
    from entmachin.run.cloning import episode_order
    from entmachin.run.logs import RunError

    frame = _per_entity_frame()
    net = frame.actor
    monkeypatch.setattr(evaluation, "load_trained", lambda *args: (frame, None, None))
    with pytest.raises(RunError, match=r"model.memory.per_entity\), and worker processes pass no ids; .*--processes 0"):
        record("Conveyor", str(tmp_path), 2, str(tmp_path / "x"), processes=2, progress=False)
    out = str(tmp_path / "data")
    record("Conveyor", str(tmp_path), 6, out, num_envs=3, progress=False)
    rows = Dataset(out).read()
    order, ids = episode_order(rows, np.flatnonzero(~rows.final), "test")
    compared = 0
    for place, r in enumerate(order):
        if place == 0 or ids[place] != ids[place - 1]:
            carried, items = MemoryRows(net.memory_size, 1), EntityRows(net.entity_memory_size, 1, ["Item"])
        one = rows.take(np.array([r]))
        state = one.state()
        seen = SimpleNamespace(ids=[{"Item": rows.ids["Item"][r]}], features=state["entities"])
        with torch.no_grad():
            tables, _, after = net.probabilities_values_and_memory(
                state["entities"], state["action_masks"], None, carried.memory, carried.episode_start,
                entity_memory=items.entries(seen)["entity_memory"])
        carried.advance(after, np.array([False]))
        items.keep(after)
        if tables["sort"].data.shape[0]:
            recorded = one.probs["sort"][0].as_array()[:, 0]
            np.testing.assert_allclose(tables["sort"].data[0].numpy(), recorded, atol=1e-5)
            compared += 1
    assert compared == 6 * 4  # four items sorted an episode


def test_a_recorded_per_entity_policy_scores_the_returns_evaluation_gives_for_its_seed(tmp_path, monkeypatch):
    """Recorded with --deterministic, the episodes of a seed score what evaluation (which carries the states as
    the collector does) gives for that seed; items' states not kept, or not dropped at episodes' ends, score
    otherwise here."""
    from entmachin.frame.evaluate import evaluate
    from entmachin.run import evaluation
    from entmachin.run.envs import EnvFactory
    from entmachin.run.record import _env_section

    frame = _per_entity_frame()
    monkeypatch.setattr(evaluation, "load_trained", lambda *args: (frame, None, None))
    out = str(tmp_path / "data")
    record("Conveyor", str(tmp_path), 8, out, seed=3, num_envs=4, deterministic=True, progress=False)
    rows = Dataset(out).read()
    recorded = sorted(float(rows.reward[index].sum()) for _, index in episodes_of(rows))
    evaluated = evaluate(frame, EnvFactory(_env_section("Conveyor", "random")), 8, True, seed=3, num_envs=4)
    assert len(recorded) == 8 and recorded == pytest.approx(sorted(evaluated.returns))
