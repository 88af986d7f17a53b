import numpy as np
import pytest

from entmachin.env import CategoricalAction
from entmachin.env.examples.move_to_origin import N_STEPS, SPACESHIP_ID, THRUST, MoveToOrigin

H_LABELS = list(THRUST["horizontal_thruster"])
V_LABELS = list(THRUST["vertical_thruster"])


def _thrust(horizontal="hold", vertical="hold"):
    return {
        "horizontal_thruster": CategoricalAction(
            [SPACESHIP_ID], np.array([H_LABELS.index(horizontal)]), H_LABELS
        ),
        "vertical_thruster": CategoricalAction([SPACESHIP_ID], np.array([V_LABELS.index(vertical)]), V_LABELS),
    }


def _at(x, y):
    env = MoveToOrigin()
    env.reset()
    env.x_pos, env.y_pos = x, y
    return env


def test_spaces():
    env = MoveToOrigin()
    assert list(env.obs_space().entities) == ["Spaceship"]
    assert env.obs_space().entities["Spaceship"].features == [
        "x_pos", "y_pos", "x_velocity", "y_velocity", "step",
    ]
    space = env.action_space()
    assert space["horizontal_thruster"].index_to_label == [
        "100% right", "10% right", "hold", "10% left", "100% left",
    ]
    assert space["vertical_thruster"].index_to_label == ["100% up", "10% up", "hold", "10% down", "100% down"]


def test_reset_starts_at_rest_on_the_unit_circle():
    env = MoveToOrigin()
    env.seed(0)
    for _ in range(5):
        obs = env.reset()
        x, y, vx, vy, step = obs.features["Spaceship"][0]
        assert np.hypot(x, y) == pytest.approx(1.0, abs=1e-6)
        assert (vx, vy, step) == (0.0, 0.0, 0.0)
        assert obs.reward == 0.0 and not obs.done
        assert obs.ids == {"Spaceship": [SPACESHIP_ID]}


def test_thrusting_towards_the_origin_is_rewarded_and_away_is_penalised():
    obs = _at(1.0, 0.0).act(_thrust(horizontal="100% left"))
    assert obs.reward == pytest.approx(0.01)
    np.testing.assert_allclose(obs.features["Spaceship"][0], [0.99, 0.0, -0.01, 0.0, 1.0], rtol=1e-6)
    obs = _at(0.0, -1.0).act(_thrust(vertical="100% down"))
    assert obs.reward == pytest.approx(-0.01)


def test_velocity_accumulates_and_the_ship_keeps_drifting():
    env = _at(0.0, 0.0)
    env.act(_thrust(vertical="10% up"))
    obs = env.act(_thrust(vertical="10% up"))
    assert env.y_velocity == pytest.approx(0.002) and env.y_pos == pytest.approx(0.003)
    obs = env.act(_thrust())
    assert env.y_pos == pytest.approx(0.005)
    assert obs.reward == pytest.approx(-0.002)


def test_episodes_last_32_steps_and_that_end_is_terminal():
    """The step count is observed, so the fixed end is the game's own: terminal, not truncated."""
    env = MoveToOrigin()
    env.seed(1)
    start = env.reset().features["Spaceship"][0]
    total = 0.0
    for step in range(1, N_STEPS + 1):
        obs = env.act(_thrust("10% right", "10% down"))
        total += obs.reward
        assert obs.done == (step == N_STEPS) and not obs.truncated
    assert N_STEPS == 32
    # The rewards telescope into the change of distance over the episode.
    end = obs.features["Spaceship"][0]
    assert total == pytest.approx(np.hypot(*start[:2]) - np.hypot(*end[:2]), abs=1e-5)


def test_bad_actions_raise():
    env = MoveToOrigin()
    env.reset()
    with pytest.raises(ValueError, match="unknown action 'boost'"):
        env.act({"boost": _thrust()["horizontal_thruster"]})
    with pytest.raises(ValueError, match="chose '100% up'; expected one of"):
        env.act({"horizontal_thruster": CategoricalAction([SPACESHIP_ID], np.array([0]), V_LABELS)})
