import numpy as np
import pytest

from entmachin.env import CategoricalAction, CategoricalActionMask
from entmachin.env.examples.not_hotdog import NotHotdog

LABELS = ["hotdog", "not_hotdog"]


def _classify(index: int) -> dict:
    return {
        "classify": CategoricalAction([0], np.array([index], dtype=np.int64), LABELS),
        "unused_action": CategoricalAction([], np.zeros(0, dtype=np.int64), ["0", "1"]),
    }


def _is_hotdog(obs) -> int:
    """The hidden bit, read back from the observation."""
    if obs.features["Hotdog"].shape[0] == 1:
        return 1
    return int(obs.features["Object"][0, 0])


def test_spaces():
    env = NotHotdog()
    space = env.obs_space()
    assert {k: v.features for k, v in space.entities.items()} == {
        "Player": ["step"], "Object": ["is_hotdog"], "Hotdog": [],
    }
    assert space.global_features == []
    actions = env.action_space()
    assert actions["classify"].index_to_label == LABELS
    assert actions["unused_action"].index_to_label == ["0", "1"]


def test_reset_layout_and_masks():
    env = NotHotdog()  # unseeded works too
    obs = env.reset()
    assert not obs.done and not obs.truncated and obs.reward == 0.0
    np.testing.assert_array_equal(obs.features["Player"], [[0.0]])
    assert obs.ids == {"Player": [0]}
    for etype, n_features in [("Player", 1), ("Object", 1), ("Hotdog", 0)]:
        feats = obs.features[etype]
        assert feats.dtype == np.float32 and feats.ndim == 2 and feats.shape[1] == n_features
    # Exactly one thing to classify: an Object or a Hotdog.
    assert obs.features["Object"].shape[0] + obs.features["Hotdog"].shape[0] == 1
    assert isinstance(obs.actions["classify"], CategoricalActionMask)
    assert list(obs.actions["classify"].actor_ids) == [0]
    assert list(obs.actions["unused_action"].actor_ids) == []


def test_all_three_presentations_occur():
    env = NotHotdog()
    env.seed(0)
    seen = set()
    for _ in range(64):
        obs = env.reset()
        if obs.features["Hotdog"].shape[0] == 1:
            seen.add("hotdog entity")
            assert obs.features["Object"].shape == (0, 1)
        else:
            seen.add(f"object {int(obs.features['Object'][0, 0])}")
            assert obs.features["Hotdog"].shape == (0, 0)
    assert seen == {"hotdog entity", "object 0", "object 1"}


def test_reward_for_right_and_wrong_answer():
    env = NotHotdog()
    env.seed(1)
    for _ in range(20):
        answer = _is_hotdog(env.reset())
        right = env.act(_classify(answer))
        assert (right.reward, right.done, right.truncated) == (1.0, True, False)
        np.testing.assert_array_equal(right.features["Player"], [[1.0]])
        answer = _is_hotdog(env.reset())
        wrong = env.act(_classify(1 - answer))
        assert (wrong.reward, wrong.done, wrong.truncated) == (0.0, True, False)


def test_act_without_classify_raises():
    env = NotHotdog()
    env.reset()
    with pytest.raises(TypeError, match=r"actions\['classify'\] must be a CategoricalAction, got NoneType"):
        env.act({})
