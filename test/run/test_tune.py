"""``entmachin tune``: the tune: section's checks, studies of ordinary runs on SQLite and PostgreSQL, pruning,
continuing, interruption and the report."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from entmachin.run.config import ConfigError, config_from_dict
from entmachin.run.tune.space import check_metric, check_space

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = {"env": {"name": "Count"}, "frame": {"name": "PPO", "batch_size": 32}, "model": {"d_model": 16},
        "rollout": {"num_envs": 8, "n_steps": 8}, "train": {"total_steps": 512, "seed": 0},
        "log": {"eval_interval": 128, "eval_episodes": 8},
        "tune": {"steps": 256, "trials": 3, "space": {"frame.actor_learning_rate": {"log_uniform": [0.0003, 0.01]},
                                                      "frame.n_epochs": {"int": [1, 4]}}}}


def _config(**tune):
    return config_from_dict({**BASE, "tune": {**BASE["tune"], **tune}})


@pytest.mark.parametrize("space, message", [
    ({"frame.actor_lerning_rate": {"uniform": [0.1, 0.2]}},
     r"tune.space.frame.actor_lerning_rate: not a key of this config \(did you mean 'frame.actor_learning_rate'"),
    ({"frame.discount": {"normal": [0.9, 0.99]}}, "tune.space.frame.discount: expected one of"),
    ({"frame.discount": {"uniform": [0.99, 0.9]}}, r"range \[0.99, 0.9\] is empty"),
    ({"frame.discount": {"uniform": [0.9]}}, r"uniform needs \[low, high\]"),
    ({"frame.actor_learning_rate": {"log_uniform": [0, 0.1]}}, "log_uniform needs 0 < low < high"),
    ({"frame.n_epochs": {"int": [1.5, 4]}}, r"int needs integers \[low, high\]"),
    ({"frame.n_epochs": {"uniform": [1.0, 4.0]}}, r"tune.space.frame.n_epochs: uniform value 1.0 is refused by the "
                                                  r"config: frame.n_epochs"),
    ({"frame.batch_size": {"choice": []}}, "choice needs a non-empty list"),
    ({"frame.batch_size": {"choice": [32, 1000]}}, "choice value 1000 is refused by the config: frame.batch_size: "
                                                   "1000 is more than the 64 rows"),
    ({"train.seed": {"int": [0, 9]}}, "train.seed says what a trial is"),
])
def test_a_search_space_is_checked_against_the_configs_own_declarations(space, message):
    with pytest.raises(ConfigError, match=message):
        check_space(_config(space=space))


def test_the_metric_must_be_a_figure_the_runs_write():
    check_metric(_config())
    with pytest.raises(ConfigError, match=r"tune.metric: 'scripted' is not a figure .* expected return \(log.eval_"):
        check_metric(_config(metric="scripted"))
    with pytest.raises(ConfigError, match="seeds: expected an int >= 1"):
        _config(seeds=0)


optuna = pytest.importorskip("optuna")

from entmachin.run.tune.report import report  # noqa: E402
from entmachin.run.tune.study import TuneError, run_study  # noqa: E402


def _trials(study_dir):
    with open(os.path.join(study_dir, "study.yaml")) as f:
        held = yaml.safe_load(f)
    return optuna.load_study(study_name=held["study"], storage=held["storage"]).trials


def test_a_study_runs_its_trials_as_runs_continues_and_reports(tmp_path):
    study_dir = str(tmp_path / "study")
    run_study(_config(), study_dir)
    trials = _trials(study_dir)
    assert len(trials) == 3 and sorted(t.number for t in trials) == [0, 1, 2]
    for t in trials:  # each an ordinary run directory
        assert os.path.exists(os.path.join(study_dir, f"trial-{t.number:04d}", "config.yaml"))
    run_study(_config(), study_dir, trials=4)  # the same command again: one more trial, none run twice
    assert len(_trials(study_dir)) == 4
    lines = report(study_dir)
    assert lines[0].startswith("study 'Count-tune'") and "finished" in lines[0]
    best = config_from_dict(yaml.safe_load(open(os.path.join(study_dir, "best.yaml"))))
    finished = [t for t in _trials(study_dir) if t.state.name == "COMPLETE"]
    top = max(finished, key=lambda t: t.value)
    assert best.frame.settings.actor_learning_rate == pytest.approx(top.params["frame.actor_learning_rate"])
    assert best.train.total_steps == 256
    assert os.path.getsize(os.path.join(study_dir, "history.png")) > 0


def test_a_directory_of_another_study_or_an_unreachable_storage_is_refused_before_any_trial(tmp_path):
    study_dir = str(tmp_path / "study")
    run_study(_config(trials=1), study_dir)
    with pytest.raises(TuneError, match="holds a study of another config"):
        run_study(_config(trials=1, metric="return", direction="minimize"), study_dir)
    with pytest.raises(TuneError, match=r"holds study 'Count-tune'"):
        run_study(_config(trials=1), study_dir, name="another")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(TuneError, match="exists and holds no study"):
        run_study(_config(trials=1), str(tmp_path / "other"))
    with pytest.raises(ConfigError, match="tune: a trial's config is refused: train.total_steps: 32 is less than one "
                                          "rollout"):
        run_study(_config(trials=1, steps=32), str(tmp_path / "short"))
    with pytest.raises(TuneError, match="--storage postgresql://nobody@127.0.0.1:9/none: cannot open the study"):
        run_study(_config(trials=1), str(tmp_path / "pg"), storage="postgresql://nobody@127.0.0.1:9/none")
    assert not (tmp_path / "pg").exists()


def test_a_pruned_trial_stops_at_the_evaluation_the_pruner_names_and_counts_in_the_study(tmp_path, monkeypatch):
    """The trial reports each evaluation as it trains; when the pruner says so the run stops there (checkpoint
    and all) and the trial is pruned. A pruner that prunes every return under 2 prunes every trial at once."""
    from entmachin.run.tune import study as study_module

    monkeypatch.setattr(study_module, "_pruner", lambda optuna, name: optuna.pruners.ThresholdPruner(lower=2.0))
    study_dir = str(tmp_path / "study")
    run_study(_config(trials=3, steps=512), study_dir)
    trials = _trials(study_dir)
    assert [t.state.name for t in trials] == ["PRUNED"] * 3
    for t in trials:
        assert list(t.intermediate_values) == [128]  # the first evaluation
        with open(os.path.join(study_dir, f"trial-{t.number:04d}", "eval.json")) as f:
            assert max(r["env_steps"] for r in yaml.safe_load(f)) < 512
        assert os.listdir(os.path.join(study_dir, f"trial-{t.number:04d}", "checkpoints"))


def test_a_shared_critics_learning_rate_follows_the_actors():
    """With model.critic: shared one optimizer trains both, and the config refuses two rates: a searched
    frame.actor_learning_rate sets the critic's too, at the start's checks and in each trial."""
    from entmachin.run.tune.space import trial_config

    shared = config_from_dict({**BASE, "model": {**BASE["model"], "critic": "shared"}})
    assert [d.key for d in check_space(shared)] == ["frame.actor_learning_rate", "frame.n_epochs"]
    trial = trial_config(shared, {"frame.actor_learning_rate": 0.002, "frame.n_epochs": 2}, 0)
    assert trial.frame.settings.actor_learning_rate == trial.frame.settings.critic_learning_rate == 0.002


def test_score_mean_values_a_trial_by_the_mean_of_its_evaluations(tmp_path):
    """tune.score: mean: a trial's value is the mean over its evaluations (the final one included once), so a
    config that learns in fewer steps scores higher; final: the last evaluation's."""
    for score in ("mean", "final"):
        study_dir = str(tmp_path / score)
        run_study(_config(trials=2, score=score, pruner="none"), study_dir)
        for t in _trials(study_dir):
            with open(os.path.join(study_dir, f"trial-{t.number:04d}", "eval.json")) as f:
                means = [r["mean"] for r in yaml.safe_load(f)]
            assert len(means) == 2  # 128 and 256 (the final one at 256, not twice)
            assert t.value == pytest.approx(sum(means) / len(means) if score == "mean" else means[-1])


def test_a_failed_trial_says_why(tmp_path, monkeypatch, caplog):
    """A run that raises fails its trial with its error on the trial's line (optuna keeps it in no attribute)."""
    from entmachin.run import runner
    from entmachin.run.logs import RunError

    def broken(*args, **kwargs):
        raise RunError("the environment broke at step 3")

    monkeypatch.setattr(runner, "Runner", broken)
    with caplog.at_level("WARNING", logger="entmachin.run.tune.study"):
        run_study(_config(trials=5), str(tmp_path / "study"))
    trials = _trials(str(tmp_path / "study"))
    assert [t.state.name for t in trials] == ["FAIL"] * 3  # three in a row: the study stops
    assert trials[0].user_attrs["fail_reason"] == "RunError: the environment broke at step 3"
    assert "trial 0: fail (RunError: the environment broke at step 3)" in caplog.text
    assert "3 trials in a row failed; the study stops (the last: RunError: the environment broke" in caplog.text


def _command(study_dir, config_path, *extra, storage=None):
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-m", "entmachin", "tune", config_path, "--dir", study_dir, *extra]
    if storage:
        args += ["--storage", storage]
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _two_processes(tmp_path, storage=None, trials_wanted=6):
    config_path = str(tmp_path / "tune.yaml")
    with open(config_path, "w") as f:
        yaml.safe_dump({**BASE, "tune": {**BASE["tune"], "trials": trials_wanted, "pruner": "none"}}, f)
    study_dir = str(tmp_path / "study")
    first = _command(study_dir, config_path, storage=storage)
    time.sleep(3)  # the first creates the study; the second joins it
    second = _command(study_dir, config_path, storage=storage)
    for process in (first, second):
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-2000:]
    trials = _trials(study_dir)
    assert len({t.number for t in trials}) == len(trials)  # unique numbers
    assert all(t.state.name == "COMPLETE" for t in trials), [t.state.name for t in trials]  # none lost
    assert len(trials) >= trials_wanted  # (two processes may each start the last one: Optuna's count is a floor)
    for t in trials:  # each trial's value is its own run's final evaluation: run once, in its own directory
        with open(os.path.join(study_dir, f"trial-{t.number:04d}", "eval.json")) as f:
            records = yaml.safe_load(f)
        assert records[-1]["final"] and records[-1]["mean"] == pytest.approx(t.value)
    with open(os.path.join(study_dir, "study.yaml")) as f:
        held = yaml.safe_load(f)
    study = optuna.load_study(study_name=held["study"], storage=held["storage"])
    assert study.best_value == max(t.value for t in trials)


def test_two_processes_share_one_sqlite_study_without_losing_or_repeating_a_trial(tmp_path):
    _two_processes(tmp_path)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres(tmp_path_factory):
    """A PostgreSQL server of Debian's binaries on a free port (as the postgres user when run as root)."""
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed (Debian: postgresql)")
    pytest.importorskip("psycopg")
    root = tempfile.mkdtemp(prefix="entmachin-pg-")
    as_user = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        import pwd

        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), _free_port()
    subprocess.run([*as_user, "initdb", "-D", data, "-A", "trust", "-U", "postgres"], check=True,
                   capture_output=True)
    subprocess.run([*as_user, "pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w", "-o",
                    f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "start"], check=True, capture_output=True)
    try:
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        yield url
    finally:
        subprocess.run([*as_user, "pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_two_processes_share_one_postgresql_study(tmp_path, postgres):
    _two_processes(tmp_path, storage=postgres)


def test_ctrl_c_ends_the_running_trial_and_leaves_the_study_whole(tmp_path):
    """SIGINT (Ctrl-C) stops the trial's run as it stops any run (with a checkpoint), the trial is marked failed
    rather than left running, and the command says so and exits 130."""
    config_path = str(tmp_path / "tune.yaml")
    with open(config_path, "w") as f:
        yaml.safe_dump({**BASE, "tune": {**BASE["tune"], "steps": 200_000, "trials": 2}}, f)
    study_dir = str(tmp_path / "study")
    process = _command(study_dir, config_path)
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(study_dir, "trial-0000", "eval.json")) and time.time() < deadline:
        time.sleep(0.2)  # the trial's run is under way
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    assert "interrupted; the study in" in err
    states = [t.state.name for t in _trials(study_dir)]
    assert states == ["FAIL"], states  # not left RUNNING: the study is whole


def test_a_study_whose_trials_keep_failing_stops_after_three(tmp_path, monkeypatch):
    from entmachin.run.logs import RunError
    from entmachin.run.runner import Runner

    def broken(self):
        raise RunError("the environment broke")

    monkeypatch.setattr(Runner, "train", broken)
    study_dir = str(tmp_path / "study")
    run_study(_config(trials=5), study_dir)
    assert [t.state.name for t in _trials(study_dir)] == ["FAIL"] * 3


def test_jobs_run_trials_in_processes_of_their_own_on_one_study(tmp_path):
    study_dir = str(tmp_path / "study")
    run_study(_config(trials=3, pruner="none"), study_dir, jobs=2)
    trials = _trials(study_dir)
    assert len(trials) >= 3 and len({t.number for t in trials}) == len(trials)
    assert all(t.state.name == "COMPLETE" for t in trials)
    assert all(os.path.exists(os.path.join(study_dir, f"trial-{t.number:04d}", "eval.json")) for t in trials)
