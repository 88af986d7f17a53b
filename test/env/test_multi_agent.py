"""Environments of several players in the vectorised lists: rows per (environment, seat), seeds,
results, final observations, validation and bad input."""
import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.env import (
    CategoricalAction,
    EnvList,
    ParallelEnvList,
    RowIndex,
    SelectEntityAction,
    ValidatingEnv,
    ValidatingMultiAgentEnv,
    batch_obs,
    checked_choices,
    env_seeds,
    game_results,
    random_actions,
)
from entmachin.env.env_list import to_env_actions
from entmachin.ragged.arrays import ragged_equal
from test.env.arena import Arena


def assert_same_rows(a, b):
    assert set(a.features) == set(b.features)
    for etype in a.features:
        assert ragged_equal(a.features[etype], b.features[etype]), etype
    assert set(a.visible) == set(b.visible)
    for etype in a.visible:
        assert ragged_equal(a.visible[etype], b.visible[etype]), etype
    for name, mask in a.action_masks.items():
        assert ragged_equal(mask.actors, b.action_masks[name].actors), name
    np.testing.assert_array_equal(a.reward, b.reward)
    np.testing.assert_array_equal(a.done, b.done)
    np.testing.assert_array_equal(a.truncated, b.truncated)
    np.testing.assert_array_equal(a.result, b.result)
    np.testing.assert_array_equal(a.final_index, b.final_index)
    assert (a.final_obs is None) == (b.final_obs is None)
    if a.final_obs is not None:
        assert_same_rows(a.final_obs, b.final_obs)


def by_hand(make, num_envs, seed, n_steps, action_seed):
    """Every environment stepped directly, per seat, with the actions EnvList would receive."""
    envs = [make() for _ in range(num_envs)]
    for env, s in zip(envs, env_seeds(seed, num_envs)):
        env.seed(s)
    space, actions_space = envs[0].obs_space(), envs[0].action_space()
    last = [env.reset() for env in envs]
    returns = [dict.fromkeys(env.seats(), 0.0) for env in envs]
    rows = [o for env, obs in zip(envs, last) for o in (obs[s] for s in env.seats())]
    vecs = [batch_obs(rows, space, actions_space)]
    rng = np.random.default_rng(action_seed)
    for _ in range(n_steps):
        actions = random_actions(vecs[-1], actions_space, rng)
        flats = {n: a.as_array().reshape(-1) for n, a in actions.items()}
        offsets = {n: np.concatenate([[0], np.cumsum(a.size1())]) for n, a in actions.items()}
        rows, finals, final_index, row = [], [], [], 0
        for i, env in enumerate(envs):
            moves = {}
            for seat in env.seats():
                choices = {n: flats[n][offsets[n][row + k]:offsets[n][row + k + 1]] for n, k in
                           ((n, env.seats().index(seat)) for n in flats)}
                moves[seat] = to_env_actions(space, actions_space, choices, last[i][seat])
            stepped = env.act(moves)
            for seat in env.seats():
                returns[i][seat] += stepped[seat].reward
            if stepped[env.seats()[0]].done:
                scores = game_results([stepped[s].result for s in env.seats()], [returns[i][s] for s in env.seats()])
                fresh = env.reset()
                for seat, score in zip(env.seats(), scores):
                    ended = stepped[seat]
                    ended.result = {1.0: "win", 0.5: "draw", 0.0: "loss"}[score]
                    finals.append(ended)
                    final_index.append(row + env.seats().index(seat))
                    new = fresh[seat]
                    new.done, new.reward, new.truncated, new.result, new.metrics = True, ended.reward, ended.truncated, ended.result, ended.metrics
                returns[i] = dict.fromkeys(env.seats(), 0.0)
                stepped = fresh
            last[i] = stepped
            rows.extend(stepped[s] for s in env.seats())
            row += len(env.seats())
        vec = batch_obs(rows, space, actions_space)
        if finals:
            vec.final_obs, vec.final_index = batch_obs(finals, space, actions_space), np.array(final_index)
        vecs.append(vec)
    return vecs


@settings(max_examples=15, deadline=None)
@given(num_envs=st.integers(1, 4), seed=st.integers(0, 2**16), turns=st.booleans(), results=st.booleans(),
       seats=st.sampled_from([2, 3, None]))
def test_env_list_rows_equal_each_environment_stepped_by_hand_per_seat(num_envs, seed, turns, results, seats):
    make = lambda: Arena(seats=seats, length=3, turns=turns, state_results=results)  # noqa: E731
    expected = by_hand(make, num_envs, seed, 6, seed + 1)
    envs = EnvList(make, num_envs, seed=seed)
    got = [envs.reset()]
    rng = np.random.default_rng(seed + 1)
    for _ in range(6):
        got.append(envs.act(random_actions(got[-1], envs.action_space(), rng)))
    for a, b in zip(got, expected):
        assert_same_rows(a, b)
    index = envs.row_index()
    assert len(envs) == len(index) == len(got[0]) and envs.num_envs == num_envs
    assert [s for s in index.seat] == [s for env in envs.envs for s in env.seats()]
    np.testing.assert_array_equal(index.env, np.repeat(np.arange(num_envs), [len(e.seats()) for e in envs.envs]))


@pytest.mark.parametrize("turns", [False, True])
def test_parallel_env_list_gives_the_rows_env_list_gives(turns):
    make = lambda: Arena(seats=None, length=4, turns=turns)  # noqa: E731
    local = EnvList(make, 5, seed=3)
    with ParallelEnvList(make, 5, 2, seed=3, start_method="fork") as remote:
        assert remote.row_index().seat == local.row_index().seat and len(remote) == len(local)
        a, b = local.reset(), remote.reset()
        assert_same_rows(a, b)
        rng = np.random.default_rng(0)
        for _ in range(10):
            actions = random_actions(a, local.action_space(), rng)
            a, b = local.act(actions), remote.act(actions)
            assert_same_rows(a, b)


def test_a_game_ends_for_every_seat_with_its_result_and_final_observation():
    envs = EnvList(lambda: Arena(seats=3, length=1, state_results=True), 2, seed=0)
    envs.reset()
    vec = envs.act(random_actions(envs._last_vec, envs.action_space(), np.random.default_rng(0)))
    assert vec.done.all() and len(vec) == 6
    np.testing.assert_array_equal(vec.result, [1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(vec.final_index, np.arange(6))
    np.testing.assert_array_equal(vec.final_obs.result, vec.result)


def test_without_stated_results_the_higher_return_wins():
    assert game_results([None, None], [3.0, 1.0]) == [1.0, 0.0]
    assert game_results([None, None, None], [2.0, 2.0, 0.0]) == [0.5, 0.5, 0.0]
    assert game_results([None, None], [0.0, 0.0]) == [0.5, 0.5]
    assert game_results(["draw", "draw"], [5.0, 0.0]) == [0.5, 0.5]
    with pytest.raises(ValueError, match="some seats only"):
        game_results(["win", None], [0.0, 0.0])


def test_results_are_nan_until_a_game_ends():
    envs = EnvList(lambda: Arena(seats=2, length=50), 3, seed=1)
    vec = envs.reset()
    assert np.isnan(vec.result).all()


def test_state_continues_a_game_exactly_and_needs_the_same_seats():
    make = lambda: Arena(seats=3, length=5)  # noqa: E731
    a = EnvList(make, 3, seed=9)
    vec = a.reset()
    rng = np.random.default_rng(1)
    vec = a.act(random_actions(vec, a.action_space(), rng))
    b = EnvList(make, 3, seed=123)
    b.set_state(a.get_state())
    for _ in range(8):
        actions = random_actions(vec, a.action_space(), rng)
        vec, other = a.act(actions), b.act(actions)
        assert_same_rows(vec, other)
    with pytest.raises(ValueError, match="seats"):
        EnvList(lambda: Arena(seats=2), 3).set_state(a.get_state())


class Uneven(Arena):
    def _observe(self):
        out = super()._observe()
        if self.t == 1:
            out["p1"].done = not out["p0"].done
        return out


def test_a_game_that_ends_for_some_seats_only_is_refused_naming_the_environment():
    envs = EnvList(lambda: Uneven(seats=2, length=5), 2, seed=0)
    vec = envs.reset()
    with pytest.raises(ValueError, match="ended for seats") as info:
        envs.act(random_actions(vec, envs.action_space(), np.random.default_rng(0)))
    assert info.value.env_index == 0


def test_one_and_several_player_environments_do_not_mix():
    from test.env.toy import Toy

    made = iter([Arena(), Toy()])
    with pytest.raises(TypeError, match="one player and of several"):
        EnvList(lambda: next(made), 2)


def test_row_index():
    index = RowIndex.of([["a", "b"], None, ["c", "d", "e"]])
    np.testing.assert_array_equal(index.env, [0, 0, 1, 2, 2, 2])
    assert index.seat == ("a", "b", None, "c", "d", "e") and index.num_envs == 3 and index.multi_agent
    assert index.rows_of(1, 3) == (2, 6) and index.rows_of(0, 1) == (0, 2)
    assert not RowIndex.of([None, None]).multi_agent


def validating(**kwargs):
    env = ValidatingEnv(Arena(**kwargs))
    assert isinstance(env, ValidatingMultiAgentEnv)
    env.seed(0)
    return env


def some_actions(env, obs):
    space = env.obs_space()
    out = {}
    for seat, o in obs.items():
        choices = {name: np.zeros(len(o._actor_indices(name, space)), np.int64) if name in o.actions else np.zeros(0, np.int64)
                   for name in env.action_space()}
        for name in o.actions:
            if name == "move":
                choices[name] = np.ones(len(choices[name]), np.int64)  # "stay" is always allowed
        out[seat] = to_env_actions(space, env.action_space(), choices, o)
    return out


def test_validating_env_refuses_a_step_that_omits_or_invents_a_seat_before_the_game_moves():
    env = validating(seats=2, length=5)
    obs = env.reset()
    actions = some_actions(env, obs)
    with pytest.raises(ValueError, match=r"omit seat\(s\) \['p1'\]"):
        env.act({"p0": actions["p0"]})
    with pytest.raises(ValueError, match=r"unknown seat\(s\) \['p9'\]"):
        env.act({**actions, "p9": {}})
    assert env.env.received == []
    env.act(actions)
    assert len(env.env.received) == 1


def test_validating_env_refuses_actions_for_a_seat_without_actors():
    env = validating(seats=2, length=5, turns=True)
    obs = env.reset()
    actions = some_actions(env, obs)
    idle = next(s for s, o in obs.items() if not o.actions)
    actions[idle] = {"move": CategoricalAction(actors=[(idle, 0)], indices=np.array([1]), index_to_label=["l", "s", "r"])}
    with pytest.raises(ValueError, match=rf"seat '{idle}': actions\['move'\] acts, but the observation has no actors"):
        env.act(actions)
    assert env.env.received == []


def test_checked_choices_names_masked_missing_and_unknown_actors():
    env = validating(seats=2, length=5)
    obs = env.reset()
    space, actions_space = env.obs_space(), env.action_space()
    o = obs["p0"]
    n = len(o._actor_indices("move", space))
    good = some_actions(env, obs)["p0"]
    np.testing.assert_array_equal(checked_choices(o, space, actions_space, good)["move"], np.ones(n))
    reversed_ = {**good, "move": CategoricalAction(actors=list(good["move"].actors)[::-1],
                                                   indices=np.arange(n)[::-1] % 2 + 1, index_to_label=["l", "s", "r"])}
    np.testing.assert_array_equal(checked_choices(o, space, actions_space, reversed_)["move"], np.arange(n) % 2 + 1)
    forbidden = np.asarray(o.actions["move"].mask)[:, 0]
    if (~forbidden).any():
        bad = copy.copy(good["move"])
        bad.indices = np.where(~forbidden, 0, 1)
        with pytest.raises(ValueError, match="mask forbids"):
            checked_choices(o, space, actions_space, {**good, "move": bad}, "seat 'p0'")
    with pytest.raises(ValueError, match=r"actions\['hit'\] is missing"):
        checked_choices(o, space, actions_space, {"move": good["move"]})
    with pytest.raises(ValueError, match="is taken by actors"):
        checked_choices(o, space, actions_space, {**good, "hit": SelectEntityAction(actors=["x"] * n, actees=good["hit"].actees)})
    with pytest.raises(ValueError, match="selects"):
        checked_choices(o, space, actions_space, {**good, "hit": SelectEntityAction(actors=good["hit"].actors, actees=["nobody"] * n)})
    with pytest.raises(ValueError, match="unknown action 'fly'"):
        checked_choices(o, space, actions_space, {**good, "fly": good["move"]})
