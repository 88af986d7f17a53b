import math

import numpy as np
import pytest

from entmachin.env import CategoricalAction, CategoricalActionMask
from entmachin.env.examples.minefield import Minefield

MOVES = ["turn left", "move forward", "turn right"]
LEFT, FORWARD, RIGHT = range(3)


def _move(choice: int) -> dict:
    return {"move": CategoricalAction(["Vehicle"], np.array([choice], dtype=np.int64), MOVES)}


def _place(env, vehicle, direction, target, mines=()) -> None:
    env.reset()
    env.vehicle, env.direction = np.array(vehicle, dtype=float), direction
    env.target = np.array(target, dtype=float)
    env.mines = np.array(mines, dtype=float).reshape(-1, 2)


def test_spaces():
    env = Minefield()
    space = env.obs_space()
    assert list(space.entities) == ["Vehicle", "Mine", "Target"]
    assert {k: v.features for k, v in space.entities.items()} == {
        "Vehicle": ["x_pos", "y_pos", "direction", "step"],
        "Mine": ["x_pos", "y_pos"],
        "Target": ["x_pos", "y_pos"],
    }
    assert env.action_space()["move"].index_to_label == MOVES


def test_reset_layout_and_placement():
    env = Minefield(max_mines=30)
    env.seed(0)
    for _ in range(20):
        obs = env.reset()
        vehicle, mines, target = obs.features["Vehicle"], obs.features["Mine"], obs.features["Target"]
        assert vehicle.dtype == mines.dtype == target.dtype == np.float32
        assert vehicle.shape == (1, 4) and target.shape == (1, 2)
        assert mines.ndim == 2 and mines.shape[1] == 2 and 0 < len(mines) <= 30
        assert 0.0 <= vehicle[0, 2] < 2 * np.pi and vehicle[0, 3] == 0.0
        points = np.concatenate([vehicle[:, :2], target, mines])
        assert (np.abs(points) <= 100).all()
        gaps = np.linalg.norm(points[:, None] - points[None], axis=-1)  # [n, n]
        np.fill_diagonal(gaps, np.inf)
        assert (gaps[2:] >= 15 - 1e-3).all()  # each mine keeps clear of everything else
        assert gaps[0, 1] >= 5.0  # the target is not reached before the first move
        assert obs.ids == {"Vehicle": ["Vehicle"]}
        mask = obs.actions["move"]
        assert isinstance(mask, CategoricalActionMask) and list(mask.actor_types) == ["Vehicle"]
        assert not obs.done and obs.reward == 0.0


def test_small_field_never_starts_at_the_target():
    env = Minefield(width=10.0)
    env.seed(1)
    for _ in range(100):
        obs = env.reset()
        gap = np.linalg.norm(obs.features["Vehicle"][0, :2] - obs.features["Target"][0])
        assert not obs.done and gap >= 5.0 - 1e-4


def test_turning_and_driving():
    env = Minefield()
    _place(env, (0.0, 0.0), 0.0, (90.0, 90.0))
    obs = env.act(_move(LEFT))
    assert obs.features["Vehicle"][0, 2] == pytest.approx(2 * np.pi - np.pi / 8)
    obs = env.act(_move(RIGHT))
    obs = env.act(_move(RIGHT))
    assert obs.features["Vehicle"][0, 2] == pytest.approx(np.pi / 8)
    obs = env.act(_move(FORWARD))
    expected = [3 * np.cos(np.pi / 8), 3 * np.sin(np.pi / 8), np.pi / 8, 4]
    np.testing.assert_allclose(obs.features["Vehicle"][0], expected, rtol=1e-6)
    assert (obs.reward, obs.done) == (0.0, False)


def test_reaching_the_target_rewards_one():
    env = Minefield()
    _place(env, (0.0, 0.0), 0.0, (7.0, 0.0))
    obs = env.act(_move(FORWARD))  # now 4 from the target
    assert (obs.reward, obs.done, obs.truncated) == (1.0, True, False)


def test_turning_away_does_not_reach():
    env = Minefield()
    _place(env, (0.0, 0.0), 0.0, (7.0, 0.0))
    obs = env.act(_move(LEFT))
    assert (obs.reward, obs.done) == (0.0, False)


def test_hitting_a_mine_ends_without_reward():
    env = Minefield()
    _place(env, (0.0, 0.0), np.pi / 2, (50.0, 50.0), mines=[(0.0, 7.0), (40.0, -40.0)])
    obs = env.act(_move(FORWARD))
    assert (obs.reward, obs.done, obs.truncated) == (0.0, True, False)


def test_step_limit_truncates():
    env = Minefield(max_steps=3)
    _place(env, (0.0, 0.0), 0.0, (50.0, 50.0))
    for done in (False, False, True):
        obs = env.act(_move(LEFT))
        assert obs.done == done
    assert obs.truncated and obs.reward == 0.0
    assert env.reset().features["Vehicle"][0, 3] == 0.0  # the step count starts over
    # Reaching the target on the last step is the game's own end.
    _place(env, (0.0, 0.0), 0.0, (7.0, 0.0))
    env.step = 2
    obs = env.act(_move(FORWARD))
    assert (obs.reward, obs.done, obs.truncated) == (1.0, True, False)


def test_translate_makes_positions_relative():
    env = Minefield(translate=True)
    _place(env, (10.0, -20.0), 0.0, (50.0, 50.0), mines=[(-30.0, 0.0)])
    obs = env.act(_move(LEFT))
    np.testing.assert_allclose(obs.features["Vehicle"][0, :2], [10.0, -20.0])
    np.testing.assert_allclose(obs.features["Target"], [[40.0, 70.0]])
    np.testing.assert_allclose(obs.features["Mine"], [[-40.0, 20.0]])


def test_no_mines():
    env = Minefield(max_mines=0)
    obs = env.reset()
    assert obs.features["Mine"].shape == (0, 2) and obs.features["Mine"].dtype == np.float32


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_mines=-1), "max_mines must be at least 0, got -1"),
        (dict(max_steps=0), "max_steps must be at least 1, got 0"),
        (dict(width=5.0), "width must be finite and at least 10.0, got 5.0"),
        (dict(width=math.inf), "width must be finite and at least 10.0, got inf"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Minefield(**kwargs)


def test_invalid_actions():
    env = Minefield()
    env.reset()
    with pytest.raises(ValueError, match=r"actions\['move'\] choice 3 is outside \[0, 3\)"):
        env.act(_move(3))
