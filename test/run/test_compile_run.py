"""``model.compile`` in a run: the log says what it chose, and ``--resume`` may switch it (the
checkpoints are the same either way). ``torch.compile`` is replaced by the identity here, so the
compiled path runs its kernels' own code: the plumbing is tested, not inductor (see
test/model/test_compiled.py for a real compile)."""
import logging

import pytest
import torch

from entmachin.model import compiled
from entmachin.model.compiled import KERNELS, is_compiled
from entmachin.run import cli, commands
from test.run.test_runner import final_actor

CONFIG = """\
env: {name: Count}
rollout: {num_envs: 4, n_steps: 4}
frame: {batch_size: 16, n_anneal_updates: null}  # constant rates: the first leg runs 64 steps, the straight run 128
model: {d_model: 8, d_qk: 8, compile: true}
train: {total_steps: 64}
log: {checkpoint_interval: 32, eval_interval: 100000, eval_episodes: 2}
"""


@pytest.fixture
def identity_compile(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)
    monkeypatch.setattr(compiled, "_PROBLEMS", {})
    monkeypatch.setattr(compiled, "_probe", lambda device: None)
    for kernel in KERNELS:
        kernel.reset()
    yield
    for kernel in KERNELS:
        kernel.reset()


def _train(argv, seen):
    original = commands._train

    def keep(*args):
        result, runner = original(*args)
        seen.append(is_compiled(runner.frame.actor))
        return result, runner

    commands._train = keep
    try:
        commands.train(cli._parser().parse_args(argv))
    finally:
        commands._train = original


def test_resume_switches_model_compile_and_continues_as_the_straight_run(tmp_path, identity_compile, caplog):
    config = tmp_path / "count.yaml"
    config.write_text(CONFIG)
    seen = []
    common = ["--no-progress", "--run-dir"]
    with caplog.at_level(logging.INFO):
        _train(["train", str(config), *common, str(tmp_path / "straight"), "--set", "train.total_steps=128"], seen)
    assert "model.compile: true: compiled on cpu" in caplog.text
    assert "recompiles over the run" in caplog.text
    assert "# model.compile: true: compiled on cpu." in (tmp_path / "straight" / "config.yaml").read_text()
    _train(["train", str(config), *common, str(tmp_path / "resumed")], seen)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        _train(["train", "--resume", str(tmp_path / "resumed"), "--no-progress", "--set", "train.total_steps=128",
                "--set", "model.compile=false"], seen)
    assert "model.compile: the network runs eagerly" in caplog.text
    resumed_config = (tmp_path / "resumed" / "config.yaml").read_text()  # rewritten with its header
    assert "# model.compile: the network runs eagerly." in resumed_config and "compile: false" in resumed_config
    assert "# rollout.overlap: " in resumed_config
    assert seen == [True, True, False]
    straight, resumed = final_actor(str(tmp_path / "straight")), final_actor(str(tmp_path / "resumed"))
    assert straight.keys() == resumed.keys()
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
