"""Run configs: typed loading, errors with dotted paths, overrides, rules across fields, round trips."""
import glob
import os

import pytest
import yaml

from entmachin.run.cli import bundled_config_path
from entmachin.run.config import (ConfigError, RunConfig, apply_overrides, config_from_dict, config_to_dict,
                                  load_config, update_times)
from entmachin.run.describe import FIELD_DOCS, commented_yaml

CONFIGS = sorted(glob.glob(os.path.join(os.path.dirname(bundled_config_path("Count")), "*.yaml")))


def test_defaults_and_round_trip():
    config = config_from_dict({})
    # the loader fills in the run layer's defaults (entmachin.run.defaults) for the frame and PPO's model
    assert config == RunConfig(frame=config.frame, model=config.model) and config.frame.name == "PPO"
    data = config_to_dict(config)
    assert config_from_dict(yaml.safe_load(yaml.safe_dump(data))) == config
    assert "seed" not in data["frame"] and "replay_size" not in data["frame"]  # derived by the runner
    assert "actor_update_times" not in data["frame"]  # n_epochs sets it


def test_nested_configs_and_tuples():
    config = config_from_dict({"model": {"relpos_encoding": {"extent": [5, 5], "position_features": ["x", "y"]},
                                         "critic": "shared"}})
    assert config.model.relpos_encoding.extent == (5, 5) and config.model.net_config().d_model == 32
    assert config_from_dict(config_to_dict(config)) == config


@pytest.mark.parametrize("data, message", [
    ({"environment": {}}, r"^environment: unknown section \(did you mean 'env'\?\); allowed sections are \['env', "
                          r"'model', 'frame', "),
    ({"env": {"nam": "Count"}}, r"^env.nam: unknown key \(did you mean 'name'\?\); allowed keys are \['name', 'kwargs', "
                                r"'max_episode_steps', 'check_finite'\]"),
    ({"frame": {"discont": 0.9}}, r"^frame.discont: unknown key for PPO \(did you mean 'discount'\?\); allowed keys "
                                  r"are \['name', 'n_epochs'"),
    ({"log": {"zzz": 1}}, r"^log.zzz: unknown key; allowed keys are"),
    ({"frame": {"name": "A2C", "surrogate_loss_clip": 0.1}}, r"^frame.surrogate_loss_clip: unknown key for A2C"),
    ({"frame": {"discount": "high"}}, r"^frame.discount: expected a number, got 'high'"),
    ({"frame": {"discount": 1.5}}, r"^frame.discount must be in \[0.0, 1.0\], got 1.5"),
    ({"frame": {"normalize_advantage": "yes"}}, r"^frame.normalize_advantage: expected true or false, got 'yes'"),
    ({"rollout": {"num_envs": 2.5}}, r"^rollout.num_envs: expected an int, got 2.5"),
    ({"rollout": {"num_envs": 0}}, r"^rollout.num_envs: expected an int >= 1, got 0"),
    ({"model": {"n_head": 3}}, r"^model: RogueNetConfig: n_head=3 must divide d_model=32"),
    ({"model": {"critic": "both"}}, r"^model.critic: expected one of 'separate', 'shared', got 'both'"),
    ({"model": {"relpos_encoding": {"extent": [5]}}}, r"^model.relpos_encoding: "),
    ({"frame": {"seed": 3}}, r"^frame.seed: set by the runner from train.seed; remove it"),
    ({"frame": {"replay_size": 3}}, r"^frame.replay_size: set by the runner from rollout.num_envs x rollout.n_steps"),
    ({"frame": {"name": "SAC"}}, r"^frame.name: expected one of \['A2C', 'BC', 'DQN', 'DQNPer', 'PPO'\], got 'SAC'"),
    ({"frame": {"name": "ppo"}}, r"^frame.name: expected one of .*, got 'ppo' \(did you mean 'PPO'\?\)"),
    ({"frame": {"actor_update_times": 3}}, r"^frame.actor_update_times: give frame.n_epochs or the update times"),
    ({"frame": {"batch_size": 1000}}, r"^frame.batch_size: 1000 is more than the 512 rows one rollout stores"),
    ({"rollout": {"num_envs": 2, "processes": 3}, "frame": {"batch_size": 8}},
     r"^rollout.processes: 3 worker processes for 2 environments"),
    ({"model": {"critic": "shared"}, "frame": {"critic_learning_rate": 0.01}},
     r"^frame.critic_learning_rate: with model.critic: shared the actor and critic share one network"),
    ({"train": {"total_steps": 10}}, r"^train.total_steps: 10 is less than one rollout \(512 steps\)"),
    ({"train": {"device": "gpu"}}, r"^train.device: expected a torch device such as 'cpu' or 'cuda:0', got 'gpu'"),
    ([1, 2], r"^config: expected a mapping with sections"),
])
def test_bad_configs_name_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


def test_n_epochs_become_update_times():
    config = config_from_dict({"rollout": {"num_envs": 10, "n_steps": 10}, "frame": {"batch_size": 30, "n_epochs": 3}})
    assert update_times(config) == (12, 12)  # 3 x ceil(100 / 30)
    config = config_from_dict({"frame": {"n_epochs": None, "actor_update_times": 2, "critic_update_times": 5}})
    assert update_times(config) == (2, 5)


def test_n_anneal_updates_auto_anneals_over_the_whole_run(monkeypatch):
    data = {"rollout": {"num_envs": 8, "n_steps": 16}, "train": {"total_steps": 10_000},
            "frame": {"n_anneal_updates": "auto", "anneal_entropy": True}}
    assert config_from_dict(data).frame.settings.n_anneal_updates == 79  # ceil(10,000 / 128)
    monkeypatch.setenv("WORLD_SIZE", "4")  # under torchrun each rank updates on its own 128 rows
    assert config_from_dict(data).frame.settings.n_anneal_updates == 20
    with pytest.raises(ConfigError, match="frame.n_anneal_updates: expected an int, null or auto, got 'end'"):
        config_from_dict({"frame": {"n_anneal_updates": "end"}})
    assert config_from_dict({"frame": {"n_anneal_updates": 7}}).frame.settings.n_anneal_updates == 7


def test_a_bundled_config_by_name_anneals_over_an_overridden_budget():
    """`entmachin train PickMatchingBalls --set train.total_steps=N`: auto sees N, as with the file's path
    (it used to resolve at the bundled 500k first, leaving a longer run's second half at learning rate 0)."""
    from entmachin.run.commands import resolve_train_config
    from entmachin.run.paths import bundled_config_path

    by_name = resolve_train_config("PickMatchingBalls", ["train.total_steps=1000000"])
    by_path = resolve_train_config(bundled_config_path("PickMatchingBalls"), ["train.total_steps=1000000"])
    assert by_name == by_path and by_name.frame.settings.n_anneal_updates == 977  # ceil(1M / 1,024 rows)
    assert resolve_train_config("PickMatchingBalls").frame.settings.n_anneal_updates == 489  # its own 500k


def test_auto_stays_auto_in_plain_data_so_a_new_budget_moves_it():
    """A config written back (init, a run's config.yaml, --resume, entmachin.run.train(RunConfig, overrides=...))
    says auto, not the count of the budget it was read with: a changed total_steps anneals over the new budget."""
    config = config_from_dict({"rollout": {"num_envs": 8, "n_steps": 16}, "train": {"total_steps": 10_000},
                               "frame": {"n_anneal_updates": "auto"}})
    data = config_to_dict(config)
    assert data["frame"]["n_anneal_updates"] == "auto" and config_from_dict(data) == config
    longer = config_from_dict(apply_overrides(data, ["train.total_steps=100000"]))
    assert longer.frame.settings.n_anneal_updates == 782  # ceil(100,000 / 128), not the 79 of 10,000 steps
    fixed = config_from_dict({"frame": {"n_anneal_updates": 79}})
    assert config_to_dict(fixed)["frame"]["n_anneal_updates"] == 79 and not fixed.frame.anneal_auto
    with pytest.raises(ConfigError, match="frame.anneal_auto: unknown key"):  # the loader's to set, not a config's
        config_from_dict({"frame": {"anneal_auto": True}})


def test_ppo_defaults_anneal_a_large_bonus_with_two_layers_and_other_frames_keep_theirs():
    ppo = config_from_dict({})
    assert ppo.model.n_layer == 2 and ppo.frame.settings.entropy_weight == -0.5
    assert ppo.frame.settings.anneal_entropy and ppo.frame.anneal_auto
    assert ppo.frame.settings.n_anneal_updates == 196  # ceil(100,000 / 512): rates and bonus reach 0 at the end
    a2c = config_from_dict({"frame": {"name": "A2C"}})
    assert a2c.model.n_layer == 1 and a2c.frame.settings.entropy_weight == -0.01
    assert not a2c.frame.settings.anneal_entropy and a2c.frame.settings.n_anneal_updates is None
    assert config_from_dict({"model": {"n_layer": 3}}).model.n_layer == 3  # what a config states, it keeps
    # a config that states no bonus, or no schedule, keeps its bonus constant rather than failing the rule
    # "anneal_entropy needs both" for a default it never set
    assert not config_from_dict({"frame": {"entropy_weight": None}}).frame.settings.anneal_entropy
    assert not config_from_dict({"frame": {"n_anneal_updates": None}}).frame.settings.anneal_entropy
    with pytest.raises(ConfigError, match="anneal_entropy"):  # stated, the rule holds
        config_from_dict({"frame": {"entropy_weight": None, "anneal_entropy": True}})


def test_overrides_are_yaml_scalars_at_dotted_paths():
    data = apply_overrides({"frame": {"discount": 0.9}}, ["frame.discount=0.995", "rollout.num_envs=64",
                                                          "model.pooling=mean", "env.max_episode_steps="])
    assert data == {"frame": {"discount": 0.995}, "rollout": {"num_envs": 64}, "model": {"pooling": "mean"},
                    "env": {"max_episode_steps": None}}
    with pytest.raises(ConfigError, match=r"--set 'frame.discount': expected dotted.path=value"):
        apply_overrides({}, ["frame.discount"])
    with pytest.raises(ConfigError, match=r"--set frame.discount.x: frame.discount is 0.9, not a section"):
        apply_overrides({"frame": {"discount": 0.9}}, ["frame.discount.x=1"])
    with pytest.raises(ConfigError, match=r"--set frame.discount, line 1: malformed YAML"):
        apply_overrides({}, ["frame.discount=[1, 2"])


def test_load_config_reports_malformed_yaml_with_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env:\n  name: Count\nframe:\n  discount: [0.9\n")
    with pytest.raises(ConfigError, match=r"bad.yaml, line \d: malformed YAML"):
        load_config(str(path))
    with pytest.raises(FileNotFoundError):
        load_config(str(tmp_path / "missing.yaml"))


def test_every_field_has_a_comment_and_init_output_loads():
    data = config_to_dict(config_from_dict({"frame": {"name": "PPO", "n_epochs": None}}))
    for section, values in data.items():
        assert section in FIELD_DOCS
        for key in values:
            assert f"{section}.{key}" in FIELD_DOCS, f"{section}.{key} has no comment"
    text = commented_yaml(data, "# header")
    assert config_from_dict(yaml.safe_load(text)) == config_from_dict(data)


def test_model_kind_mlp_and_its_fields():
    config = config_from_dict({"model": {"kind": "mlp", "d_hidden": [32, 16], "activation": "relu",
                                         "normalize_inputs": False, "continuous": "squashed_gaussian"}})
    assert config.model.kind == "mlp" and config.model.d_hidden == (32, 16)
    assert config.model.mlp_options() == {"d_hidden": (32, 16), "activation": "relu", "normalize_inputs": False,
                                          "clip": 5.0, "continuous": "squashed_gaussian"}
    assert config_from_dict(yaml.safe_load(yaml.safe_dump(config_to_dict(config)))) == config
    default = config_from_dict({}).model
    assert (default.kind, default.d_hidden, default.activation, default.normalize_inputs) == \
        ("rogue_net", (64, 64), "tanh", True)
    assert config_from_dict({"model": {"kind": "mlp"}, "frame": {"name": "A2C"}}).frame.name == "A2C"


@pytest.mark.parametrize("data, message", [
    ({"model": {"kind": "cnn"}}, r"^model.kind: expected one of 'rogue_net', 'mlp', got 'cnn'"),
    ({"model": {"kind": "mlp", "d_hidden": []}}, r"^model.d_hidden: expected a list of positive ints, got \[\]"),
    ({"model": {"kind": "mlp", "d_hidden": [64, 0]}}, r"^model.d_hidden: expected a list of positive ints"),
    ({"model": {"kind": "mlp", "activation": "elu"}}, r"^model.activation: expected one of 'tanh', 'relu', 'gelu'"),
    ({"model": {"kind": "mlp", "d_model": 64}}, r"^model.d_model: a setting of kind: rogue_net, which kind: mlp does "
                                                 r"not read"),
    ({"model": {"kind": "mlp", "relpos_encoding": {"extent": [5], "position_features": ["x"]}}},
     r"^model.relpos_encoding: a setting of kind: rogue_net"),
    ({"model": {"d_hidden": [32]}}, r"^model.d_hidden: a setting of kind: mlp, which kind: rogue_net does not read"),
    ({"model": {"activation": "relu"}}, r"^model.activation: a setting of kind: mlp"),
    ({"model": {"kind": "mlp"}, "frame": {"name": "DQN"}}, r"^model.kind: mlp trains with frame.name PPO or A2C; DQN "
                                                          r".*use model.kind: rogue_net"),
    ({"model": {"kind": "mlp"}, "frame": {"name": "BC"}}, r"^model.kind: mlp trains with frame.name PPO or A2C; BC"),
])
def test_bad_model_kinds_name_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


def test_init_shows_the_other_kinds_fields_commented_out():
    for kind, shown, hidden in (("mlp", "d_hidden", "d_model"), ("rogue_net", "d_model", "d_hidden")):
        data = config_to_dict(config_from_dict({"model": {"kind": kind}}))
        text = commented_yaml(data)
        assert f"\n  {shown}: " in text and f"\n  # {hidden}: " in text
        assert f"\n  kind: {kind}  # rogue_net: the entity transformer; mlp: " in text
        assert config_from_dict(yaml.safe_load(text)) == config_from_dict(data)
    for key in ("kind", "d_hidden", "activation", "normalize_inputs"):
        assert FIELD_DOCS[f"model.{key}"]


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.basename(p) for p in CONFIGS])
def test_bundled_configs_load_and_state_what_they_reach(path):
    config = load_config(path)
    text = open(path, encoding="utf-8").read()
    assert "# Reaches" in text, f"{path} does not say what return it reaches within how many steps"
    assert config.env.name.lower().removeprefix("gymnasium:") in os.path.basename(path).replace("-a2c", "")


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.basename(p) for p in CONFIGS])
def test_bundled_configs_train_for_a_handful_of_steps(path, tmp_path):
    from entmachin.run.runner import Runner

    overrides = ["rollout.num_envs=2", "rollout.n_steps=2", "frame.batch_size=4", "train.total_steps=8",
                 "log.eval_episodes=1", "rollout.processes=0", "env.max_episode_steps=20"]
    if load_config(path).frame.name == "BC":  # behaviour cloning: a dataset of two random episodes
        pytest.importorskip("pyarrow")
        from entmachin.run.record import record

        data = str(tmp_path / "data")
        record(load_config(path).env.name, "random", 2, data, progress=False)
        overrides += [f"bc.data={data}", "bc.rows_per_update=8"]
    if load_config(path).model.memory is not None:  # sequences that divide the shortened rollout
        overrides.append("frame.sequence_length=2")
    config = load_config(path, overrides)
    result = Runner(config, str(tmp_path / "run"), progress=False).train()
    assert result.env_steps == 8 and result.final_eval is not None
