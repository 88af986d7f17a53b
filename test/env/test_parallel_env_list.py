"""ParallelEnvList: equality with EnvList, wire format, splits, worker failures, reaping, start methods.

Most tests use the ``fork`` start method because it starts a worker in milliseconds; the
start method does not change what the workers compute, and ``spawn`` / ``forkserver`` (the
default) have their own tests.
"""
import contextlib
import gc
import logging
import multiprocessing as mp
import os
import pickle
import signal
import subprocess
import sys
import time
from typing import Dict, Mapping

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from entmachin.env import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    EnvList,
    Environment,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    random_actions,
)
from entmachin.env.examples.move_to_origin import MoveToOrigin
from entmachin.env.parallel_env_list import EnvWorkerError, ParallelEnvList
from entmachin.env.vec_env import merge_vec_obs, split_envs
from entmachin.env.wire import pack, pack_actions, unpack, unpack_actions, unpack_many
from entmachin.ragged.arrays import ragged_equal, ragged_from_arrays, take


class Toy(Environment):
    """Random balls and walls, a masked categorical action and a select-entity action."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng()

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["t"], entities={"Ball": Entity(["x", "y"]), "Wall": Entity(["h"])})

    def action_space(self) -> Dict[str, ActionSpace]:
        return {"move": CategoricalActionSpace(["left", "stay", "right"]), "pick": SelectEntityActionSpace()}

    def reset(self) -> Observation:
        self.t, self.length = 0, int(self.rng.integers(1, 6))
        return self._observe(0.0, done=False)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        move, pick = actions["move"], actions["pick"]
        assert isinstance(move, CategoricalAction) and isinstance(pick, SelectEntityAction)
        assert list(move.actors) == self.balls and list(pick.actors) == self.balls
        assert set(pick.actees) <= set(self.walls)
        self.t += 1
        reward = float(self.rng.random()) + float(np.sum(move.indices))
        truncated = self.t >= self.length
        return self._observe(reward, done=truncated or self.rng.random() < 0.2, truncated=truncated)

    def _observe(self, reward: float, done: bool, truncated: bool = False) -> Observation:
        n_balls, n_walls = int(self.rng.integers(0, 4)), int(self.rng.integers(1, 3))
        self.balls = [("ball", k) for k in range(n_balls)]
        self.walls = [("wall", k) for k in range(n_walls)]
        mask = self.rng.random((n_balls, 3)) < 0.7  # [n_balls, 3]
        mask[:, 1] = True
        return Observation(
            global_features=np.array([self.t], dtype=np.float32),
            features={
                "Ball": self.rng.random((n_balls, 2)).astype(np.float32),  # [n_balls, 2]
                "Wall": self.rng.random((n_walls, 1)).astype(np.float32),  # [n_walls, 1]
            },
            ids={"Ball": self.balls, "Wall": self.walls},
            visible={"Ball": self.rng.random(n_balls) < 0.5},
            actions={
                "move": CategoricalActionMask(actor_types=["Ball"], mask=mask),
                "pick": SelectEntityActionMask(actor_types=["Ball"], actee_types=["Wall"]),
            },
            done=done,
            reward=reward,
            truncated=truncated,
            metrics={"t": float(self.t)} if done else {},
        )

    def render(self, **kwargs) -> np.ndarray:
        return np.full((2, 3, 3), len(self.balls) * 10 + kwargs.get("shift", 0), dtype=np.uint8)


class Patchy(Environment):
    """Fields that only some steps carry: visibility, both kinds of mask, metrics, a global action.

    Workers then return batches with different keys and optional masks, which the merge must
    fill exactly as ``EnvList`` batching does.
    """

    def __init__(self) -> None:
        self.rng = np.random.default_rng()

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["t"], entities={"Ball": Entity(["x", "y"]), "Wall": Entity([])})

    def action_space(self) -> Dict[str, ActionSpace]:
        return {
            "move": CategoricalActionSpace(["left", "stay", "right"]),
            "pick": SelectEntityActionSpace(),
            "mode": GlobalCategoricalActionSpace(["calm", "wild"]),
        }

    def reset(self) -> Observation:
        self.t = 0
        return self._observe(0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.t += 1
        return self._observe(float(self.rng.random()))

    def _sometimes(self) -> bool:
        return bool(self.rng.random() < 0.4)

    def _observe(self, reward: float) -> Observation:
        n_balls, n_walls = int(self.rng.integers(0, 4)), int(self.rng.integers(1, 3))
        some = self._sometimes
        move_mask = self.rng.random((n_balls, 3)) < 0.7  # [n_balls, 3]
        move_mask[:, 1] = True
        pick_mask = self.rng.random((n_balls, n_walls)) < 0.7  # [n_balls, n_walls]
        pick_mask[:, 0] = True
        done = self.rng.random() < 0.3
        return Observation(
            global_features=np.array([self.t], dtype=np.float32),
            features={
                "Ball": self.rng.random((n_balls, 2)).astype(np.float32),  # [n_balls, 2]
                "Wall": np.zeros((n_walls, 0), dtype=np.float32),  # [n_walls, 0]
            },
            ids={"Ball": [("ball", k) for k in range(n_balls)], "Wall": [("wall", k) for k in range(n_walls)]},
            visible={"Wall": self.rng.random(n_walls) < 0.5} if some() else {},
            actions={
                "move": CategoricalActionMask(actor_types=["Ball"], mask=move_mask if some() else None),
                "pick": SelectEntityActionMask(
                    actor_types=["Ball"], actee_types=["Wall"], mask=pick_mask if some() else None
                ),
                "mode": GlobalCategoricalActionMask(mask=np.array([True, some()]) if some() else None),
            },
            done=done,
            truncated=done and some(),
            reward=reward,
            metrics={"t": float(self.t), "balls": float(n_balls)} if done else ({"t": float(self.t)} if some() else {}),
        )


FATES = ["live", "raise", "exit", "malformed", "malformed end", "hang"]


class Fragile(Environment):
    """One unit whose action chooses its fate: live, raise ValueError, ``os._exit(3)``, return
    an observation with two features instead of one (as the episode goes on, or as it ends), or
    hang for a minute."""

    def __init__(self, fail_on_reset: bool = False, fail_on_close: bool = False) -> None:
        self.fail_on_reset, self.fail_on_close = fail_on_reset, fail_on_close

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Unit": Entity(["hp"])})

    def action_space(self) -> Dict[str, ActionSpace]:
        return {"fate": CategoricalActionSpace(FATES)}

    def reset(self) -> Observation:
        if self.fail_on_reset:
            raise KeyError("no map to reset to")
        return self._observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        fate = FATES[int(actions["fate"].indices[0])]
        if fate == "raise":
            raise ValueError("the unit was told to fail")
        if fate == "exit":
            os._exit(3)
        if fate == "hang":
            time.sleep(60)
        return self._observe(width=1 if fate == "live" else 2, done=fate == "malformed end")

    def _observe(self, width: int = 1, done: bool = False) -> Observation:
        return Observation(
            features={"Unit": np.ones((1, width), dtype=np.float32)},  # [1, width]
            ids={"Unit": [0]},
            actions={"fate": CategoricalActionMask(actor_types=["Unit"])},
            done=done,
            reward=0.0,
        )

    def close(self) -> None:
        if self.fail_on_close:
            raise OSError("the unit's log file is gone")


def _fates(*fates: str):
    """One action per row: row ``i`` takes ``fates[i]``."""
    choices = np.array([[FATES.index(f)] for f in fates], dtype=np.int64)  # [n_rows, 1]
    return {"fate": ragged_from_arrays(choices, np.ones(len(fates), dtype=np.int64))}


def _alive(pids):
    children = {p.pid for p in mp.active_children()}
    return [pid for pid in pids if pid in children]


@contextlib.contextmanager
def _no_hang(seconds: float):
    """Turns a hang into a failure (a guard, not a timing assertion)."""

    def fail(signum, frame):
        raise TimeoutError(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_same(a, b) -> None:
    """Two VecObs hold the same values (metric sums up to rounding of the summation order)."""
    assert a.features.keys() == b.features.keys() and a.visible.keys() == b.visible.keys()
    for name in a.features:
        assert ragged_equal(a.features[name], b.features[name]), name
    for name in a.visible:
        assert ragged_equal(a.visible[name], b.visible[name]), name
    assert a.action_masks.keys() == b.action_masks.keys()
    for name, mask in a.action_masks.items():
        other = b.action_masks[name]
        assert type(mask) is type(other)
        for attr in ("actors", "actees", "mask"):
            x, y = getattr(mask, attr, None), getattr(other, attr, None)
            assert (x is None and y is None) or ragged_equal(x, y), (name, attr)
    for attr in ("reward", "done", "truncated", "final_index"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)
    assert a.metrics.keys() == b.metrics.keys()
    for name, m in a.metrics.items():
        n = b.metrics[name]
        assert (m.count, m.min, m.max) == (n.count, n.min, n.max) and m.sum == pytest.approx(n.sum)
    assert (a.final_obs is None) == (b.final_obs is None)
    if a.final_obs is not None:
        assert_same(a.final_obs, b.final_obs)


def _run_both(parallel, serial, n_steps, obs_filters=(None,)):
    rng = np.random.default_rng(1)
    obs, expected = parallel.reset(obs_filters[0]), serial.reset(obs_filters[0])
    assert_same(obs, expected)
    n_done = n_truncated = 0
    for step in range(n_steps):
        actions = random_actions(obs, parallel.action_space(), rng)
        obs_filter = obs_filters[step % len(obs_filters)]
        obs, expected = parallel.act(actions, obs_filter), serial.act(actions, obs_filter)
        assert_same(obs, expected)
        n_done += int(obs.done.sum())
        n_truncated += int(obs.truncated.sum())
    return n_done, n_truncated


@pytest.mark.parametrize("num_envs,num_processes", [(5, 2), (4, 2), (3, 3)])
def test_same_observations_as_env_list(num_envs, num_processes):
    with ParallelEnvList(Toy, num_envs, num_processes, start_method="fork", seed=7) as parallel:
        n_done, n_truncated = _run_both(parallel, EnvList(Toy, num_envs, seed=7), n_steps=12)
    assert n_done > n_truncated > 0  # auto-resets, final_obs and both kinds of ending were compared


def test_same_observations_under_obs_filters():
    narrow = ObsSpace(global_features=[], entities={"Ball": Entity(["y"]), "Wall": Entity([])})
    wide = ObsSpace(global_features=["t"], entities={"Wall": Entity(["h"]), "Ball": Entity(["y", "x"])})
    with ParallelEnvList(Toy, 5, 2, start_method="fork", seed=3) as parallel:
        _run_both(parallel, EnvList(Toy, 5, seed=3), n_steps=6, obs_filters=(narrow, None, wide))


def test_same_observations_when_workers_return_different_fields():
    with ParallelEnvList(Patchy, 7, 3, start_method="fork", seed=11) as parallel:
        n_done, n_truncated = _run_both(parallel, EnvList(Patchy, 7, seed=11), n_steps=25)
    assert n_done > n_truncated > 0


def _batches(create_env, num_envs: int, n_steps: int, seed: int):
    """Every VecObs that an EnvList of ``create_env`` returns over ``n_steps`` random steps."""
    envs, rng = EnvList(create_env, num_envs, seed=seed), np.random.default_rng(seed)
    vec = envs.reset()
    batches = [vec]
    for _ in range(n_steps):
        vec = envs.act(random_actions(vec, envs.action_space(), rng))
        batches.append(vec)
    return batches


@pytest.mark.parametrize("create_env", [Toy, Patchy])
def test_wire_format_round_trips_every_field(create_env):
    batches = _batches(create_env, 4, n_steps=20, seed=5)
    assert any(v.final_obs is not None for v in batches)
    if create_env is Patchy:  # optional fields present in some batches and absent in others
        assert any(v.visible for v in batches) and any(not v.visible for v in batches)
        assert {v.action_masks["pick"].mask is None for v in batches} == {True, False}
        assert any(v.final_obs is not None and v.final_obs.metrics for v in batches)
    for vec in batches:
        copy = unpack(pickle.loads(pickle.dumps(pack(vec), protocol=5)))
        assert_same(copy, vec)
        for name, m in vec.metrics.items():  # exactly, not up to rounding
            assert copy.metrics[name] == m
        for arr, dtype in ((copy.reward, np.float32), (copy.done, np.bool_), (copy.truncated, np.bool_),
                           (copy.final_index, np.int64)):
            assert arr.dtype == dtype and arr.flags.writeable  # not a view of the message's bytes
        assert {n: type(m) for n, m in copy.action_masks.items()} == {n: type(m) for n, m in vec.action_masks.items()}


@pytest.mark.parametrize("create_env", [Toy, Patchy])
def test_unpack_many_joins_messages_as_merging_their_unpacked_batches(create_env):
    """Joined field by field (one layout) or filled in by extend (Patchy's layouts differ)."""
    first, second, third = (_batches(create_env, n, n_steps=12, seed=seed) for n, seed in ((3, 1), (2, 2), (4, 3)))
    for vecs in zip(first, second, third):
        messages = [pickle.loads(pickle.dumps(pack(v), protocol=5)) for v in vecs]
        joined = unpack_many(messages)
        assert_same(joined, merge_vec_obs([unpack(m) for m in messages]))
        assert len(joined) == 9 and all(a.flags.writeable for a in (joined.reward, joined.done, joined.truncated))


@given(
    lengths=st.lists(st.integers(0, 3), min_size=1, max_size=12),
    n_workers=st.integers(1, 5),
    width=st.integers(1, 2),
)
def test_actions_reach_each_worker_as_its_rows(lengths, n_workers, width):
    rng = np.random.default_rng(len(lengths))
    values = rng.integers(0, 9, size=(sum(lengths), width))  # [n_actors_total, width]
    nothing = np.zeros((0, 1), dtype=np.int64)  # [0, 1]: an action that no row takes
    actions = {"move": ragged_from_arrays(values, lengths), "none": ragged_from_arrays(nothing, [0] * len(lengths))}
    bounds = split_envs(len(lengths), min(n_workers, len(lengths)))
    for (start, stop), message in zip(bounds, pack_actions(actions, bounds)):
        received = unpack_actions(pickle.loads(pickle.dumps(message, protocol=5)))
        assert received.keys() == actions.keys()
        for name, a in actions.items():
            assert ragged_equal(received[name], take(a, slice(start, stop))), (name, start, stop)


def test_render_concatenates_frames_in_env_order():
    with ParallelEnvList(Toy, 5, 2, start_method="fork", seed=2) as parallel:
        serial = EnvList(Toy, 5, seed=2)
        parallel.reset(), serial.reset()
        np.testing.assert_array_equal(parallel.render(shift=1), serial.render(shift=1))
        assert parallel.render().shape == (5, 2, 3, 3)


@given(num_envs=st.integers(1, 50), n_workers=st.integers(1, 50))
def test_split_is_contiguous_and_even(num_envs, n_workers):
    n_workers = min(num_envs, n_workers)
    bounds = split_envs(num_envs, n_workers)
    assert [b[0] for b in bounds] == [0] + [b[1] for b in bounds[:-1]] and bounds[-1][1] == num_envs
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1 and sizes == sorted(sizes, reverse=True)


def test_uneven_split_and_more_processes_than_envs():
    with ParallelEnvList(Toy, 7, 3, start_method="fork") as envs:
        assert len(envs) == 7 and len(envs.worker_pids) == 3
        assert [(w.start, w.stop) for w in envs._workers] == [(0, 3), (3, 5), (5, 7)]
        assert len(envs.reset()) == 7
    with ParallelEnvList(Toy, 2, 5, start_method="fork") as envs:
        assert envs.num_processes == 2 and len(envs.worker_pids) == 2


def test_error_in_act_names_worker_env_and_traceback_then_closes():
    envs = ParallelEnvList(Fragile, 4, 2, start_method="fork")
    pids = envs.worker_pids
    envs.reset()
    with pytest.raises(EnvWorkerError) as info:
        envs.act(_fates("live", "live", "live", "raise"))
    text = str(info.value)
    assert "worker 1 (environments 2..3" in text and "in environment 3" in text and "during act()" in text
    assert "ValueError" in text and "the unit was told to fail" in text
    assert "Traceback (most recent call last)" in text and "raise ValueError" in text
    assert (info.value.worker, info.value.env_index, info.value.exitcode) == (1, 3, None)
    assert isinstance(info.value, RuntimeError) and _alive(pids) == []
    with pytest.raises(RuntimeError, match=r"act: the list is unusable, it was closed after worker 1 raised ValueError"):
        envs.act(_fates("live", "live", "live", "live"))
    with pytest.raises(RuntimeError, match=r"reset: the list is unusable.*ValueError in environment 3; create a new"):
        envs.reset()
    envs.close()


@pytest.mark.parametrize("fate", ["malformed", "malformed end"])
def test_malformed_observation_names_the_environment_not_the_workers_row(fate):
    envs = ParallelEnvList(Fragile, 4, 2, start_method="fork")
    envs.reset()
    with pytest.raises(EnvWorkerError, match=r"(?s)worker 1 .* raised ValueError in environment 3 during act\(\): "
                       r"row 3: features\['Unit'\] has shape \(1, 2\)") as info:
        envs.act(_fates("live", "live", "live", fate))
    assert (info.value.worker, info.value.env_index) == (1, 3)
    envs.close()


def test_error_in_reset_reports_the_first_failing_worker():
    envs = ParallelEnvList(lambda: Fragile(fail_on_reset=True), 3, 2, start_method="fork")
    with pytest.raises(EnvWorkerError, match=r"(?s)worker 0 .* raised KeyError in environment 0 during reset\(\).*"
                       r"no map to reset to.*Traceback.*\(also: worker 1 raised KeyError in environment 2\)"):
        envs.reset()
    assert envs.worker_pids == []
    with pytest.raises(RuntimeError, match="unusable"):
        envs.render()


def test_error_while_building_the_environments():
    def broken():
        raise ImportError("the simulator library is missing")

    with pytest.raises(EnvWorkerError, match=r"(?s)raised ImportError while building its environments.*simulator"):
        ParallelEnvList(broken, 2, 2, start_method="fork")
    assert not [p for p in mp.active_children() if p.name.startswith("ParallelEnvList")]


def test_a_worker_that_hangs_past_the_timeout_is_reported_and_reaped():
    envs = ParallelEnvList(Fragile, 4, 2, start_method="fork", timeout=0.5)
    pids = envs.worker_pids
    envs.reset()
    envs.act(_fates("live", "live", "live", "live"))
    start = time.monotonic()
    with _no_hang(10.0), pytest.raises(EnvWorkerError, match=r"worker 1 \(environments 2\.\.3, pid \d+\) did not answer "
                                                             r"within 0\.5 s during act\(\)") as info:
        envs.act(_fates("live", "live", "hang", "live"))
    assert 0.5 <= time.monotonic() - start < 5.0
    assert (info.value.worker, info.value.env_index, info.value.exitcode) == (1, None, None)
    assert _alive(pids) == []
    with pytest.raises(RuntimeError, match=r"act: the list is unusable, it was closed after worker 1 did not answer"):
        envs.act(_fates("live", "live", "live", "live"))


def test_a_failure_does_not_wait_out_a_long_timeout_for_a_hung_worker():
    envs = ParallelEnvList(Fragile, 4, 2, start_method="fork", timeout=30.0)
    envs.reset()
    start = time.monotonic()
    with _no_hang(15.0), pytest.raises(EnvWorkerError, match=r"worker 0 .* raised ValueError in environment 0"):
        envs.act(_fates("raise", "live", "hang", "live"))
    assert time.monotonic() - start < 10.0


@pytest.mark.parametrize("timeout", [0, -1.0, "5", True])
def test_timeout_must_be_positive_seconds(timeout):
    with pytest.raises(ValueError, match=r"timeout must be None or a number of seconds > 0, got"):
        ParallelEnvList(Fragile, 2, 2, start_method="fork", timeout=timeout)


@pytest.mark.parametrize("how", ["sigkill", "os._exit"])
def test_dead_worker_raises_instead_of_hanging(how):
    envs = ParallelEnvList(Fragile, 4, 2, start_method="fork")
    pids = envs.worker_pids
    envs.reset()
    if how == "sigkill":
        os.kill(pids[1], signal.SIGKILL)
        actions, pattern = _fates("live", "live", "live", "live"), r"worker 1 \(.*pid \d+\) was killed by SIGKILL \(exit code -9\)"
    else:
        actions, pattern = _fates("live", "live", "exit", "live"), r"worker 1 \(.*\) exited with code 3 during act\(\)"
    with _no_hang(10.0), pytest.raises(EnvWorkerError, match=pattern) as info:
        envs.act(actions)
    assert info.value.worker == 1 and info.value.exitcode in (-9, 3)
    assert _alive(pids) == []
    with pytest.raises(RuntimeError, match=r"closed after worker 1"):
        envs.act(actions)


def test_close_reaps_and_is_idempotent():
    envs = ParallelEnvList(Toy, 3, 2, start_method="fork")
    pids = envs.worker_pids
    assert len(_alive(pids)) == 2
    envs.reset()
    envs.close()
    assert _alive(pids) == [] and envs.worker_pids == []
    envs.close()
    with pytest.raises(RuntimeError, match=r"ParallelEnvList.reset: the list is unusable, it was closed by close\(\)"):
        envs.reset()
    with ParallelEnvList(Toy, 2, 2, start_method="fork") as envs:
        pids = envs.worker_pids
    assert _alive(pids) == []


def test_garbage_collection_reaps_the_workers():
    envs = ParallelEnvList(Toy, 2, 2, start_method="fork")
    pids = envs.worker_pids
    del envs
    gc.collect()
    assert _alive(pids) == []


def test_interrupted_request_closes_the_list(monkeypatch):
    envs = ParallelEnvList(Toy, 2, 2, start_method="fork")
    pids = envs.worker_pids

    def interrupted(cmd):
        raise KeyboardInterrupt

    monkeypatch.setattr(envs, "_gather", interrupted)
    with pytest.raises(KeyboardInterrupt):
        envs.reset()
    assert _alive(pids) == []
    with pytest.raises(RuntimeError, match=r"closed because KeyboardInterrupt interrupted reset\(\)"):
        envs.reset()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line.split()[1] for line in f if line.startswith("State:"))
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_workers_exit_when_the_parent_dies_without_closing():
    script = (
        "import os, sys\n"
        "from entmachin.env.examples.move_to_origin import MoveToOrigin\n"
        "from entmachin.env.parallel_env_list import ParallelEnvList\n"
        "envs = ParallelEnvList(MoveToOrigin, 2, 2, start_method='fork')\n"
        "print(*envs.worker_pids, flush=True)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 2
    with _no_hang(10.0):
        while any(_state(pid) not in ("gone", "Z") for pid in pids):
            time.sleep(0.02)


def test_close_logs_an_environment_that_fails_to_close(caplog):
    envs = ParallelEnvList(lambda: Fragile(fail_on_close=True), 2, 2, start_method="fork")
    pids = envs.worker_pids
    with caplog.at_level(logging.WARNING, logger="entmachin.env.parallel_env_list"):
        envs.close()
    assert _alive(pids) == []
    assert "OSError" in caplog.text and "log file is gone" in caplog.text


def test_wrong_actions_raise_in_the_parent_and_keep_the_workers():
    with ParallelEnvList(Fragile, 3, 2, start_method="fork") as envs:
        with pytest.raises(RuntimeError, match=r"act called before reset\(\)"):
            envs.act(_fates("live", "live", "live"))
        envs.reset()
        with pytest.raises(ValueError, match=r"actions\['fate'\] has 2 rows; expected one per environment \(3\)"):
            envs.act(_fates("live", "live"))
        with pytest.raises(ValueError, match=r"actions\['fate'\] item 1 is 7; expected a value in \[0, 6\)"):
            envs.act({"fate": ragged_from_arrays(np.array([[0], [7], [0]]), [1, 1, 1])})
        assert len(envs.act(_fates("live", "live", "live"))) == 3


@pytest.mark.parametrize("start_method", ["spawn", None])
def test_spawn_and_forkserver_take_lambdas_and_local_classes(start_method):
    # Built on an example environment rather than this module's Toy, so that a fresh worker
    # needs no import of this test module (and of pytest and hypothesis with it).
    class Local(MoveToOrigin):
        def reset(self) -> Observation:
            obs = super().reset()
            obs.reward = 0.5
            return obs

    with ParallelEnvList(lambda: Local(), 3, 2, start_method=start_method, seed=5) as parallel:
        assert parallel.start_method == (start_method or "forkserver")
        _run_both(parallel, EnvList(Local, 3, seed=5), n_steps=3)
        assert parallel.reset().reward.tolist() == [0.5] * 3


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        ({"num_envs": 0}, r"num_envs must be an int >= 1, got 0"),
        ({"num_processes": 0}, r"num_processes must be an int >= 1, got 0"),
        ({"num_processes": 1.5}, r"num_processes must be an int >= 1, got 1.5"),
        ({"num_envs": True}, r"num_envs must be an int >= 1, got True"),
        ({"start_method": "thread"}, r"start_method must be one of \[.*'spawn'.*\] on this platform, got 'thread'"),
        ({"seed": -1}, r"seed must be None or an int >= 0, got -1"),
    ],
)
def test_bad_arguments(kwargs, pattern):
    args = {"create_env": Toy, "num_envs": 2, "num_processes": 2, **kwargs}
    with pytest.raises(ValueError, match=pattern):
        ParallelEnvList(**args)


def test_create_env_must_be_callable_and_serialisable():
    with pytest.raises(TypeError, match=r"create_env must be callable, got Toy"):
        ParallelEnvList(Toy(), 2, 2)
    generator = (i for i in range(3))
    with pytest.raises(TypeError, match=r"cannot be serialised with dill"):
        ParallelEnvList(lambda: (Toy(), next(generator))[0], 2, 2)


def test_env_worker_error_pickles():
    error = EnvWorkerError("worker 1 died", worker=1, env_index=None, exitcode=-9)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.worker, copy.env_index, copy.exitcode) == ("worker 1 died", 1, None, -9)


SIGTERM_SCRIPT = """
import os, signal, time
from entmachin.env import ParallelEnvList
from entmachin.env.examples import MineSweeper

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *args: print("parent: SIGTERM", flush=True))
    envs = ParallelEnvList(MineSweeper, 4, 2, seed=0)
    envs.reset()
    os.killpg(os.getpgid(0), signal.SIGTERM)  # as a job scheduler or a container stop does
    time.sleep(0.3)
    print("rows", len(envs.reset().reward), flush=True)
    envs.close()
"""


def test_a_sigterm_to_the_process_group_leaves_the_workers_to_the_parent(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "term.py"
    script.write_text(SIGTERM_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          start_new_session=True, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["parent:", "SIGTERM", "rows", "4"]
