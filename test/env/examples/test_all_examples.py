"""Every example environment passes ValidatingEnv for 1,000 seeded random-action steps; every
game of several players plays validated random games to their ends, replayed by its seed."""
import numpy as np
import pytest

from entmachin.env import EnvList, ValidatingEnv, random_actions, to_state, validate_observation
from entmachin.env.examples import ENV_REGISTRY, MULTI_AGENT, SINGLE_AGENT
from entmachin.env.examples._play import random_opponent
from entmachin.env.multi_agent import check_game_step
from entmachin.ragged.arrays import ragged_to_arrays

CONFIGS = {name: {} for name in ENV_REGISTRY}
CONFIGS["MineSweeper"] = {"orbital_cannon": True, "cooldown_period": 2}  # exercise select-entity
CONFIGS["RockPaperScissors"] = {"cheat": True}

STEPS = 250
N_ENVS = 4  # 4 x 250 = 1,000 validated environment steps each


@pytest.mark.parametrize("name", SINGLE_AGENT)
def test_thousand_validated_random_steps(name):
    cls, kwargs = ENV_REGISTRY[name], CONFIGS[name]
    envs = EnvList(lambda: ValidatingEnv(cls(**kwargs)), N_ENVS, seed=0)
    rng = np.random.default_rng(0)
    obs = envs.reset()
    episodes = 0
    for _ in range(STEPS):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        episodes += int(obs.done.sum())
        assert not (obs.truncated & ~obs.done).any()
        assert np.isfinite(obs.reward).all()
    state = to_state(obs, envs.action_space())
    assert set(state["entities"]) >= set(envs.obs_space().entities)
    assert episodes > 0, f"{name}: no episode ended in {STEPS} steps"


@pytest.mark.parametrize("name", SINGLE_AGENT)
def test_same_seed_same_rollout(name):
    cls, kwargs = ENV_REGISTRY[name], CONFIGS[name]

    def run():
        envs = EnvList(lambda: cls(**kwargs), 2, seed=11)
        rng = np.random.default_rng(1)
        obs = envs.reset()
        trace = []
        for _ in range(20):
            obs = envs.act(random_actions(obs, envs.action_space(), rng))
            trace.append((obs.reward.copy(), [ragged_to_arrays(f)[0].copy() for f in obs.features.values()]))
        return trace

    for (ra, fa), (rb, fb) in zip(run(), run()):
        np.testing.assert_array_equal(ra, rb)
        for x, y in zip(fa, fb):
            np.testing.assert_array_equal(x, y)


def _random_games(name, seed, n_games):
    """Every step of ``n_games`` random games of ``name``: (rewards, results, features) per seat,
    each seat's observation validated and every step checked by ``check_game_step``."""
    env = ENV_REGISTRY[name](**CONFIGS[name])
    env.seed(seed)
    rng = np.random.default_rng(seed)
    space, actions = env.obs_space(), env.action_space()
    seats = env.seats()
    trace = []
    for game in range(n_games):
        obs = env.reset()
        for step in range(1000):
            assert check_game_step(f"{name} game {game} step {step}", obs, seats) == obs[seats[0]].done
            for seat, o in obs.items():
                validate_observation(o, space, actions, where=f"{name} seat {seat} step {step}")
                assert not o.truncated and np.isfinite(o.reward)
            trace.append([(o.reward, o.result, *(np.asarray(f).tobytes() for f in o.features.values()))
                          for o in obs.values()])
            if obs[seats[0]].done:
                break
            obs = env.act({seat: random_opponent(o, actions, rng) for seat, o in obs.items()})
        else:
            pytest.fail(f"{name}: a random game did not end in 1,000 steps")
        results = sorted(o.result for o in obs.values())
        assert results in (["draw", "draw"], ["loss", "win"]), results
        for o in obs.values():  # nobody acts once the game is over
            assert all(len(m.actor_ids) == 0 for m in o.actions.values())
    return trace


@pytest.mark.parametrize("name", MULTI_AGENT)
def test_games_play_validated_random_games_to_their_end(name):
    _random_games(name, seed=0, n_games=20)


@pytest.mark.parametrize("name", MULTI_AGENT)
def test_games_same_seed_same_games(name):
    assert _random_games(name, seed=3, n_games=3) == _random_games(name, seed=3, n_games=3)
    assert _random_games(name, seed=3, n_games=3) != _random_games(name, seed=4, n_games=3)
