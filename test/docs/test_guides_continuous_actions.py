"""docs/guides/continuous-actions.md: what its story says it did."""
import numpy as np
import pytest

from entmachin.env import ContinuousActionMask, EnvList, ValidatingEnv, random_actions
from test.docs._pages import DOCS, blocks

PAGE = "guides/continuous-actions.md"


def test_the_continuous_example_steps_within_its_narrowed_bounds(page):
    ns = page(PAGE)
    envs = EnvList(lambda: ValidatingEnv(ns["Parking"]()), 4, seed=0)
    obs, rng = envs.reset(), np.random.default_rng(0)
    for _ in range(50):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        low, high = obs.action_masks["drive"].bounds(envs.action_space()["drive"])
        assert (low <= high).all() and obs.action_masks["drive"].low.size2() == 2
    assert (ns["low"] <= ns["high"]).all()


def test_a_parked_car_has_its_bounds_narrowed_to_zero(page):
    env = page(PAGE)["Parking"]()
    env.seed(0)
    env.reset()
    env.pos[0] = 0.0  # car 0 on the centre: parked
    mask = env.observe(0.0).actions["drive"]
    assert np.array_equal(np.asarray(mask.low)[0], [0.0, 0.0]) and np.array_equal(np.asarray(mask.high)[0], [0.0, 0.0])
    assert np.array_equal(np.asarray(mask.high)[1], [1.0, 1.0])


def test_the_page_shows_the_refusal_vec_env_act_raised(page):
    assert page(PAGE)["refused"] == blocks(DOCS / PAGE, "text")[0].strip()


def test_validating_env_refuses_a_mask_that_widens_the_bounds(page):
    ns = page(PAGE)

    class Wide(ns["Parking"]):
        def observe(self, reward):
            obs = super().observe(reward)
            ids = [("Car", i) for i in range(3)]
            obs.actions["drive"] = ContinuousActionMask(actor_ids=ids, low=[[-1.0, 0.0]] * 3, high=[[2.0, 1.0]] * 3)
            return obs

    env = ValidatingEnv(Wide())
    env.seed(0)
    with pytest.raises(ValueError, match="never widens them"):
        env.reset()
