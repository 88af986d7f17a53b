import copy

import numpy as np
import pytest

from entmachin.env import CategoricalAction
from entmachin.env.examples.floor_is_lava import DIRECTIONS, MOVE, PLAYER_ID, FloorIsLava

LABELS = list(DIRECTIONS)


def _move(label):
    return {MOVE: CategoricalAction([PLAYER_ID], np.array([LABELS.index(label)]), LABELS)}


def _direction_to(obs, entity):
    """Label of the move from the player onto the first entity of type ``entity``."""
    dx, dy = (obs.features[entity][0] - obs.features["Player"][0]).astype(int)
    return next(label for label, step in DIRECTIONS.items() if step == (dx, dy))


def _seeded(seed):
    env = FloorIsLava()
    env.seed(seed)
    return env, env.reset()


def test_spaces():
    env = FloorIsLava()
    assert list(env.obs_space().entities) == ["Lava", "HighGround", "Player"]
    assert all(e.features == ["x", "y"] for e in env.obs_space().entities.values())
    assert env.action_space()[MOVE].index_to_label == ["n", "ne", "e", "se", "s", "sw", "w", "nw"]
    assert DIRECTIONS["n"] == (0, 1) and DIRECTIONS["e"] == (1, 0) and DIRECTIONS["sw"] == (-1, -1)


def test_tiles_are_distinct_neighbours_of_the_player():
    env = FloorIsLava()
    env.seed(0)
    n_lava = set()
    for _ in range(100):
        obs = env.reset()
        player = obs.features["Player"][0]
        assert np.all(np.abs(player) <= 1000) and np.all(player == np.round(player))
        tiles = np.concatenate([obs.features["Lava"], obs.features["HighGround"]])  # [n_tiles, 2]
        offsets = {tuple(t) for t in (tiles - player).astype(int)}
        assert len(offsets) == len(tiles) and offsets <= set(DIRECTIONS.values())
        assert obs.features["HighGround"].shape == (1, 2)
        n_lava.add(obs.features["Lava"].shape[0])
        assert not obs.done and obs.reward == 0.0
    assert n_lava == set(range(8))


def test_moving_onto_the_high_ground_wins():
    env, obs = _seeded(1)
    obs = env.act(_move(_direction_to(obs, "HighGround")))
    assert obs.reward == 1.0 and obs.done and not obs.truncated
    np.testing.assert_array_equal(obs.features["Player"], obs.features["HighGround"])


def test_moving_onto_lava_loses():
    seed = next(s for s in range(100) if _seeded(s)[1].features["Lava"].shape[0] > 0)
    env, obs = _seeded(seed)
    obs = env.act(_move(_direction_to(obs, "Lava")))
    assert obs.reward == 0.0 and obs.done and not obs.truncated


def test_exactly_one_direction_pays():
    for seed in range(20):
        env, _ = _seeded(seed)
        rewards = [copy.deepcopy(env).act(_move(label)).reward for label in LABELS]
        assert sorted(rewards) == [0.0] * 7 + [1.0]


def test_bad_actions_raise():
    env, _ = _seeded(0)
    with pytest.raises(ValueError, match=r"expects one choice by actor 0, got actors \[1\] and 1 choices"):
        env.act({MOVE: CategoricalAction([1], np.array([0]), LABELS)})
    with pytest.raises(ValueError, match=r"actions\['move'\] choice 8 is outside \[0, 8\)"):
        env.act({MOVE: CategoricalAction([PLAYER_ID], np.array([8]), LABELS)})
    with pytest.raises(ValueError, match="expected exactly the action 'move'"):
        env.act({})
