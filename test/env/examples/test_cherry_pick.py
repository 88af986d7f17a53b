import numpy as np
import pytest

from entmachin.env import SelectEntityAction
from entmachin.env.examples.cherry_pick import PICK, PLAYER_ID, CherryPick

from ._rollouts import random_rollout


def _pick(index):
    return {PICK: SelectEntityAction([PLAYER_ID], [("Cherry", index)])}


def _seeded(num_cherries=32, seed=0):
    env = CherryPick(num_cherries)
    env.seed(seed)
    return env, env.reset()


def test_spaces():
    env = CherryPick()
    assert list(env.obs_space().entities) == ["Cherry", "Player"]
    assert env.obs_space().entities["Cherry"].features == ["quality"]
    assert env.obs_space().entities["Player"].features == []
    assert list(env.action_space()) == ["Pick Cherry"]


def test_reset_observation():
    env, obs = _seeded()
    assert obs.features["Cherry"].shape == (32, 1)
    assert obs.features["Player"].shape == (1, 0)
    assert obs.ids["Cherry"] == [("Cherry", i) for i in range(32)]
    mask = obs.actions[PICK]
    assert list(mask.actor_ids) == [PLAYER_ID] and list(mask.actee_ids) == obs.ids["Cherry"]
    assert obs.reward == 0.0 and not obs.done


@pytest.mark.parametrize("num_cherries", [32, 2, 7])
def test_best_half_sums_to_one(num_cherries):
    _, obs = _seeded(num_cherries, seed=num_cherries)
    quality = np.sort(obs.features["Cherry"][:, 0])[::-1]  # [num_cherries]
    assert quality[: num_cherries // 2].sum() == pytest.approx(1.0, abs=1e-5)


def test_greedy_picking_earns_one_and_ends_the_game():
    env, obs = _seeded()
    total = 0.0
    for step in range(1, 17):
        quality = obs.features["Cherry"][:, 0]
        obs = env.act(_pick(int(np.argmax(quality))))
        assert obs.reward == pytest.approx(float(quality.max()), abs=1e-6)
        assert obs.features["Cherry"].shape == (32 - step, 1)
        assert obs.done == (step == 16) and not obs.truncated
        total += obs.reward
    assert total == pytest.approx(1.0)
    assert env.total_reward == pytest.approx(1.0)


def test_picking_the_worst_cherry_earns_its_quality():
    env, obs = _seeded(seed=2)
    quality = obs.features["Cherry"][:, 0]
    worst = int(np.argmin(quality))
    obs = env.act(_pick(worst))
    assert obs.reward == pytest.approx(float(quality.min()), abs=1e-6) and obs.reward < float(quality.max())
    np.testing.assert_array_equal(obs.features["Cherry"][:, 0], np.delete(quality, worst))


def test_bad_actions_raise():
    env, _ = _seeded(num_cherries=4)
    with pytest.raises(ValueError, match=r"refers to entity \('Cherry', 4\), which is not a current Cherry id"):
        env.act(_pick(4))
    with pytest.raises(ValueError, match=r"expects one choice by actor 'Player', got actors \[\] and 0 choices"):
        env.act({PICK: SelectEntityAction([], [])})
    with pytest.raises(ValueError, match="expected exactly the action 'Pick Cherry', got \\[\\]"):
        env.act({})


@pytest.mark.parametrize(
    "value, error, match",
    [
        (1, ValueError, "`num_cherries` must be >= 2, got 1"),
        (-3, ValueError, "`num_cherries` must be >= 2, got -3"),
        (4.0, TypeError, "`num_cherries` must be an int, got float"),
    ],
)
def test_constructor_validation(value, error, match):
    with pytest.raises(error, match=match):
        CherryPick(value)


def test_every_episode_ends_after_half_the_basket_whatever_is_picked():
    n_ends = sum(int(obs.done.sum()) for obs in random_rollout(lambda: CherryPick(num_cherries=10), 200))
    assert n_ends == 200 // 5
