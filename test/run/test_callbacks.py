"""Callbacks: the events a run calls and their order, stopping a run, a callback that raises, ``train.callbacks``
in YAML, ``StopWhen``, and ``entmachin.run.train`` from Python."""
import json
import math
import os

import pytest

import entmachin.run
from entmachin.frame.checkpoint_files import manifest_versions
from entmachin.run.callbacks import Callback, CallbackError
from entmachin.run.cli import main
from entmachin.run.config import ConfigError, config_from_dict
from entmachin.run.logs import RunError
from entmachin.run.runner import Runner

TINY = {"env": {"name": "Count"}, "rollout": {"num_envs": 4, "n_steps": 4}, "frame": {"batch_size": 16},
        "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": 96},
        "log": {"eval_interval": 32, "checkpoint_interval": 48, "eval_episodes": 3, "keep_checkpoints": None}}


def tiny(**train):
    return config_from_dict({**TINY, "train": {**TINY["train"], **train}})


class Recorder(Callback):
    """Writes down every event it hears, with the run's steps then."""

    def __init__(self, tag="recorder"):
        self.tag, self.events = tag, []

    def on_start(self, run):
        self.events.append(("on_start", run.state.env_steps))

    def after_rollout(self, run, stats):
        self.events.append(("after_rollout", run.state.env_steps, stats.n_env_steps))

    def after_update(self, run, stats):
        self.events.append(("after_update", run.state.env_steps))
        run.writer.add_scalar("custom/iterations", run.state.iterations, run.state.env_steps)

    def on_evaluation(self, run, record):
        self.events.append(("on_evaluation", record["env_steps"], record["final"]))

    def on_checkpoint(self, run, env_steps):
        self.events.append(("on_checkpoint", env_steps))

    def on_end(self, run, result):
        self.events.append(("on_end", result.env_steps, result.stopped, result.reason))

    def close(self, run):
        self.events.append(("close",))


def test_a_run_calls_every_event_in_order_with_the_run_state(tmp_path):
    recorder = Recorder()
    result = Runner(tiny(), str(tmp_path / "run"), progress=False, callbacks=[recorder]).train()
    events = recorder.events
    assert events[0] == ("on_start", 0) and events[-2:] == [("on_end", 96, None, None), ("close",)]
    loop = events[1:-2]
    rollouts = [e for e in loop if e[0] == "after_rollout"]
    assert [e[1] for e in rollouts] == list(range(0, 96, 16)) and all(e[2] == 16 for e in rollouts)
    assert [e[1] for e in loop if e[0] == "after_update"] == list(range(16, 97, 16))
    # every evaluation (those due at 32 and 64, then the final one) and every checkpoint, each once and in turn
    assert [e[1:] for e in loop if e[0] == "on_evaluation"] == [(32, False), (64, False), (96, True)]
    assert [e[1] for e in loop if e[0] == "on_checkpoint"] == [48, 96]
    assert loop.index(("on_evaluation", 96, True)) < loop.index(("on_checkpoint", 96))
    evals = json.load(open(tmp_path / "run" / "eval.json"))
    assert [e["env_steps"] for e in evals] == [32, 64, 96]
    assert manifest_versions(str(tmp_path / "run" / "checkpoints")) == [48, 96]
    assert result.reason is None and result.stopped is None


class StopAt(Callback):
    def __init__(self, steps):
        self.steps = steps

    def after_update(self, run, stats):
        if run.state.env_steps >= self.steps:
            run.stop(f"reached {self.steps} steps")


def test_a_callback_that_stops_the_run_ends_it_as_a_finished_run(tmp_path):
    recorder = Recorder()
    result = Runner(tiny(), str(tmp_path / "run"), progress=False, callbacks=[StopAt(40), recorder]).train()
    assert result.env_steps == 48 and result.stopped is None
    assert result.reason == "reached 40 steps"
    assert result.final_eval is not None and result.final_eval["env_steps"] == 48  # its final evaluation
    assert manifest_versions(str(tmp_path / "run" / "checkpoints")) == [48]  # and its final checkpoint
    assert recorder.events[-2] == ("on_end", 48, None, "reached 40 steps")


class Raises(Callback):
    def __init__(self, at):
        self.at = at

    def after_update(self, run, stats):
        if run.state.env_steps >= self.at:
            raise ValueError("a figure it could not compute")


def test_a_callback_that_raises_stops_the_run_naming_it_and_the_checkpoints_stay_whole(tmp_path):
    run_dir = str(tmp_path / "run")
    recorder = Recorder()
    with pytest.raises(CallbackError, match=r"callback Raises\.after_update raised at 64 environment steps: "
                                            r"ValueError: a figure it could not compute"):
        Runner(tiny(), run_dir, progress=False, callbacks=[Raises(64), recorder]).train()
    assert recorder.events[-1] == ("close",)  # closed however the run ended
    assert manifest_versions(os.path.join(run_dir, "checkpoints")) == [48]
    # the published checkpoint resumes: the run finishes from it
    result = Runner(tiny(), run_dir, resume=True, progress=False).train()
    assert result.env_steps == 96 and result.final_eval is not None


def test_a_callback_that_raises_before_the_first_checkpoint_leaves_no_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(CallbackError, match="Raises.after_update raised at 16"):
        Runner(tiny(), str(run_dir), progress=False, callbacks=[Raises(0)]).train()
    assert not run_dir.exists()


def test_an_object_with_no_event_is_refused_before_the_run_directory(tmp_path):
    with pytest.raises(RunError, match="callback 'object' has none of the events"):
        Runner(tiny(), str(tmp_path / "run"), progress=False, callbacks=[object()])
    assert not (tmp_path / "run").exists()


def test_callbacks_named_in_the_config_are_built_and_called(tmp_path):
    config = tiny(callbacks=["test.run.test_callbacks:Recorder",
                             {"class": "test.run.test_callbacks:StopAt", "kwargs": {"steps": 32}}])
    runner = Runner(config, str(tmp_path / "run"), progress=False)
    result = runner.train()
    assert result.env_steps == 32 and result.reason == "reached 32 steps"
    recorder = runner.callbacks.users[0]
    assert isinstance(recorder, Recorder) and recorder.events[0] == ("on_start", 0)


@pytest.mark.parametrize("specs, message", [
    (["test.run.test_callbacks:Nope"], r"train\.callbacks\[0\]: cannot find 'test\.run\.test_callbacks:Nope' "
                                       r"\(module 'test\.run\.test_callbacks' has no attribute 'Nope'\)"),
    (["no_such_package.mod:Thing"], r"train\.callbacks\[0\]: cannot find 'no_such_package\.mod:Thing' "
                                    r"\(No module named 'no_such_package'\)"),
    ([{"class": "test.run.test_callbacks:StopAt", "kwargs": {"stpes": 3}}],
     r"train\.callbacks\[0\]: test\.run\.test_callbacks:StopAt\(\*\*\{'stpes': 3\}\) raised TypeError"),
    ([{"class": "StopWhen", "kwargs": {"evaluations": 0}}],
     r"train\.callbacks\[0\]: .*StopWhen.* raised ValueError: evaluations: expected an int >= 1, got 0"),
])
def test_a_callback_the_config_cannot_build_is_refused_before_the_run_directory(tmp_path, specs, message):
    with pytest.raises(RunError, match=message):
        Runner(tiny(callbacks=specs), str(tmp_path / "run"), progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("specs, message", [
    (["Recorder"], r"train\.callbacks\[0\]: expected pkg\.mod:Class or one of entmachin's \['StopWhen'\], "
                   r"got 'Recorder'"),
    ([{"class": "StopWhen", "kwarg": {}}], r"train\.callbacks\[0\]: expected keys class and kwargs"),
    ([{"class": "StopWhen", "kwargs": [1]}], r"train\.callbacks\[0\]\.kwargs: expected a mapping"),
    ("StopWhen", r"train\.callbacks: expected a list"),
])
def test_a_malformed_callbacks_entry_is_refused_with_its_path(specs, message):
    with pytest.raises(ConfigError, match=message):
        tiny(callbacks=specs)


def test_stop_when_ends_the_run_at_its_threshold(tmp_path):
    stop = entmachin.run.StopWhen(figure="return", at_least=-math.inf, evaluations=2)
    result = Runner(tiny(), str(tmp_path / "run"), progress=False, callbacks=[stop]).train()
    assert result.env_steps == 64  # the evaluations at 32 and 64 both reach it
    assert result.reason.startswith("StopWhen: mean return") and "(2 evaluations in a row)" in result.reason
    # the final evaluation is the one at 64 steps, not played again: the same policy, seed and games
    evals = json.load(open(tmp_path / "run" / "eval.json"))
    assert [(e["env_steps"], e["final"]) for e in evals] == [(32, False), (64, False), (64, True)]
    assert {k: v for k, v in evals[2].items() if k != "final"} == {k: v for k, v in evals[1].items() if k != "final"}
    assert result.final_eval == evals[2]
    never = entmachin.run.StopWhen(figure="return", at_least=math.inf)
    assert Runner(tiny(), str(tmp_path / "other"), progress=False, callbacks=[never]).train().env_steps == 96


def test_stop_when_naming_a_figure_the_evaluations_do_not_measure_is_refused(tmp_path):
    stop = entmachin.run.StopWhen(figure="scripted", at_least=0.9)
    with pytest.raises(RunError, match=r"StopWhen: figure 'scripted' is not measured by this run's evaluations; "
                                       r"expected return or one of log.eval_opponents \[\]"):
        Runner(tiny(), str(tmp_path / "run"), progress=False, callbacks=[stop]).train()
    assert not (tmp_path / "run").exists()


def test_train_from_python_returns_the_trained_frame_and_resumes(tmp_path):
    recorder = Recorder()
    run_dir = str(tmp_path / "run")
    frame = entmachin.run.train(TINY, callbacks=[recorder], overrides=["train.total_steps=48"], run_dir=run_dir,
                                progress=False)
    assert hasattr(frame, "actor") and frame.optimizers  # the trained frame, ready to act or train on
    assert recorder.events[-2][:2] == ("on_end", 48)
    frame = entmachin.run.train(resume=run_dir, overrides=["train.total_steps=96"], progress=False)
    assert manifest_versions(os.path.join(run_dir, "checkpoints")) == [48, 96]
    with pytest.raises(RunError, match="give a config or resume=RUN_DIR, not both"):
        entmachin.run.train(TINY, resume=run_dir)
    with pytest.raises(TypeError, match="config: expected a RunConfig"):
        entmachin.run.train(3, run_dir=str(tmp_path / "x"))


def test_the_command_takes_callbacks_and_says_why_a_run_stopped_early(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    args = ["train", "Count", "--run-dir", run_dir, "--no-progress"]
    for key, value in TINY["rollout"].items():
        args += ["--set", f"rollout.{key}={value}"]
    args += ["--set", "frame.batch_size=16", "--set", "log.eval_interval=32", "--set", "log.eval_episodes=3",
             "--set", "train.total_steps=96",
             "--set", "train.callbacks=[{class: StopWhen, kwargs: {figure: return, at_least: -.inf}}]"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "stopped early by StopWhen: mean return" in out and "after 32 environment steps" in out
    # a resumed run may change its callbacks
    assert main(["train", "--resume", run_dir, "--no-progress", "--set", "train.callbacks=[]"]) == 0
    assert "after 96 environment steps" in capsys.readouterr().out


def test_the_rollout_collector_is_a_collector(tmp_path):
    from entmachin.frame.collector import Collector, RolloutCollector

    runner = Runner(tiny(total_steps=16), str(tmp_path / "run"), progress=False)
    runner.train()
    assert isinstance(runner.collector, RolloutCollector) and isinstance(runner.collector, Collector)
