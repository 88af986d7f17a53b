"""RayEnvList: Ray actors as environment workers, equal to ParallelEnvList for the same seeds."""
import subprocess
import sys

import numpy as np
import pytest

from entmachin.env import EnvWorkerError, ParallelEnvList, random_actions
from entmachin.env.examples import MineSweeper
from entmachin.env.ray_env_list import RayEnvList, import_ray
from entmachin.env.wire import pack
from test.conftest import REPO
from test.env.test_parallel_env_list import Fragile, _fates


def test_same_seeds_give_the_same_observations_as_parallel_env_list(ray_local):
    remote = RayEnvList(MineSweeper, 5, 2, seed=7)
    local = ParallelEnvList(MineSweeper, 5, 2, seed=7, start_method="fork")
    try:
        rng = np.random.default_rng(0)
        a, b = remote.reset(), local.reset()
        assert pack(a) == pack(b)
        ended = 0
        for _ in range(30):
            actions = random_actions(b, local.action_space(), rng)
            a, b = remote.act(actions), local.act(actions)
            assert pack(a) == pack(b)  # features, masks, rewards, done, final observations: every byte
            ended += int(b.done.sum())
        assert ended > 0  # episodes ended, so final observations were compared too
        assert remote.obs_space() == local.obs_space()
        assert len(remote.reset_rows) == 0
        state = remote.get_state()
        after = remote.act(actions)
        remote.set_state(state)
        assert pack(remote.act(actions)) == pack(after)
    finally:
        remote.close()
        local.close()


def test_an_error_in_a_worker_names_the_worker_its_environment_and_node(ray_local):
    envs = RayEnvList(Fragile, 4, 2)
    try:
        envs.reset()
        with pytest.raises(EnvWorkerError, match=r"RayEnvList: worker 1 \(environments 2\.\.3, on .+, node \w+\) "
                                                  r"raised ValueError in environment 3 during act\(\): .*told to fail"):
            envs.act(_fates("live", "live", "live", "raise"))
    finally:
        envs.close()


def test_a_dead_worker_is_reported_or_replaced(ray_local):
    envs = RayEnvList(Fragile, 4, 2)
    try:
        envs.reset()
        with pytest.raises(EnvWorkerError, match=r"worker 0 \(environments 0\.\.1, on .+\) died during act\(\) "
                                                  r"\(\w+: .*\); pass restart=True to replace dead workers"):
            envs.act(_fates("exit", "live", "live", "live"))
    finally:
        envs.close()
    envs = RayEnvList(Fragile, 4, 2, restart=True)
    try:
        envs.reset()
        obs = envs.act(_fates("live", "live", "exit", "live"))
        assert envs.reset_rows.tolist() == [2, 3]
        assert obs.done.tolist() == [False, False, True, True] and obs.truncated.tolist() == [False, False, True, True]
        assert obs.final_index.tolist() == [2, 3]
        assert len(envs.act(_fates("live", "live", "live", "live"))) == 4 and len(envs.reset_rows) == 0
    finally:
        envs.close()


def test_importing_entmachin_never_imports_ray():
    code = ("import sys, entmachin, entmachin.env, entmachin.env.ray_env_list, entmachin.frame, entmachin.run.runner, "
            "entmachin.run.cli; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"RayEnvList needs Ray.*pip install 'entmachin\[ray\]'"):
        import_ray()
    with pytest.raises(ImportError, match=r"pip install 'entmachin\[ray\]'"):
        RayEnvList(MineSweeper, 2, 1)


def test_counts_are_checked(ray_local):
    with pytest.raises(ValueError, match=r"RayEnvList: num_workers must be an int >= 1, got 0"):
        RayEnvList(MineSweeper, 2, 0)


def test_train_with_ray_workers_learns_what_parallel_env_list_workers_learn(ray_local, tmp_path):
    import torch

    from entmachin.run.config import config_from_dict
    from entmachin.run.runner import Runner
    from test.run.test_runner import final_actor

    weights = []
    for workers in (None, "auto"):
        config = config_from_dict({
            "env": {"name": "Count"}, "rollout": {"num_envs": 4, "n_steps": 4, "processes": 2, "workers": workers},
            "frame": {"batch_size": 16}, "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": 48},
            "log": {"eval_interval": 10_000, "checkpoint_interval": 10_000, "eval_episodes": 2},
        })
        Runner(config, str(tmp_path / str(workers)), progress=False).train()
        weights.append(final_actor(str(tmp_path / str(workers))))
        text = (tmp_path / str(workers) / "config.yaml").read_text()
        assert ("environment workers on Ray" in text) == (workers is not None)
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_games_of_several_players_give_env_list_rows_per_seat(ray_local):
    from entmachin.env import EnvList
    from test.env.arena import Arena

    make = lambda: Arena(seats=None, length=3)  # noqa: E731
    remote, local = RayEnvList(make, 4, 2, seed=5), EnvList(make, 4, seed=5)
    try:
        assert remote.row_index().seat == local.row_index().seat and len(remote) == len(local)
        rng = np.random.default_rng(0)
        a, b = remote.reset(), local.reset()
        for _ in range(8):
            assert pack(a) == pack(b)
            actions = random_actions(b, local.action_space(), rng)
            a, b = remote.act(actions), local.act(actions)
        assert pack(a) == pack(b)
    finally:
        remote.close()
