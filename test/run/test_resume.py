"""A run killed (SIGKILL) or stopped (SIGINT) mid-way and resumed repeats the uninterrupted run bit for bit."""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from test.run.test_cli import scalars

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = ["--set", "rollout.num_envs=8", "--set", "rollout.n_steps=8", "--set", "frame.batch_size=32",
            "--set", "model.d_model=16", "--set", "model.d_qk=8", "--set", "train.total_steps=1024",
            "--set", "log.checkpoint_interval=128", "--set", "log.eval_interval=512", "--set", "log.eval_episodes=4",
            "--no-progress"]
LOSSES = ("losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl")


def command(run_dir, processes, *extra):
    """``processes``: 0, 2, or "2 overlapped" (two worker processes, rollout.overlap: true)."""
    overlap = ["--set", "rollout.overlap=true"] if processes == "2 overlapped" else []
    return [sys.executable, "-m", "entmachin", "train", "MineSweeper", "--run-dir", run_dir,
            "--set", f"rollout.processes={str(processes)[0]}", *overlap, *SETTINGS, *extra]


def run(args, **kwargs):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO}
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)


def losses(run_dir):
    found = scalars(run_dir)
    return {tag: found[tag] for tag in LOSSES}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = {}
    for processes in (0, 2, "2 overlapped"):
        run_dir = str(tmp_path_factory.mktemp("uninterrupted") / f"p{processes}".replace(" ", "-"))
        process = run(command(run_dir, processes))
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        out[processes] = losses(run_dir)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("processes, sig", [(0, signal.SIGKILL), (0, signal.SIGINT), (2, signal.SIGKILL),
                                            (2, signal.SIGINT), (2, signal.SIGTERM), ("2 overlapped", signal.SIGKILL),
                                            ("2 overlapped", signal.SIGINT)])
def test_a_killed_or_stopped_run_resumes_exactly(uninterrupted, tmp_path, processes, sig):
    run_dir = str(tmp_path / "run")
    process = run(command(run_dir, processes))
    deadline = time.monotonic() + 120
    while len(glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint_*.json"))) < 3:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1]
        time.sleep(0.02)
    os.killpg(process.pid, sig)  # the whole group: parent and environment workers
    _, err = process.communicate(timeout=120)
    if sig in (signal.SIGINT, signal.SIGTERM):  # stopped after the iteration, with a checkpoint
        assert process.returncode == 128 + sig, err
        assert f"resume with:  entmachin train --resume {run_dir}" in err, err
    else:
        assert process.returncode == -signal.SIGKILL
    checkpoints = sorted(int(os.path.basename(p)[11:-5]) for p in glob.glob(os.path.join(run_dir, "checkpoints",
                                                                                          "checkpoint_*.json")))
    resumed = run([sys.executable, "-m", "entmachin", "train", "--resume", run_dir, "--no-progress"])
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    expected, found = uninterrupted[processes], losses(run_dir)
    after = [step for step, _ in expected["losses/policy_loss"] if step > checkpoints[-1]]
    assert len(after) >= 3, (checkpoints, after)
    for tag in LOSSES:
        assert found[tag] == expected[tag], tag  # every step, before and after the resume, bit for bit


def test_a_game_of_two_players_resumes_exactly_from_a_checkpoint(tmp_path):
    # Whole run to 256 steps; then its last checkpoint is dropped and the run resumed from the one at 128:
    # the games in progress (both seats' rows, their returns so far) continue, and the losses repeat.
    from entmachin.run.cli import main

    run_dir = str(tmp_path / "c4")
    settings = ["--set", "rollout.num_envs=4", "--set", "rollout.n_steps=16", "--set", "frame.batch_size=64",
                "--set", "model.d_model=16", "--set", "model.n_layer=1", "--set", "train.total_steps=256",
                "--set", "log.checkpoint_interval=128", "--set", "log.eval_interval=256", "--set", "log.eval_episodes=4",
                "--no-progress"]
    assert main(["train", "ConnectFour", "--run-dir", run_dir, *settings]) == 0
    expected = losses(run_dir)
    for path in glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint_256.json")):
        os.remove(path)
    assert main(["train", "--resume", run_dir, "--no-progress"]) == 0
    found = losses(run_dir)
    for tag in LOSSES:
        assert found[tag] == expected[tag] and [s for s, _ in found[tag]][-1] == 256, tag
