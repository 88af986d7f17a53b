"""ParallelEnvList stepped in parts (parts / act_async / receive): the same observations as EnvList,
the rules while a part is in flight, and worker failures reported as from act()."""
import copy
import multiprocessing as mp

import numpy as np
import pytest

from entmachin.env import EnvList, random_actions
from entmachin.env.parallel_env_list import EnvWorkerError, ParallelEnvList
from entmachin.env.parts import take_rows
from entmachin.env.vec_env import merge_vec_obs
from entmachin.ragged.arrays import take
from test.env.test_parallel_env_list import Fragile, Patchy, Toy, _fates, assert_same


def _rows_of(actions, rows):
    return {name: take(a, np.arange(*rows)) for name, a in actions.items()}


@pytest.mark.parametrize("num_envs,num_processes,n_parts,expected", [
    (3, 2, 2, [(0, 2), (2, 3)]), (5, 3, 2, [(0, 4), (4, 5)]), (4, 1, 2, [(0, 4)]), (6, 3, 3, [(0, 2), (2, 4), (4, 6)]),
    (6, 3, 1, [(0, 6)]), (4, 2, 5, [(0, 2), (2, 4)]),
])
def test_parts_are_groups_of_whole_workers(num_envs, num_processes, n_parts, expected):
    with ParallelEnvList(Toy, num_envs, num_processes, start_method="fork") as envs:
        assert envs.parts(n_parts) == expected
    assert EnvList(Toy, num_envs).parts(2) == [(0, num_envs)]  # stepped in this process: one part


@pytest.mark.parametrize("create_env,num_envs,num_processes", [(Toy, 5, 3), (Patchy, 7, 3)])
def test_parts_stepped_out_of_order_return_what_env_list_returns(create_env, num_envs, num_processes):
    rng = np.random.default_rng(1)
    serial = EnvList(create_env, num_envs, seed=7)
    with ParallelEnvList(create_env, num_envs, num_processes, start_method="fork", seed=7) as envs:
        obs, expected = envs.reset(), serial.reset()
        a, b = envs.parts(2)
        n_done = 0
        for step in range(14):
            actions = random_actions(obs, envs.action_space(), rng)
            if step == 13:
                break  # its actions go to b alone, below
            expected = serial.act(actions)
            if step % 5 == 4:  # now and then every row at once, after parts (and parts after it)
                obs = envs.act(actions)
            else:
                envs.act_async(_rows_of(actions, b), b)
                envs.act_async(_rows_of(actions, a), a)
                got_a, got_b = envs.receive(a), envs.receive(b)
                obs = merge_vec_obs([copy.deepcopy(got_a), got_b])
            assert_same(obs, expected)
            n_done += int(obs.done.sum())
        assert n_done > 0
        envs.act_async(_rows_of(actions, b), b)
        newer = serial.act(actions)  # steps a's rows too: only its rows of b are compared
        envs.receive(b)
        envs.get_state()  # every row's last observation, of two parts: a's from the loop, b's just received
        want = merge_vec_obs([take_rows(obs, np.arange(*a)), take_rows(newer, np.arange(*b))])  # metrics: not per row
        assert_same(envs._last_vec, want)


def test_in_flight_rows_refuse_every_row_calls_and_a_second_send():
    with ParallelEnvList(Fragile, 3, 2, start_method="fork") as envs:
        with pytest.raises(RuntimeError, match=r"act_async called before reset\(\)"):
            envs.act_async(_fates("live", "live"), (0, 2))
        envs.reset()
        envs.act_async(_fates("live", "live"), (0, 2))
        for call in (lambda: envs.act(_fates("live", "live", "live")), envs.reset, envs.get_state,
                     lambda: envs.set_state(b""), envs.render):
            with pytest.raises(RuntimeError, match=r"rows \(0, 2\) were sent by act_async\(\) and are still stepping; "
                                                   r"receive\(\) them first"):
                call()
        with pytest.raises(RuntimeError, match=r"act_async: rows \(0, 2\) were sent .* receive\(\) them first"):
            envs.act_async(_fates("live", "live", "live"), (0, 3))
        with pytest.raises(RuntimeError, match=r"receive: rows \(2, 3\) are not in flight \(in flight: \[\(0, 2\)\]\)"):
            envs.receive((2, 3))
        assert len(envs.receive((0, 2))) == 2
        assert len(envs.act(_fates("live", "live", "live"))) == 3  # usable again


def test_parts_and_their_actions_are_checked_before_anything_is_sent():
    with ParallelEnvList(Fragile, 3, 2, start_method="fork") as envs:
        envs.reset()
        for rows in [(0, 1), (1, 3), (0, 0), (2, 5), "ab", None]:
            with pytest.raises(ValueError, match=r"act_async: rows .* is not a range of whole workers' rows; give one "
                                                 r"of parts\(n\)'s ranges, e.g. \[\(0, 2\), \(2, 3\)\]"):
                envs.act_async(_fates("live"), rows)
        with pytest.raises(ValueError, match=r"actions\['fate'\] has 2 rows; expected one per environment \(1\)"):
            envs.act_async(_fates("live", "live"), (2, 3))
        with pytest.raises(ValueError, match=r"n_parts must be an int >= 1, got 0"):
            envs.parts(0)
        envs.act_async(_fates("live"), (2, 3))
        assert len(envs.receive((2, 3))) == 1


@pytest.mark.parametrize("fate,match", [
    ("raise", r"(?s)^worker 1 \(environment 2, pid \d+\) raised ValueError in environment 2 during act\(\): the unit "
              r"was told to fail\n--- traceback in worker 1 ---\nTraceback.*raise ValueError"),
    ("exit", r"^worker 1 \(environment 2, pid \d+\) exited with code 3 during act\(\); its stderr may say why$"),
])
def test_a_failing_part_reports_as_act_and_closes_the_list(fate, match):
    envs = ParallelEnvList(Fragile, 3, 2, start_method="fork")
    pids = envs.worker_pids
    envs.reset()
    envs.act_async(_fates("live", "live"), (0, 2))
    envs.act_async(_fates(fate), (2, 3))
    with pytest.raises(EnvWorkerError, match=match) as info:
        envs.receive((2, 3))
    assert info.value.worker == 1
    assert not {p.pid for p in mp.active_children()} & set(pids)  # every worker reaped, the other part's too
    with pytest.raises(RuntimeError, match=r"receive: the list is unusable, it was closed after worker 1"):
        envs.receive((0, 2))
    envs.close()


def test_take_rows_keeps_the_final_observations_of_the_rows_taken():
    envs, rng = EnvList(Toy, 5, seed=3), np.random.default_rng(0)
    vec = envs.reset()
    while vec.final_obs is None or len(vec.final_index) < 2:
        vec = envs.act(random_actions(vec, envs.action_space(), rng))
    ended = vec.final_index.tolist()
    rows = np.array([ended[1], 4 if ended[0] != 4 else 3, ended[0]])
    got = take_rows(vec, rows)
    assert got.done.tolist() == vec.done[rows].tolist() and got.metrics == {}
    for i, row in enumerate(rows.tolist()):
        assert_same(take_rows(got, np.array([i])), take_rows(vec, np.array([row])))
    assert sorted(got.final_index.tolist()) == [i for i, row in enumerate(rows.tolist()) if row in ended]
    for place, row in zip(got.final_index.tolist(), rows[got.final_index].tolist()):
        k = ended.index(row)
        assert_same(take_rows(got.final_obs, np.array([got.final_index.tolist().index(place)])),
                    take_rows(vec.final_obs, np.array([k])))
