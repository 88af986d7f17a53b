"""EntityRows: per-entity states kept by id across an entity's absences, dropped when its episode ends, and
an environment that breaks the ids' contract named."""
import numpy as np
import pytest
import torch

from entmachin.env import EnvList, ParallelEnvList
from entmachin.env.action import CategoricalActionMask, CategoricalActionSpace
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.frame.entity_memory import EntityRows
from entmachin.ragged.arrays import ragged_from_arrays


class Flicker(Environment):
    """Four steps: entity 7 (an ``A``) is seen, then out of sight, then seen again beside a new one (8), which
    alone is left at the last step. The
    ``mode`` breaks the ids' contract at the last step: ``reuse`` gives 7 to a ``B``, ``twice`` gives 7 twice,
    ``none`` gives no ids."""

    def __init__(self, mode="ok"):
        self.mode, self.t = mode, 0

    def obs_space(self):
        return ObsSpace(entities={"A": Entity(["x"]), "B": Entity(["y"])})

    def action_space(self):
        return {"go": CategoricalActionSpace(["a", "b"])}

    def reset(self):
        self.t = 0
        return self._observe()

    def act(self, actions):
        self.t += 1
        return self._observe()

    def _observe(self):
        a_ids = {0: [7], 1: [], 2: [7, 8], 3: [8]}[self.t]
        b_ids = []
        if self.t == 2 and self.mode == "reuse":
            a_ids, b_ids = [8], [7]
        if self.t == 2 and self.mode == "twice":
            a_ids = [7, 7]
        ids = {"A": a_ids, "B": b_ids}
        features = {"A": np.ones((len(a_ids), 1), np.float32), "B": np.ones((len(b_ids), 1), np.float32)}
        return Observation(features=features, ids={} if self.mode == "none" else ids,
                           actions={"go": CategoricalActionMask(actor_ids=[])}, reward=0.0, done=self.t == 3)


class Result:
    """What a network returns: each given entity's state plus one."""

    def __init__(self, entries):
        self.entity_memory = {t: r.data + 1.0 for t, r in entries["entity_memory"].items()}


def _no_actions(n_rows=1):
    return {"go": ragged_from_arrays(np.zeros((0, 1), np.int64), [0] * n_rows)}


def _walk(mode="ok"):
    envs = EnvList(lambda: Flicker(mode), 1)
    rows = EntityRows(2, 1, ["A", "B"])
    obs = envs.reset()
    seen = []
    for _ in range(3):
        entries = rows.entries(obs)
        seen.append(entries)
        obs = envs.act(_no_actions())
        after = rows.advance(Result(entries), obs)
    return seen, after, rows


def test_a_state_is_kept_across_an_absence_and_dropped_when_the_episode_ends():
    seen, after, rows = _walk()
    first, gone, back = (s["entity_memory"]["A"] for s in seen)
    assert first.data.tolist() == [[0.0, 0.0]]  # seen the first time: zeros
    assert gone.data.shape == (0, 2)
    assert back.data.tolist() == [[1.0, 1.0], [0.0, 0.0]]  # 7 kept its state while out of sight; 8 is new
    assert [s["entity_handles"]["A"].data[:, 0].tolist() for s in seen] == [[0], [], [0, 1]]
    # the episode ended at the next step: the next state is its final observation's, then the row starts over
    assert after["entity_memory"]["A"].data.tolist() == [[1.0, 1.0]]
    assert rows.index == [{}] and rows.table[0].shape == (0, 2)


def test_a_snapshot_restores_the_states_and_the_numbering():
    envs = EnvList(Flicker, 1)
    rows = EntityRows(2, 1, ["A", "B"])
    obs = envs.reset()
    entries = rows.entries(obs)
    obs = envs.act(_no_actions())
    rows.advance(Result(entries), obs)
    again = EntityRows(2, 1, ["A", "B"])
    again.restore(rows.snapshot(), "test")
    obs = envs.act(_no_actions())
    assert again.entries(obs)["entity_memory"]["A"].data.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="the saved per-entity states are 1 rows of width 2; this run's are 1 of 3"):
        EntityRows(3, 1, ["A", "B"]).restore(rows.snapshot(), "RolloutCollector.restore")


@pytest.mark.parametrize("mode, message", [
    ("reuse", r"row 0: entity id 7 names a 'B' entity, but earlier in this episode it named a 'A' one; an "
              "environment must not reuse an id within an episode for another entity"),
    ("twice", "row 0: entity id 7 is given twice in one observation"),
    ("none", r"row 0: 1 'A' entities but 0 ids; per-entity memory keeps states by id"),
])
def test_an_environment_that_breaks_the_ids_contract_is_named(mode, message):
    with pytest.raises(ValueError, match=message):
        _walk(mode)


def test_observations_without_ids_are_named():
    """Worker processes do not pass the entities' ids yet."""
    envs = ParallelEnvList(Flicker, 2, 2)
    try:
        obs = envs.reset()
        assert obs.ids is None
        with pytest.raises(ValueError, match=r"carry no entity ids \(VecObs.ids\); .* \(rollout.processes: 0\)"):
            EntityRows(2, 2, ["A", "B"]).entries(obs)
    finally:
        envs.close()


def test_a_result_without_per_entity_states_is_named():
    envs = EnvList(Flicker, 1)
    rows = EntityRows(2, 1, ["A", "B"])
    obs = envs.reset()
    rows.entries(obs)
    with pytest.raises(ValueError, match="returned no per-entity states"):
        rows.advance(object(), envs.act(_no_actions()))

    class Wrong:
        entity_memory = {"A": torch.zeros(1, 3)}

    rows.entries(obs)
    with pytest.raises(ValueError, match=r"returned 'A' states \(1, 3\); expected \(1, 2\)"):
        rows.advance(Wrong(), obs)


def test_keep_end_and_a_rows_states_moved_between_rows():
    """``keep`` writes a result's states back by handle, ``end`` drops the rows whose episode ended, and ``row`` /
    ``put`` move one row's states (its numbering too) into a row of another ``EntityRows``: what a player that
    assembles each pass's rows from states kept per game does."""
    rows = EntityRows(2, 1, ["A", "B"])
    with pytest.raises(ValueError, match="kept before entries"):
        rows.keep(Result({"entity_memory": {}}))
    rows.keep(Result(rows.entries(EnvList(Flicker, 1).reset())))  # 7: [1, 1]
    batch = EntityRows(2, 2, ["A", "B"])
    batch.put(1, rows.row(0))
    both = EnvList(Flicker, 2)
    both.reset()
    two = {"go": ragged_from_arrays(np.zeros((0, 1), np.int64), [0, 0])}
    both.act(two)
    entries = batch.entries(both.act(two))  # both rows at the step that shows 7 and 8
    # row 0 begins its episode here (zeros); row 1 took the states where 7 was seen once
    assert entries["entity_memory"]["A"].data.tolist() == [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    batch.keep(Result(entries))
    index, table = batch.row(1)
    assert index == {7: ("A", 0), 8: ("A", 1)} and table.tolist() == [[2.0, 2.0], [1.0, 1.0]]
    batch.end(np.array([False, True]))
    assert batch.row(1)[0] == {} and batch.row(1)[1].shape == (0, 2) and len(batch.row(0)[0]) == 2


class Picked:
    """What a network acting only some rows returns: each of their entities' given state plus ``step``."""

    def __init__(self, entries, rows, step=1.0):
        picked = set(rows)
        self.entity_memory = {}
        for t, r in entries["entity_memory"].items():
            keep = torch.tensor([int(b) in picked for b in r.batch_index.tolist()], dtype=torch.bool)
            self.entity_memory[t] = r.data[keep] + step


def test_a_player_of_some_rows_keeps_only_theirs_and_every_rows_end_drops_it():
    """The learner of a self-play game advances the rows it acted (rows=); a row's end drops its states
    whoever acted it."""
    envs = EnvList(Flicker, 2)
    rows = EntityRows(2, 2, ["A", "B"])
    obs = envs.reset()
    entries = rows.entries(obs)
    obs = envs.act(_no_actions(2))
    rows.advance(Picked(entries, [1]), obs, rows=np.array([1]))
    obs = envs.act(_no_actions(2))
    again = rows.entries(obs)["entity_memory"]["A"]
    assert again.data.tolist() == [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]  # row 0 untouched, row 1 kept
    rows.end(np.array([False, True]))
    assert rows.index[1] == {} and rows.table[1].shape == (0, 2) and rows.table[0].shape == (2, 2)


def test_a_snapshot_keeps_its_own_states_by_the_numbering_another_gave():
    """entries_for/keep: a second EntityRows keeps states of the rows it plays by the first's handles."""
    envs = EnvList(Flicker, 2)
    learner, snapshot = EntityRows(2, 2, ["A", "B"]), EntityRows(2, 2, ["A", "B"])
    obs = envs.reset()
    seen = []
    entries = learner.entries(obs)
    for _ in range(3):
        mine = {t: h[[1]] for t, h in entries["entity_handles"].items()}  # row 1's, as the learner numbered them
        given = snapshot.entries_for(np.array([1]), mine)
        seen.append(given["entity_memory"]["A"].data.tolist())
        snapshot.keep(Picked(given, [0], 10.0))
        obs = envs.act(_no_actions(2))
        learner.advance(Picked(entries, []), obs, rows=np.array([], dtype=np.int64))  # it acted none of them
        snapshot.end(obs.done)
        entries = learner.entries(obs)
    assert seen == [[[0.0, 0.0]], [], [[10.0, 10.0], [0.0, 0.0]]]  # 7 kept its state through its absence
    assert float(learner.table[1].abs().sum()) == 0.0  # the learner keeps nothing of the snapshot's row
