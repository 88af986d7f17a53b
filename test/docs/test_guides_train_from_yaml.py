"""docs/guides/train-from-yaml.md: its configs load, its run ran, and the errors it shows are the command's."""
import pathlib

import yaml

from entmachin.run.cli import main as entmachin
from entmachin.run.config import config_from_dict, load_config
from test.docs._pages import DOCS, blocks

PAGE = "guides/train-from-yaml.md"


def test_the_minimal_run_config_loads():
    minimal = blocks(DOCS / PAGE, "yaml")[0]
    config = config_from_dict(yaml.safe_load(minimal))
    assert config.env.name == "MineSweeper" and config.env.max_episode_steps == 200
    assert config.frame.name == "PPO" and config.frame.settings.batch_size == 256
    assert (config.rollout.num_envs, config.rollout.n_steps, config.train.total_steps) == (32, 16, 30000)


def test_every_config_on_the_page_loads():
    for block in blocks(DOCS / PAGE, "yaml"):
        config_from_dict(yaml.safe_load(block))


def test_the_in_process_run_trained_and_the_misspelt_field_was_refused(page):
    ns = page(PAGE)
    assert ns["trained"] == 0 and ns["misspelt"] == 2
    run_dir = pathlib.Path(ns["__directory__"]) / "runs" / "count"
    assert load_config(str(run_dir / "config.yaml")).train.total_steps == 1000
    assert (run_dir / "checkpoints" / "checkpoint_1024.json").exists()  # rounded up to whole rollouts


def _error(capsys, argv):
    capsys.readouterr()
    assert entmachin(argv) == 2
    return capsys.readouterr().err.strip()


def _shown(start):
    lines = [line for block in blocks(DOCS / PAGE, "text") for line in block.splitlines()]
    return next(line for line in lines if line.startswith(start))


def _matches(shown, printed):
    """``printed`` is ``shown``, where ``[...]`` in ``shown`` stands for a list left out."""
    head, _, tail = shown.partition("[...]")
    return printed.startswith(head) and printed.endswith(tail)


def test_the_errors_the_page_shows_are_the_commands(page, capsys, monkeypatch):
    monkeypatch.chdir(page(PAGE)["__directory__"])
    assert _matches(_shown("entmachin: error: frame.discont"),
                    _error(capsys, ["train", "count.yaml", "--set", "frame.discont=0.99"]))
    assert _matches(_shown("entmachin: error: env.name"), _error(capsys, ["train", "MineSweepr"]))
    holds = _error(capsys, ["train", "count.yaml", "--run-dir", "runs/count"])
    assert holds == _shown("entmachin: error: 'runs/ms'").replace("runs/ms", "runs/count")
    overlap = _error(capsys, ["train", "count.yaml", "--run-dir", "runs/overlap", "--set", "rollout.processes=0",
                              "--set", "rollout.overlap=true"])
    assert overlap.splitlines()[-1] == _shown("entmachin: error: rollout.overlap")
    assert not pathlib.Path("runs/overlap").exists()  # a run that failed before its first checkpoint
