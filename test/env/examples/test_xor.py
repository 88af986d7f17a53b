import numpy as np

from entmachin.env import GlobalCategoricalAction, GlobalCategoricalActionMask
from entmachin.env.examples.xor import Xor


def _output(index: int) -> dict:
    return {"output": GlobalCategoricalAction(index, str(index))}


def _answer(obs) -> int:
    bit1, bit2 = obs.features["Input"][:, 0].astype(int)
    return (bit1 ^ bit2) ^ int(obs.global_features[0])


def test_spaces():
    env = Xor()
    space = env.obs_space()
    assert space.global_features == ["negate"]
    assert {k: v.features for k, v in space.entities.items()} == {"Input": ["is_set"]}
    assert env.action_space()["output"].index_to_label == ["0", "1"]


def test_reset_layout():
    obs = Xor().reset()  # unseeded
    feats = obs.features["Input"]
    assert feats.dtype == np.float32 and feats.shape == (2, 1)
    assert set(feats[:, 0]) <= {0.0, 1.0}
    assert obs.global_features.dtype == np.float32 and obs.global_features.shape == (1,)
    assert isinstance(obs.actions["output"], GlobalCategoricalActionMask)
    assert obs.actions["output"].mask is None
    assert not obs.done and obs.reward == 0.0


def test_reward_over_all_eight_inputs():
    env = Xor()
    env.seed(0)
    seen = set()
    for _ in range(80):
        obs = env.reset()
        bits = tuple(obs.features["Input"][:, 0].astype(int))
        seen.add((*bits, int(obs.global_features[0])))
        right = env.act(_output(_answer(obs)))
        assert (right.reward, right.done, right.truncated) == (1.0, True, False)
        obs = env.reset()
        wrong = env.act(_output(1 - _answer(obs)))
        assert (wrong.reward, wrong.done, wrong.truncated) == (0.0, True, False)
    assert len(seen) == 8


def test_known_cases():
    env = Xor()
    env.reset()
    env.bits, env.negate = np.array([1, 0]), 0
    assert env.act(_output(1)).reward == 1.0
    env.bits, env.negate = np.array([1, 1]), 1
    assert env.act(_output(1)).reward == 1.0
    env.bits, env.negate = np.array([0, 0]), 1
    assert env.act(_output(0)).reward == 0.0
