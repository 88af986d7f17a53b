"""Self-play with a network with memory: each snapshot keeps its own states, the learner trains on sequences
of its own rows."""
import io

import numpy as np
import pytest
import torch

from entmachin.env import EnvList
from entmachin.frame import RolloutCollector
from entmachin.frame.memory import sequence_groups, time_major
from entmachin.frame.rollout import Rollout
from entmachin.frame.safe_call import safe_call
from entmachin.run import selfplay as selfplay_module
from entmachin.run.build import make_frame
from entmachin.run.config import config_from_dict
from entmachin.run.logs import RunError
from entmachin.run.selfplay import SelfPlay
from entmachin.run.spaces import spaces_record
from test.env.arena import Arena

MEMORY = {"d_model": 16, "n_layer": 1, "critic": "shared", "memory": {"kind": "gru", "size": 8}}


def arena_with_memory(num_envs=6, model=MEMORY, length=3, **section):
    """Self-play on ``Arena`` games of ``length`` steps with a network of ``model``: the environments, the frame,
    the self-play and its collector."""
    config = config_from_dict({"model": model, "rollout": {"num_envs": num_envs, "n_steps": 8},
                               "frame": {"name": "PPO", "batch_size": 16, "n_epochs": 1, "sequence_length": 4},
                               "selfplay": {"seats": "random", "save_steps": 48, "swap_steps": 48, **section}})
    torch.manual_seed(0)
    envs = EnvList(lambda: Arena(2, length=length), num_envs, seed=0)
    obs_space, action_space = envs.obs_space(), envs.action_space()
    frame, _ = make_frame(config, obs_space, action_space, rows_per_env=2)
    selfplay = SelfPlay(config.selfplay, frame, envs.row_index(), seed=0, spaces=spaces_record(obs_space, action_space))
    return envs, frame, selfplay, RolloutCollector(frame, envs, 8, opponents=selfplay)


def with_snapshots_in_play(frame, selfplay, collector):
    """Collects until two snapshots play (their rows let go of untrained: the snapshots need no learning)."""
    steps = 0
    while sum(slot.snapshot >= 0 for slot in selfplay.slots) < 2:
        steps += collector.collect().n_env_steps
        frame._let_go_of_rows()
        selfplay.advance(steps)


def pool_reloaded(arena):
    """A pool saved after a rollout with two snapshots in play, and a fresh arena's pool loaded from it:
    ``(envs, selfplay, other, data)``."""
    envs, frame, selfplay, collector = arena()
    with_snapshots_in_play(frame, selfplay, collector)
    collector.collect()
    data = selfplay.to_bytes()
    _, _, other, _ = arena()
    other.load(other.check_bytes(data, "pool.pt"), games=True)
    return envs, selfplay, other, data


def changed_pool(data, change):
    """The pool file ``data`` with ``change(state)`` applied to its loaded state, saved again."""
    state = torch.load(io.BytesIO(data), weights_only=True)
    change(state)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def test_each_snapshot_carries_its_own_state_per_row_reset_where_its_game_ends(monkeypatch):
    envs, frame, selfplay, collector = arena_with_memory(play_against_latest=0.2, max_snapshots=2)
    with_snapshots_in_play(frame, selfplay, collector)
    fed, steps = [], []  # per step: {slot: memory given}, (slot states before, learner's before, acted, done)
    original_call, act, observe = selfplay_module.safe_call, selfplay.act, selfplay.observe

    def spying_call(module, state, *args, **kwargs):
        fed[-1][[s.module for s in selfplay.slots].index(module)] = state["memory"].clone()
        return original_call(module, state, *args, **kwargs)

    def watched_act(state):
        fed.append({})
        before = [(s.states.memory.memory.clone(), s.states.memory.episode_start.clone()) for s in selfplay.slots]
        learner = collector._memory.memory.clone()
        pieces = act(state)
        steps.append([before, learner, [(w, rows, out.memory.clone()) for w, rows, out in selfplay._acted]])
        return pieces

    def watched_observe(obs):
        steps[-1].append(np.asarray(obs.done).copy())
        return observe(obs)

    monkeypatch.setattr(selfplay_module, "safe_call", spying_call)
    selfplay.act, selfplay.observe = watched_act, watched_observe
    for _ in range(2):
        collector.collect()
        frame.update()
    carried = reset = 0
    for t, (before, learner, acted, done) in enumerate(steps):
        for w, rows, out in acted:
            index = torch.from_numpy(rows)
            torch.testing.assert_close(fed[t][w], before[w][0][index])  # its own states, nobody else's
            assert float(learner[index].abs().sum()) == 0.0  # the learner holds nothing of these rows
            others = np.setdiff1d(np.arange(len(selfplay.rows)), rows)
            assert float(before[w][0][torch.from_numpy(others)].abs().sum()) == 0.0  # nor it of the others'
            if t + 1 == len(steps):
                continue
            after = steps[t + 1][0][w]
            ended = torch.from_numpy(done[rows])
            torch.testing.assert_close(after[0][index][~ended], out[~ended])  # carried to its next step
            assert float(after[0][index][ended].abs().sum()) == 0.0 and bool(after[1][index][ended].all())
            carried, reset = carried + int((~ended).sum()), reset + int(ended.sum())
    assert carried > 20 and reset > 5
    envs.close()


def test_the_learners_sequences_are_its_own_consecutive_steps_and_unroll_as_step_by_step_replay():
    envs, frame, selfplay, collector = arena_with_memory(play_against_latest=0.2)
    with_snapshots_in_play(frame, selfplay, collector)
    torch.nn.init.normal_(frame.actor.memory.out.weight)  # the state moves what the network outputs
    collector.collect()
    [stored] = frame._chunks
    assert isinstance(stored, np.ndarray) and 0 < stored.sum() < stored.size  # snapshots played some rows
    step_of, row_of = np.nonzero(stored)  # [n_stored] each: the step and environment row of each stored row
    rollout = Rollout.read(frame.replay_buffer)
    groups = sequence_groups(frame._chunks, 4, "test")
    every = np.sort(np.concatenate([g.rows.reshape(-1) for g in groups]))
    np.testing.assert_array_equal(every, np.arange(rollout.n_rows))  # exactly the stored rows, once each
    with torch.no_grad():
        for group in groups:
            assert (row_of[group.rows] == row_of[group.rows[:, :1]]).all()  # one environment row
            assert (np.diff(step_of[group.rows], axis=1) == 1).all()  # its consecutive steps
            n, length = group.rows.shape
            rows = torch.from_numpy(time_major(group.rows))
            result, value = safe_call(frame.actor, rollout.state[rows], {"action": rollout.action[rows]},
                                      {"sequence_length": length}, method="forward_with_value")
            memory = rollout.state["memory"][torch.from_numpy(group.rows[:, 0])]  # [n, size]
            for t in range(length):
                index = torch.from_numpy(group.rows[:, t])
                step = {**rollout.state[index], "memory": memory}
                out, step_value = safe_call(frame.actor, step, {"action": rollout.action[index]},
                                            method="forward_with_value")
                torch.testing.assert_close(step_value, value[t * n:(t + 1) * n], atol=1e-4, rtol=1e-4)
                memory = out.memory
            torch.testing.assert_close(memory, result.memory, atol=1e-4, rtol=1e-4)
    envs.close()


def test_the_pool_file_keeps_the_snapshots_states_and_refuses_states_of_another_shape():
    envs, selfplay, other, data = pool_reloaded(arena_with_memory)
    for ours, theirs in zip(selfplay.slots, other.slots):
        torch.testing.assert_close(theirs.states.memory.memory, ours.states.memory.memory)
        assert torch.equal(theirs.states.memory.episode_start, ours.states.memory.episode_start)
    changed = changed_pool(data, lambda state: state["memory"][0].update(memory=torch.zeros(3, 8)))
    with pytest.raises(RunError, match=r"pool.pt: the recurrent states of snapshot place 0 have shape \(3, 8\)"):
        other.check_bytes(changed, "pool.pt")
    envs.close()


def test_a_selfplay_run_with_memory_trains_and_resumes_exactly(tmp_path):
    """``selfplay.seats`` with ``model.memory`` on Connect Four: a few updates against snapshots, then a run
    stopped at a checkpoint and resumed ends as the uninterrupted one (the snapshots' states and the learner's
    are in the checkpoint)."""
    data = {"env": {"name": "ConnectFour"}, "model": {**MEMORY, "memory": {"kind": "lstm", "size": 8}},
            "frame": {"name": "PPO", "batch_size": 32, "sequence_length": 4, "n_anneal_updates": None},
            "rollout": {"num_envs": 4, "n_steps": 8},
            "selfplay": {"seats": "random", "save_steps": 32, "swap_steps": 32, "play_against_latest": 0.3},
            "log": {"eval_interval": 160, "eval_episodes": 2, "eval_opponents": [], "best": None,
                    "checkpoint_interval": 96}}
    resumes_exactly(data, tmp_path)


def resumes_exactly(data, tmp_path):
    """A run of ``data`` stopped at its checkpoint at 96 steps and resumed ends as the uninterrupted one at 160
    (5 updates): every state the collector and the pool keep came back."""
    from entmachin.run import train

    whole = train(data, overrides=["train.total_steps=160"], progress=False, run_dir=str(tmp_path / "whole"))
    assert whole.n_updates == 5
    train(data, overrides=["train.total_steps=96"], progress=False, run_dir=str(tmp_path / "half"))
    resumed = train(resume=str(tmp_path / "half"), overrides=["train.total_steps=160"], progress=False)
    for a, b in zip(whole.actor.state_dict().values(), resumed.actor.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
