"""The runner's build of gymnasium environments (``env.name: gymnasium:ID``) and of ``model.kind: mlp``."""
import sys

import gymnasium as gym
import numpy as np
import pytest

from entmachin.env import EnvList, GlobalContinuousAction, GymnasiumVecEnv, ParallelEnvList
from entmachin.env.adapters import GymnasiumEnvironment
from entmachin.model import DenseNet, DenseNetCritic
from entmachin.ragged.array import RaggedArrayF32
from entmachin.run import envs
from entmachin.run.build import make_envs, make_frame
from entmachin.run.envs import EnvFactory, GymnasiumMaker, env_class
from entmachin.run.config import ConfigError, EnvSection, config_from_dict

SMALL = {"rollout": {"num_envs": 2, "n_steps": 4}, "frame": {"batch_size": 8}}


def pendulum(**sections):
    return config_from_dict({"env": {"name": "gymnasium:Pendulum-v1"}, "model": {"kind": "mlp"}, **SMALL, **sections})


def test_a_gymnasium_id_names_one_maker_with_its_registered_step_limit():
    maker = env_class("gymnasium:Pendulum-v1")
    assert isinstance(maker, GymnasiumMaker) and maker.max_episode_steps == 200
    assert env_class("Pendulum-v1") is maker  # a bare id gymnasium registers, and entmachin's registry lacks
    assert env_class("gymnasium:CartPole-v1").max_episode_steps == gym.spec("CartPole-v1").max_episode_steps == 500
    env = maker(g=9.0)
    assert isinstance(env, GymnasiumEnvironment) and env.env.unwrapped.g == 9.0
    assert env_class("MineSweeper").__name__ == "MineSweeper"  # the registry first


@pytest.mark.parametrize("name, match", [
    ("gymnasium:Pendulm-v1", r"^env.name: 'Pendulm-v1' is not a registered gymnasium environment .*close registered "
                             r"ids: Pendulum-v1"),
    ("gymnasium:Pendulum-v9", r"'Pendulum-v9' is not a registered gymnasium environment .*Pendulum-v1"),
    ("Pendulm-v1", r"^env.name: unknown environment 'Pendulm-v1'; did you mean 'gymnasium:Pendulum-v1'.*or give "
                   r"'gymnasium:ID'"),
])
def test_unknown_ids_list_close_registered_ones(name, match):
    with pytest.raises(ConfigError, match=match):
        env_class(name)


def test_a_missing_gymnasium_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(envs, "_MAKERS", {})
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # import gymnasium now raises ImportError
    with pytest.raises(ConfigError, match=r"^env.name: 'gymnasium:Pendulum-v1' is a gymnasium environment, and "
                                          r"gymnasium is not installed: pip install entmachin\[gymnasium\]"):
        env_class("gymnasium:Pendulum-v1")
    with pytest.raises(ConfigError, match=r"unknown environment 'Pendulum-v1'"):
        env_class("Pendulum-v1")


def test_env_factory_passes_kwargs_and_the_step_limit_to_gymnasium_make():
    factory = EnvFactory(EnvSection(name="gymnasium:Pendulum-v1", kwargs={"g": 3.0}, max_episode_steps=7))
    env = factory()
    assert isinstance(env, GymnasiumEnvironment)  # no entmachin TimeLimit: gymnasium's cuts at 7
    assert env.env.spec.max_episode_steps == 7 and env.env.unwrapped.g == 3.0
    env.reset()
    for _ in range(7):
        obs = env.act({"action": GlobalContinuousAction(values=np.zeros(1, np.float32), names=["0"])})
    assert obs.done and obs.truncated  # truncated, bootstrapped
    assert factory.gymnasium_env().spec.max_episode_steps == 7
    obs_space, action_space = factory.spaces()
    assert obs_space.global_features == ["obs_0", "obs_1", "obs_2"] and list(action_space) == ["action"]
    with pytest.raises(ConfigError, match=r"^env.kwargs: gymnasium:Pendulum-v1 does not accept \{'gravity': 1\}"):
        EnvFactory(EnvSection(name="gymnasium:Pendulum-v1", kwargs={"gravity": 1}))()
    with pytest.raises(ConfigError, match=r"^env.kwargs.max_episode_steps: give the step limit once"):
        EnvFactory(EnvSection(name="gymnasium:Pendulum-v1", kwargs={"max_episode_steps": 5}, max_episode_steps=7))


def test_in_process_gymnasium_environments_take_the_fast_path_with_env_lists_values():
    config = pendulum(env={"name": "gymnasium:Pendulum-v1", "max_episode_steps": 3})
    fast = make_envs(config, seed=5)
    assert isinstance(fast, GymnasiumVecEnv) and len(fast) == 2
    slow = EnvList(EnvFactory(config.env), 2, seed=5)
    a, b = fast.reset(), slow.reset()
    torque = {"action": RaggedArrayF32.from_flattened(np.full((2, 1), 0.5, np.float32), np.ones(2, np.int64))}
    for t in range(3):
        np.testing.assert_array_equal(a.features["__global__"].as_array(), b.features["__global__"].as_array())
        a, b = fast.act(torque), slow.act(torque)
        np.testing.assert_array_equal(a.reward, b.reward)
        assert a.truncated.tolist() == b.truncated.tolist() == [t == 2] * 2  # cut by the limit, bootstrapped
    ours = make_envs(config_from_dict({"env": {"name": "Count"}, **SMALL}), seed=0)
    assert isinstance(ours, EnvList)
    ours.close()


def test_worker_processes_build_gymnasium_environments_too():
    config = pendulum(rollout={"num_envs": 2, "n_steps": 4, "processes": 1})
    envs = make_envs(config, seed=0)
    try:
        assert isinstance(envs, ParallelEnvList)
        assert envs.reset().features["__global__"].size2() == 3
    finally:
        envs.close()


@pytest.mark.parametrize("critic", ["separate", "shared"])
def test_model_kind_mlp_builds_a_dense_net(critic):
    config = pendulum(model={"kind": "mlp", "critic": critic, "d_hidden": [8], "continuous": "squashed_gaussian"})
    obs_space, action_space = EnvFactory(config.env).spaces()
    frame, _ = make_frame(config, obs_space, action_space)
    assert isinstance(frame.actor, DenseNet) and isinstance(frame.critic, DenseNetCritic)
    assert frame.actor.continuous == "squashed_gaussian" and frame.actor.trunk.d_out == 8
    assert (frame.critic.shared_actor is frame.actor) == (critic == "shared")
    assert frame.shared_parameters == (critic == "shared")
    if critic == "separate":
        assert len(frame.critic.shared_actor.heads) == 0  # a value-only network


def test_model_kind_mlp_refuses_entity_environments():
    config = config_from_dict({"env": {"name": "MineSweeper"}, "model": {"kind": "mlp"}, **SMALL})
    obs_space, action_space = EnvFactory(config.env).spaces()
    with pytest.raises(ConfigError, match=r"^model.kind: mlp reads global features only, and MineSweeper has entity "
                                          r"types \[.*\]: use model.kind: rogue_net"):
        make_frame(config, obs_space, action_space)
