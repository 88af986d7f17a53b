"""NaN and infinity in observations and rewards stop EnvList, ParallelEnvList and GymnasiumVecEnv
at the environment that produced them, naming the entity type and the feature."""
import pickle
from typing import Dict, Mapping

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from entmachin.env import (
    Action,
    ActionSpace,
    Entity,
    EnvList,
    EnvWorkerError,
    Environment,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GymnasiumVecEnv,
    NonFiniteObservationError,
    Observation,
    ObsSpace,
    ParallelEnvList,
)
from entmachin.ragged.arrays import ragged_from_arrays

FATES = ["live", "end", "feature", "global", "reward", "final"]


class Poisonable(Environment):
    """Three ``A`` entities; the global action chooses what the next observation holds: clean
    values, the clean end of the episode, NaN in entity 2's feature ``y``, a NaN global
    feature, an infinite reward, or the end of the episode with infinity in entity 0's ``x``
    (in the final observation; the reset is clean)."""

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["t"], entities={"A": Entity(["x", "y"])})

    def action_space(self) -> Dict[str, ActionSpace]:
        return {"fate": GlobalCategoricalActionSpace(FATES)}

    def reset(self) -> Observation:
        return self._observe("live")

    def act(self, actions: Mapping[str, Action]) -> Observation:
        return self._observe(FATES[actions["fate"].index])

    def _observe(self, fate: str) -> Observation:
        feats = np.arange(6, dtype=np.float32).reshape(3, 2)  # [3, 2]
        if fate == "feature":
            feats[2, 1] = np.nan
        if fate == "final":
            feats[0, 0] = np.inf
        return Observation(
            features={"A": feats},
            ids={"A": [0, 1, 2]},
            global_features=np.array([np.nan if fate == "global" else 1.0], dtype=np.float32),
            actions={"fate": GlobalCategoricalActionMask()},
            reward=float("inf") if fate == "reward" else 0.0,
            done=fate in ("end", "final"),
        )


def fates(*chosen: str):
    choices = np.array([[FATES.index(f)] for f in chosen], dtype=np.int64)  # [n_rows, 1]
    return {"fate": ragged_from_arrays(choices, np.ones(len(chosen), dtype=np.int64))}


@pytest.mark.parametrize(
    "fate, entity_type, feature, match",
    [
        ("feature", "A", "y", r"EnvList: environment 2 returned nan in features\['A'\] entity 2, feature 'y' "
                              r"\(column 1\) of its observation"),
        ("global", "__global__", "t", r"EnvList: environment 2 returned nan in global_features, feature 't'"),
        ("reward", None, None, r"EnvList: environment 2 returned reward inf with its observation; rewards must be finite"),
        ("final", "A", "x", r"EnvList: environment 2 returned inf in features\['A'\] entity 0, feature 'x' "
                            r"\(column 0\) of its final observation"),
    ],
)
def test_env_list_names_the_environment_entity_type_and_feature(fate, entity_type, feature, match):
    envs = EnvList(Poisonable, 4)
    envs.reset()
    with pytest.raises(NonFiniteObservationError, match=match + r".*check_finite=False") as info:
        envs.act(fates("live", "end", fate, "live"))
    assert (info.value.env_index, info.value.entity_type, info.value.feature) == (2, entity_type, feature)


def test_env_list_names_the_feature_of_the_observation_filter():
    envs = EnvList(Poisonable, 2)
    only_y = ObsSpace(global_features=["t"], entities={"A": Entity(["y"])})
    envs.reset(only_y)
    with pytest.raises(NonFiniteObservationError, match=r"environment 1 returned nan in features\['A'\] entity 2, "
                       r"feature 'y' \(column 0\)"):
        envs.act(fates("live", "feature"), only_y)


def test_env_list_check_can_be_turned_off():
    envs = EnvList(Poisonable, 2, check_finite=False)
    envs.reset()
    obs = envs.act(fates("feature", "reward"))
    assert np.isnan(obs.features["A"].as_array()).any() and np.isinf(obs.reward[1])
    with pytest.raises(TypeError, match=r"EnvList: check_finite must be a bool, got 'no'"):
        EnvList(Poisonable, 2, check_finite="no")


@pytest.mark.parametrize("fate, where", [("feature", r"features\['A'\] entity 2, feature 'y'"),
                                         ("final", r"features\['A'\] entity 0, feature 'x'.*final observation")])
def test_parallel_env_list_names_the_global_environment_index(fate, where):
    envs = ParallelEnvList(Poisonable, 4, 2, start_method="fork")
    envs.reset()
    with pytest.raises(EnvWorkerError, match=r"(?s)worker 1 .* raised entmachin.env.finite.NonFiniteObservationError "
                       r"in environment 3 during act\(\): ParallelEnvList: environment 3 returned (nan|inf) in " + where
                       ) as info:
        envs.act(fates("live", "live", "live", fate))
    assert (info.value.worker, info.value.env_index) == (1, 3)
    envs.close()


def test_parallel_env_list_check_can_be_turned_off():
    with ParallelEnvList(Poisonable, 2, 2, start_method="fork", check_finite=False) as envs:
        envs.reset()
        assert np.isinf(envs.act(fates("live", "reward")).reward[1])
    with pytest.raises(TypeError, match=r"ParallelEnvList: check_finite must be a bool, got 1"):
        ParallelEnvList(Poisonable, 2, 2, check_finite=1)


class Leaky(gym.Env):
    """Action 1 returns NaN in the second observation value; action 2 ends the episode with an
    infinite value in the first (the reset observation is clean); action 3 gives a NaN reward."""

    observation_space = spaces.Box(-10.0, 10.0, shape=(3,), dtype=np.float32)
    action_space = spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, dtype=np.float32), {}

    def step(self, action):
        obs = np.zeros(3, dtype=np.float32)  # [3]
        if action == 1:
            obs[1] = np.nan
        if action == 2:
            obs[0] = -np.inf
        return obs, float("nan") if action == 3 else 0.0, action == 2, False, {}


@pytest.mark.parametrize(
    "action, match",
    [
        (1, r"GymnasiumVecEnv: environment 1 returned nan in global_features, feature 'obs_1' \(column 1\) of its "
            r"observation"),
        (2, r"GymnasiumVecEnv: environment 1 returned -inf in global_features, feature 'obs_0' \(column 0\) of its "
            r"final observation"),
        (3, r"GymnasiumVecEnv: environment 1 returned reward nan"),
    ],
)
def test_gymnasium_vec_env_names_the_environment_and_feature(action, match):
    envs = GymnasiumVecEnv(Leaky, 3)
    envs.reset()
    chosen = ragged_from_arrays(np.array([[0], [action], [0]], dtype=np.int64), np.ones(3, dtype=np.int64))
    with pytest.raises(NonFiniteObservationError, match=match) as info:
        envs.act({"action": chosen})
    assert info.value.env_index == 1


def test_gymnasium_vec_env_check_can_be_turned_off():
    envs = GymnasiumVecEnv(Leaky, 2, check_finite=False)
    envs.reset()
    chosen = ragged_from_arrays(np.array([[1], [3]], dtype=np.int64), np.ones(2, dtype=np.int64))
    obs = envs.act({"action": chosen})
    assert np.isnan(obs.reward[1]) and np.isnan(obs.features["__global__"].as_array()[0, 1])
    with pytest.raises(TypeError, match=r"GymnasiumVecEnv: check_finite must be a bool, got None"):
        GymnasiumVecEnv(Leaky, 2, check_finite=None)


def test_the_error_keeps_its_attributes_through_pickle():
    error = pickle.loads(pickle.dumps(NonFiniteObservationError("bad", 3, "A", "x")))
    assert (str(error), error.env_index, error.entity_type, error.feature) == ("bad", 3, "A", "x")
