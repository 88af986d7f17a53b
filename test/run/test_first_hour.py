"""What a new user meets in the first hour: an environment of their own trained with the defaults,
episodes that never end, devices that do not exist, runs that fail early, and the command's
small promises (rounded budgets, kept checkpoints, --version, the saved run directory)."""
import dataclasses
import json
import logging
import os
import re

import numpy as np
import pytest
import torch
import yaml

from entmachin.env import CategoricalActionMask, CategoricalActionSpace, Entity, Environment, Observation, ObsSpace
from entmachin.env.finite import NonFiniteObservationError
from entmachin.frame.checkpoint_files import manifest_versions, read_manifest
from entmachin.run import runner as runner_module
from entmachin.run.build import make_envs
from entmachin.run.cli import main
from entmachin.run.config import config_from_dict, load_config
from entmachin.run.evaluation import eval_options
from entmachin.run.runner import Runner

TINY = ["--set", "rollout.num_envs=4", "--set", "rollout.n_steps=4", "--set", "model.d_model=8",
        "--set", "model.d_qk=8", "--set", "log.eval_episodes=2", "--no-progress"]


class Endless(Environment):
    """A robot that walks and is never done; ``nan_at``: the step whose observation holds NaN."""

    def __init__(self, nan_at=None):
        self.nan_at, self.t = nan_at, 0

    def obs_space(self):
        return ObsSpace(entities={"Robot": Entity(["x"])})

    def action_space(self):
        return {"move": CategoricalActionSpace(["left", "right"])}

    def reset(self):
        self.t = 0
        return self._obs()

    def act(self, actions):
        self.t += 1
        return self._obs()

    def _obs(self):
        x = np.nan if self.t == self.nan_at else float(self.t % 7)
        return Observation(entities={"Robot": (np.array([[x]], np.float32), [("Robot", 0)])},
                           actions={"move": CategoricalActionMask(actor_types=["Robot"])}, reward=0.0, done=False)


class EndlessWithItsOwnLimit(Endless):
    max_episode_steps = 50


def error_of(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def tiny(total_steps, **log):
    return config_from_dict({
        "env": {"name": "Count"}, "rollout": {"num_envs": 4, "n_steps": 4},
        "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": total_steps},
        "log": {"checkpoint_interval": 16, "eval_interval": 10_000, "eval_episodes": 2, **log}})


# ------------------------------------------------------------------------------ an environment of one's own

def test_a_class_without_a_bundled_config_trains_with_the_defaults_init_writes(tmp_path, capsys, caplog):
    name = "test.run.test_first_hour:Endless"
    run_dir = str(tmp_path / "run")
    with caplog.at_level(logging.INFO, logger="entmachin"):
        assert main(["train", name, "--run-dir", run_dir, "--set", "train.total_steps=32", *TINY]) == 0
    assert f"{name} has no bundled PPO config: training with entmachin's defaults (`entmachin init {name} > " \
           "my.yaml` writes them" in caplog.text
    trained = load_config(os.path.join(run_dir, "config.yaml"))
    capsys.readouterr()
    assert main(["init", name]) == 0
    written = config_from_dict(yaml.safe_load(capsys.readouterr().out))
    assert written.frame == config_from_dict({"frame": {"name": "PPO"}}).frame  # the defaults, as trained
    assert trained.env == written.env and trained.frame.settings.batch_size == 16  # the 16 rows of the tiny rollout
    # the same defaults; the schedule is auto in both, resolved over each one's budget (32 steps; init's 100,000)
    assert dataclasses.replace(trained.frame.settings, batch_size=256, replay_size=512, n_anneal_updates=196) == \
        written.frame.settings
    assert trained.frame.settings.n_anneal_updates == 2 and trained.frame.anneal_auto and written.frame.anneal_auto
    assert written.env.max_episode_steps == 1000  # the class declares no limit: init writes one
    assert written.frame.settings.gae_lambda == 0.95 and written.frame.settings.entropy_weight == -0.5
    assert written.frame.settings.anneal_entropy and written.model.n_layer == 2 == trained.model.n_layer
    assert written.frame.settings.gradient_max == 0.5
    assert main(["init", "test.run.test_first_hour:EndlessWithItsOwnLimit"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["env"]["max_episode_steps"] == 50


def test_the_default_batch_divides_the_rollout():
    for rollout in ({}, {"num_envs": 24, "n_steps": 16}, {"num_envs": 10, "n_steps": 10}):
        config = config_from_dict({"rollout": rollout})
        rows, batch = config.rollout.rows, config.frame.settings.batch_size
        assert batch <= 256 and rows % batch == 0, (rows, batch)
    assert config_from_dict({}).frame.settings.batch_size == 256


# ------------------------------------------------------------------------------ episodes that never end

def test_an_episode_past_the_threshold_without_a_step_limit_warns_once(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(runner_module, "LONG_EPISODE", 20)
    data = {"env": {"name": "test.run.test_first_hour:Endless"}, "rollout": {"num_envs": 2, "n_steps": 8},
            "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": 96},
            "log": {"eval_interval": 10_000, "eval_episodes": 2, "eval_max_steps": 5}}
    with caplog.at_level(logging.WARNING):
        Runner(config_from_dict(data), str(tmp_path / "a"), progress=False).train()
    warnings = [r.getMessage() for r in caplog.records if "without ending" in r.getMessage()]
    assert len(warnings) == 1 and "an episode has run 24 steps" in warnings[0]
    assert "set env.max_episode_steps" in warnings[0]
    caplog.clear()
    data["env"]["max_episode_steps"] = 1000
    with caplog.at_level(logging.WARNING):
        Runner(config_from_dict(data), str(tmp_path / "b"), progress=False).train()
    assert "without ending" not in caplog.text


def test_the_evaluation_cap_follows_the_step_limit_and_is_a_setting():
    def cap(env=None, log=None, episodes=100):
        config = config_from_dict({"env": {"max_episode_steps": env}, "log": log or {}})
        options = eval_options(config, episodes)
        return options["max_steps"], options["num_envs"]

    assert cap() == (1000, 100)  # no step limit: 1000 steps per episode
    assert cap(env=200) == (200, 100)
    assert cap(env=200, log={"eval_max_steps": 50}) == (50, 100)
    assert cap(env=200, episodes=300) == (200 * 3, 128)  # three episodes one after the other per environment


def test_evaluation_stops_an_endless_episode_at_log_eval_max_steps(tmp_path, caplog):
    data = {"env": {"name": "test.run.test_first_hour:Endless"}, "rollout": {"num_envs": 2, "n_steps": 8},
            "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": 16},
            "log": {"eval_episodes": 3, "eval_max_steps": 7}}
    with caplog.at_level(logging.WARNING):
        result = Runner(config_from_dict(data), str(tmp_path / "run"), progress=False).train()
    assert result.final_eval["episodes"] == 3
    assert "3 episode(s) unfinished after max_steps=7" in caplog.text


# ------------------------------------------------------------------------------ devices and early failures

def test_a_device_this_machine_lacks_names_train_device_and_leaves_no_directory(tmp_path, capsys):
    devices = ["cuda:99"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in devices:
        run_dir = tmp_path / device.replace(":", "")
        err = error_of(capsys, ["train", "Count", "--run-dir", str(run_dir), "--set", f"train.device={device}"])
        assert err.startswith(f"entmachin: error: train.device: '{device}' cannot be used on this machine ("), err
        assert "set train.device: cpu" in err
        assert not run_dir.exists()


def test_a_run_that_fails_before_its_first_checkpoint_takes_away_what_it_wrote(tmp_path, capsys):
    name = "test.run.test_first_hour:Endless"
    fresh, existing = tmp_path / "fresh", tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    for run_dir in (fresh, existing):
        err = error_of(capsys, ["train", name, "--run-dir", str(run_dir), "--set", "env.kwargs.nan_at=3", *TINY])
        assert "NaN" in err and "env.check_finite: false" in err, err
    assert not fresh.exists()
    assert sorted(os.listdir(existing)) == ["notes.txt"]  # the user's file stays
    for run_dir in (fresh, existing):  # starting again there needs no --force
        assert main(["train", "Count", "--run-dir", str(run_dir), "--set", "train.total_steps=32",
                     "--set", "frame.batch_size=16", *TINY]) == 0


def test_env_check_finite_in_yaml_reaches_the_environments():
    data = {"env": {"name": "test.run.test_first_hour:Endless", "kwargs": {"nan_at": 1}}}
    envs = make_envs(config_from_dict(data), seed=0)
    with pytest.raises(NonFiniteObservationError, match=r"env.check_finite: false"):
        envs.act(_moves(envs))
    data["env"]["check_finite"] = False
    envs = make_envs(config_from_dict(data), seed=0)
    obs = envs.act(_moves(envs))
    assert np.isnan(obs.features["Robot"].as_array()).all()


def _moves(envs):
    from entmachin.env import random_actions

    obs = envs.reset()
    return random_actions(obs, envs.action_space(), np.random.default_rng(0))


# ------------------------------------------------------------------------------ the command's small promises

def test_total_steps_rounded_up_to_whole_rollouts_is_said_and_the_bar_ends_full(tmp_path, capsys, caplog):
    with caplog.at_level(logging.INFO, logger="entmachin"):
        result = Runner(tiny(40), str(tmp_path / "run"), progress=True).train()
    assert result.env_steps == 48
    assert ("train.total_steps=40 is not a whole number of rollouts of 16 steps (rollout.num_envs 4 x "
            "rollout.n_steps 4): the run ends at 48 steps") in caplog.text
    err = capsys.readouterr().err
    assert re.search(r"100%.*48/48", err), err


def test_a_bc_runs_rounding_is_said_in_updates_of_bc_rows_per_update(tmp_path, caplog):
    config = config_from_dict({"env": {"name": "Count"}, "frame": {"name": "BC", "batch_size": 64},
                               "bc": {"data": str(tmp_path / "data"), "rows_per_update": 256},
                               "train": {"total_steps": 1000}})
    with caplog.at_level(logging.INFO, logger="entmachin"):
        assert Runner(config, str(tmp_path / "run"), progress=False)._planned_steps() == 1024
    assert "rollouts" not in caplog.text and "rollout.num_envs" not in caplog.text
    assert "updates of 256 rows (bc.rows_per_update)" in caplog.text


def test_keep_checkpoints_keeps_the_latest(tmp_path):
    run_dir = tmp_path / "run"
    Runner(tiny(96, keep_checkpoints=2), str(run_dir), progress=False).train()
    checkpoints = str(run_dir / "checkpoints")
    assert manifest_versions(checkpoints) == [80, 96]
    named = {entry["file"] for v in (80, 96) for entry in read_manifest(checkpoints, v).files.values()}
    assert set(os.listdir(checkpoints)) == named | {"checkpoint_80.json", "checkpoint_96.json"}
    Runner(tiny(96, keep_checkpoints=None), str(tmp_path / "all"), progress=False).train()
    assert manifest_versions(str(tmp_path / "all" / "checkpoints")) == [16, 32, 48, 64, 80, 96]
    assert config_from_dict({}).log.keep_checkpoints == 5


def test_version(capsys):
    import entmachin

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"entmachin {entmachin.__version__} (Python ")


def test_the_saved_config_records_the_run_directory_used(tmp_path):
    run_dir = str(tmp_path / "run")
    assert main(["train", "Count", "--run-dir", run_dir, "--set", "train.total_steps=32", "--set",
                 "frame.batch_size=16", *TINY]) == 0
    assert load_config(os.path.join(run_dir, "config.yaml")).log.run_dir == run_dir
    assert json.load(open(os.path.join(run_dir, "eval.json")))[-1]["env_steps"] == 32
