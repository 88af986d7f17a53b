import numpy as np
import pytest

from entmachin.env import ContinuousAction, ContinuousActionMask, EnvList, random_actions
from entmachin.env.examples import ENV_REGISTRY
from entmachin.ragged.arrays import ragged_from_arrays
from entmachin.env.examples.vehicles import (
    ARRIVAL_BONUS,
    COLLISION_PENALTY,
    FEATURES,
    MAX_SPEED,
    MAX_TURN,
    MIN_TRIP,
    N_STEPS,
    PROGRESS_COEF,
    SPAWN_GAP,
    Vehicles,
    vehicles_scripted,
)
from test.env.examples._rollouts import policy_returns, random_returns

COLUMN = {name: k for k, name in enumerate(FEATURES)}


def _drive(values, actors=None):
    values = np.array(values, dtype=np.float32).reshape(-1, 2)
    actors = list(range(len(values))) if actors is None else actors
    return {"drive": ContinuousAction(actors=actors, values=values, names=["steer", "throttle"])}


def _place(env, positions, headings, targets):
    env.reset()
    n = len(positions)
    env.position = np.array(positions, dtype=float).reshape(n, 2)
    env.heading = np.array(headings, dtype=float)
    env.target = np.array(targets, dtype=float).reshape(n, 2)
    env.start_distance = np.linalg.norm(env.target - env.position, axis=1)
    env.speed = np.zeros(n)
    env.arrived = np.zeros(n, dtype=bool)
    env.wrecked = np.zeros(n, dtype=bool)
    env.step = 0


def test_spaces():
    env = Vehicles()
    assert env.obs_space().entities["Vehicle"].features == FEATURES and len(FEATURES) == 14
    space = env.action_space()["drive"]
    assert space.names == ["steer", "throttle"]
    np.testing.assert_array_equal(space.low, [-1.0, 0.0])
    np.testing.assert_array_equal(space.high, [1.0, 1.0])
    assert ENV_REGISTRY["Vehicles"] is Vehicles and Vehicles.scripted_policy is vehicles_scripted


def test_reset_layout_and_the_number_of_vehicles_varies():
    env = Vehicles()
    env.seed(0)
    counts = []
    for _ in range(60):
        obs = env.reset()
        features = obs.features["Vehicle"]
        n = len(features)
        counts.append(n)
        assert features.dtype == np.float32 and features.shape == (n, 14)
        assert obs.ids == {"Vehicle": list(range(n))} and not obs.done and obs.reward == 0.0
        gaps = np.linalg.norm(env.position[:, None] - env.position[None], axis=2) + np.eye(n) * 9
        assert (gaps >= SPAWN_GAP).all() and (np.abs(env.position) <= 0.9).all()
        assert (np.linalg.norm(env.target - env.position, axis=1) >= MIN_TRIP).all()
        assert (features[:, COLUMN["speed"]] == 0).all() and (features[:, COLUMN["arrived"]] == 0).all()
        np.testing.assert_allclose(features[:, COLUMN["target_distance"]], env.start_distance, rtol=1e-5)
        mask = obs.actions["drive"]
        assert isinstance(mask, ContinuousActionMask) and list(mask.actor_ids) == list(range(n))
        np.testing.assert_array_equal(mask.low, np.tile([-1.0, 0.0], (n, 1)))
        np.testing.assert_array_equal(mask.high, np.ones((n, 2)))
    assert set(counts) == {1, 2, 3, 4, 5}


def test_the_seed_decides_the_episode():
    def first(seed):
        env = Vehicles()
        env.seed(seed)
        return [env.reset().features["Vehicle"].tobytes() for _ in range(5)]

    assert first(3) == first(3) and first(3) != first(4)


def test_steering_turns_then_drives_and_progress_is_rewarded():
    env = Vehicles()
    _place(env, [(0.0, 0.0)], [0.0], [(0.0, 0.8)])
    obs = env.act(_drive([[1.0, 0.5]]))
    assert env.heading[0] == pytest.approx(MAX_TURN)
    step = 0.5 * MAX_SPEED * np.array([np.cos(MAX_TURN), np.sin(MAX_TURN)])
    np.testing.assert_allclose(env.position[0], step)
    progress = (0.8 - np.hypot(step[0], 0.8 - step[1])) / 0.8
    assert obs.reward == pytest.approx(PROGRESS_COEF * progress)
    row = obs.features["Vehicle"][0]
    assert row[COLUMN["speed"]] == pytest.approx(0.5) and row[COLUMN["time"]] == pytest.approx(1 / N_STEPS)
    # The target, ahead and to the left, in the vehicle's own frame.
    assert row[COLUMN["target_forward"]] > 0 and row[COLUMN["target_left"]] > 0
    heading = (row[COLUMN["cos_heading"]], row[COLUMN["sin_heading"]])
    assert heading == pytest.approx((np.cos(MAX_TURN), np.sin(MAX_TURN)))


def test_driving_away_is_penalised_and_the_field_edge_stops_a_vehicle():
    env = Vehicles()
    _place(env, [(0.95, 0.0)], [0.0], [(0.0, 0.0)])
    obs = env.act(_drive([[0.0, 1.0]]))
    assert env.position[0] == pytest.approx([1.0, 0.0])
    assert obs.reward == pytest.approx(PROGRESS_COEF * (0.95 - 1.0) / 0.95)


def test_arriving_parks_the_vehicle_and_fixes_its_values_to_zero():
    env = Vehicles()
    _place(env, [(0.0, 0.0), (-0.5, -0.5)], [0.0, 0.0], [(0.15, 0.0), (0.55, -0.5)])
    obs = env.act(_drive([[0.0, 1.0], [0.0, 0.0]]))  # vehicle 0 ends 0.05 from its target
    assert obs.reward == pytest.approx((PROGRESS_COEF * 0.1 / 0.15 + ARRIVAL_BONUS) / 2)
    assert not obs.done and obs.features["Vehicle"][0, COLUMN["arrived"]] == 1.0
    mask = obs.actions["drive"]
    np.testing.assert_array_equal(mask.low, [[0.0, 0.0], [-1.0, 0.0]])
    np.testing.assert_array_equal(mask.high, [[0.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match=r"actor 0 value 'throttle' is 1\.0; expected a finite value in \[0\.0, 0"):
        env.act(_drive([[0.0, 1.0], [0.0, 1.0]]))
    for _ in range(9):  # vehicle 1 drives 0.9 of its 1.05
        obs = env.act(_drive([[0.0, 0.0], [0.0, 1.0]]))
    assert env.position[0] == pytest.approx([0.1, 0.0]) and not obs.done
    obs = env.act(_drive([[0.0, 0.0], [0.0, 1.0]]))
    assert obs.done and not obs.truncated and env.arrived.all()


def test_vehicles_that_come_too_close_are_wrecked():
    env = Vehicles()
    targets = [(0.8, 0.0), (-0.8, 0.0), (0.0, -0.55)]
    _place(env, [(-0.1, 0.0), (0.1, 0.0), (0.0, 0.8)], [0.0, np.pi, -np.pi / 2], targets)
    obs = env.act(_drive([[0.0, 0.6], [0.0, 0.6], [0.0, 0.0]]))  # 0.08 apart
    progress = 2 * PROGRESS_COEF * 0.06 / 0.9
    assert obs.reward == pytest.approx((progress - 2 * COLLISION_PENALTY) / 3)
    assert list(env.wrecked) == [True, True, False] and obs.metrics["crashes"] == 2.0
    features = obs.features["Vehicle"]
    assert list(features[:, COLUMN["wrecked"]]) == [1.0, 1.0, 0.0]
    np.testing.assert_array_equal(obs.actions["drive"].high[:2], 0.0)
    # Wrecks are off the road: nobody's neighbour, and they no longer move.
    assert features[2, COLUMN["neighbour_distance"]] == pytest.approx(0.5)
    wrecks = env.position[:2].copy()
    obs = env.act(_drive([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]]))
    np.testing.assert_array_equal(env.position[:2], wrecks)
    for _ in range(12):  # 1.35 to drive, through the gap the wrecks left
        obs = env.act(_drive([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]]))
    assert obs.done and env.arrived[2] and not env.wrecked[2] and not obs.truncated


def test_the_closest_vehicle_on_the_road_is_seen_in_the_own_frame():
    env = Vehicles()
    _place(env, [(0.0, 0.0), (0.0, 0.3), (0.0, -0.45)], [np.pi / 2, 0.0, 0.0], [(0.8, 0.8), (-0.8, 0.8), (0.8, -0.8)])
    obs = env.act(_drive([[0.0, 0.0]] * 3))
    row = obs.features["Vehicle"][0]
    assert (row[COLUMN["neighbour_forward"]], row[COLUMN["neighbour_left"]]) == pytest.approx((0.3, 0.0), abs=1e-6)
    assert row[COLUMN["neighbour_distance"]] == pytest.approx(0.3)
    far = obs.features["Vehicle"][2]  # 0.45 from vehicle 0, 0.75 from vehicle 1
    assert far[COLUMN["neighbour_forward"]] == pytest.approx(0.0, abs=1e-6)
    assert far[COLUMN["neighbour_left"]] == pytest.approx(0.45)


def test_episodes_end_at_the_step_limit_as_terminal():
    env = Vehicles()
    _place(env, [(0.0, 0.0)], [0.0], [(0.0, 0.8)])
    for step in range(1, N_STEPS + 1):
        obs = env.act(_drive([[0.0, 0.0]]))
        assert obs.done == (step == N_STEPS) and not obs.truncated


def test_bad_actions_raise():
    env = Vehicles()
    _place(env, [(0.0, 0.0), (0.5, 0.5)], [0.0, 0.0], [(0.0, 0.8), (-0.5, -0.5)])
    with pytest.raises(TypeError, match=r"Vehicles\.act: actions\['drive'\] must be a ContinuousAction, got NoneType"):
        env.act({})
    with pytest.raises(ValueError, match=r"actions\['drive'\] has actors \[0, 0\]; expected each of \[0, 1\] once"):
        env.act(_drive([[0.0, 0.0], [0.0, 0.0]], actors=[0, 0]))
    with pytest.raises(ValueError, match=r"values of shape \(2, 1\); expected \(2, 2\)"):
        env.act({"drive": ContinuousAction([0, 1], np.zeros((2, 1), np.float32), ["steer"])})
    with pytest.raises(ValueError, match=r"actor 1 value 'steer' is -2\.0"):
        env.act(_drive([[0.0, 0.0], [-2.0, 0.0]]))
    with pytest.raises(ValueError, match=r"actor 0 value 'throttle' is nan"):
        env.act(_drive([[0.0, np.nan], [0.0, 0.0]]))
    # Actors in another order are matched by id.
    env.act(_drive([[0.0, 1.0], [0.0, 0.0]], actors=[1, 0]))
    assert env.position[1] == pytest.approx([0.6, 0.5]) and env.position[0] == pytest.approx([0.0, 0.0])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"max_vehicles": 0}, ValueError, "`max_vehicles` must be between 1 and 8, got 0"),
    ({"max_vehicles": 2.0}, TypeError, "`max_vehicles` must be an int, got float"),
])
def test_invalid_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        Vehicles(**kwargs)


class _OneParked(Vehicles):
    """Episodes of at least two vehicles, the first parked from the start."""

    def reset(self):
        while len(super().reset().ids["Vehicle"]) < 2:
            pass
        self.arrived[0] = True
        return self._observe(reward=0.0)


def test_envlist_keeps_random_values_within_a_narrowed_mask_and_refuses_others():
    envs = EnvList(_OneParked, 2, seed=0)
    obs = envs.reset()
    rng = np.random.default_rng(0)
    for _ in range(5):
        actions = random_actions(obs, envs.action_space(), rng)
        starts = np.concatenate([[0], np.cumsum(obs.action_masks["drive"].actors.size1())[:-1]])  # [n_rows]
        first = actions["drive"].as_array()[starts]
        np.testing.assert_array_equal(first, 0.0)  # each row's parked vehicle
        obs = envs.act(actions)
    actions = random_actions(obs, envs.action_space(), rng)
    values = actions["drive"].as_array().copy()
    values[0] = [0.0, 0.5]
    match = r"actions\['drive'\] row 0, actor 0, value 'throttle' \(dimension 1\): 0\.5 is outside its bounds \[0\.0, 0"
    with pytest.raises(ValueError, match=match):
        envs.act({"drive": ragged_from_arrays(values, actions["drive"].size1(), np.float32)})


def test_the_scripted_driver_beats_random_values_by_far():
    scripted, random = policy_returns(Vehicles, vehicles_scripted, 60, seed=0), random_returns(Vehicles, 64, seed=0)
    # Measured: scripted 0.95 (sd 0.10), random -0.06 (sd 0.25); the margins are over 5 standard errors.
    assert scripted.mean() > 0.85 and scripted.min() > 0.0
    assert random.mean() < 0.1
    assert scripted.mean() - random.mean() > 0.7
    assert np.abs(random).max() < 2.0 and np.abs(scripted).max() <= 1.0 + 1e-6
