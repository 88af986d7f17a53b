"""Every example environment passes ValidatingEnv for 1,000 seeded random-action steps."""
import numpy as np
import pytest

from entmachin.env import EnvList, ValidatingEnv, random_actions, to_state
from entmachin.env.examples import ENV_REGISTRY
from entmachin.ragged.arrays import ragged_to_arrays

CONFIGS = {name: {} for name in ENV_REGISTRY}
CONFIGS["MineSweeper"] = {"orbital_cannon": True, "cooldown_period": 2}  # exercise select-entity
CONFIGS["RockPaperScissors"] = {"cheat": True}

STEPS = 250
N_ENVS = 4  # 4 x 250 = 1,000 validated environment steps each


@pytest.mark.parametrize("name", sorted(ENV_REGISTRY))
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


@pytest.mark.parametrize("name", sorted(ENV_REGISTRY))
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
