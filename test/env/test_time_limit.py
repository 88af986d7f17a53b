import numpy as np
import pytest

from entmachin.env import EnvList, TimeLimit, random_actions
from test.env.toy import Toy


def test_cuts_episodes_and_marks_them_truncated():
    envs = EnvList(lambda: TimeLimit(Toy(length=100), 3), 2, seed=0)
    obs, rng = envs.reset(), np.random.default_rng(0)
    flags = []
    for _ in range(6):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        flags.append((obs.done.tolist(), obs.truncated.tolist()))
    assert flags[2] == flags[5] == ([True, True], [True, True])
    assert all(f == ([False, False], [False, False]) for k, f in enumerate(flags) if k not in (2, 5))


def test_an_ending_on_the_last_step_stays_terminal():
    class Ends(Toy):
        def _observe(self):
            obs = super()._observe()
            obs.truncated = False  # the game itself ends at t == length
            return obs

    env = TimeLimit(Ends(length=2), 2)
    env.seed(0)
    env.reset()
    env.act({})
    obs = env.act({})
    assert obs.done and not obs.truncated


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_max_steps_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="TimeLimit: max_steps must be an int >= 1"):
        TimeLimit(Toy(), bad)
