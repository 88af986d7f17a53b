import numpy as np
import pytest

from entmachin.env import SelectEntityAction, SelectEntityActionMask
from entmachin.env.examples.pick_matching_balls import PickMatchingBalls

from ._rollouts import random_rollout

FEATURES = ["color0", "color1", "color2", "color3", "color4", "color5", "selected"]


def _pick(obs, ball) -> dict:
    return {"Pick Ball": SelectEntityAction(actors=obs.actions["Pick Ball"].actor_ids, actees=[ball])}


def _colors(obs) -> np.ndarray:
    return obs.features["Ball"][:, 0].astype(int)  # without one_hot every colour column holds the colour


def test_spaces():
    env = PickMatchingBalls()
    space = env.obs_space()
    assert {k: v.features for k, v in space.entities.items()} == {"Ball": FEATURES, "Player": []}
    assert list(env.action_space()) == ["Pick Ball"]


def test_reset_layout_and_mask():
    obs = PickMatchingBalls().reset()  # unseeded, 32 balls by default
    balls = obs.features["Ball"]
    assert balls.dtype == np.float32 and balls.shape == (32, 7)
    assert obs.features["Player"].shape == (1, 0) and obs.features["Player"].dtype == np.float32
    assert (balls[:, :6] == balls[:, :1]).all() and set(balls[:, 0]) <= set(range(6))
    assert (balls[:, 6] == 0).all()
    assert obs.ids == {"Ball": list(range(32)), "Player": [32]}
    mask = obs.actions["Pick Ball"]
    assert isinstance(mask, SelectEntityActionMask)
    assert list(mask.actor_ids) == [32] and list(mask.actee_ids) == list(range(32))
    assert not obs.done and obs.reward == 0.0


def test_one_hot_colours():
    env = PickMatchingBalls(8, one_hot=True)
    env.seed(0)
    obs = env.reset()
    balls = obs.features["Ball"]
    assert balls.shape == (8, 7)
    np.testing.assert_array_equal(balls[:, :6].sum(axis=1), np.ones(8))
    np.testing.assert_array_equal(np.argmax(balls[:, :6], axis=1), env.colors)


def test_picked_ball_leaves_the_mask_and_is_marked():
    env = PickMatchingBalls(6)
    env.seed(1)
    obs = env.reset()
    obs = env.act(_pick(obs, 4))
    assert 4 not in obs.actions["Pick Ball"].actee_ids
    assert len(obs.actions["Pick Ball"].actee_ids) == 5
    assert obs.features["Ball"][4, 6] == 1.0 and obs.features["Ball"][:, 6].sum() == 1.0
    with pytest.raises(
        ValueError,
        match=r"cannot pick ball 4; the balls not picked yet are \[0, 1, 2, 3, 5\]",
    ):
        env.act(_pick(obs, 4))
    with pytest.raises(ValueError, match="cannot pick ball 'a'"):
        env.act(_pick(obs, "a"))


def test_whole_largest_group_then_a_mismatch_scores_one():
    env = PickMatchingBalls(16)
    env.seed(2)
    obs = env.reset()
    colors = _colors(obs)
    counts = np.bincount(colors, minlength=6)
    best = int(np.argmax(counts))
    for ball in np.flatnonzero(colors == best):
        assert not obs.done
        obs = env.act(_pick(obs, int(ball)))
    other = int(np.flatnonzero(colors != best)[0])
    obs = env.act(_pick(obs, other))
    assert (obs.reward, obs.done, obs.truncated) == (1.0, True, False)


def test_early_mismatch_scores_little():
    env = PickMatchingBalls(16)
    env.seed(3)
    obs = env.reset()
    colors = _colors(obs)
    first = 0
    other = int(np.flatnonzero(colors != colors[first])[0])
    obs = env.act(_pick(obs, first))
    assert (obs.reward, obs.done) == (0.0, False)
    obs = env.act(_pick(obs, other))
    largest = np.bincount(colors).max()
    assert obs.done and not obs.truncated
    assert obs.reward == pytest.approx(1 / largest)


def test_picking_every_ball_scores_one():
    env = PickMatchingBalls(1)
    obs = env.reset()
    obs = env.act(_pick(obs, 0))
    assert (obs.reward, obs.done) == (1.0, True)
    assert list(obs.actions["Pick Ball"].actee_ids) == []
    assert list(obs.actions["Pick Ball"].actor_ids) == []  # nothing left to select: no actor


def test_small_and_randomized_games_validate_to_the_end():
    for make in (lambda: PickMatchingBalls(3), lambda: PickMatchingBalls(6, randomize=True)):
        episodes = sum(int(obs.done.sum()) for obs in random_rollout(make, 200))
        assert episodes > 0


def test_randomize_draws_counts_in_range():
    env = PickMatchingBalls(6, randomize=True)
    env.seed(4)
    counts = {len(env.reset().features["Ball"]) for _ in range(100)}
    assert counts == {3, 4, 5, 6}


def test_invalid_arguments():
    with pytest.raises(ValueError, match="max_balls must be at least 1, got 0"):
        PickMatchingBalls(0)
    with pytest.raises(ValueError, match="max_balls must be at least 3 with randomize=True, got 2"):
        PickMatchingBalls(2, randomize=True)


def test_random_play_rewards_only_the_last_pick():
    steps = list(random_rollout(PickMatchingBalls, 200))
    assert sum(int(obs.done.sum()) for obs in steps) > 10
    for obs in steps:
        assert not obs.truncated.any()
        assert (obs.reward[~obs.done] == 0.0).all() and ((obs.reward >= 0.0) & (obs.reward <= 1.0)).all()
