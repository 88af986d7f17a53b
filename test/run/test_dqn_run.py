"""``frame: DQN`` / ``DQNPer`` in a run config: built, trained, logged, checkpointed and resumed."""
import pytest
import yaml

from entmachin.run.cli import main
from entmachin.run.config import ConfigError, config_from_dict, config_to_dict
from test.run.test_cli import scalars

TINY = ["--set", "train.total_steps=64", "--set", "log.checkpoint_interval=32", "--set", "log.eval_interval=64",
        "--set", "log.eval_episodes=2", "--set", "rollout.num_envs=4", "--set", "rollout.n_steps=4",
        "--set", "frame.batch_size=8", "--set", "frame.n_updates=2", "--set", "model.d_model=16",
        "--set", "model.d_qk=8", "--no-progress"]


def test_a_dqnper_run_logs_its_tags_and_resumes(tmp_path):
    config = tmp_path / "count-dqn.yaml"
    config.write_text(yaml.safe_dump({"env": {"name": "Count"}, "model": {"n_layer": 1, "n_head": 2, "q_head": "dueling"},
                                      "frame": {"name": "DQNPer", "replay_size": 1000, "n_step": 2}}))
    directory = str(tmp_path / "run")
    assert main(["train", str(config), "--run-dir", directory, *TINY]) == 0
    found = scalars(directory)
    for tag in ("losses/td_loss", "charts/epsilon", "charts/q_values", "charts/buffer_size",
                "charts/importance_weight", "charts/learning_rate", "eval/mean_return"):
        assert tag in found, f"{tag} missing; found {sorted(found)}"
    assert [s for s, _ in found["losses/td_loss"]] == [16, 32, 48, 64]
    assert [v for _, v in found["charts/buffer_size"]] == [16, 32, 48, 64]
    assert main(["train", "--resume", directory, "--set", "train.total_steps=80", "--no-progress"]) == 0
    assert [s for s, _ in scalars(directory)["losses/td_loss"]][-1] == 80


def test_dqn_config_sections_round_trip_and_refuse_ppo_keys():
    config = config_from_dict({"frame": {"name": "DQN", "replay_size": 5000, "n_updates": 3, "batch_size": 64}})
    assert config.frame.n_updates == 3 and config.frame.settings.replay_size == 5000
    data = config_to_dict(config)
    assert "seed" not in data["frame"] and "n_epochs" not in data["frame"]
    assert config_from_dict(yaml.safe_load(yaml.safe_dump(data))) == config
    with pytest.raises(ConfigError, match=r"frame.n_epochs: unknown key for DQN; allowed keys are \['name', "
                                          r"'n_updates', 'optimizer'"):
        config_from_dict({"frame": {"name": "DQN", "n_epochs": 2}})
    with pytest.raises(ConfigError, match=r"frame.n_updates: expected an int >= 1, got 0"):
        config_from_dict({"frame": {"name": "DQNPer", "n_updates": 0}})


def test_train_finds_the_bundled_dqn_config_by_frame(tmp_path, capsys):
    directory = str(tmp_path / "run")
    assert main(["train", "MineSweeper", "--frame", "DQN", "--run-dir", directory, *TINY]) == 0
    assert "name: DQNPer" in (tmp_path / "run" / "config.yaml").read_text()
    assert main(["train", "Count", "--frame", "DQN", "--run-dir", str(tmp_path / "other"), *TINY]) == 2
    assert "'Count' has no bundled DQN config" in capsys.readouterr().err
