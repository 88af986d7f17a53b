import numpy as np
import pytest

from entmachin.env import CategoricalAction, SelectEntityAction, validate_observation
from entmachin.env.examples.skirmish import MOVES, Skirmish, skirmish_opponent


def _orders(moves=(), attacks=()):
    """One seat's actions: ``moves`` as (unit k, label), ``attacks`` as (unit k, enemy k)."""
    return {
        "move": CategoricalAction([("Unit", k) for k, _ in moves],
                                  np.array([MOVES.index(m) for _, m in moves], dtype=np.int64), MOVES),
        "attack": SelectEntityAction([("Unit", k) for k, _ in attacks], [("Enemy", e) for _, e in attacks]),
    }


def _place(env, pos0, pos1, hp0=None, hp1=None):
    """Set true positions (x, y) and hit points of both squads; return the observations."""
    env.reset()
    env.n = len(pos0)
    env.pos = np.array([pos0, pos1], dtype=np.int64)
    env.hp = np.array([hp0 or [env.hp_start] * env.n, hp1 or [env.hp_start] * env.n], dtype=np.int64)
    return _validated(env, env._observe(np.zeros(2), [None, None]))


def _validated(env, obs):
    for seat, o in obs.items():
        validate_observation(o, env.obs_space(), env.action_space(), where=f"seat {seat}")
    return obs


def test_spaces_and_mirrored_start_look_the_same_to_both_seats():
    env = Skirmish()
    assert env.seats() == ["0", "1"] and env.scripted_opponent is skirmish_opponent
    space = env.obs_space()
    assert space.global_features == ["time_left"]
    assert {k: v.features for k, v in space.entities.items()} == {"Unit": ["x", "y", "hp"], "Enemy": ["x", "y", "hp"]}
    assert env.action_space()["move"].index_to_label == ["stay", "up", "down", "left", "right"]
    counts = set()
    for seed in range(40):
        env.seed(seed)
        obs = _validated(env, env.reset())
        counts.add(env.n)
        np.testing.assert_array_equal(env.pos[1], 7 - env.pos[0])  # mirrored through the centre
        for etype in ("Unit", "Enemy"):
            np.testing.assert_array_equal(obs["0"].features[etype], obs["1"].features[etype])
        assert obs["0"].features["Unit"][:, 1].max() <= 1 and obs["0"].features["Enemy"][:, 1].min() >= 6
        assert (obs["0"].features["Unit"][:, 2] == 3).all()
        assert list(obs["0"].actions["move"].actor_ids) == [("Unit", k) for k in range(env.n)]
        assert list(obs["0"].actions["attack"].actor_ids) == []
    assert counts == {2, 3, 4, 5, 6}


def test_moves_follow_each_seats_view_and_off_grid_moves_are_masked():
    env = Skirmish()
    obs = _place(env, [(0, 0)], [(7, 7)])
    assert obs["0"].actions["move"].mask.tolist() == [[True, True, False, False, True]]
    assert obs["1"].actions["move"].mask.tolist() == [[True, True, False, False, True]]  # (0, 0) in its view
    obs = _validated(env, env.act({"0": _orders([(0, "up")]), "1": _orders([(0, "right")])}))
    assert env.pos.tolist() == [[[0, 1]], [[6, 7]]]
    assert obs["1"].features["Unit"][0, :2].tolist() == [1, 0] and obs["1"].features["Enemy"][0, :2].tolist() == [7, 6]
    assert obs["0"].global_features[0] == pytest.approx(49 / 50)


def test_units_in_range_attack_instead_of_moving_and_damage_is_simultaneous():
    env = Skirmish()
    obs = _place(env, [(3, 3), (0, 0)], [(5, 4), (7, 7)], hp0=[1, 3], hp1=[1, 3])
    assert list(obs["0"].actions["attack"].actor_ids) == [("Unit", 0)]
    assert list(obs["0"].actions["attack"].actee_ids) == [("Enemy", 0), ("Enemy", 1)]
    assert obs["0"].actions["attack"].mask.tolist() == [[True, False]]
    assert list(obs["0"].actions["move"].actor_ids) == [("Unit", 1)]
    obs = _validated(env, env.act({"0": _orders([(1, "up")], [(0, 0)]), "1": _orders([(1, "up")], [(0, 0)])}))
    # Both attackers hit each other and die together; the removed units leave the observations.
    assert obs["0"].ids["Unit"] == [("Unit", 1)] and obs["0"].ids["Enemy"] == [("Enemy", 1)]
    assert obs["1"].ids["Unit"] == [("Unit", 1)] and obs["1"].ids["Enemy"] == [("Enemy", 1)]
    assert obs["0"].reward == 0.0 and obs["1"].reward == 0.0 and not obs["0"].done
    assert env.pos.tolist() == [[[3, 3], [0, 1]], [[5, 4], [7, 6]]]


def test_damage_shapes_the_reward_and_a_wiped_out_side_loses():
    env = Skirmish()
    _place(env, [(3, 3), (3, 4)], [(4, 4), (0, 7)], hp1=[2, 3])
    obs = env.act({"0": _orders([], [(0, 0), (1, 0)]), "1": _orders([(1, "stay")], [(0, 1)])})
    assert obs["0"].reward == pytest.approx(0.5 * (2 - 1) / 6) and obs["1"].reward == pytest.approx(-obs["0"].reward)
    assert obs["0"].ids["Enemy"] == [("Enemy", 1)]
    env.pos[1, 1] = (3, 5)
    env.hp[1, 1] = 1
    obs = _validated(env, env._observe(np.zeros(2), [None, None]))
    obs = env.act({"0": _orders([], [(0, 1), (1, 1)]), "1": _orders([], [(1, 0)])})
    assert obs["0"].done and obs["1"].done and not obs["0"].truncated
    assert (obs["0"].result, obs["1"].result) == ("win", "loss")
    assert obs["0"].reward == pytest.approx(1 + 0.5 * (1 - 1) / 6)
    assert obs["1"].reward == pytest.approx(-1.0)
    assert not obs["0"].actions["move"].actor_ids and not obs["0"].actions["attack"].actor_ids


def test_both_wiped_out_at_once_is_a_draw():
    env = Skirmish()
    _place(env, [(3, 3)], [(4, 4)], hp0=[1], hp1=[1])
    obs = env.act({"0": _orders([], [(0, 0)]), "1": _orders([], [(0, 0)])})
    assert [(o.done, o.result, o.reward) for o in obs.values()] == [(True, "draw", 0.0)] * 2


@pytest.mark.parametrize("hp1, results", [([3, 1], ("win", "loss")), ([3, 2], ("draw", "draw")), ([3, 3], ("loss", "win"))])
def test_time_limit_ends_the_game_by_hit_points_left(hp1, results):
    env = Skirmish(time_limit=3)
    _place(env, [(0, 0), (1, 0)], [(7, 7), (6, 7)], hp0=[3, 2], hp1=hp1)
    for step in range(3):
        obs = env.act({"0": _orders([(0, "stay"), (1, "stay")]), "1": _orders([(0, "stay"), (1, "stay")])})
        assert obs["0"].done == (step == 2)
    assert (obs["0"].result, obs["1"].result) == results and not obs["0"].truncated
    with pytest.raises(ValueError, match="the game is over"):
        env.act({"0": {}, "1": {}})


def test_bad_actions_raise_naming_the_seat_before_the_state_changes():
    env = Skirmish()
    _place(env, [(0, 0), (3, 3)], [(7, 7), (4, 4)])
    good = {"0": _orders([(0, "up")], [(1, 1)]), "1": _orders([(0, "up")], [(1, 1)])}
    bad = [
        ({**good, "1": _orders([(0, "down")], [(1, 1)])}, r"actions\['1'\]\['move'\] moves unit \('Unit', 0\) down, off"),
        ({**good, "0": _orders([(0, "up")], [(1, 0)])}, r"actions\['0'\]\['attack'\] has unit \('Unit', 1\) attack "
                                                        r"\('Enemy', 0\), which is not an enemy within its range"),
        ({**good, "0": _orders([(0, "up"), (1, "up")])}, r"actions\['0'\]\['move'\] has actors"),
        ({**good, "1": _orders([], [(1, 1)])}, r"actions\['1'\]\['move'\] has actors \[\]; expected each of its units"),
        ({"0": good["0"]}, r"omit seat\(s\) \['1'\]"),
        ({**good, "x": {}}, r"unknown seat\(s\) \['x'\]"),
    ]
    before = (env.pos.copy(), env.hp.copy(), env.t)
    for actions, match in bad:
        with pytest.raises(ValueError, match=match):
            env.act(actions)
        np.testing.assert_array_equal(env.pos, before[0])
        np.testing.assert_array_equal(env.hp, before[1])
        assert env.t == before[2]
    with pytest.raises(TypeError, match=r"Skirmish.act: actions\['0'\]\['attack'\] must be a SelectEntityAction"):
        env.act({**good, "0": {"move": good["0"]["move"]}})
    env.act(good)
    assert env.t == 1


def test_opponent_attacks_in_range_and_approaches_otherwise():
    env = Skirmish()
    obs = _place(env, [(3, 3), (0, 0)], [(4, 5), (7, 7)])
    # Seat 0's unit 0 reaches only enemy 0; unit 1 moves toward its nearest enemy (enemy 0 at (4, 5)).
    action = skirmish_opponent(obs["0"], env.action_space(), np.random.default_rng(0))
    assert list(action["attack"].actors) == [("Unit", 0)] and list(action["attack"].actees) == [("Enemy", 0)]
    assert list(action["move"].actors) == [("Unit", 1)] and action["move"].labels[0] in ("up", "right")
    # Seat 1 sees the board turned half a turn: its unit 1 at (0, 0) in its view, nearest enemy unit 0 there at (4, 4).
    action = skirmish_opponent(obs["1"], env.action_space(), np.random.default_rng(0))
    assert list(action["attack"].actors) == [("Unit", 0)] and list(action["attack"].actees) == [("Enemy", 0)]
    assert action["move"].labels[0] in ("up", "right")
    rng = np.random.default_rng(0)
    env.act({seat: skirmish_opponent(o, env.action_space(), rng) for seat, o in obs.items()})  # accepted as is


def test_opponent_prefers_the_nearest_then_weakest_target():
    env = Skirmish()
    obs = _place(env, [(3, 3), (0, 0)], [(5, 5), (4, 4)], hp1=[1, 3])
    action = skirmish_opponent(obs["0"], env.action_space(), np.random.default_rng(0))
    assert list(action["attack"].actees)[0] == ("Enemy", 1)  # nearer, though stronger
    obs = _place(env, [(3, 3), (0, 0)], [(5, 5), (5, 4)], hp1=[3, 1])
    action = skirmish_opponent(obs["0"], env.action_space(), np.random.default_rng(0))
    assert list(action["attack"].actees)[0] == ("Enemy", 1)  # equally near by Chebyshev, nearer by Manhattan


def test_the_focus_opponent_hits_the_weakest_in_range_and_closes_on_the_weakest_enemy():
    from entmachin.env.examples.skirmish import focus_opponent

    env = Skirmish()
    obs = _place(env, [(3, 3), (0, 0)], [(5, 5), (4, 4)], hp1=[1, 3])
    action = focus_opponent(obs["0"], env.action_space(), np.random.default_rng(0))
    assert list(action["attack"].actees) == [("Enemy", 0)]  # weaker, though farther (skirmish_opponent: Enemy 1)
    assert list(action["move"].actors) == [("Unit", 1)] and action["move"].labels[0] in ("up", "right")
    obs = _place(env, [(0, 0), (1, 0)], [(7, 7), (0, 7)], hp1=[3, 1])
    action = focus_opponent(obs["0"], env.action_space(), np.random.default_rng(0))
    assert not list(action["attack"].actors) and list(action["move"].labels) == ["up", "up"]  # toward (0, 7)
    rng, games = np.random.default_rng(0), {"win": 0, "loss": 0, "draw": 0}
    for _ in range(20):  # it plays whole games, and holds its own against the scripted opponent
        obs = env.reset()
        while not obs["0"].done:
            obs = env.act({"0": focus_opponent(obs["0"], env.action_space(), rng),
                           "1": skirmish_opponent(obs["1"], env.action_space(), rng)})
        games[obs["0"].result] += 1
    assert sum(games.values()) == 20 and games["win"] + games["draw"] >= 5, games


def test_constructor_arguments_are_checked():
    with pytest.raises(ValueError, match="`max_units` must be between 3 and 16"):
        Skirmish(min_units=3, max_units=2)
    with pytest.raises(TypeError, match="`hp` must be an int"):
        Skirmish(hp=2.5)
    env = Skirmish(size=5, min_units=1, max_units=1, hp=1, attack_range=1, time_limit=5)
    assert env.reset()["0"].features["Unit"].shape == (1, 3)
