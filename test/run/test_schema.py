"""``entmachin schema``: the run config's JSON Schema takes every config the loader takes (the bundled ones, what
``entmachin init`` writes) and refuses the unknown keys and wrong types the loader refuses."""
import glob
import json
import os

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")

from entmachin.run.cli import main  # noqa: E402
from entmachin.run.config import ConfigError, config_from_dict  # noqa: E402
from entmachin.run.paths import _CONFIGS  # noqa: E402
from entmachin.run.schema import json_schema  # noqa: E402

BUNDLED = sorted(glob.glob(os.path.join(_CONFIGS, "*.yaml")))


@pytest.fixture(scope="module")
def validator():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_command_prints_the_schema(capsys):
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json_schema() and printed["$schema"].endswith("2020-12/schema")
    assert printed["properties"]["train"]["properties"]["total_steps"] == {
        "type": "integer", "description": "environment steps to train for", "default": 100000}
    json.dumps(printed, allow_nan=False)  # strict JSON: no Infinity from an unbounded side of a field's range
    assert printed["properties"]["model"]["properties"]["n_layer"]["description"].endswith("(PPO's default: 2)")


@pytest.mark.parametrize("path", BUNDLED, ids=os.path.basename)
def test_every_bundled_config_is_valid(validator, path):
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    assert not list(validator.iter_errors(data))


@pytest.mark.parametrize("env, frame", [("MineSweeper", "PPO"), ("MineSweeper", "A2C"), ("Count", "PPO")])
def test_what_init_writes_is_valid(validator, env, frame, capsys):
    assert main(["init", env, "--frame", frame]) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    assert not list(validator.iter_errors(data))


@pytest.mark.parametrize("data", [
    {"trian": {}},                                              # an unknown section
    {"train": {"total_step": 10}},                              # an unknown key
    {"train": {"total_steps": "many"}},                         # a wrong type
    {"rollout": {"processes": "many"}},                         # neither an int nor auto
    {"frame": {"name": "PPO", "n_updates": 2}},                 # a DQN key in PPO's section
    {"frame": {"n_updates": 2}},                                # ... and in the default frame's (PPO)
    {"frame": {"name": "DQN", "n_epochs": 2}},                  # PPO's key in DQN's section
    {"frame": {"name": "SAC"}},                                 # a frame entmachin lacks
    {"frame": {"name": "PPO", "surrogate_loss_clip": -0.1}},    # out of its bounds
    {"frame": {"name": "BC", "entropy_weight": 0.1}},           # a key BC's section does not use
    {"log": {"keep_checkpoints": "all"}},
])
def test_the_schema_refuses_what_the_loader_refuses(validator, data):
    assert list(validator.iter_errors(data)), data
    with pytest.raises(ConfigError):
        config_from_dict(data)


def test_values_the_run_layer_adds_are_valid(validator):
    data = {"frame": {"name": "PPO", "n_anneal_updates": "auto", "anneal_entropy": True, "entropy_weight": -0.1},
            "rollout": {"processes": "auto"}, "train": {"callbacks": ["StopWhen", {"class": "a.b:C", "kwargs": {}}]}}
    assert not list(validator.iter_errors(data))
    config_from_dict(data)
