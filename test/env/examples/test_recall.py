"""Recall: the cue is seen once, the choice comes ``delay`` steps later, and nothing at the choosing step
tells the cues apart (the feed-forward bound)."""
import numpy as np
import pytest

from entmachin.env import CategoricalAction
from entmachin.env.examples.recall import Recall


def _choose(index, n_cues=4, actors=(0,)):
    return {"choose": CategoricalAction(list(actors), np.array([index] * len(actors), dtype=np.int64),
                                        [f"colour_{i}" for i in range(n_cues)])}


def _episode(env, choice):
    """Plays one episode choosing ``choice`` (a function of the first observation); the observations and
    the last one."""
    seen = [env.reset()]
    while not seen[-1].done:
        actors = seen[-1].actions["choose"].actor_ids
        seen.append(env.act(_choose(choice(seen[0])) if actors else {}))
    return seen


def test_the_cue_is_shown_once_and_the_choice_comes_at_the_last_step():
    env = Recall(n_cues=3, delay=2)
    env.seed(0)
    seen = _episode(env, lambda first: int(np.argmax(first.features["Cue"][0])))
    assert len(seen) == 4 and seen[-1].done and seen[-1].reward == 1.0
    assert seen[0].features["Cue"].shape == (1, 3) and seen[0].features["Cue"].sum() == 1.0
    assert [o.features["Cue"].shape[0] for o in seen[1:]] == [0, 0, 0]
    assert [list(o.actions["choose"].actor_ids) for o in seen[:3]] == [[], [], [0]]


def test_the_choosing_step_looks_the_same_whatever_the_cue_so_a_feed_forward_policy_scores_one_in_n():
    env = Recall()
    env.seed(1)
    choosing, rewards = [], []
    for _ in range(400):
        seen = _episode(env, lambda first: 0)  # any policy of the choosing step alone: a constant choice
        choosing.append(seen[-2].features)
        rewards.append(seen[-1].reward)
    assert all(np.array_equal(f["Player"], choosing[0]["Player"]) and f["Cue"].shape[0] == 0 for f in choosing)
    assert abs(np.mean(rewards) - 0.25) < 0.06


def test_bad_actions_and_arguments_are_named():
    with pytest.raises(ValueError, match="`n_cues` must be >= 2"):
        Recall(n_cues=1)
    with pytest.raises(TypeError, match="`delay` must be an int"):
        Recall(delay=1.5)
    env = Recall(delay=1)
    env.reset()
    with pytest.raises(ValueError, match=r"chooses only at step 1 \(this was step 0\)"):
        env.act(_choose(0))
    env.reset()
    env.act({})
    with pytest.raises(ValueError, match="outside"):
        env.act(_choose(7))
