"""The entmachin command: train, eval, envs, init, tensorboard output and one-line errors."""
import glob
import json
import os
import re

import pytest
import yaml

from entmachin.run.cli import main
from entmachin.run.config import config_from_dict, load_config

TINY = ["--set", "train.total_steps=128", "--set", "log.checkpoint_interval=64", "--set", "log.eval_interval=64",
        "--set", "log.eval_episodes=4", "--set", "rollout.num_envs=8", "--set", "rollout.n_steps=4",
        "--set", "frame.batch_size=16", "--no-progress"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One tiny trained Count run shared by the tests that only read it."""
    directory = str(tmp_path_factory.mktemp("runs") / "count")
    assert main(["train", "Count", "--run-dir", directory, *TINY]) == 0
    return directory


def scalars(directory):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(directory, size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_a_run_directory_holds_everything(run_dir, capsys):
    names = set(os.listdir(run_dir))
    assert {"config.yaml", "eval.json", "curve.png", "checkpoints"} <= names
    assert any(n.startswith("events.out.tfevents") for n in names)
    config = load_config(os.path.join(run_dir, "config.yaml"))  # the resolved config re-loads as is
    assert config.train.total_steps == 128 and config.env.name == "Count"
    evals = json.load(open(os.path.join(run_dir, "eval.json")))
    assert [e["env_steps"] for e in evals] == [64, 128] and evals[-1]["final"]
    assert sorted(glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint_*.json"))) == [
        os.path.join(run_dir, "checkpoints", f"checkpoint_{s}.json") for s in (128, 64)]
    with open(os.path.join(run_dir, "curve.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_tensorboard_tags_use_environment_steps(run_dir):
    found = scalars(run_dir)
    for tag in ("charts/episodic_return", "charts/episodic_length", "charts/SPS", "charts/learning_rate",
                "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl", "losses/clipfrac",
                "losses/explained_variance", "entities/Bean", "entities/Player", "eval/mean_return"):
        assert tag in found, f"{tag} missing; found {sorted(found)}"
    assert [s for s, _ in found["losses/policy_loss"]] == [32, 64, 96, 128]
    assert [s for s, _ in found["eval/mean_return"]] == [64, 128]
    assert any(tag.startswith("actions/count/") for tag in found)


def test_resume_continues_without_duplicated_or_rewound_steps(run_dir, tmp_path):
    import shutil

    directory = str(tmp_path / "count")
    shutil.copytree(run_dir, directory)
    assert main(["train", "--resume", directory, "--set", "train.total_steps=192", "--no-progress"]) == 0
    steps = [s for s, _ in scalars(directory)["losses/policy_loss"]]
    # Each step once (none repeated, none missing). The event files are read in name order, which puts the
    # resumed run's file first when both runs started within one second and its writer's counter has more
    # digits (".10" before ".9"); tensorboard itself orders scalars by step.
    assert sorted(steps) == [32, 64, 96, 128, 160, 192]


def test_eval_envs_and_init(run_dir, capsys):
    assert main(["eval", run_dir, "--episodes", "5", "--deterministic"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"episodes 5  return mean -?\d\.\d{3}  min .*  length mean 1\.0", out), out
    assert main(["eval", os.path.join(run_dir, "checkpoints"), "--episodes", "2"]) == 0
    capsys.readouterr()
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "MineSweeper\n  entity Mine: features ['x', 'y']" in out and "action 'Fire Orbital Cannon' (select entity)" in out
    assert main(["init", "Count", "--frame", "A2C"]) == 0
    text = capsys.readouterr().out
    config = config_from_dict(yaml.safe_load(text))
    assert config.frame.name == "A2C" and config.env.name == "Count"
    assert "  discount: 0.99  # discount factor gamma" in text


def error_of(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_bad_input_is_one_line(run_dir, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("env:\n  name: Count\n  kwargs: {a: 1\n")
    assert re.search(r"bad.yaml, line \d: malformed YAML", error_of(capsys, ["train", str(bad)]))
    assert "missing.yaml: no such file or directory" in error_of(capsys, ["train", str(tmp_path / "missing.yaml")])
    assert "unknown environment 'Cout'; did you mean 'Count'?" in error_of(capsys, ["train", "Cout"])
    assert "frame.discont: unknown key for PPO" in error_of(capsys, ["train", "Count", "--set", "frame.discont=1"])
    assert "--set 'frame': expected dotted.path=value" in error_of(capsys, ["train", "Count", "--set", "frame"])
    assert "already holds a run; resume it with --resume" in error_of(capsys, ["train", "Count", "--run-dir", run_dir])
    assert "holds no config.yaml" in error_of(capsys, ["train", "--resume", str(tmp_path)])
    assert "a resumed run keeps its config" in error_of(capsys, ["train", "--resume", run_dir, "--set",
                                                                 "frame.discount=0.5"])
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert "cannot write to the run directory" in error_of(capsys, ["train", "Count", "--run-dir",
                                                                    str(blocked / "run")])
    assert "not an entmachin run directory" in error_of(capsys, ["eval", str(tmp_path)])


def test_a_damaged_checkpoint_is_named(run_dir, tmp_path, capsys):
    import shutil

    directory = str(tmp_path / "count")
    shutil.copytree(run_dir, directory)
    manifest = json.load(open(os.path.join(directory, "checkpoints", "checkpoint_128.json")))
    actor = os.path.join(directory, "checkpoints", manifest["files"]["actor"]["file"])
    with open(actor, "r+b") as f:
        f.truncate(100)
    err = error_of(capsys, ["eval", directory])
    assert re.search(r"actor_128\.[0-9a-f]{12}\.pt' is truncated or damaged", err), err


def test_a_checkpoint_of_other_spaces_says_which_differ(run_dir, tmp_path):
    from entmachin.run.envs import EnvFactory
    from entmachin.run.config import EnvSection
    from entmachin.run.evaluation import load_trained
    from entmachin.run.runner import RunError

    with pytest.raises(RunError, match=r"was trained on other spaces than NotHotdog's: .*entity type 'Bean' only in "
                                       r"the checkpoint"):
        load_trained(run_dir, EnvFactory(EnvSection(name="NotHotdog")))


GAME = '''
import numpy as np
from entmachin.env import CategoricalActionMask, CategoricalActionSpace, Entity, Environment, Observation, ObsSpace


class Reach(Environment):
    def obs_space(self):
        return ObsSpace(entities={"Robot": Entity(["x"])})

    def action_space(self):
        return {"move": CategoricalActionSpace(["left", "right"])}

    def reset(self):
        return self.act({})

    def act(self, actions):
        return Observation(entities={"Robot": (np.zeros((1, 1), np.float32), [("Robot", 0)])},
                           actions={"move": CategoricalActionMask(actor_types=["Robot"])}, reward=0.0, done=False)
'''


def test_the_command_finds_a_users_module_in_the_working_directory(tmp_path):
    """As ``python -m entmachin`` does; the installed command's script has its own folder on sys.path."""
    import subprocess
    import sys

    game, bin_dir = tmp_path / "game", tmp_path / "bin"
    game.mkdir()
    bin_dir.mkdir()
    (game / "mygame.py").write_text(GAME)
    launcher = bin_dir / "entmachin"
    launcher.write_text("import sys\nfrom entmachin.run.cli import main\nsys.exit(main())\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, str(launcher), "init", "mygame:Reach"], cwd=game, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "name: mygame:Reach" in done.stdout


def test_a_folder_shadowing_the_package_is_named(tmp_path, monkeypatch, capsys):
    """A checkout folder called entmachin (no __init__.py) on PYTHONPATH before an installed entmachin
    imports as an empty namespace package."""
    import types

    shadow = types.ModuleType("entmachin")
    shadow.__file__, shadow.__path__ = None, [str(tmp_path / "entmachin")]
    monkeypatch.setitem(__import__("sys").modules, "entmachin", shadow)
    assert main(["--version"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "entmachin") in err and "PYTHONPATH" in err and "Traceback" not in err


def test_a_wrong_run_directory_says_whether_it_exists_and_export_errors_say_export(run_dir, tmp_path, capsys):
    assert "does not exist" in error_of(capsys, ["eval", str(tmp_path / "nothing-here")])
    (tmp_path / "empty").mkdir()
    err = error_of(capsys, ["export", str(tmp_path / "empty")])
    assert "exists" in err and "no config.yaml" in err
    import shutil

    copy = str(tmp_path / "no-checkpoints")
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoints"))
    err = error_of(capsys, ["export", copy])
    assert "holds no checkpoint" in err and "eval" not in err.replace(copy, "")


def test_league_help_names_the_seed_it_uses(capsys):
    with pytest.raises(SystemExit):
        main(["league", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "evaluation seed" in help_text and "1,000,003" in help_text
