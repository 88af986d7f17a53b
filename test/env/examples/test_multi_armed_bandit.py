import numpy as np
import pytest

from entmachin.env import GlobalCategoricalAction
from entmachin.env.examples.multi_armed_bandit import ARMS, N_STEPS, PULL, MultiArmedBandit


def _pull(label):
    return {PULL: GlobalCategoricalAction(ARMS.index(label), label)}


def test_spaces():
    env = MultiArmedBandit()
    assert env.obs_space().global_features == ["step"] and env.obs_space().entities == {}
    assert env.action_space()[PULL].index_to_label == ["A", "B", "C", "D", "E"]


def test_reset_observation():
    obs = MultiArmedBandit().reset()
    assert obs.global_features.dtype == np.float32 and obs.global_features.tolist() == [0.0]
    assert obs.features == {} and obs.reward == 0.0 and not obs.done
    assert obs.actions[PULL].mask is None


def test_arm_a_pays_and_the_others_do_not():
    env = MultiArmedBandit()
    env.reset()
    assert env.act(_pull("A")).reward == pytest.approx(1 / 32)
    for label in "BCDE":
        assert env.act(_pull(label)).reward == 0.0


def test_episodes_last_32_pulls_and_end_by_time_limit():
    env = MultiArmedBandit()
    env.reset()
    total = 0.0
    for step in range(1, N_STEPS + 1):
        obs = env.act(_pull("A"))
        total += obs.reward
        assert obs.global_features.tolist() == [float(step)]
        assert obs.done == (step == 32) and obs.truncated == obs.done
    assert total == pytest.approx(1.0)
    assert env.reset().global_features.tolist() == [0.0]


def test_bad_actions_raise():
    env = MultiArmedBandit()
    env.reset()
    with pytest.raises(ValueError, match="chose 'F'; expected one of \\['A', 'B', 'C', 'D', 'E'\\]"):
        env.act({PULL: GlobalCategoricalAction(5, "F")})
    with pytest.raises(ValueError, match="expected exactly the action 'pull', got \\[\\]"):
        env.act({})
