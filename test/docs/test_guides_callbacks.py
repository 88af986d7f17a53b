"""docs/guides/callbacks.md: the callback's figure reached tensorboard, StopWhen stopped the run, refusals as shown."""
import json
import pathlib

import yaml

from entmachin.run.cli import main as entmachin
from test.docs._pages import DOCS, blocks

PAGE = "guides/callbacks.md"


def test_the_callback_example_wrote_its_figure(page):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ns = page(PAGE)
    seen = ns["longest"].seen
    assert seen and all(1 <= n <= 200 for n in seen)  # MineSweeper's bundled step limit
    events = EventAccumulator(str(pathlib.Path(ns["__directory__"]) / "runs" / "ms-custom"),
                              size_guidance={"scalars": 0})
    events.Reload()
    assert [e.value for e in events.Scalars("custom/longest_episode")] == seen


def test_stop_when_ended_the_run_as_a_finished_run_ends(page):
    run_dir = pathlib.Path(page(PAGE)["__directory__"]) / "runs" / "count"
    evaluations = json.loads((run_dir / "eval.json").read_text())
    assert [(e["env_steps"], e["final"]) for e in evaluations] == [(512, False), (512, True)]  # not 4096
    assert [p.name for p in run_dir.glob("checkpoints/checkpoint_*.json")] == ["checkpoint_512.json"]


def test_the_command_runs_the_yaml_callbacks_and_prints_the_reason(page, capsys, monkeypatch):
    monkeypatch.chdir(page(PAGE)["__directory__"])
    capsys.readouterr()
    status = entmachin(["train", "Count", "--run-dir", "runs/count-yaml", "--no-progress",
                        "--set", "train.callbacks=[{class: StopWhen, kwargs: {at_least: 0.9}}]",
                        "--set", "train.total_steps=4096", "--set", "log.eval_interval=512",
                        "--set", "log.eval_episodes=10"])
    assert status == 0
    assert "stopped early by StopWhen: mean return 1.000 >= 0.9 at 512 environment steps" in capsys.readouterr().out


def test_the_refusals_are_the_ones_shown_and_leave_no_run_directory(page, capsys, monkeypatch):
    monkeypatch.chdir(page(PAGE)["__directory__"])
    shown = blocks(DOCS / PAGE, "text")[-1].strip().splitlines()
    entry = yaml.safe_load(blocks(DOCS / PAGE, "yaml")[0])["train"]["callbacks"][0]
    for spec, line in ((["nosuch.mod:Cls"], shown[0]), ([entry], shown[1])):
        capsys.readouterr()
        status = entmachin(["train", "MineSweeper", "--run-dir", "runs/refused", "--no-progress",
                            "--set", f"train.callbacks={json.dumps(spec)}", "--set", "train.total_steps=512"])
        assert status == 2 and capsys.readouterr().err.strip() == line
        assert not pathlib.Path("runs/refused").exists()
