import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.env.action import GlobalCategoricalAction, GlobalCategoricalActionMask, GlobalCategoricalActionSpace
from entmachin.env.add_metrics_wrapper import AddMetricsWrapper
from entmachin.env.env_list import EnvList
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.vec_env import Metric
from entmachin.ragged.array import RaggedArrayI64


class Ticker(Environment):
    """Step ``t`` shows ``t`` items and pays reward ``t``; the episode ends after ``length`` steps."""

    def __init__(self, length, truncate=False):
        self.length, self.truncate, self.t = length, truncate, 0

    def obs_space(self):
        return ObsSpace(global_features=["t"], entities={"Item": Entity(["v"]), "Flag": Entity([])})

    def action_space(self):
        return {"noop": GlobalCategoricalActionSpace(["a"])}

    def reset(self):
        self.t = 0
        return self._observe(reward=0.0, done=False)

    def act(self, actions):
        if not isinstance(actions["noop"], GlobalCategoricalAction):
            raise TypeError("Ticker expects a GlobalCategoricalAction")
        self.t += 1
        done = self.t >= self.length
        return self._observe(reward=float(self.t), done=done, truncated=done and self.truncate)

    def _observe(self, reward, done, truncated=False):
        return Observation(
            features={"Item": np.full((self.t, 1), self.t, np.float32)},  # [t, 1]
            global_features=[float(self.t)],
            actions={"noop": GlobalCategoricalActionMask()},
            reward=reward,
            done=done,
            truncated=truncated,
        )


def make_envs(specs):
    """An EnvList of Tickers, one per ``(length, truncate)``."""
    it = iter(specs)
    return EnvList(lambda: Ticker(*next(it)), num_envs=len(specs))


def noop(n):
    return {"noop": RaggedArrayI64.from_flattened(np.zeros((n, 1), np.int64), np.ones(n, np.int64))}


def metric(values):
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return Metric()
    return Metric(count=values.size, sum=float(values.sum()), min=float(values.min()), max=float(values.max()))


def test_metrics_over_two_episodes_ending_terminal_and_truncated():
    envs = AddMetricsWrapper(make_envs([(2, False), (3, True)]))
    obs = envs.reset()
    assert obs.metrics["step"] == metric([0, 0])
    assert obs.metrics["entity_count/Item"] == metric([0, 0])
    assert obs.metrics["entity_count/Flag"] == metric([0, 0])
    assert obs.metrics["entity_count/__global__"] == metric([1, 1])
    assert obs.metrics["entity_count"] == metric([1, 1])
    assert obs.metrics["reward"] == metric([0, 0])
    assert obs.metrics["episodic_reward"] == Metric() and obs.metrics["episode_length"] == Metric()

    obs = envs.act(noop(2))
    assert obs.metrics["step"] == metric([1, 1])
    assert obs.metrics["entity_count/Item"] == metric([1, 1])
    assert obs.metrics["entity_count"] == metric([2, 2])
    assert obs.metrics["reward"] == metric([1, 1])
    assert obs.metrics["episodic_reward"].count == 0

    obs = envs.act(noop(2))  # env 0 ends (terminal) and restarts with no items
    assert obs.done.tolist() == [True, False]
    assert obs.metrics["episodic_reward"] == metric([1 + 2])
    assert obs.metrics["episode_length"] == metric([2])
    assert obs.metrics["step"] == metric([0, 2])
    assert obs.metrics["entity_count/Item"] == metric([0, 2])
    assert obs.metrics["reward"] == metric([2, 2])

    obs = envs.act(noop(2))  # env 1 ends (truncated)
    assert obs.truncated.tolist() == [False, True]
    assert obs.metrics["episodic_reward"] == metric([1 + 2 + 3])
    assert obs.metrics["episode_length"] == metric([3])
    assert obs.metrics["step"] == metric([1, 0])

    obs = envs.act(noop(2))  # env 0's second episode ends: counted from its restart
    assert obs.metrics["episodic_reward"] == metric([1 + 2])
    assert obs.metrics["episode_length"] == metric([2])


class TruncatedOnly(EnvList):
    """An EnvList whose rows report ``truncated`` without ``done``."""

    def act(self, actions, obs_filter=None):
        obs = super().act(actions, obs_filter)
        obs.done = obs.done & ~obs.truncated
        return obs


def test_truncated_rows_end_episodes_even_without_done():
    it = iter([(1, True), (2, False)])
    envs = AddMetricsWrapper(TruncatedOnly(lambda: Ticker(*next(it)), num_envs=2))
    envs.reset()
    obs = envs.act(noop(2))
    assert obs.done.tolist() == [False, False] and obs.truncated.tolist() == [True, False]
    assert obs.metrics["episodic_reward"] == metric([1])
    assert obs.metrics["episode_length"] == metric([1])
    assert envs.total_steps.tolist() == [0, 1]


def test_filter_reports_selected_rows_but_restarts_every_row():
    envs = AddMetricsWrapper(make_envs([(1, False), (2, False)]), filter=np.array([False, True]))
    envs.reset()
    obs = envs.act(noop(2))  # env 0 ends; filtered out
    assert obs.metrics["episodic_reward"] == Metric()
    assert envs.total_reward.tolist() == [0.0, 1.0] and envs.total_steps.tolist() == [0, 1]
    obs = envs.act(noop(2))  # both end; only env 1 is reported
    assert obs.metrics["episodic_reward"] == metric([1 + 2])
    assert obs.metrics["episode_length"] == metric([2])


def test_reset_restarts_the_running_totals():
    envs = AddMetricsWrapper(make_envs([(3, False)]))
    envs.reset()
    envs.act(noop(1))
    envs.act(noop(1))
    assert envs.reset().metrics["step"] == metric([0])
    for _ in range(2):
        assert envs.act(noop(1)).metrics["episode_length"] == Metric()
    obs = envs.act(noop(1))
    assert obs.metrics["episode_length"] == metric([3])
    assert obs.metrics["episodic_reward"] == metric([6])


def test_filtered_entity_types_count_zero():
    envs = AddMetricsWrapper(make_envs([(3, False)]))
    obs = envs.reset(ObsSpace(global_features=["t"], entities={"Flag": Entity([])}))
    envs.act(noop(1))
    obs = envs.act(noop(1))
    assert obs.metrics["entity_count/Item"] == metric([0])
    assert obs.metrics["entity_count"] == metric([1])


def test_forwards_the_vec_env_api():
    inner = make_envs([(2, False), (2, False)])
    envs = AddMetricsWrapper(inner)
    assert len(envs) == 2
    assert envs.obs_space() is inner.obs_space() and envs.action_space() is inner.action_space()
    assert envs.has_global_entity()
    envs.close()


@pytest.mark.parametrize(
    "filter, error, message",
    [
        (np.array([1, 0]), TypeError, r"filter must be a bool array, got dtype int64"),
        (np.array([True]), ValueError, r"filter has shape \(1,\); expected \(2,\), one flag per environment"),
    ],
)
def test_bad_filter(filter, error, message):
    with pytest.raises(error, match=message):
        AddMetricsWrapper(make_envs([(2, False), (2, False)]), filter=filter)


class Shrunk(EnvList):
    def __len__(self):
        return 3


def test_row_count_mismatch():
    envs = AddMetricsWrapper(Shrunk(lambda: Ticker(2), num_envs=2))
    with pytest.raises(ValueError, match=r"the wrapped VecEnv returned 2 rows; expected 3"):
        envs.reset()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.booleans()), min_size=1, max_size=4), st.integers(0, 9))
def test_episode_metrics_match_closed_form(specs, n_steps):
    """An episode of length L pays 1 + ... + L; env i completes n_steps // L_i of them."""
    envs = AddMetricsWrapper(make_envs(specs))
    envs.reset()
    total = Metric()
    lengths = Metric()
    for _ in range(n_steps):
        obs = envs.act(noop(len(specs)))
        total += obs.metrics["episodic_reward"]
        lengths += obs.metrics["episode_length"]
    episodes = [length for length, _ in specs for _ in range(n_steps // length)]
    assert total == metric([length * (length + 1) / 2 for length in episodes])
    assert lengths == metric(episodes)
