"""EnvList / ParallelEnvList get_state and set_state continue the episodes in progress exactly."""
import numpy as np
import pytest

from entmachin.env import EnvList, ParallelEnvList, random_actions
from entmachin.env.examples import MineSweeper


def trajectory(envs, obs, seed, n):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        out.append((obs.reward.tolist(), obs.done.tolist(), [f.as_array().tolist() for f in obs.features.values()]))
    return out


@pytest.mark.parametrize("make", [lambda: EnvList(MineSweeper, 6, seed=0),
                                  lambda: ParallelEnvList(MineSweeper, 6, 2, seed=0)], ids=["EnvList", "Parallel"])
def test_set_state_continues_exactly(make):
    envs = make()
    try:
        obs = envs.reset()
        trajectory(envs, obs, 1, 5)
        obs = envs._last_vec
        state = envs.get_state()
        expected = trajectory(envs, obs, 2, 8)
    finally:
        envs.close()
    other = make()
    try:
        other.reset()
        other.set_state(state)
        assert trajectory(other, other._last_vec, 2, 8) == expected
    finally:
        other.close()


def test_set_state_refuses_another_layout():
    small, big = EnvList(MineSweeper, 2, seed=0), EnvList(MineSweeper, 3, seed=0)
    small.reset()
    with pytest.raises(ValueError, match=r"EnvList.set_state: the state holds 2 environments; this EnvList has 3"):
        big.set_state(small.get_state())
    one, two = ParallelEnvList(MineSweeper, 4, 1, seed=0), ParallelEnvList(MineSweeper, 4, 2, seed=0)
    try:
        one.reset()
        with pytest.raises(ValueError, match=r"splits environments over workers as \[\(0, 4\)\]; this "
                                             r"ParallelEnvList splits them as \[\(0, 2\), \(2, 4\)\]"):
            two.set_state(one.get_state())
    finally:
        one.close()
        two.close()
