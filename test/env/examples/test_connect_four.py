import numpy as np
import pytest

from entmachin.env import CategoricalAction, validate_observation
from entmachin.env.examples._play import play_game, random_opponent
from entmachin.env.examples.connect_four import COLUMNS, MOVER_ID, ConnectFour, connect_four_opponent


def _drop(col: int) -> dict:
    return {"drop": CategoricalAction([MOVER_ID], np.array([col], dtype=np.int64), COLUMNS)}


def _play(env, cols):
    """Drop into ``cols`` in turn from a fresh game; each observation validated."""
    obs = env.reset()
    for col in cols:
        seat = "0" if env.turn == 0 else "1"
        obs = env.act({seat: _drop(col), "1" if seat == "0" else "0": {}})
        for s, o in obs.items():
            validate_observation(o, env.obs_space(), env.action_space(), where=f"seat {s}")
    return obs


def _cells(obs, etype):
    return sorted(map(tuple, obs.features[etype].astype(int).tolist()))


def test_spaces_and_start():
    env = ConnectFour()
    assert env.seats() == ["0", "1"] and env.scripted_opponent is connect_four_opponent
    space = env.obs_space()
    assert {k: v.features for k, v in space.entities.items()} == {
        "Mine": ["row", "col"], "Theirs": ["row", "col"], "Column": ["row", "col"], "Mover": ["to_move"]}
    assert env.action_space()["drop"].index_to_label == list("0123456")
    obs = env.reset()
    assert list(obs["0"].actions["drop"].actor_ids) == [MOVER_ID] and obs["0"].actions["drop"].mask.all()
    assert list(obs["1"].actions["drop"].actor_ids) == [] and obs["1"].actions["drop"].mask.shape == (0, 7)
    assert obs["0"].features["Mover"][0, 0] == 1.0 and obs["1"].features["Mover"][0, 0] == 0.0
    assert obs["0"].features["Column"].tolist() == [[0, c] for c in range(7)]


def test_turns_alternate_and_each_seat_sees_its_own_pieces_as_mine():
    env = ConnectFour()
    obs = _play(env, [3, 4, 3])
    assert _cells(obs["0"], "Mine") == [(0, 3), (1, 3)] and _cells(obs["0"], "Theirs") == [(0, 4)]
    assert _cells(obs["1"], "Mine") == [(0, 4)] and _cells(obs["1"], "Theirs") == [(0, 3), (1, 3)]
    assert list(obs["1"].actions["drop"].actor_ids) == [MOVER_ID] and not obs["0"].actions["drop"].actor_ids
    assert obs["0"].features["Column"][3, 0] == 2 and obs["0"].features["Column"][4, 0] == 1


@pytest.mark.parametrize("cols, winner", [
    ([0, 1, 0, 1, 0, 1, 0], "0"),  # vertical
    ([0, 0, 1, 1, 2, 2, 3], "0"),  # horizontal
    ([6, 0, 1, 1, 2, 2, 6, 2, 3, 3, 3, 3], "1"),  # diagonal up-right for seat 1: (0,0) (1,1) (2,2) (3,3)
    ([6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3], "0"),  # diagonal up-left: (0,6) (1,5) (2,4) (3,3)
])
def test_four_in_a_line_wins(cols, winner):
    obs = _play(ConnectFour(), cols)
    loser = "1" if winner == "0" else "0"
    assert obs[winner].done and obs[loser].done and not obs[winner].truncated
    assert (obs[winner].reward, obs[winner].result) == (1.0, "win")
    assert (obs[loser].reward, obs[loser].result) == (-1.0, "loss")
    assert not obs[winner].actions["drop"].actor_ids and not obs[loser].actions["drop"].actor_ids


def test_three_in_a_line_and_wrapped_lines_do_not_win():
    obs = _play(ConnectFour(), [0, 0, 1, 1, 2, 2])
    assert not obs["0"].done and obs["0"].reward == 0.0 and obs["0"].result is None
    # Seat 0 holds column 0's top three cells and column 1's bottom one: next to each other in a
    # bitboard without the spare bit atop each column.
    obs = _play(ConnectFour(), [1, 0, 6, 0, 6, 0, 0, 6, 0, 5, 0])
    assert _cells(obs["0"], "Mine") == [(0, 1), (0, 6), (1, 6), (3, 0), (4, 0), (5, 0)]
    assert not obs["0"].done


# A game that fills the board without four in a line.
DRAW = [3, 6, 1, 5, 4, 2, 0, 2, 6, 3, 0, 5, 4, 5, 5, 5, 1, 0, 6, 0, 3, 0, 0, 2, 2, 3, 4, 4, 3, 1, 1, 1, 3, 4, 5, 1, 2,
        2, 4, 6, 6, 6]


def test_full_board_without_a_line_is_a_draw_and_full_columns_are_masked():
    env = ConnectFour()
    obs = _play(env, DRAW[:35])  # column 5 filled by the 35th drop
    mover = "1"
    assert obs[mover].actions["drop"].mask.tolist() == [[DRAW[:35].count(c) < 6 for c in range(7)]]
    assert not obs[mover].actions["drop"].mask[0, 5] and obs[mover].features["Column"][5, 0] == 6
    obs = _play(env, DRAW)
    assert all(o.done and o.reward == 0.0 and o.result == "draw" for o in obs.values())


def test_bad_actions_raise_naming_the_seat_before_the_state_changes():
    env = ConnectFour()
    _play(env, [2] * 6)
    before = (list(env.bits), list(env.heights), env.turn)
    bad = [
        ({"0": _drop(2), "1": {}}, r"actions\['0'\]\['drop'\] chose column 2, which is full"),
        ({"0": _drop(3), "1": _drop(3)}, r"actions\['1'\]\['drop'\] is given, but seat '1' is not to move"),
        ({"0": _drop(3)}, r"omit seat\(s\) \['1'\]"),
        ({"0": _drop(3), "1": {}, "2": {}}, r"unknown seat\(s\) \['2'\]"),
        ({"0": _drop(9), "1": {}}, r"actions\['0'\]\['drop'\] choice 9 is outside \[0, 7\)"),
        ({"0": {"drop": CategoricalAction([5], np.array([3]), COLUMNS)}, "1": {}}, r"actions\['0'\]\['drop'\] expects"),
    ]
    for actions, match in bad:
        with pytest.raises(ValueError, match=match):
            env.act(actions)
        assert (env.bits, env.heights, env.turn) == (before[0], before[1], before[2])
    with pytest.raises(TypeError, match=r"ConnectFour.act: actions\['0'\]\['drop'\] must be a CategoricalAction"):
        env.act({"0": {}, "1": {}})
    # A drop without actors stands for "no action" of the seat not to move.
    env.act({"0": _drop(3), "1": {"drop": CategoricalAction([], np.zeros(0, np.int64), COLUMNS)}})
    assert env.turn == 1


def test_acting_after_the_end_raises():
    env = ConnectFour()
    _play(env, [0, 1, 0, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="the game is over"):
        env.act({"0": {}, "1": _drop(2)})


def _opponent_choice(env, cols, seed=0):
    obs = _play(env, cols)
    seat = "0" if env.turn == 0 else "1"
    action = connect_four_opponent(obs[seat], env.action_space(), np.random.default_rng(seed))
    assert connect_four_opponent(obs["1" if seat == "0" else "0"], env.action_space(), np.random.default_rng(0)) == {}
    return int(action["drop"].indices[0])


def test_opponent_takes_a_win_over_a_block():
    # Seat 0 can win at column 3 (row 0); seat 1 threatens the same cell (row 1 is not playable yet).
    env = ConnectFour()
    assert all(_opponent_choice(env, [0, 0, 1, 1, 2, 2], seed) == 3 for seed in range(5))
    assert all(_opponent_choice(env, [0, 4, 0, 5, 1, 6, 0], seed) == 3 for seed in range(5))  # seat 1 wins at 3


def test_opponent_blocks_an_immediate_loss():
    env = ConnectFour()
    assert all(_opponent_choice(env, [0, 6, 0, 6, 0], seed) == 0 for seed in range(5))  # block the column
    assert all(_opponent_choice(env, [1, 6, 2, 6, 3], seed) in (0, 4) for seed in range(5))  # block a row end


def test_opponent_never_chooses_a_masked_column():
    env = ConnectFour()
    cols = [3] * 6 + [2] * 6 + [4] * 6  # three full middle columns, no line
    for seed in range(30):
        assert _opponent_choice(env, cols, seed) not in (2, 3, 4)


def test_opponent_beats_a_random_player():
    env = ConnectFour()
    env.seed(0)
    rng = np.random.default_rng(0)
    wins = 0
    for game in range(200):
        me, other = ("0", "1") if game % 2 == 0 else ("1", "0")
        final = play_game(env, {me: connect_four_opponent, other: random_opponent}, rng)
        wins += final[me].result == "win"
    assert wins >= 180, wins


def test_the_centre_opponent_wins_blocks_and_otherwise_favours_the_centre():
    from entmachin.env.examples.connect_four import centre_opponent

    def choice(cols, seed=0):
        env = ConnectFour()
        obs = _play(env, cols)
        seat = "0" if env.turn == 0 else "1"
        return int(centre_opponent(obs[seat], env.action_space(), np.random.default_rng(seed))["drop"].indices[0])

    assert choice([0, 0, 1, 1, 2, 2]) == 3  # its own win first
    assert choice([0, 6, 0, 6, 0]) == 0  # a block
    counts = np.bincount([choice([], seed) for seed in range(1600)], minlength=7) / 1600
    np.testing.assert_allclose(counts, np.array([1, 2, 3, 4, 3, 2, 1]) / 16, atol=0.03)  # 4 - |column - 3|
    assert 3 not in {choice([3] * 6, seed) for seed in range(50)}  # never a full column


def test_choose_column_selects_column_entities_and_plays_the_same_game():
    from entmachin.env import SelectEntityAction, SelectEntityActionSpace
    from entmachin.env.examples.connect_four import COLUMN_IDS, centre_opponent

    drop, column = ConnectFour(), ConnectFour(choose="column")
    assert isinstance(column.action_space()["drop"], SelectEntityActionSpace)
    obs = column.reset()
    assert list(obs["0"].ids["Column"]) == COLUMN_IDS and list(obs["0"].actions["drop"].actee_ids) == COLUMN_IDS
    for col in [3, 3, 3, 3, 3, 3]:  # fill column 3: it is no longer selectable
        seat = "0" if column.turn == 0 else "1"
        obs = column.act({seat: {"drop": SelectEntityAction([MOVER_ID], [COLUMN_IDS[col]])},
                          "1" if seat == "0" else "0": {}})
        for s, o in obs.items():
            validate_observation(o, column.obs_space(), column.action_space(), where=f"seat {s}")
    assert COLUMN_IDS[3] not in obs["0"].actions["drop"].actee_ids and len(obs["0"].actions["drop"].actee_ids) == 6
    with pytest.raises(ValueError, match=r"selected entity 0, which is not a Column \(ids 1..7\)"):
        column.act({"0": {"drop": SelectEntityAction([MOVER_ID], [MOVER_ID])}, "1": {}})
    with pytest.raises(TypeError, match="must be a SelectEntityAction, got CategoricalAction"):
        column.act({"0": _drop(2), "1": {}})
    # the scripted opponents play either kind, the same games for the same draws
    for opponent in (connect_four_opponent, centre_opponent):
        results = []
        for env in (drop, column):
            rng, obs = np.random.default_rng(5), env.reset()
            while not obs["0"].done:
                obs = env.act({s: opponent(o, env.action_space(), rng) for s, o in obs.items()})
            results.append((env.bits, obs["0"].result))
        assert results[0] == results[1]
    with pytest.raises(ValueError, match=r"`choose` must be one of \['drop', 'column'\], got 'pointer'"):
        ConnectFour(choose="pointer")
