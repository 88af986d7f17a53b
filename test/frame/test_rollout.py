"""RolloutCollector and evaluate: stored rows, final observations on truncation, statistics."""
import logging

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from entmachin.env import EnvList, GymnasiumVecEnv, from_gymnasium, to_state
from entmachin.frame.evaluate import evaluate
from entmachin.frame.ppo import PPO
from entmachin.frame.collector import RolloutCollector, global_actions, global_state
from entmachin.model import MLPActor, MLPCritic
from test.frame._frames import Sparse, entity_frame, stored


class RecordingEnvList(EnvList):
    def act(self, actions, obs_filter=None):
        obs = super().act(actions, obs_filter)
        self.seen.append(obs)
        return obs


def test_collect_stores_step_major_rows_and_episode_statistics():
    envs = EnvList(Sparse, 3, seed=0)
    frame = entity_frame(envs)
    collector = RolloutCollector(frame, envs, n_steps=6)
    stats = collector.collect()
    assert frame.replay_buffer.size() == 18 and stats.n_env_steps == 18
    assert stats.episode_lengths == (4, 4, 4) and len(stats.episode_returns) == 3
    _, _, reward, terminal, truncated, _, _ = stored(frame)
    assert truncated.reshape(6, 3)[3].all() and truncated.sum() == 3 and not terminal.any()
    assert collector.collect().episode_lengths == (4,) * 6  # episodes continue: steps 8 and 12 end them
    assert collector.total_env_steps == 36


def test_truncated_rows_bootstrap_from_the_final_observation():
    envs = RecordingEnvList(Sparse, 2, seed=1)
    envs.seen = []
    frame = entity_frame(envs, discount=0.5, gae_lambda=0.0)
    with torch.no_grad():
        frame.actor.value_head.bias.fill_(1.0)
        frame.actor.value_head.weight.normal_()
    RolloutCollector(frame, envs, n_steps=4).collect()
    final = envs.seen[3]
    assert final.done.all() and final.final_obs is not None
    with torch.no_grad():
        v_final = frame.criticize(to_state(final.final_obs, envs.action_space()))[:, 0]
        v_reset = frame.criticize(to_state(final, envs.action_space()))[:, 0]
    _, _, reward, _, _, value, _ = stored(frame)
    expected = torch.from_numpy(final.reward) + 0.5 * v_final[torch.from_numpy(np.argsort(final.final_index))]
    assert torch.allclose(value.reshape(4, 2)[3], expected, atol=1e-5)
    assert not torch.allclose(v_final, v_reset)


def test_collector_checks_n_steps():
    envs = EnvList(Sparse, 1, seed=0)
    with pytest.raises(ValueError, match=r"RolloutCollector: n_steps must be an int >= 1, got 0"):
        RolloutCollector(entity_frame(envs), envs, n_steps=0)


def test_dense_models_on_a_gymnasium_environment():
    envs = EnvList(lambda: from_gymnasium(gym.make("CartPole-v1")), 2, seed=0)
    torch.manual_seed(0)
    frame = PPO(MLPActor(4, 2), MLPCritic(4), torch.optim.Adam, nn.MSELoss(), batch_size=8)
    stats = RolloutCollector(frame, envs, n_steps=5, state_fn=global_state, action_fn=global_actions()).collect()
    assert stats.n_env_steps == 10 and frame.replay_buffer.size() == 10
    assert np.isfinite(frame.update()).all()
    result = evaluate(frame, lambda: from_gymnasium(gym.make("CartPole-v1")), 3, seed=0,
                      state_fn=global_state, action_fn=global_actions())
    assert len(result.returns) == 3 and result.min >= 1


def test_global_state_needs_one_global_entity():
    envs = EnvList(Sparse, 1, seed=0)
    with pytest.raises(ValueError, match=r"global_state: every row needs exactly one __global__ entity"):
        global_state(envs.reset())


def test_evaluate_counts_each_episode_once_and_repeats_under_a_seed():
    envs = EnvList(Sparse, 1, seed=0)
    frame = entity_frame(envs)
    count = frame.actor.embedding.state_dict()
    a = evaluate(frame, Sparse, 5, seed=3, num_envs=2)
    assert len(a.returns) == 5 and a.min <= a.mean <= a.max
    assert evaluate(frame, Sparse, 5, seed=3, num_envs=2) == a
    sampled = evaluate(frame, Sparse, 4, deterministic=False, seed=3)
    assert len(sampled.returns) == 4
    for key, value in frame.actor.embedding.state_dict().items():  # statistics untouched
        assert torch.equal(value, count[key])
    assert frame.replay_buffer.size() == 0


def test_evaluate_max_steps_and_errors(caplog):
    envs = EnvList(Sparse, 1, seed=0)
    frame = entity_frame(envs)
    with caplog.at_level(logging.WARNING):
        result = evaluate(frame, Sparse, 2, seed=0, max_steps=2)
    assert len(result.returns) == 2 and "unfinished after max_steps=2" in caplog.text
    with pytest.raises(ValueError, match=r"evaluate: episodes must be an int >= 1, got 0"):
        evaluate(frame, Sparse, 0)


def test_episode_statistics_match_a_step_by_step_count_across_rollouts_and_a_failed_step():
    rng = np.random.default_rng(0)

    def make():  # random float rewards; episodes end (terminal) or are cut at 25 steps (truncated)
        return gym.wrappers.TransformReward(gym.make("CartPole-v1", max_episode_steps=25),
                                            lambda r: float(r * rng.random()))

    envs = GymnasiumVecEnv(make, 3, seed=0)
    seen, fail_in = [], [-1]
    act = envs.act

    def recording_act(actions, obs_filter=None):
        fail_in[0] -= 1
        if fail_in[0] == 0:
            raise RuntimeError("the simulator crashed")
        seen.append(act(actions, obs_filter))
        return seen[-1]

    envs.act = recording_act
    torch.manual_seed(0)
    frame = PPO(MLPActor(4, 2), MLPCritic(4), torch.optim.Adam, nn.MSELoss(), batch_size=8)
    collector = RolloutCollector(frame, envs, n_steps=7, state_fn=global_state, action_fn=global_actions())
    stats = []
    for _ in range(4):
        stats.append(collector.collect())
        frame.replay_buffer.clear()
    fail_in[0] = 4
    with pytest.raises(RuntimeError, match="crashed"):
        collector.collect()  # fails in its fourth step: the three steps taken count for the episodes
    unreported = range(len(seen) - 3, len(seen))
    for _ in range(6):
        stats.append(collector.collect())
        frame.replay_buffer.clear()
    got_returns = [r for s in stats for r in s.episode_returns]
    got_lengths = [n for s in stats for n in s.episode_lengths]

    running, length, returns, lengths = np.zeros(3), np.zeros(3, dtype=np.int64), [], []
    for i, obs in enumerate(seen):  # one addition per step; the rows that ended, in row order
        running += obs.reward
        length += 1
        for row in np.flatnonzero(obs.done):
            if i not in unreported:
                returns.append(running[row])
                lengths.append(int(length[row]))
            running[row], length[row] = 0.0, 0
    assert got_lengths == lengths and len(lengths) > 8 and 25 in lengths and min(lengths) < 25
    assert got_returns == pytest.approx(returns, rel=1e-12, abs=1e-12)
