"""RolloutCollector(overlap=True): the same rows as the sequential loop, halves of worker processes.

The differential tests act deterministically (each actor's most likely choice, input statistics
frozen) on seeded environments: then the sequential and the overlapped loops must store identical
rows, return identical statistics and leave identical frames after each update. Worker processes
start with ``fork`` (milliseconds; the start method does not change what they compute).
"""
import copy
import functools
import logging
import multiprocessing as mp
import re

import numpy as np
import pytest
import torch

from entmachin.env import (
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    EnvList,
    EnvWorkerError,
    Environment,
    Observation,
    ObsSpace,
    ParallelEnvList,
)
from entmachin.env.vec_env import env_seeds
from entmachin.frame.collector import RolloutCollector
from entmachin.ragged import trees
from entmachin.ragged.tensor import ragged_tensor_equal
from test.frame._frames import entity_frame, stored

pytestmark = pytest.mark.usefixtures("one_thread")  # torch's second thread would fight the workers for the cores


class Walk(Environment):
    """1-3 walkers on a line, each moving left or right; the reward depends on where they went.

    Episodes end at random (terminal) or at a random limit (truncated), so rows end at different
    steps in both ways. With ``fail_seed`` set, the environment seeded with it raises ValueError
    at its ``fail_at``-th act.
    """

    def __init__(self, fail_seed=None, fail_at=0):
        self.rng = np.random.default_rng()
        self.fail_seed, self.fail_at, self.n_acts, self.my_seed = fail_seed, fail_at, 0, None

    def seed(self, seed):
        super().seed(seed)
        self.my_seed = seed

    def obs_space(self):
        return ObsSpace(entities={"Walker": Entity(["x", "t"])})

    def action_space(self):
        return {"move": CategoricalActionSpace(["left", "right"])}

    def reset(self):
        self.t, self.limit = 0, int(self.rng.integers(2, 7))
        self.x = self.rng.integers(-3, 4, size=int(self.rng.integers(1, 4))).astype(np.float32)
        return self._observe(0.0, False, False)

    def act(self, actions):
        self.n_acts += 1
        if self.my_seed is not None and self.my_seed == self.fail_seed and self.n_acts == self.fail_at:
            raise ValueError("the walker fell")
        self.x += 2 * np.asarray(actions["move"].indices, dtype=np.float32) - 1
        self.t += 1
        truncated = self.t >= self.limit
        terminal = not truncated and bool(self.rng.random() < 0.15)
        return self._observe(float(np.abs(self.x).sum()) * 0.1 + float(self.rng.random()), terminal or truncated,
                             truncated)

    def _observe(self, reward, done, truncated):
        n = len(self.x)
        features = np.stack([self.x, np.full(n, self.t, np.float32)], axis=1)  # [n, 2]
        return Observation(entities={"Walker": (features, [("w", i) for i in range(n)])},
                           actions={"move": CategoricalActionMask(actor_types=["Walker"])},
                           reward=reward, done=done, truncated=truncated)


def deterministic_frame(envs):
    """A PPO frame whose act takes each actor's most likely choice and leaves input statistics alone."""
    frame = entity_frame(envs)
    act = frame.act
    frame.act = lambda state: act(state, deterministic=True, collect_stats=False)
    return frame


def assert_same_tree(a, b, where):
    assert [p for p, _ in trees.leaves(a)] == [p for p, _ in trees.leaves(b)], where
    for (path, x), (_, y) in zip(trees.leaves(a), trees.leaves(b)):
        same = ragged_tensor_equal(x, y) if hasattr(x, "lengths") else torch.equal(torch.as_tensor(x), torch.as_tensor(y))
        assert same, (where, path)


def assert_same_rows(frame_a, frame_b):
    a, b = stored(frame_a), stored(frame_b)
    assert_same_tree(a[0], b[0], "state")
    assert_same_tree(a[1], b[1], "action")
    for name, x, y in zip(("reward", "terminal", "truncated", "value", "gae"), a[2:], b[2:]):
        assert torch.equal(x, y), name


def parallel(num_envs, num_processes, make=Walk):
    return ParallelEnvList(make, num_envs, num_processes, start_method="fork", seed=0)


@pytest.mark.parametrize("num_envs,num_processes", [(3, 2), (5, 3)])
def test_overlapped_rows_statistics_and_updates_equal_the_sequential_loops(num_envs, num_processes):
    with parallel(num_envs, num_processes) as envs, parallel(num_envs, num_processes) as other:
        sequential = RolloutCollector(deterministic_frame(envs), envs, n_steps=6)
        overlapped = RolloutCollector(deterministic_frame(other), other, n_steps=6, overlap=True)
        assert overlapped.overlap and not sequential.overlap
        ends = np.zeros(2, dtype=np.int64)  # terminal, truncated rows seen
        for _ in range(3):
            expected, got = sequential.collect(), overlapped.collect()
            assert got == expected
            assert_same_rows(sequential.frame, overlapped.frame)
            ends += [int(stored(sequential.frame)[3].sum()), int(stored(sequential.frame)[4].sum())]
            assert_same_tree(sequential.snapshot()["state"], overlapped.snapshot()["state"], "snapshot")
            sequential.frame.update()
            overlapped.frame.update()
            for p, q in zip(sequential.frame.actor.parameters(), overlapped.frame.actor.parameters()):
                assert torch.equal(p, q)
        assert (ends > 0).all()  # both kinds of ending were stored (truncated rows bootstrap from final_obs)


def test_each_row_is_acted_on_once_per_step_in_row_order_so_input_statistics_see_every_row_once():
    with parallel(5, 3) as envs:
        frame = entity_frame(envs)
        act, seen = frame.act, []

        def recording(state):
            seen.append(state)
            return act(state)

        frame.act = recording
        RolloutCollector(frame, envs, n_steps=4, overlap=True).collect()
        assert [trees.n_rows(s, "state") for s in seen] == [4, 1] * 4  # half A (workers 0, 1), half B, per step
        assert_same_tree(trees.stack(seen, str), stored(frame)[0], "acted states vs stored rows")
    # Statistics merged per half are those of the whole batch, up to rounding.
    net = frame.actor
    halves, whole = copy.deepcopy(net), copy.deepcopy(net)
    state = stored(frame)[0]
    with torch.no_grad():
        with halves.collecting_stats():
            halves(**trees.row_range(state, 0, 9))
            halves(**trees.row_range(state, 9, 20))
        with whole.collecting_stats():
            whole(**state)
    for (name, a), (_, b) in zip(halves.named_buffers(), whole.named_buffers()):
        assert torch.allclose(a.double(), b.double(), rtol=1e-6, atol=1e-9), name


def test_sampled_actions_store_the_same_structure():
    with parallel(4, 2) as envs:
        frame = entity_frame(envs)
        collector = RolloutCollector(frame, envs, n_steps=4, overlap=True)
        stats = collector.collect()
        assert stats.n_env_steps == 16 and frame.replay_buffer.size() == 16
        state, action, reward, terminal, truncated, _, _ = stored(frame)
        assert reward.shape == terminal.shape == truncated.shape == (16, 1)
        assert len(state["entities"]["Walker"]) == len(action["action"]["move"]) == 16
        assert trees.n_rows(collector.snapshot()["state"], "state") == 4


def test_snapshot_and_restore_continue_an_overlapped_run_exactly():
    with parallel(3, 2) as envs:
        collector = RolloutCollector(deterministic_frame(envs), envs, n_steps=4, overlap=True)
        collector.collect()
        snapshot, state = collector.snapshot(), envs.get_state()
        collector.frame.replay_buffer.clear()
        expected = collector.collect()
        rows = stored(collector.frame)
    with parallel(3, 2) as other:
        resumed = RolloutCollector(deterministic_frame(other), other, n_steps=4, overlap=True)
        other.reset()
        other.set_state(state)
        resumed.restore(snapshot)
        resumed.frame.replay_buffer.clear()
        assert resumed.collect() == expected
        got = stored(resumed.frame)
        assert_same_tree(got[0], rows[0], "state")
        assert all(torch.equal(x, y) for x, y in zip(got[2:5], rows[2:5]))


def _worker_error(overlap):
    fail_seed = env_seeds(0, 3)[2]  # environment 2, worker 1's (half B's) only environment
    with parallel(3, 2, functools.partial(Walk, fail_seed=fail_seed, fail_at=3)) as envs:
        collector = RolloutCollector(deterministic_frame(envs), envs, n_steps=5, overlap=overlap)
        pids = envs.worker_pids
        with pytest.raises(EnvWorkerError) as info:
            collector.collect()
        assert not {p.pid for p in mp.active_children()} & set(pids)  # reaped
        with pytest.raises(RuntimeError, match=r"unusable, it was closed after worker 1 raised ValueError"):
            collector.collect()
    return re.sub(r"pid \d+", "pid N", str(info.value)), info.value


def test_a_worker_error_in_an_overlapped_step_surfaces_as_in_the_sequential_loop():
    message, error = _worker_error(overlap=True)
    assert message.startswith("worker 1 (environment 2, pid N) raised ValueError in environment 2 during act(): "
                              "the walker fell")
    assert "raise ValueError" in message and (error.worker, error.env_index) == (1, 2)
    assert message == _worker_error(overlap=False)[0]


def test_a_failed_overlapped_step_receives_the_half_in_flight_and_restarts_the_episodes(caplog):
    with parallel(4, 2) as envs:
        frame = deterministic_frame(envs)
        collector = RolloutCollector(frame, envs, n_steps=4, overlap=True)
        collector.collect()
        act, calls = frame.act, []

        def failing(state):
            calls.append(1)
            if len(calls) == 4:  # half B of the second step, half A in flight
                raise RuntimeError("the policy broke")
            return act(state)

        frame.act = failing
        with caplog.at_level(logging.WARNING, logger="entmachin.frame.collector"), \
                pytest.raises(RuntimeError, match="the policy broke"):
            collector.collect()
        assert "rows [(0, 2)] in flight" in caplog.text and "resets the environments" in caplog.text
        frame.act = act
        frame.replay_buffer.clear()
        stats = collector.collect()  # the list is usable; the episodes restart
        assert frame.replay_buffer.size() == 16 and stats.n_env_steps == 16
        assert max(stats.episode_lengths, default=0) <= 4 and stats.longest_running <= 4


def test_overlap_falls_back_to_the_sequential_loop_where_the_rows_cannot_be_halved(caplog):
    in_process = EnvList(Walk, 4, seed=0)
    with caplog.at_level(logging.WARNING, logger="entmachin.frame.collector"):
        collector = RolloutCollector(entity_frame(in_process), in_process, n_steps=2, overlap=True)
    assert not collector.overlap and "EnvList steps its rows in one part" in caplog.text
    assert collector.collect().n_env_steps == 8
    with parallel(4, 1) as one_worker:
        assert one_worker.parts(2) == [(0, 4)]
        assert not RolloutCollector(entity_frame(one_worker), one_worker, n_steps=2, overlap=True).overlap
    with pytest.raises(TypeError, match="overlap must be a bool, got 'auto'"):
        RolloutCollector(entity_frame(in_process), in_process, n_steps=2, overlap="auto")


def test_overlap_falls_back_with_opponents(caplog):
    class Nobody:
        def learner_rows(self):
            return np.arange(4)

        def current_rows(self):
            return np.arange(4)

        def act(self, state):
            return []

        def observe(self, obs):
            pass

    with parallel(4, 2) as envs, caplog.at_level(logging.WARNING, logger="entmachin.frame.collector"):
        collector = RolloutCollector(entity_frame(envs), envs, n_steps=2, opponents=Nobody(), overlap=True)
        assert not collector.overlap and "self-play's opponents" in caplog.text
        assert collector.collect().n_env_steps == 8
