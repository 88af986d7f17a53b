"""Self-play with per-entity memory (``model.memory.per_entity``): each snapshot keeps its own entities' states
of the rows it plays, by the learner's numbering, and the learner trains on its own rows' stored states."""

import numpy as np
import pytest
import torch

from entmachin.frame.memory import sequence_groups, time_major
from entmachin.frame.rollout import Rollout
from entmachin.frame.safe_call import safe_call
from entmachin.run import selfplay as selfplay_module
from entmachin.run.logs import RunError
from test.run.test_selfplay_memory import (arena_with_memory, changed_pool, pool_reloaded, resumes_exactly,
                                          with_snapshots_in_play)

MEMORY = {"d_model": 16, "n_layer": 1, "critic": "shared", "memory": {"kind": "gru", "size": 4, "per_entity": True}}


def arena_with_entity_memory(num_envs=6, **section):
    return arena_with_memory(num_envs, model=MEMORY, length=4, **section)


def test_each_snapshot_keeps_its_own_entity_states_per_row_apart_from_the_learners_and_reset_per_game(monkeypatch):
    """Held to a reference kept by the environments' ids: each entity of a snapshot's row is given the state the
    same snapshot returned at its previous appearance in the episode (zeros at its first), never the learner's."""
    envs, frame, selfplay, collector = arena_with_entity_memory(play_against_latest=0.2, max_snapshots=2)
    seen = []  # the last observation (the ids the collector's state was built from)
    reset, step = envs.reset, envs.act
    envs.reset = lambda *a, **k: seen.append(reset(*a, **k)) or seen[-1]
    envs.act = lambda *a, **k: seen.append(step(*a, **k)) or seen[-1]
    with_snapshots_in_play(frame, selfplay, collector)
    torch.nn.init.normal_(frame.actor.entity_memory.cell.weight_hh)
    for slot in selfplay.slots:  # (the frozen copies take it too: their states then differ from zero at once)
        slot.module.entity_memory.cell.weight_hh.data.copy_(frame.actor.entity_memory.cell.weight_hh)
    fed = {}  # slot -> the states given to its module this step
    original_call = selfplay_module.safe_call

    def spying_call(module, state, *args, **kwargs):
        fed[[s.module for s in selfplay.slots].index(module)] = {t: r.data.clone()
                                                                 for t, r in state["entity_memory"].items()}
        return original_call(module, state, *args, **kwargs)

    monkeypatch.setattr(selfplay_module, "safe_call", spying_call)
    reference = {}  # (slot, row) -> id -> state
    fresh = set()  # the rows whose game began while watched
    owners = [id(s.states) for s in selfplay.slots]
    checked = carried = 0
    act, observe = selfplay.act, selfplay.observe

    def watched_act(state):
        nonlocal checked, carried
        fed.clear()
        learner_tables = [t.clone() for t in collector._entities.table]
        pieces = act(state)
        ids = seen[-1].ids
        for w, rows, out in selfplay._acted:
            for etype, given in fed[w].items():
                k = 0
                for r in rows.tolist():
                    assert float(learner_tables[r].abs().sum()) == 0.0  # the learner keeps nothing of this row
                    for eid in ids[r].get(etype, ()):
                        kept = reference.get((w, r), {}).get(eid)
                        expected = torch.zeros(given.shape[1]) if kept is None else kept
                        if r in fresh:
                            torch.testing.assert_close(given[k], expected, rtol=0, atol=0)
                            checked, carried = checked + 1, carried + (kept is not None)
                        reference.setdefault((w, r), {})[eid] = out.entity_memory[etype][k].detach().clone()
                        k += 1
            others = np.setdiff1d(np.arange(len(selfplay.rows)), rows)
            tables = selfplay.slots[w].states.entities.table
            assert all(float(tables[r].abs().sum()) == 0.0 for r in others.tolist())  # nor it of the others'
        return pieces

    def watched_observe(obs):
        observe(obs)
        for r in np.flatnonzero(np.asarray(obs.done)).tolist():  # a row's game ended: every snapshot forgets it
            for w in range(len(selfplay.slots)):
                reference.pop((w, r), None)
                fresh.add(r)
                assert selfplay.slots[w].states.entities.table[r].shape[0] == 0
        for w, slot in enumerate(selfplay.slots):  # a snapshot put in a place starts with no states
            if id(slot.states) != owners[w]:
                owners[w] = id(slot.states)
                for key in [key for key in reference if key[0] == w]:
                    del reference[key]

    selfplay.act, selfplay.observe = watched_act, watched_observe
    for _ in range(3):
        collector.collect()
        frame._let_go_of_rows()  # (no learning needed)
        selfplay.advance(collector.total_env_steps)
    assert checked > 200 and carried > 100
    envs.close()


def test_the_learners_sequences_unroll_as_its_steps_acted_with_the_stored_entity_states():
    envs, frame, selfplay, collector = arena_with_entity_memory(play_against_latest=0.2)
    with_snapshots_in_play(frame, selfplay, collector)
    torch.nn.init.normal_(frame.actor.entity_memory.out.weight)  # the entities' states move what the network outputs
    collector.collect()
    [stored] = frame._chunks
    assert isinstance(stored, np.ndarray) and 0 < stored.sum() < stored.size  # snapshots played some rows
    rollout = Rollout.read(frame.replay_buffer)
    linked = 0
    with torch.no_grad():
        for group in sequence_groups(frame._chunks, 4, "test"):
            n, length = group.rows.shape
            rows = torch.from_numpy(time_major(group.rows))
            _, value = safe_call(frame.actor, rollout.state[rows], {"action": rollout.action[rows]},
                                 {"sequence_length": length}, method="forward_with_value")
            for t in range(length):  # each step as it was acted: with the states stored with it
                index = torch.from_numpy(group.rows[:, t])
                _, step_value = safe_call(frame.actor, rollout.state[index], {"action": rollout.action[index]},
                                          method="forward_with_value")
                torch.testing.assert_close(step_value, value[t * n:(t + 1) * n], atol=1e-4, rtol=1e-4)
                given = rollout.state[index]["entity_memory"]
                linked += sum(int((m.data.abs().sum(1) > 0).sum()) for m in given.values()) if t else 0
    assert linked > 10  # steps whose entities carried states from earlier steps of the sequence
    envs.close()


def test_the_pool_file_keeps_the_snapshots_entity_states_and_refuses_another_width():
    envs, selfplay, other, data = pool_reloaded(arena_with_entity_memory)
    n_states = 0
    for ours, theirs in zip(selfplay.slots, other.slots):
        for a, b in zip(ours.states.entities.table, theirs.states.entities.table):
            torch.testing.assert_close(b, a, rtol=0, atol=0)
            n_states += a.shape[0]
    assert n_states > 0
    def wider(state):
        place = state["entity_memory"][1]
        place["table"] = [torch.zeros(2, 5) for _ in place["table"]]

    with pytest.raises(RunError, match=r"pool.pt: snapshot place 1: the saved per-entity states are 12 rows of "
                                       r"width 5; this run's are 12 of 4"):
        other.check_bytes(changed_pool(data, wider), "pool.pt")
    envs.close()


def test_a_selfplay_run_with_per_entity_memory_trains_and_resumes_exactly(tmp_path):
    """``selfplay.seats`` with ``model.memory.per_entity`` on Skirmish (every unit has an id): a few updates
    against snapshots, then a run stopped at a checkpoint and resumed ends as the uninterrupted one (the
    snapshots' entity states and the learner's are in the checkpoint)."""
    data = {"env": {"name": "Skirmish", "kwargs": {"max_units": 3, "time_limit": 6}},
            "model": {**MEMORY, "memory": {"kind": "lstm", "size": 4, "per_entity": True}},
            "frame": {"name": "PPO", "batch_size": 32, "sequence_length": 4, "n_anneal_updates": None},
            "rollout": {"num_envs": 4, "n_steps": 8},
            "selfplay": {"seats": "random", "save_steps": 32, "swap_steps": 32, "play_against_latest": 0.3},
            "log": {"eval_interval": 160, "eval_episodes": 2, "eval_opponents": [], "best": None,
                    "checkpoint_interval": 96}}
    resumes_exactly(data, tmp_path)
