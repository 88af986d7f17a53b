"""Continuous actions through the environment layer: spaces, batching, canonical states, stepping
in this process and in workers, ``VecEnv.act``'s checks, the wire format, records of spaces and
random actions."""
import functools
import json
import pickle
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.env import (
    CategoricalActionMask,
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    EnvList,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ParallelEnvList,
    ValidatingEnv,
    VecCategoricalActionMask,
    VecContinuousActionMask,
    batch_obs,
    checked_choices,
    random_actions,
    to_state,
    validate_observation,
)
from entmachin.env.env_list import check_actions, row_choices, to_env_actions
from entmachin.env.spaces import space_differences, spaces_from_record, spaces_record
from entmachin.env.wire import pack, pack_actions, unpack, unpack_actions, unpack_many
from entmachin.ragged.array import RaggedArrayF32, RaggedArrayI64
from entmachin.ragged.arrays import ragged_equal, ragged_from_arrays, take
from test.env.toy import Driving

OBS_SPACE = Driving().obs_space()
ACTIONS = Driving().action_space()
DRIVE, BOOST = ACTIONS["drive"], ACTIONS["boost"]


def car_obs(n_cars, low=None, high=None, boost=None):
    """An observation of ``Driving``'s spaces: ``n_cars`` cars (ids 100, 101, ...) and 2 cones."""
    ids = [100 + k for k in range(n_cars)]
    return Observation(
        features={"Car": np.zeros((n_cars, 2), np.float32), "Cone": np.ones((2, 1), np.float32)},
        ids={"Car": ids},
        global_features=[0.0],
        actions={
            "drive": ContinuousActionMask(actor_ids=ids, low=low, high=high),
            "boost": boost if boost is not None else GlobalContinuousActionMask(),
            "horn": CategoricalActionMask(actor_types=["Car"]),
        },
        done=False,
        reward=0.0,
    )


# ------------------------------------------------------------------ spaces

SPACE_ERRORS = [
    ("low > high", dict(low=[0, 1], high=[1, 0], names=["a", "b"]), "value 'b' (dimension 1) has low 1.0 > high 0.0"),
    ("nan", dict(low=[0, np.nan], high=1, names=["a", "b"]),
     "value 'b' (dimension 1) has bounds [nan, 1.0]; both must be finite"),
    ("inf", dict(low=0, high=np.inf), "value '0' (dimension 0) has bounds [0.0, inf]; both must be finite"),
    ("-inf", dict(low=[-np.inf, 0], high=[0, 0]), "value '0' (dimension 0) has bounds [-inf, 0.0]"),
    ("beyond float32", dict(low=0, high=1e39), "value '0' (dimension 0) has bounds [0.0, 1e+39]; both must be finite"),
    ("counts differ", dict(low=[0, 0], high=[1, 1, 1]), "low has 2 values and high 3; expected one per value (3)"),
    ("names and bounds differ", dict(low=[0, 0], high=[1, 1], names=["a"]),
     "low has 2 values and high 2; expected one per value (1, the names)"),
    ("duplicate names", dict(low=0, high=1, names=["a", "a"]), "value names ['a', 'a'] repeat a name"),
    ("no values", dict(low=[], high=[]), "an action of no values"),
    ("2-d bounds", dict(low=[[0.0]], high=1.0), "low and high must be numbers or 1-d sequences, got shapes (1, 1) and ()"),
]


@pytest.mark.parametrize("cls", [ContinuousActionSpace, GlobalContinuousActionSpace])
@pytest.mark.parametrize("label, kwargs, message", SPACE_ERRORS, ids=[c[0] for c in SPACE_ERRORS])
def test_space_construction_errors(cls, label, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(f"{cls.__name__}: {message}")):
        cls(**kwargs)


def test_space_bounds_broadcast_names_default_and_fixed_values_are_allowed():
    space = ContinuousActionSpace(low=-1, high=[1, 2, 2])
    assert space.names == ["0", "1", "2"] and len(space) == 3
    assert space.low.dtype == np.float32 and space.low.tolist() == [-1.0, -1.0, -1.0]
    fixed = GlobalContinuousActionSpace(low=0.5, high=0.5, names=["x"])  # low == high fixes the value
    assert fixed.low.tolist() == fixed.high.tolist() == [0.5]
    assert ContinuousActionSpace(0, 1, names=["a"]) == ContinuousActionSpace([0.0], [1.0], ["a"])
    assert ContinuousActionSpace(0, 1, names=["a"]) != GlobalContinuousActionSpace(0, 1, names=["a"])
    assert ContinuousActionSpace(0, 1, names=["a"]) != ContinuousActionSpace(0, 2, names=["a"])


# ------------------------------------------------------------------ batching and canonical states


def test_batch_fills_the_space_bounds_where_another_observation_narrows():
    obs = [car_obs(1, low=np.array([[-0.5, 0.5]])), car_obs(2), car_obs(0, low=np.zeros((0, 2)))]
    vec = batch_obs(obs, OBS_SPACE, ACTIONS)
    drive = vec.action_masks["drive"]
    assert isinstance(drive, VecContinuousActionMask) and drive.mask is None
    assert drive.actors.size1().tolist() == [1, 2, 0]
    assert drive.actors.as_array().ravel().tolist() == [0, 0, 1]  # cars come first in each row
    assert isinstance(drive.low, RaggedArrayF32) and drive.low.size2() == 2
    np.testing.assert_array_equal(drive.low.as_array(), [[-0.5, 0.5], [-1, 0], [-1, 0]])
    np.testing.assert_array_equal(drive.high.as_array(), [[1, 2]] * 3)  # no row narrows high: all the space's
    boost = vec.action_masks["boost"]
    np.testing.assert_array_equal(boost.low.as_array(), [[0]] * 3)  # no row narrows it: the space's bounds
    assert boost.actors.as_array().ravel().tolist() == [3, 4, 2]  # __global__ after each row's cars and cones
    assert isinstance(vec.action_masks["horn"], VecCategoricalActionMask)


def test_batch_fills_the_space_bounds_where_no_observation_narrows():
    vec = batch_obs([car_obs(2), car_obs(0), car_obs(1)], OBS_SPACE, ACTIONS)
    low, high = vec.action_masks["drive"].bounds(DRIVE)  # [n_actors, n_values] each
    np.testing.assert_array_equal(low, [[-1, 0]] * 3)
    np.testing.assert_array_equal(high, [[1, 2]] * 3)


def test_batch_reads_both_global_bound_layouts():
    obs = [car_obs(0, boost=GlobalContinuousActionMask(low=[0.25])),
           car_obs(1, boost=GlobalContinuousActionMask(high=np.array([[0.5]], np.float32))), car_obs(0)]
    boost = batch_obs(obs, OBS_SPACE, ACTIONS).action_masks["boost"]
    assert boost.low.size1().tolist() == [1, 1, 1]
    np.testing.assert_array_equal(boost.low.as_array(), [[0.25], [0.0], [0.0]])
    np.testing.assert_array_equal(boost.high.as_array(), [[1.0], [0.5], [1.0]])


def test_batch_names_the_row_of_bounds_of_the_wrong_shape():
    obs = [car_obs(1), car_obs(2, low=np.zeros((1, 2)))]
    with pytest.raises(ValueError, match=re.escape("row 1: actions['drive'].low has shape (1, 2); expected "
                                                   "(n_actors, n_values) = (2, 2)")):
        batch_obs(obs, OBS_SPACE, ACTIONS)


@pytest.mark.parametrize("narrowed", [False, True])
def test_to_state_always_carries_bounds_of_continuous_actions(narrowed):
    low = np.array([[0.0, 1.0], [0.5, 1.5]]) if narrowed else None
    vec = batch_obs([car_obs(2, low=low), car_obs(1)], OBS_SPACE, ACTIONS)
    state = to_state(vec, ACTIONS)
    for name, space in (("drive", DRIVE), ("boost", BOOST)):
        entry = state["action_masks"][name]
        assert set(entry) == {"actors", "low", "high"}
        for side in ("low", "high"):
            assert isinstance(entry[side], RaggedArrayF32) and entry[side].size2() == len(space)
            assert entry[side].size1().tolist() == entry["actors"].size1().tolist()
    drive = state["action_masks"]["drive"]
    expected_low = [[0, 1], [0.5, 1.5], [-1, 0]] if narrowed else [[-1, 0]] * 3
    np.testing.assert_array_equal(drive["low"].as_array(), expected_low)
    np.testing.assert_array_equal(drive["high"].as_array(), [[1, 2]] * 3)
    np.testing.assert_array_equal(state["action_masks"]["boost"]["low"].as_array(), [[0.0], [0.0]])
    assert "mask" in state["action_masks"]["horn"]


# ------------------------------------------------------------------ random actions


def test_random_actions_stay_within_narrowed_bounds_and_repeat_for_a_seed():
    low, high = [[0.5, 1.0], [-1.0, 0.0]], [[0.5, 1.5], [-0.9, 0.1]]  # the first car's steer is fixed
    vec = batch_obs([car_obs(2, low=low, high=high), car_obs(3), car_obs(0)], OBS_SPACE, ACTIONS)
    first, again, other = (random_actions(vec, ACTIONS, np.random.default_rng(s)) for s in (3, 3, 4))
    assert all(ragged_equal(first[name], again[name]) for name in ACTIONS)
    assert not ragged_equal(first["drive"], other["drive"])
    values = first["drive"].as_array()  # [n_actors, 2]
    assert isinstance(first["drive"], RaggedArrayF32) and values.shape == (5, 2)
    assert first["drive"].size1().tolist() == [2, 3, 0]
    lo, hi = vec.action_masks["drive"].bounds(DRIVE)
    assert (values >= lo).all() and (values <= hi).all()
    assert values[0, 0] == np.float32(0.5)
    assert first["boost"].as_array().shape == (3, 1) and isinstance(first["horn"], RaggedArrayI64)
    check_actions(first, vec, ACTIONS)


def test_random_actions_within_bounds_near_the_float32_limits():
    space = {"a": ContinuousActionSpace(low=-3.4e38, high=3.4e38)}
    vec_mask = VecContinuousActionMask(ragged_from_arrays(np.zeros((2000, 1), np.int64), [2000]))

    class Vec:
        action_masks = {"a": vec_mask}

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way
        values = random_actions(Vec(), space, np.random.default_rng(0))["a"].as_array()  # [2000, 1]
    assert np.isfinite(values).all() and values.min() < -1e38 and values.max() > 1e38


# ------------------------------------------------------------------ stepping


@pytest.mark.parametrize("narrow", ["always", "never", "sometimes"])
def test_env_list_hands_the_environment_float32_actions_within_the_bounds(narrow):
    envs = EnvList(lambda: ValidatingEnv(Driving(narrow)), 3, seed=5)
    rng = np.random.default_rng(0)
    obs = envs.reset()
    for _ in range(12):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        assert obs.metrics["ok"].min == 1.0  # every environment found its actions fit
    received = [actions for env in envs.envs for actions in env.env.received]
    assert len(received) == 36
    assert any(len(a["drive"].actors) == 0 for a in received) and any(len(a["drive"].actors) > 1 for a in received)
    for actions in received:
        drive, boost = actions["drive"], actions["boost"]
        assert isinstance(drive, ContinuousAction) and drive.values.dtype == np.float32
        assert drive.values.shape == (len(drive.actors), 2) and drive.names == ["steer", "gas"]
        assert isinstance(boost, GlobalContinuousAction) and boost.values.dtype == np.float32
        assert boost.values.shape == (1,)


def _assert_same_obs(a, b):
    for etype in b.features:
        assert ragged_equal(a.features[etype], b.features[etype]), etype
    for name, mask in b.action_masks.items():
        other = a.action_masks[name]
        assert type(other) is type(mask) and ragged_equal(other.actors, mask.actors), name
        for side in ("low", "high", "mask"):
            mine, theirs = getattr(other, side, None), getattr(mask, side, None)
            assert (mine is None) == (theirs is None) and (mine is None or ragged_equal(mine, theirs)), (name, side)
    np.testing.assert_array_equal(a.reward, b.reward)


def test_parallel_env_list_steps_continuous_actions_like_env_list():
    make = functools.partial(Driving, "always")
    local = EnvList(make, 4, seed=9)
    with ParallelEnvList(make, 4, 2, start_method="fork", seed=9) as parallel:
        assert parallel.action_space() == local.action_space()
        a, b = parallel.reset(), local.reset()
        rng = np.random.default_rng(1)
        for _ in range(8):
            _assert_same_obs(a, b)
            actions = random_actions(a, parallel.action_space(), rng)
            a, b = parallel.act(actions), local.act(actions)
            assert a.metrics["ok"].min == 1.0 and b.metrics["ok"].min == 1.0
        _assert_same_obs(a, b)


def test_parallel_env_list_merges_workers_that_narrow_and_workers_that_do_not():
    with ParallelEnvList(functools.partial(Driving, "sometimes"), 4, 2, start_method="fork", seed=3) as envs:
        obs, rng = envs.reset(), np.random.default_rng(0)
        for _ in range(10):
            obs = envs.act(random_actions(obs, envs.action_space(), rng))
            assert obs.metrics["ok"].min == 1.0  # every environment got values within its bounds
            low, high = obs.action_masks["drive"].low, obs.action_masks["drive"].high
            assert low.size1().tolist() == obs.action_masks["drive"].actors.size1().tolist() == high.size1().tolist()


def _first_row_with_cars(envs, rng):
    """Steps ``envs`` until a row has cars; returns its observation, random actions and that row."""
    obs = envs.reset()
    for _ in range(20):
        lengths = obs.action_masks["drive"].actors.size1()
        if lengths.any():
            return obs, random_actions(obs, envs.action_space(), rng), int(np.flatnonzero(lengths)[0])
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
    raise AssertionError("no car in 20 steps")


def _with_item(actions, name, k, j, value):
    flat = actions[name].as_array().copy()
    flat[k, j] = value
    return dict(actions, **{name: ragged_from_arrays(flat, actions[name].size1(), np.float32)})


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda a, k: _with_item(a, "drive", k, 0, 1.5), ValueError,
         r"actions\['drive'\] row {row}, actor 0, value 'steer' \(dimension 0\): 1\.5 is outside its bounds \[-1\.0, 1\.0\]"),
        (lambda a, k: _with_item(a, "drive", k, 1, -0.5), ValueError,
         r"actions\['drive'\] row {row}, actor 0, value 'gas' \(dimension 1\): -0\.5 is outside its bounds"),
        (lambda a, k: _with_item(a, "drive", k, 1, np.nan), ValueError,
         r"actions\['drive'\] row {row}, actor 0, value 'gas' \(dimension 1\): nan is not finite"),
        (lambda a, k: _with_item(a, "boost", 0, 0, 2.0), ValueError,
         r"actions\['boost'\] row 0, actor 0, value '0' \(dimension 0\): 2\.0 is outside its bounds \[0\.0, 1\.0\]"),
        (lambda a, k: dict(a, drive=ragged_from_arrays(np.zeros((a["drive"].items(), 3)), a["drive"].size1(),
                                                       np.float32)), ValueError,
         r"actions\['drive'\] has 3 values per actor; the space has 2 \(\['steer', 'gas'\]\)"),
        (lambda a, k: dict(a, drive=ragged_from_arrays(np.zeros((a["drive"].items(), 2)), a["drive"].size1(),
                                                       np.int64)), TypeError,
         r"actions\['drive'\]: expected a RaggedArrayF32 \(a continuous action\), got RaggedArrayI64"),
        (lambda a, k: dict(a, drive=take(a["drive"], [0])), ValueError,
         r"actions\['drive'\] has 1 rows; expected one per environment \(2\)"),
    ],
    ids=["steer above", "gas below", "nan", "global above", "width", "int64", "rows"],
)
def test_vec_env_act_refuses_bad_continuous_values(change, error, message):
    envs = EnvList(functools.partial(Driving, "never"), 2, seed=4)
    obs, actions, row = _first_row_with_cars(envs, np.random.default_rng(0))
    k = int(obs.action_masks["drive"].actors.size1()[:row].sum())  # the row's first actor among all actors
    before = [len(env.received) for env in envs.envs]
    with pytest.raises(error, match=message.format(row=row)):
        envs.act(change(actions, k))
    assert [len(env.received) for env in envs.envs] == before  # nothing stepped
    envs.act(actions)  # the unchanged actions still go


def test_vec_env_act_refuses_values_outside_the_narrowed_bounds():
    envs = EnvList(functools.partial(Driving, "always"), 2, seed=4)
    obs, actions, row = _first_row_with_cars(envs, np.random.default_rng(0))
    k = int(obs.action_masks["drive"].actors.size1()[:row].sum())
    low, high = obs.action_masks["drive"].bounds(DRIVE)
    assert DRIVE.low[0] < low[k, 0]  # narrowed, so the space's low is outside
    with pytest.raises(ValueError, match=rf"row {row}, actor 0, value 'steer' \(dimension 0\): -1\.0 is outside its "
                                         rf"bounds \[{re.escape(str(low[k, 0]))}, {re.escape(str(high[k, 0]))}\]"):
        envs.act(_with_item(actions, "drive", k, 0, DRIVE.low[0]))


def test_parallel_env_list_refuses_bad_continuous_values_before_the_workers_step():
    with ParallelEnvList(functools.partial(Driving, "never"), 2, 2, start_method="fork", seed=4) as envs:
        obs, actions, row = _first_row_with_cars(envs, np.random.default_rng(0))
        k = int(obs.action_masks["drive"].actors.size1()[:row].sum())
        with pytest.raises(ValueError, match=rf"actions\['drive'\] row {row}, actor 0, value 'steer' \(dimension 0\)"):
            envs.act(_with_item(actions, "drive", k, 0, np.inf))
        assert envs.act(actions).metrics["ok"].min == 1.0


def test_to_env_actions_of_a_continuous_action_without_actors():
    obs = car_obs(0)
    vec = batch_obs([obs], OBS_SPACE, ACTIONS)
    choices = row_choices(random_actions(vec, ACTIONS, np.random.default_rng(0)), 1)[0]
    actions = to_env_actions(OBS_SPACE, ACTIONS, choices, obs)
    assert actions["drive"].actors == [] and actions["drive"].values.shape == (0, 2)
    assert actions["drive"].values.dtype == np.float32
    assert actions["boost"].values.shape == (1,) and actions["boost"]["0"] == actions["boost"].values[0]


# ------------------------------------------------------------------ the wire format


def _masks_equal(a, b):
    assert type(a) is type(b) and ragged_equal(a.actors, b.actors)
    for side in ("low", "high"):
        mine, theirs = getattr(a, side), getattr(b, side)
        assert (mine is None) == (theirs is None) and (mine is None or ragged_equal(mine, theirs)), side


def test_wire_round_trips_continuous_masks_and_actions():
    obs = [car_obs(2, low=[[0, 0], [0.5, 1]]), car_obs(0), car_obs(1, boost=GlobalContinuousActionMask(high=[0.5]))]
    vec = batch_obs(obs, OBS_SPACE, ACTIONS)
    message = pickle.loads(pickle.dumps(pack(vec)))  # what crosses the pipe
    back = unpack(message)
    for name in ("drive", "boost"):
        _masks_equal(back.action_masks[name], vec.action_masks[name])
    plain = batch_obs([car_obs(1)], OBS_SPACE, ACTIONS)
    _masks_equal(unpack(pack(plain)).action_masks["drive"], plain.action_masks["drive"])
    both = unpack_many([pack(vec), pack(vec)])  # one layout: joined field by field
    twice = batch_obs(obs + obs, OBS_SPACE, ACTIONS)
    for name in ("drive", "boost"):
        _masks_equal(both.action_masks[name], twice.action_masks[name])

    actions = random_actions(vec, ACTIONS, np.random.default_rng(0))
    messages = pickle.loads(pickle.dumps(pack_actions(actions, [(0, 1), (1, 3)])))
    parts = [unpack_actions(m) for m in messages]
    for part, rows in zip(parts, (slice(0, 1), slice(1, 3))):
        assert isinstance(part["drive"], RaggedArrayF32) and isinstance(part["horn"], RaggedArrayI64)
        for name in ACTIONS:
            assert ragged_equal(part[name], take(actions[name], rows)), name


# ------------------------------------------------------------------ records of spaces


def test_spaces_record_round_trips_continuous_spaces():
    record = json.loads(json.dumps(spaces_record(OBS_SPACE, ACTIONS)))  # as a checkpoint stores it
    assert record["actions"]["drive"] == {"kind": "continuous", "values": ["steer", "gas"], "low": [-1.0, 0.0],
                                          "high": [1.0, 2.0]}
    assert record["actions"]["boost"]["kind"] == "global continuous"
    obs_space, actions = spaces_from_record(record)
    assert actions == ACTIONS and obs_space == OBS_SPACE
    assert space_differences(record, spaces_record(obs_space, actions)) == []


@pytest.mark.parametrize(
    "name, space, fact",
    [
        ("drive", ContinuousActionSpace(low=[-1, 0], high=[1, 3], names=["steer", "gas"]), "'high': [1.0, 3.0]"),
        ("drive", ContinuousActionSpace(low=[-1, 0], high=[1, 2], names=["steer", "brake"]), "'brake'"),
        ("boost", GlobalContinuousActionSpace(low=0.5, high=1), "'low': [0.5]"),
        ("boost", ContinuousActionSpace(low=0, high=1), "'kind': 'continuous'"),
    ],
)
def test_space_differences_notice_changed_continuous_spaces(name, space, fact):
    changed = dict(ACTIONS, **{name: space})
    differences = space_differences(spaces_record(OBS_SPACE, ACTIONS), spaces_record(OBS_SPACE, changed))
    assert len(differences) == 1 and differences[0].startswith(f"action '{name}' is ")
    assert fact in differences[0]


def test_spaces_from_record_refuses_crossed_bounds():
    record = spaces_record(OBS_SPACE, ACTIONS)
    record["actions"]["drive"]["low"] = [-1.0, 3.0]
    with pytest.raises(ValueError, match=re.escape("run/spaces.json: ContinuousActionSpace: value 'gas' (dimension 1) "
                                                   "has low 3.0 > high 2.0")):
        spaces_from_record(record, where="run/spaces.json")


# ------------------------------------------------------------------ properties


@st.composite
def continuous_problems(draw):
    """A continuous space and a global one over the same random bounds, and observations whose
    masks narrow them (per actor, per side) or not."""
    n_values = draw(st.integers(1, 3))
    big = 2.0**100  # far from float32's limit, so that low + width stays finite
    low = np.array(draw(st.lists(st.floats(-big, big, width=32), min_size=n_values, max_size=n_values)))
    width = np.array(draw(st.lists(st.floats(0, big, width=32), min_size=n_values, max_size=n_values)))
    high = np.maximum(low, (low + width).astype(np.float32))
    rows = draw(st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans(), st.booleans()),
                         min_size=1, max_size=4))
    return low, high, rows, draw(st.integers(0, 2**16))


def _narrowed(space_low, space_high, shape, rng):
    """Random sub-intervals of the space's bounds: float64 ``(low, high)`` of ``shape``."""
    span = space_high.astype(np.float64) - space_low
    a, b = rng.random((2, *shape))
    return space_low + span * np.minimum(a, b), space_low + span * np.maximum(a, b)


@settings(max_examples=40, deadline=None)
@given(continuous_problems())
def test_random_actions_always_pass_the_checks(problem):
    """Property: for random bounds and masks, the validator accepts the observations, the
    random actions pass ``VecEnv.act``'s checks, and ``checked_choices`` of the actions they turn
    into gives back the same values."""
    space_low, space_high, rows, seed = problem
    n_values = len(space_low)
    names = [f"v{j}" for j in range(n_values)]
    actions = {"move": ContinuousActionSpace(space_low, space_high, names),
               "team": GlobalContinuousActionSpace(space_low, space_high, names)}
    rng = np.random.default_rng(seed)
    observations = []
    for n_cars, narrow_low, narrow_high, narrow_team in rows:
        low, high = _narrowed(actions["move"].low, actions["move"].high, (n_cars, n_values), rng)
        team_low, team_high = _narrowed(actions["team"].low, actions["team"].high, (n_values,), rng)
        ids = [f"car{k}" for k in range(n_cars)]
        observations.append(Observation(
            features={"Car": np.zeros((n_cars, 2), np.float32)}, ids={"Car": ids}, global_features=[0.0],
            actions={"move": ContinuousActionMask(actor_ids=ids, low=low if narrow_low else None,
                                                  high=high if narrow_high else None),
                     "team": GlobalContinuousActionMask(low=team_low if narrow_team else None,
                                                        high=team_high if narrow_team else None)},
            done=False, reward=0.0))
    for obs in observations:
        validate_observation(obs, OBS_SPACE, actions)
    vec = batch_obs(observations, OBS_SPACE, actions)
    chosen = random_actions(vec, actions, rng)
    check_actions(chosen, vec, actions)
    for obs, row in zip(observations, row_choices(chosen, len(observations))):
        env_actions = to_env_actions(OBS_SPACE, actions, row, obs)
        back = checked_choices(obs, OBS_SPACE, actions, env_actions)
        for name in actions:
            assert back[name].dtype == np.float32
            np.testing.assert_array_equal(back[name], np.asarray(row[name]).reshape(-1, n_values))
