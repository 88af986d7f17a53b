import numpy as np
import pytest

from entmachin.env import CategoricalAction
from entmachin.env.examples.rock_paper_scissors import RockPaperScissors

THROWS = ["rock", "paper", "scissors"]
ROCK, PAPER, SCISSORS = range(3)


def _throw(index: int) -> dict:
    return {"throw": CategoricalAction([0], np.array([index], dtype=np.int64), THROWS)}


def _policy_view(env, obs) -> tuple:
    """Everything the policy sees: counts and features of visible entities, globals, actors."""
    view = []
    for etype in env.obs_space().entities:
        feats = obs.features[etype]
        visible = np.asarray(obs.visible.get(etype, np.ones(len(feats), bool)), dtype=bool)
        view.append((etype, len(feats), feats[visible].tobytes()))
    view.append(np.asarray(obs.global_features, dtype=np.float32).tobytes())
    view.append(tuple((name, tuple(m.actor_ids), m.mask is None) for name, m in obs.actions.items()))
    return tuple(view)


def test_spaces():
    env = RockPaperScissors()
    space = env.obs_space()
    assert {k: v.features for k, v in space.entities.items()} == {"Player": [], "Opponent": THROWS}
    assert space.global_features == []
    assert env.action_space()["throw"].index_to_label == THROWS


@pytest.mark.parametrize("cheat", [False, True])
def test_reset_layout(cheat):
    obs = RockPaperScissors(cheat=cheat).reset()
    assert obs.features["Player"].shape == (1, 0) and obs.features["Player"].dtype == np.float32
    opponent = obs.features["Opponent"]
    assert opponent.dtype == np.float32 and opponent.shape == (1, 3) and opponent.sum() == 1.0
    assert list(obs.visible["Opponent"]) == [cheat]
    assert obs.ids == {"Player": [0]}
    assert list(obs.actions["throw"].actor_ids) == [0]
    assert not obs.done and obs.reward == 0.0


def test_rewards_for_each_pair():
    env = RockPaperScissors()
    env.reset()
    wins = {(ROCK, SCISSORS), (PAPER, ROCK), (SCISSORS, PAPER)}
    for opponent in range(3):
        for throw in range(3):
            env.opponent = opponent
            obs = env.act(_throw(throw))
            assert obs.reward == (2.0 if (throw, opponent) in wins else 0.0), (throw, opponent)
            assert obs.done and not obs.truncated


def test_opponent_distribution_and_paper_is_best():
    env = RockPaperScissors()
    env.seed(0)
    throws = np.array([int(np.argmax(env.reset().features["Opponent"][0])) for _ in range(2000)])
    np.testing.assert_allclose(np.bincount(throws, minlength=3) / len(throws), [0.5, 0.3, 0.2], atol=0.03)
    env.seed(1)
    returns = {}
    for throw in range(3):
        rewards = []
        for _ in range(800):
            env.reset()
            rewards.append(env.act(_throw(throw)).reward)
        returns[throw] = np.mean(rewards)
    assert returns[PAPER] > returns[SCISSORS] > returns[ROCK]
    assert abs(returns[PAPER] - 1.0) < 0.1


def test_without_cheat_the_policy_sees_nothing_of_the_opponent():
    env = RockPaperScissors(cheat=False)
    env.seed(2)
    reset_views, act_views = {}, {}
    for _ in range(300):
        obs = env.reset()
        reset_views.setdefault(env.opponent, set()).add(_policy_view(env, obs))
        act_views.setdefault(env.opponent, set()).add(_policy_view(env, env.act(_throw(PAPER))))
    assert set(reset_views) == {ROCK, PAPER, SCISSORS}
    # The policy's view is one constant for every throw, so nothing it sees can correlate
    # with the opponent's choice; the critic still finds the throw in the invisible entity.
    assert len(set.union(*reset_views.values())) == 1
    assert len(set.union(*act_views.values())) == 1
    assert not env.reset().visible["Opponent"][0]


def test_with_cheat_the_policy_sees_the_opponent():
    env = RockPaperScissors(cheat=True)
    env.seed(2)
    views = {}
    for _ in range(300):
        obs = env.reset()
        views.setdefault(env.opponent, set()).add(_policy_view(env, obs))
    assert len(views) == 3
    assert all(len(v) == 1 for v in views.values())
    assert len(set.union(*views.values())) == 3  # one distinct view per throw


def test_rejects_bad_arguments_and_actions():
    with pytest.raises(TypeError, match="`cheat` must be a bool, got str"):
        RockPaperScissors(cheat="yes")
    env = RockPaperScissors()
    env.reset()
    with pytest.raises(ValueError, match=r"actions\['throw'\] choice 3 is outside \[0, 3\)"):
        env.act(_throw(3))
