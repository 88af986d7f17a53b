import numpy as np
import pytest

from entmachin.env import CategoricalAction, CategoricalActionMask
from entmachin.env.examples.multi_snake import MultiSnake, _Food, _Snake

MOVES = ["up", "down", "left", "right"]
UP, DOWN, LEFT, RIGHT = range(4)


def _move(*choices: int) -> dict:
    """Snake ``i`` makes move ``choices[i]``."""
    return {"move": CategoricalAction(list(range(len(choices))), np.array(choices, dtype=np.int64), MOVES)}


def _setup(env, snakes, food) -> None:
    """Reset ``env``, then place snakes (colour = index, segments tail first) and food."""
    env.reset()
    env.snakes = [_Snake(color, list(segments)) for color, segments in enumerate(snakes)]
    env.food = [_Food(color, cell) for color, cell in food]


def test_spaces():
    env = MultiSnake()
    space = env.obs_space()
    assert space.global_features == ["step"]
    assert {k: v.features for k, v in space.entities.items()} == {
        "SnakeHead": ["x", "y", "color"], "SnakeBody": ["x", "y", "color"], "Food": ["x", "y", "color"],
    }
    assert env.action_space()["move"].index_to_label == MOVES


def test_reset_layout_and_mask():
    env = MultiSnake(board_size=6, num_snakes=3)  # unseeded
    obs = env.reset()
    heads, food = obs.features["SnakeHead"], obs.features["Food"]
    assert heads.dtype == np.float32 and heads.shape == (3, 3)
    assert obs.features["SnakeBody"].shape == (0, 3) and obs.features["SnakeBody"].dtype == np.float32
    assert food.shape == (3, 3)
    np.testing.assert_array_equal(heads[:, 2], [0, 1, 2])
    np.testing.assert_array_equal(np.sort(food[:, 2]), [0, 1, 2])
    cells = {tuple(c) for c in np.concatenate([heads, food])[:, :2]}
    assert len(cells) == 6 and all(0 <= x < 6 and 0 <= y < 6 for x, y in cells)
    assert obs.global_features.dtype == np.float32 and list(obs.global_features) == [0.0]
    assert obs.ids == {"SnakeHead": [0, 1, 2]}
    mask = obs.actions["move"]
    assert isinstance(mask, CategoricalActionMask) and list(mask.actor_types) == ["SnakeHead"]
    assert not obs.done and obs.reward == 0.0


def test_moves_follow_the_labels():
    env = MultiSnake(num_snakes=4)
    _setup(env, [[(5, 5)], [(2, 2)], [(7, 7)], [(3, 6)]], [(c, (9, c)) for c in range(4)])
    obs = env.act(_move(UP, DOWN, LEFT, RIGHT))
    np.testing.assert_array_equal(obs.features["SnakeHead"][:, :2], [[5, 6], [2, 1], [6, 7], [4, 6]])
    assert (obs.reward, obs.done) == (0.0, False)
    assert list(obs.global_features) == [1.0]


def test_eating_own_food_grows_and_rewards():
    env = MultiSnake()
    _setup(env, [[(2, 2)], [(7, 7)]], [(0, (2, 3)), (1, (0, 9))])
    obs = env.act(_move(UP, DOWN))
    assert obs.reward == pytest.approx(1 / 10 / 2) and not obs.done
    np.testing.assert_array_equal(obs.features["SnakeHead"][0], [2, 3, 0])
    np.testing.assert_array_equal(obs.features["SnakeBody"], [[2, 2, 0]])
    # The eaten food reappears elsewhere, on a free cell.
    food = {int(c): tuple(xy) for *xy, c in obs.features["Food"]}
    assert len(food) == 2 and food[0] not in {(2, 3), (2, 2), (7, 6)}


@pytest.mark.parametrize(
    "snakes, food, moves",
    [
        ([[(0, 0)], [(5, 5)]], [(0, (9, 9)), (1, (8, 8))], (LEFT, UP)),  # off the board
        ([[(2, 2)], [(2, 4)]], [(0, (9, 9)), (1, (8, 8))], (UP, DOWN)),  # 1 runs into 0's head
        ([[(2, 2)], [(5, 5)]], [(0, (9, 9)), (1, (2, 3))], (UP, UP)),  # 0 eats 1's food
        ([[(2, 2), (2, 3), (3, 3)], [(7, 7)]], [(0, (9, 9)), (1, (8, 8))], (LEFT, UP)),  # into own body
    ],
)
def test_game_over_without_reward(snakes, food, moves):
    env = MultiSnake()
    _setup(env, snakes, food)
    obs = env.act(_move(*moves))
    assert (obs.reward, obs.done, obs.truncated) == (0.0, True, False)


def test_reaching_full_length_ends_the_game():
    env = MultiSnake(board_size=4, num_snakes=1, max_snake_length=2)
    _setup(env, [[(0, 0)]], [(0, (0, 1))])
    obs = env.act(_move(UP))
    assert (obs.reward, obs.done, obs.truncated) == (1.0, True, False)


def test_every_players_snakes_must_be_full_length_to_end():
    env = MultiSnake(num_snakes=2, num_players=2, max_snake_length=2)
    _setup(env, [[(0, 0)], [(5, 5)]], [(0, (0, 1)), (1, (9, 9))])
    obs = env.act(_move(UP, UP))  # player 0's only snake reaches length 2
    assert obs.done and not obs.truncated
    env = MultiSnake(num_snakes=2, num_players=1, max_snake_length=2)
    _setup(env, [[(0, 0)], [(5, 5)]], [(0, (0, 1)), (1, (9, 9))])
    obs = env.act(_move(UP, UP))  # one player: its other snake is still short
    assert not obs.done


def test_step_limit_truncates():
    env = MultiSnake(num_snakes=1, max_steps=3)
    _setup(env, [[(0, 0)]], [(0, (9, 9))])
    for move, done in [(UP, False), (DOWN, False), (UP, True)]:
        obs = env.act(_move(move))
        assert obs.done == done
    assert obs.truncated and obs.reward == 0.0
    # A game that ends by itself on the last step is not truncated.
    _setup(env, [[(0, 0)]], [(0, (9, 9))])
    env.step = 2
    obs = env.act(_move(LEFT))
    assert obs.done and not obs.truncated


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_snakes=0), r"num_snakes must be in \[1, 9\], got 0"),
        (dict(num_snakes=10), r"num_snakes must be in \[1, 9\], got 10"),
        (dict(num_players=0), "num_players must be at least 1 and divide num_snakes=2, got 0"),
        (dict(num_snakes=3, num_players=2), "num_players must be at least 1 and divide num_snakes=3, got 2"),
        (dict(max_snake_length=1), "max_snake_length must be at least 2, got 1"),
        (dict(max_steps=0), "max_steps must be at least 1, got 0"),
        (dict(board_size=-1), "board_size=-1 gives 0 cells"),
        (
            dict(board_size=4),
            "board_size=4 gives 16 cells; 2 snakes of length up to 11 and their food need 24",
        ),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiSnake(**kwargs)


def test_invalid_actions():
    env = MultiSnake()
    env.reset()
    with pytest.raises(ValueError, match=r"actor 5 is not a snake; expected a SnakeHead id in \[0, 2\)"):
        env.act({"move": CategoricalAction([5], np.array([0]), MOVES)})
    with pytest.raises(ValueError, match=r"actions\['move'\] choice 4 is outside \[0, 4\)"):
        env.act(_move(4, 0))
