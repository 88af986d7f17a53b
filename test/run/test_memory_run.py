"""A run config with ``model.memory``: what it trains with, what it refuses by name, and resume."""
import pytest
import torch

from entmachin.run import train
from entmachin.run.commands import resolve_train_config
from entmachin.run.config import ConfigError, config_from_dict, config_to_dict
from entmachin.run.fingerprint import fingerprint, learning_settings

RECALL = {"env": {"name": "Recall"}, "model": {"critic": "shared", "memory": {"kind": "gru", "size": 8}},
          "frame": {"name": "PPO", "batch_size": 40, "sequence_length": 5},
          "rollout": {"num_envs": 4, "n_steps": 10}}


def _fingerprint(config):
    return fingerprint(learning_settings(config_to_dict(config), continuous_actions=False))


def _config(**changes):
    data = {k: dict(v) for k, v in RECALL.items()}
    for path, value in changes.items():
        section, key = path.split("__")
        if value is None and key in data.get(section, {}):
            del data[section][key]
        else:
            data.setdefault(section, {})[key] = value
    return data


def test_the_bundled_recall_config_loads_with_memory():
    config = resolve_train_config("Recall")
    assert config.model.memory.kind == "gru" and config.frame.settings.sequence_length == 5
    without = config_from_dict({**_config(model__memory=None), "frame": {"name": "PPO"}})
    assert _fingerprint(config) != _fingerprint(without)  # memory changes what a run learns


@pytest.mark.parametrize("changes, message", [
    ({"frame__name": "DQN", "frame__sequence_length": None, "frame__batch_size": None},
     "model.memory: DQN takes single transitions"),
    ({"model__critic": "separate"}, "model.critic: separate, but a network with memory"),
    ({"frame__sequence_length": 3}, r"frame.sequence_length: 3 does not divide rollout.n_steps \(10\)"),
    ({"model__memory": None}, "frame.sequence_length: 5, but model.memory is null"),
    ({"model__memory": {"kind": "gru", "per_entity": True}, "rollout__processes": 2},
     "rollout.processes: 2, but model.memory.per_entity keeps its states by the entities' ids"),
    ({"model__memory": {"kind": "rnn"}}, "model.memory.kind: expected one of"),
    ({"rollout__symmetries": ["mirror_x"]}, "rollout.symmetries stores images"),
    ({"rollout__overlap": True, "rollout__processes": 2}, "rollout.overlap: true, but the network's memory"),
    ({"frame__burn_in": 6}, r"frame.burn_in: 6 steps before a sequence, but a rollout of 10 steps in sequences of 5 "
                            r"has at most 5 before its last sequence"),
    ({"frame__burn_in": 2, "frame__sequence_length": None}, "frame.sequence_length is null: each rollout is one"),
    ({"frame__burn_in": 2, "frame__sequence_length": None, "model__memory": None},
     "frame.burn_in: 2, but model.memory is null"),
])
def test_what_does_not_go_with_memory_is_refused_by_its_setting(changes, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(_config(**changes))


def test_burn_in_trains(tmp_path):
    frame = train(_config(frame__burn_in=5), overrides=["train.total_steps=80", "log.eval_interval=80",
                                                        "log.eval_episodes=2"], progress=False, run_dir=str(tmp_path))
    assert frame.config.burn_in == 5 and frame.n_updates == 2


def test_a_resumed_run_continues_with_the_states_its_rows_had(tmp_path):
    """A run stopped at a checkpoint and resumed trains as the uninterrupted one: the rows' recurrent states
    are part of the collector's snapshot (3-step episodes: the checkpoint falls inside episodes)."""
    settings = ["env.kwargs.delay=2", "train.total_steps=80", "log.checkpoint_interval=40", "log.eval_interval=80",
                "log.eval_episodes=4", "frame.n_anneal_updates=null", "train.seed=3"]
    whole = train(_config(), overrides=settings, progress=False, run_dir=str(tmp_path / "whole"))
    half = [s if not s.startswith("train.total_steps") else "train.total_steps=40" for s in settings]
    train(_config(), overrides=half, progress=False, run_dir=str(tmp_path / "halves"))
    resumed = train(resume=str(tmp_path / "halves"), overrides=["train.total_steps=80"], progress=False)
    for a, b in zip(whole.actor.state_dict().values(), resumed.actor.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_an_exported_run_with_memory_evaluates_as_the_run_does(tmp_path):
    """``entmachin export`` writes the state as the graph's input and output; the deployed policy keeps it per
    row and gives the returns ``entmachin eval --deterministic`` gives (the checkpoint, carried by the frame)."""
    pytest.importorskip("onnxruntime")
    from entmachin.deploy import OnnxPolicy
    from entmachin.env.examples import Recall
    from entmachin.run.evaluation import evaluate_checkpoint
    from entmachin.run.export import export_run

    run_dir = str(tmp_path / "run")
    train(_config(), overrides=["train.total_steps=2000", "log.eval_interval=2000", "log.eval_episodes=2"],
          progress=False, run_dir=run_dir)
    result = export_run(run_dir)
    policy = OnnxPolicy(result.path)
    assert policy.memory_size == 8
    ours = evaluate_checkpoint(run_dir, 40, True, 0)
    deployed = policy.evaluate(Recall, 40, True, seed=0)
    assert deployed.returns == ours.returns


def test_init_from_a_run_whose_state_has_another_size_names_both(tmp_path):
    from entmachin.run.logs import RunError

    source = str(tmp_path / "source")
    train(_config(), overrides=["train.total_steps=40", "log.eval_interval=40", "log.eval_episodes=2"],
          progress=False, run_dir=source)
    wider = _config(model__memory={"kind": "gru", "size": 16})
    with pytest.raises(RunError, match=r"model.memory \{kind: gru, size: 8\} \(8 floats per row\), this config's "
                                       r"\{kind: gru, size: 16\}"):
        train(wider, overrides=[f"train.init_from={source}", "train.total_steps=40"], progress=False,
              run_dir=str(tmp_path / "wider"))
    plain = {**_config(model__memory=None, frame__sequence_length=None)}
    with pytest.raises(RunError, match="model.memory .* this config's null"):
        train(plain, overrides=[f"train.init_from={source}", "train.total_steps=40"], progress=False,
              run_dir=str(tmp_path / "plain"))


def test_resuming_episodes_in_progress_without_their_states_is_refused(tmp_path, monkeypatch):
    """A checkpoint whose collector snapshot lacks the states (written without them) cannot continue the
    episodes it holds: the error names the run, the checkpoint and model.memory."""
    from entmachin.frame import collector as collector_module
    from entmachin.run.logs import RunError

    run_dir = str(tmp_path / "run")
    original = collector_module.RolloutCollector.snapshot
    monkeypatch.setattr(collector_module.RolloutCollector, "snapshot",
                        lambda self: {k: v for k, v in original(self).items() if k != "memory"})
    train(_config(), overrides=["train.total_steps=40", "log.eval_interval=40", "log.eval_episodes=2",
                                "env.kwargs.delay=2"], progress=False, run_dir=run_dir)
    monkeypatch.undo()
    with pytest.raises(RunError, match=r"checkpoint 40 holds its episodes in progress but no recurrent states, "
                                       r"and the run's network has model.memory \{kind: gru, size: 8\}"):
        train(resume=run_dir, overrides=["train.total_steps=80"], progress=False)


def test_processes_auto_measures_a_network_with_memory_acting_on_its_states():
    """``rollout.processes: auto`` times the policy's forward (on machines of three cores and more): a network
    with memory is given the rows' states as acting gives them."""
    from entmachin.run.build import measure_step_costs

    env_s, act_s = measure_step_costs(config_from_dict(_config()), budget_s=0.01)
    assert env_s > 0 and act_s > 0


def test_a_game_with_memory_is_evaluated_against_its_opponents(tmp_path):
    """Two seats played by one policy with memory (selfplay.seats: all), evaluated against ``random`` in matches
    where it keeps a state per game and seat."""
    data = {"env": {"name": "ConnectFour"}, "model": {"critic": "shared", "d_model": 16,
                                                       "memory": {"kind": "lstm", "size": 8}},
            "frame": {"name": "PPO", "batch_size": 32, "sequence_length": 4},
            "rollout": {"num_envs": 4, "n_steps": 8}, "selfplay": {"seats": "all"},
            "train": {"total_steps": 64}, "log": {"eval_interval": 64, "eval_episodes": 4, "eval_opponents": ["random"]}}
    import json

    train(data, progress=False, run_dir=str(tmp_path))
    records = json.loads((tmp_path / "eval.json").read_text())
    assert records and 0.0 <= records[-1]["win_rate"]["random"] <= 1.0


CONVEYOR = {"env": {"name": "Conveyor", "kwargs": {"n_items": 2}},
            "model": {"critic": "shared", "memory": {"kind": "gru", "size": 8, "per_entity": True}},
            "frame": {"name": "PPO", "batch_size": 32, "sequence_length": 4},
            "rollout": {"num_envs": 4, "n_steps": 8, "processes": "auto"}}


def test_per_entity_memory_trains_resumes_and_evaluates_with_its_states(tmp_path):
    """A run keeping a state per item id: auto steps the environments in this process (the ids reach the
    states there); a run stopped at a checkpoint inside episodes and resumed trains as the uninterrupted one
    (the entities' states and their numbering are part of the collector's snapshot)."""
    from entmachin.run.build import decide_processes

    assert decide_processes(config_from_dict(CONVEYOR))[0] == 0
    settings = ["train.total_steps=96", "log.checkpoint_interval=48", "log.eval_interval=96", "log.eval_episodes=4",
                "frame.n_anneal_updates=null", "train.seed=3", "frame.burn_in=4"]
    whole = train(CONVEYOR, overrides=settings, progress=False, run_dir=str(tmp_path / "whole"))
    half = [s if not s.startswith("train.total_steps") else "train.total_steps=48" for s in settings]
    train(CONVEYOR, overrides=half, progress=False, run_dir=str(tmp_path / "halves"))
    resumed = train(resume=str(tmp_path / "halves"), overrides=["train.total_steps=96"], progress=False)
    assert resumed.actor.entity_memory_size == 8
    for a, b in zip(whole.actor.state_dict().values(), resumed.actor.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    _recorded_as_evaluated(str(tmp_path / "whole"), str(tmp_path / "data"))


def _recorded_as_evaluated(run_dir, out):
    """``entmachin record --policy RUN_DIR --deterministic`` scores the returns evaluation gives for its seed."""
    pytest.importorskip("pyarrow")
    import numpy as np

    from entmachin.data import Dataset
    from entmachin.frame.evaluate import evaluate
    from entmachin.run.cli import main
    from entmachin.run.evaluation import load_trained

    assert main(["record", "--policy", run_dir, "--episodes", "8", "-o", out, "--num-envs", "4", "--seed", "5",
                 "--deterministic", "--no-progress"]) == 0
    rows = Dataset(out).read()
    recorded = sorted(float(rows.reward[rows.episode == e].sum()) for e in np.unique(rows.episode))
    frame, _, factory = load_trained(run_dir)
    assert recorded == pytest.approx(sorted(evaluate(frame, factory, 8, True, seed=5, num_envs=4).returns))


def test_an_exported_run_with_per_entity_memory_evaluates_as_the_run_does(tmp_path):
    """``entmachin export`` writes each entity type's states as the graph's inputs and outputs; the deployed policy
    keeps them by the items' ids (shuffled at every step) and gives the returns ``entmachin eval --deterministic``
    gives."""
    pytest.importorskip("onnxruntime")
    from entmachin.deploy import OnnxPolicy
    from entmachin.env.examples import Conveyor
    from entmachin.run.evaluation import evaluate_checkpoint
    from entmachin.run.export import export_run

    run_dir = str(tmp_path / "run")
    train(CONVEYOR, overrides=["train.total_steps=2048", "log.eval_interval=2048", "log.eval_episodes=2"],
          progress=False, run_dir=run_dir)
    policy = OnnxPolicy(export_run(run_dir).path)
    assert policy.entity_memory_size == 8 and policy.metadata["entity_memory"] == {"state_size": 8}
    ours = evaluate_checkpoint(run_dir, 40, True, 0)
    assert ours.mean > 0.6  # beyond the feed-forward bound (0.5): the returns depend on the items' states
    deployed = policy.evaluate(lambda: Conveyor(n_items=2), 40, True, seed=0)
    assert deployed.returns == ours.returns


def test_what_does_not_carry_per_entity_states_yet_is_refused_by_name(tmp_path, monkeypatch):
    from entmachin.frame import collector as collector_module
    from entmachin.run.logs import RunError

    with pytest.raises(ConfigError, match="rollout.processes: 2, but model.memory.per_entity keeps its states by"):
        config_from_dict({**CONVEYOR, "rollout": {**CONVEYOR["rollout"], "processes": 2}})
    config_from_dict({**CONVEYOR, "env": {"name": "Skirmish"}, "selfplay": {"seats": "random"}})  # self-play carries them
    run_dir = str(tmp_path / "run")
    original = collector_module.RolloutCollector.snapshot
    monkeypatch.setattr(collector_module.RolloutCollector, "snapshot",
                        lambda self: {k: v for k, v in original(self).items() if k != "entity_memory"})
    train(CONVEYOR, overrides=["train.total_steps=40", "log.eval_interval=40", "log.eval_episodes=2",
                                       "rollout.n_steps=10", "frame.sequence_length=5"], progress=False,
                  run_dir=run_dir)
    monkeypatch.undo()
    with pytest.raises(RunError, match=r"checkpoint 40 holds its episodes in progress but no per-entity states, "
                                       r"and the run's network has model.memory \{kind: gru, size: 8, per_entity"):
        train(resume=run_dir, overrides=["train.total_steps=96"], progress=False)


def test_init_from_a_run_with_or_without_per_entity_states_names_both(tmp_path):
    from entmachin.run.logs import RunError

    source = str(tmp_path / "source")
    train(CONVEYOR, overrides=["train.total_steps=32", "log.eval_interval=32", "log.eval_episodes=2"],
          progress=False, run_dir=source)
    rows_only = {**CONVEYOR, "model": {**CONVEYOR["model"], "memory": {"kind": "gru", "size": 8}}}
    with pytest.raises(RunError, match=r"model.memory \{kind: gru, size: 8, per_entity: true\} \(8 floats per row "
                                       r"and 8 per entity\), this config's \{kind: gru, size: 8\} \(8 floats per row\)"):
        train(rows_only, overrides=[f"train.init_from={source}", "train.total_steps=32"], progress=False,
              run_dir=str(tmp_path / "rows"))


def test_a_game_with_per_entity_memory_is_evaluated_against_opponents_and_runs(tmp_path, capsys):
    """A two-seat run keeping a state per entity id (selfplay.seats: all) is evaluated against ``random`` in
    training (log.eval_opponents) and by ``entmachin eval --opponent`` against a run directory, itself, where
    both sides keep their own entities' states per game."""
    import json

    from entmachin.run.cli import main

    data = {"env": {"name": "RockPaperScissorsDuel"}, "model": {"critic": "shared", "d_model": 16, "n_layer": 1,
                                                                 "memory": {"kind": "gru", "size": 4, "per_entity": True}},
            "frame": {"name": "PPO", "batch_size": 32, "sequence_length": 4},
            "rollout": {"num_envs": 4, "n_steps": 8}, "selfplay": {"seats": "all"},
            "train": {"total_steps": 32}, "log": {"eval_interval": 32, "eval_episodes": 4, "eval_opponents": ["random"]}}
    train(data, progress=False, run_dir=str(tmp_path))
    records = json.loads((tmp_path / "eval.json").read_text())
    assert records and 0.0 <= records[-1]["win_rate"]["random"] <= 1.0
    capsys.readouterr()
    assert main(["eval", str(tmp_path), "--opponent", str(tmp_path), "--episodes", "6"]) == 0
    assert "games 6  wins" in capsys.readouterr().out
