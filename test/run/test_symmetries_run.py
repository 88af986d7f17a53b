"""``rollout.symmetries``: a run trains on each row and its images; bad names are refused at the door."""
import pytest

from entmachin.run.build import make_frame, symmetries_of
from entmachin.run.config import ConfigError, config_from_dict, config_to_dict
from entmachin.run.fingerprint import fingerprint, learning_settings
from entmachin.run.runner import Runner

GAME = {"env": {"name": "ConnectFour", "kwargs": {"choose": "column"}}, "rollout": {"num_envs": 4, "n_steps": 8},
        "frame": {"batch_size": 32}, "model": {"d_model": 8, "d_qk": 8}, "selfplay": {"seats": "random"},
        "train": {"total_steps": 128}, "log": {"eval_interval": 10_000, "checkpoint_interval": 10_000}}


def game(**rollout):
    return config_from_dict({**GAME, "rollout": {**GAME["rollout"], **rollout}})


def test_a_run_stores_every_row_and_its_mirror_image(tmp_path):
    config = game(symmetries=["mirror"])
    assert config.rollout.rows == 32 and config.rollout.images == 2  # environment steps per rollout stay 32
    runner = Runner(config, str(tmp_path / "run"), progress=False)
    runner.train()
    frame = runner.frame
    assert frame.replay_buffer.buffer_size == 32 * 2 * 2  # steps x seats x (row + image)
    assert frame.config.actor_update_times == 4 * 4  # n_epochs 4 x (128 rows / batch_size 32)
    assert runner.state.env_steps == 128


def test_without_symmetries_the_fingerprint_is_as_before_and_with_them_it_changes():
    plain, mirrored = game(), game(symmetries=["mirror"])
    settings = [learning_settings(config_to_dict(c), continuous_actions=False) for c in (plain, mirrored)]
    assert "symmetries" not in settings[0]["rollout"] and settings[1]["rollout"]["symmetries"] == ["mirror"]
    assert fingerprint(settings[0]) != fingerprint(settings[1])
    assert symmetries_of(plain) == [] and len(symmetries_of(mirrored)) == 1


@pytest.mark.parametrize("data, message", [
    ({**GAME, "rollout": {**GAME["rollout"], "symmetries": ["flip"]}},
     r"rollout\.symmetries: \['flip'\] are not symmetries of ConnectFour; it offers \['mirror'\]"),
    ({"env": {"name": "Count"}, "rollout": {"symmetries": ["mirror"]}},
     r"\['mirror'\] are not symmetries of Count; it offers none"),
])
def test_symmetries_the_environment_lacks_stop_the_run_before_its_directory(tmp_path, data, message):
    with pytest.raises(ConfigError, match=message):
        Runner(config_from_dict(data), str(tmp_path / "run"), progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("data, message", [
    ({"frame": {"name": "DQN"}, "rollout": {"symmetries": ["mirror"]}},
     r"rollout\.symmetries: DQN does not train on symmetric images"),
    ({"rollout": {"symmetries": ["mirror", "mirror"]}}, r"names a symmetry twice"),
    ({"rollout": {"symmetries": "mirror"}}, r"rollout\.symmetries: expected a list"),
])
def test_bad_symmetry_settings_are_named(data, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


def test_make_frame_holds_the_images(tmp_path):
    from entmachin.run.envs import EnvFactory

    config = game(symmetries=["mirror"])
    obs_space, action_space, seats = EnvFactory(config.env).layout()
    frame, _ = make_frame(config, obs_space, action_space, rows_per_env=seats)
    assert frame.replay_buffer.buffer_size == config.rollout.rows * seats * 2
