import numpy as np
import pytest

from entmachin.env import CategoricalAction, SelectEntityAction
from entmachin.env.examples.minesweeper import CANNON_ID, FIRE, MOVE, MOVE_LABELS, MineSweeper

from ._rollouts import random_rollout


def _move(env, choices):
    """Actions where robot ``i`` takes ``choices[i]`` (a label) and the cannon holds fire."""
    actors = [("Robot", i) for i in range(len(choices))]
    indices = np.array([MOVE_LABELS.index(c) for c in choices], dtype=np.int64)
    return {
        MOVE: CategoricalAction(actors, indices, MOVE_LABELS),
        FIRE: SelectEntityAction([], []),
    }


def _fire(env, target, choices=()):
    actions = _move(env, list(choices))
    actions[FIRE] = SelectEntityAction([CANNON_ID], [target])
    return actions


def _place(env, mines, robots):
    env.reset()
    env.mines, env.robots = list(mines), list(robots)


def test_spaces():
    env = MineSweeper()
    space = env.obs_space()
    assert list(space.entities) == ["Mine", "Robot", "Orbital Cannon"]
    assert space.entities["Mine"].features == ["x", "y"]
    assert space.entities["Robot"].features == ["x", "y"]
    assert space.entities["Orbital Cannon"].features == ["cooldown"]
    assert env.action_space()[MOVE].index_to_label == ["Up", "Down", "Left", "Right", "Defuse Mines"]
    assert set(env.action_space()) == {MOVE, FIRE}


def test_reset_places_distinct_entities_on_the_grid():
    env = MineSweeper(width=3, height=4, nmines=6, nrobots=6)
    env.seed(1)
    obs = env.reset()
    cells = np.concatenate([obs.features["Mine"], obs.features["Robot"]])  # [12, 2]
    assert len({tuple(c) for c in cells}) == 12
    assert cells[:, 0].min() >= 0 and cells[:, 0].max() < 3
    assert cells[:, 1].min() >= 0 and cells[:, 1].max() < 4
    assert obs.features["Orbital Cannon"].shape == (0, 1)
    assert not obs.done and obs.reward == 0.0


def test_defusing_the_last_mine_wins():
    env = MineSweeper(nmines=1, nrobots=1)
    _place(env, mines=[(2, 3)], robots=[(2, 2)])
    obs = env.act(_move(env, ["Defuse Mines"]))
    assert obs.reward == 1.0 and obs.done and not obs.truncated
    assert obs.features["Mine"].shape == (0, 2)


def test_defusing_reaches_only_adjacent_mines():
    env = MineSweeper(nmines=3, nrobots=1)
    _place(env, mines=[(1, 2), (3, 3), (4, 2)], robots=[(2, 2)])
    obs = env.act(_move(env, ["Defuse Mines"]))
    assert obs.reward == 0.0 and not obs.done
    np.testing.assert_array_equal(obs.features["Mine"], [[3, 3], [4, 2]])


def test_stepping_on_a_mine_destroys_the_robot():
    env = MineSweeper(nmines=2, nrobots=2)
    _place(env, mines=[(0, 1), (5, 5)], robots=[(0, 0), (3, 3)])
    obs = env.act(_move(env, ["Up", "Left"]))
    assert obs.reward == 0.0 and not obs.done
    np.testing.assert_array_equal(obs.features["Robot"], [[2, 3]])
    assert obs.ids["Robot"] == [("Robot", 0)]
    for label in ["Right", "Right", "Right", "Up"]:
        obs = env.act(_move(env, [label]))
        assert not obs.done
    obs = env.act(_move(env, ["Up"]))
    assert obs.done and obs.reward == 0.0 and not obs.truncated  # last robot lost on (5, 5)


def test_moves_follow_their_labels_and_the_mask_keeps_robots_on_the_grid():
    env = MineSweeper(width=3, height=3, nmines=1, nrobots=1)
    _place(env, mines=[(2, 2)], robots=[(0, 0)])
    obs = env._observe(0.0)
    assert obs.actions[MOVE].mask.tolist() == [[True, False, False, True, True]]
    for label, expected in [("Up", (0, 1)), ("Right", (1, 1)), ("Down", (1, 0)), ("Left", (0, 0))]:
        obs = env.act(_move(env, [label]))
        assert tuple(obs.features["Robot"][0]) == expected
    _place(env, mines=[(0, 0)], robots=[(2, 2)])
    assert env._observe(0.0).actions[MOVE].mask.tolist() == [[False, True, True, False, True]]


def test_cannon_is_absent_when_disabled():
    env = MineSweeper(cooldown_period=0)
    obs = env.reset()
    assert obs.features["Orbital Cannon"].shape == (0, 1)
    assert list(obs.actions[FIRE].actor_ids) == []
    with pytest.raises(ValueError, match="only .* may fire"):
        env.act(_fire(env, ("Mine", 0), ["Defuse Mines"] * 2))


def test_cannon_cooldown_shots_and_targets():
    env = MineSweeper(nmines=2, nrobots=2, orbital_cannon=True, cooldown_period=2)
    _place(env, mines=[(0, 0), (5, 5)], robots=[(3, 0), (3, 3)])
    obs = env._observe(0.0)
    assert obs.features["Orbital Cannon"].tolist() == [[2.0]]
    assert list(obs.actions[FIRE].actor_ids) == []
    assert list(obs.actions[FIRE].actee_ids) == [("Mine", 0), ("Mine", 1), ("Robot", 0), ("Robot", 1)]
    with pytest.raises(ValueError, match="cooldown is 0 \\(it is 2"):
        env.act(_fire(env, ("Mine", 0), ["Defuse Mines"] * 2))
    obs = env.act(_move(env, ["Defuse Mines"] * 2))
    assert obs.features["Orbital Cannon"].tolist() == [[1.0]]
    obs = env.act(_move(env, ["Defuse Mines"] * 2))
    assert obs.features["Orbital Cannon"].tolist() == [[0.0]]
    assert list(obs.actions[FIRE].actor_ids) == [CANNON_ID]
    # Shooting robot 0 still lets it make its move this step.
    obs = env.act(_fire(env, ("Robot", 0), ["Left", "Defuse Mines"]))
    np.testing.assert_array_equal(obs.features["Robot"], [[3, 3]])
    assert obs.features["Orbital Cannon"].tolist() == [[2.0]] and not obs.done
    env.cooldown = 0
    obs = env.act(_fire(env, ("Mine", 0), ["Defuse Mines"]))
    np.testing.assert_array_equal(obs.features["Mine"], [[5, 5]])
    env.cooldown = 0
    obs = env.act(_fire(env, ("Mine", 0), ["Defuse Mines"]))
    assert obs.done and obs.reward == 1.0


def test_shot_mine_no_longer_destroys_a_robot_moving_onto_it():
    env = MineSweeper(nmines=2, nrobots=1, orbital_cannon=True, cooldown_period=0)
    _place(env, mines=[(0, 1), (5, 5)], robots=[(0, 0)])
    obs = env.act(_fire(env, ("Mine", 0), ["Up"]))
    np.testing.assert_array_equal(obs.features["Robot"], [[0, 1]])


def test_actions_naming_unknown_entities_raise():
    env = MineSweeper(orbital_cannon=True, cooldown_period=0)
    env.reset()
    before = (list(env.mines), list(env.robots))
    with pytest.raises(ValueError, match="refers to entity \\('Robot', 2\\), which is not a current Robot id"):
        env.act(_move(env, ["Up"] * 8))
    assert (env.mines, env.robots) == before  # nothing moved before the error
    with pytest.raises(ValueError, match="choice 5 is outside \\[0, 5\\)"):
        env.act({MOVE: CategoricalAction([("Robot", 0)], np.array([5]), MOVE_LABELS), FIRE: SelectEntityAction([], [])})
    with pytest.raises(ValueError, match="has 1 actors but 0 actees"):
        env.act({FIRE: SelectEntityAction([CANNON_ID], [])})
    with pytest.raises(ValueError, match="refers to entity \\('Cherry', 0\\), which is not a current Mine or Robot"):
        env.act(_fire(env, ("Cherry", 0)))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"width": 0}, ValueError, "`width` must be >= 1, got 0"),
        ({"height": -2}, ValueError, "`height` must be >= 1, got -2"),
        ({"nmines": 0}, ValueError, "`nmines` must be >= 1, got 0"),
        ({"nrobots": -1}, ValueError, "`nrobots` must be >= 1, got -1"),
        ({"cooldown_period": -1}, ValueError, "`cooldown_period` must be >= 0, got -1"),
        ({"width": 2, "height": 2, "nmines": 3, "nrobots": 2}, ValueError, "5 entities don't fit on a 2x2 grid"),
        ({"width": 2.5}, TypeError, "`width` must be an int, got float"),
        ({"orbital_cannon": 1}, TypeError, "`orbital_cannon` must be a bool, got int"),
    ],
)
def test_constructor_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        MineSweeper(**kwargs)


@pytest.mark.parametrize("orbital_cannon", [False, True])
def test_random_play_ends_by_the_rules_only(orbital_cannon):
    steps = list(random_rollout(lambda: MineSweeper(orbital_cannon=orbital_cannon, cooldown_period=2), 200))
    assert sum(int(obs.done.sum()) for obs in steps) >= 1
    assert all(set(obs.reward.tolist()) <= {0.0, 1.0} and not obs.truncated.any() for obs in steps)
