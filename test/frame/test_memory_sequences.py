"""Sequences of a rollout that stores only some of its rows (self-play), and states kept for some rows."""
import numpy as np
import pytest
import torch

from entmachin.frame.memory import MemoryRows, sequence_groups, sequence_schedule


class _Out:
    def __init__(self, memory):
        self.memory = memory


def test_each_rows_runs_of_stored_steps_are_cut_into_sequences_grouped_by_length():
    stored = np.array([[1, 0, 1],
                       [1, 1, 1],
                       [1, 1, 0],
                       [0, 1, 1],
                       [1, 1, 1]], dtype=bool)  # [T=5, B=3]; stored places numbered step-major
    place = np.full(stored.shape, -1)
    place[stored] = np.arange(stored.sum())
    groups = sequence_groups([(2, 2), stored], 2, "update", burn_in=1)  # a whole rollout first: 4 rows
    by_length = {g.rows.shape[1]: g for g in groups}
    assert sorted(by_length) == [1, 2] and groups[0].rows.shape[1] == 2  # longest first
    offset = 4
    assert by_length[2].rows.tolist() == [[0, 2], [1, 3]] + (offset + np.array(
        [[place[0, 0], place[1, 0]], [place[0, 2], place[1, 2]], [place[1, 1], place[2, 1]],
         [place[3, 1], place[4, 1]], [place[3, 2], place[4, 2]]])).tolist()
    assert by_length[1].rows.tolist() == (offset + np.array([[place[2, 0]], [place[4, 0]]])).tolist()
    assert by_length[2].prior[:, 0].tolist() == [-1, -1, -1, -1, -1, offset + place[2, 1], -1]
    assert by_length[1].prior[:, 0].tolist() == [offset + place[1, 0], -1]
    every = np.sort(np.concatenate([g.rows.reshape(-1) for g in groups]))
    np.testing.assert_array_equal(every, np.arange(4 + stored.sum()))  # every stored row, once
    [whole] = sequence_groups([stored], None, "update")[:1]
    assert whole.rows.tolist() == [(place[1:, 1] + 0).tolist()]  # sequence_length null: a run is one sequence


def test_a_schedule_over_several_lengths_holds_one_length_per_minibatch_and_every_sequence_once_an_epoch():
    stored = np.random.default_rng(0).random((12, 6)) < 0.7
    config = type("Config", (), {"sequence_length": 4, "batch_size": 8, "burn_in": 0})()
    groups = sequence_groups([stored], 4, "update")
    n_sequences = sum(g.rows.shape[0] for g in groups)
    schedule, plan = sequence_schedule([stored], config, 40, np.random.default_rng(1), "update")
    assert plan.burn is None and len(schedule) == len(plan.lengths) == 40
    first_rows = []
    for rows, length in zip(schedule, plan.lengths):
        assert rows.shape[0] % length == 0
        first_rows += rows[: rows.shape[0] // length].tolist()  # time-major: the sequences' first steps
    starts = {int(r[0]) for g in groups for r in g.rows}
    assert set(first_rows) == starts and len(first_rows) >= n_sequences


def test_the_states_of_some_rows_advance_and_every_row_that_ended_restarts():
    rows = MemoryRows(2, 4)
    rows.memory = torch.arange(8.0).reshape(4, 2)
    returned = rows.advance(_Out(torch.full((2, 2), -1.0)), np.array([False, False, True, True]), np.array([1, 2]))
    assert returned.tolist() == [[0, 1], [-1, -1], [-1, -1], [6, 7]]  # before the reset
    assert rows.memory.tolist() == [[0, 1], [-1, -1], [0, 0], [0, 0]]
    assert rows.episode_start[:, 0].tolist() == [False, False, True, True]
    with pytest.raises(ValueError, match=r"returned the next state \(4, 2\); expected \(2, 2\)"):
        rows.advance(_Out(torch.zeros(4, 2)), np.zeros(4, dtype=bool), np.array([0, 3]))
