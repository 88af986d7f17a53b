import numpy as np
import pytest

from entmachin.env import CategoricalAction, validate_observation
from entmachin.env.examples.rock_paper_scissors_duel import PLAYER_ID, RockPaperScissorsDuel, uniform_throw

THROWS = ["rock", "paper", "scissors"]


def _throw(index: int) -> dict:
    return {"throw": CategoricalAction([PLAYER_ID], np.array([index], dtype=np.int64), THROWS)}


def _validated(env, obs):
    for seat, o in obs.items():
        validate_observation(o, env.obs_space(), env.action_space(), where=f"seat {seat}")
    return obs


def test_spaces_and_start():
    env = RockPaperScissorsDuel()
    assert env.seats() == ["0", "1"] and env.scripted_opponent is uniform_throw
    assert {k: v.features for k, v in env.obs_space().entities.items()} == {"Player": []}
    assert env.action_space()["throw"].index_to_label == THROWS
    obs = _validated(env, env.reset())
    for o in obs.values():
        assert list(o.actions["throw"].actor_ids) == [PLAYER_ID] and not o.done and o.result is None


@pytest.mark.parametrize("a, b, result", [
    (0, 2, "win"), (1, 0, "win"), (2, 1, "win"), (2, 0, "loss"), (0, 1, "loss"), (1, 2, "loss"),
    (0, 0, "draw"), (1, 1, "draw"), (2, 2, "draw"),
])
def test_both_throw_at_once_and_the_game_ends(a, b, result):
    env = RockPaperScissorsDuel()
    env.reset()
    obs = _validated(env, env.act({"0": _throw(a), "1": _throw(b)}))
    other = {"win": "loss", "loss": "win", "draw": "draw"}[result]
    reward = {"win": 1.0, "loss": -1.0, "draw": 0.0}
    assert (obs["0"].result, obs["1"].result) == (result, other)
    assert (obs["0"].reward, obs["1"].reward) == (reward[result], reward[other])
    assert all(o.done and not o.truncated and not o.actions["throw"].actor_ids for o in obs.values())


def test_bad_actions_raise_naming_the_seat():
    env = RockPaperScissorsDuel()
    env.reset()
    with pytest.raises(ValueError, match=r"omit seat\(s\) \['1'\]"):
        env.act({"0": _throw(0)})
    with pytest.raises(ValueError, match=r"RockPaperScissorsDuel.act: actions\['1'\]\['throw'\] choice 3 is outside"):
        env.act({"0": _throw(0), "1": _throw(3)})
    with pytest.raises(TypeError, match=r"actions\['1'\]\['throw'\] must be a CategoricalAction, got NoneType"):
        env.act({"0": _throw(0), "1": {}})
    assert not env.over
    env.act({"0": _throw(0), "1": _throw(0)})
    with pytest.raises(ValueError, match="the game is over"):
        env.act({"0": _throw(0), "1": _throw(0)})


def test_the_scripted_opponent_throws_uniformly():
    env = RockPaperScissorsDuel()
    obs = env.reset()
    rng = np.random.default_rng(0)
    counts = np.bincount([int(uniform_throw(obs["0"], env.action_space(), rng)["throw"].indices[0])
                          for _ in range(3000)], minlength=3)
    assert (np.abs(counts - 1000) < 100).all(), counts
    final = env.act({"0": _throw(0), "1": _throw(1)})
    assert uniform_throw(final["0"], env.action_space(), rng) == {}
