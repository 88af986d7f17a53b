import numpy as np
import pytest

from entmachin.env import CategoricalAction, GlobalCategoricalAction, GlobalCategoricalActionMask
from entmachin.env.examples.xor import Xor


def _output(index: int) -> dict:
    return {"output": GlobalCategoricalAction(index, str(index))}


def _answer(obs) -> int:
    bit1, bit2 = obs.features["Input"][:, 0].astype(int)
    return (bit1 ^ bit2) ^ int(obs.global_features[0])


def _random_actions(env, obs, rng) -> dict:
    """A random allowed choice of the global action, from its mask."""
    space = env.action_space()["output"]
    mask = obs.actions["output"].mask
    allowed = np.ones(len(space), bool) if mask is None else np.asarray(mask).reshape(-1)
    index = int(rng.choice(np.flatnonzero(allowed)))
    return {"output": GlobalCategoricalAction(index, space.index_to_label[index])}


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


def test_act_rejects_wrong_action_type():
    env = Xor()
    env.reset()
    with pytest.raises(
        TypeError,
        match=r"actions\['output'\] must be a GlobalCategoricalAction, got CategoricalAction",
    ):
        env.act({"output": CategoricalAction([0], np.array([1]), ["0", "1"])})


def _run(seed: int, n: int):
    env, rng = Xor(), np.random.default_rng(seed)
    env.seed(seed)
    out = []
    for _ in range(n):
        obs = env.reset()
        after = env.act(_random_actions(env, obs, rng))
        out.append((obs.features["Input"].tobytes(), obs.global_features.tobytes(), after.reward))
    return out


def test_seeding_reproducible():
    assert _run(3, 30) == _run(3, 30)
    assert _run(3, 30) != _run(4, 30)


def test_random_smoke_200_steps():
    env, rng = Xor(), np.random.default_rng(0)
    env.seed(0)
    obs, rewards = env.reset(), []
    for _ in range(200):
        obs = env.act(_random_actions(env, obs, rng))
        assert obs.done and not obs.truncated
        assert obs.features["Input"].shape == (2, 1) and obs.features["Input"].dtype == np.float32
        rewards.append(obs.reward)
        obs = env.reset()
    assert 0.3 < np.mean(rewards) < 0.7
