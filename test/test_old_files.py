"""Files written before entmachin had its own ragged arrays still load, with the values they hold.

``test/fixtures/before_ragged_arrays/`` was written by commit 92126af, whose ragged values were
``ragged_buffer``'s ``RaggedBuffer*`` classes, with ``test/fixtures/make_before_ragged_arrays.py``
(its docstring gives the command). ``expected.json`` beside the files holds what that code saw:
every stored row, parameter checksums, the pickled environments and what they do next. Each test
loads one kind of file with today's code and compares. Ragged values read back from a pickle are
checked by what they do (``size0`` / ``size1`` / ``size2`` / ``as_array``), not by their class.
"""
import builtins
import contextlib
import dataclasses
import hashlib
import glob
import io
import json
import logging
import os
import shutil
from pathlib import Path

import dill
import numpy as np
import pytest
import torch
import yaml
from torch import nn

from entmachin.buffer import Buffer, PrioritizedBuffer, Transition
from entmachin.env import EnvList, ParallelEnvList, random_actions, to_state
from entmachin.env.examples import MineSweeper
from entmachin.frame.checkpoint import latest_version, read_frame_checkpoint
from entmachin.frame.ppo import PPO
from entmachin.frame.collector import RolloutCollector
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.ragged import RaggedArray
from entmachin.run.build import make_frame
from entmachin.run.envs import EnvFactory
from entmachin.run.config import EnvSection
from entmachin.run.evaluation import evaluate_checkpoint
from entmachin.run.play import play
from entmachin.run.runner import Runner, load_run_config
from test.fixtures.make_before_ragged_arrays import (  # the summaries that wrote expected.json
    MOVE,
    all_rows,
    assert_ragged_like,
    defuse_actions,
    env_summary,
    envs_blob,
    ragged_summary,
    rows_summary,
    schema_summary,
    state_dict_checksum,
    tree_summary,
    vec_summary,
)

FIXTURES = Path(__file__).parent / "fixtures" / "before_ragged_arrays"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def slice_rows(rows, start, stop):
    """Rows ``start:stop`` of an :func:`all_rows` summary."""
    out = {"n": stop - start}
    for key, leaf in rows.items():
        if key == "n":
            continue
        if isinstance(leaf, dict):
            offsets = np.concatenate([[0], np.cumsum(leaf["lengths"])])
            out[key] = {"lengths": leaf["lengths"][start:stop], "values": leaf["values"][offsets[start]:offsets[stop]]}
        else:
            out[key] = leaf[start:stop]
    return out


def joined_rows(a, b):
    """The rows of two :func:`all_rows` summaries, ``a``'s first."""
    out = {"n": a["n"] + b["n"]}
    for key in a.keys() - {"n"}:
        if isinstance(a[key], dict):
            out[key] = {"lengths": a[key]["lengths"] + b[key]["lengths"], "values": a[key]["values"] + b[key]["values"]}
        else:
            out[key] = a[key] + b[key]
    return out


def copy_run(tmp_path):
    """A copy of the fixture's run directory under ``tmp_path`` (a resumed run writes into it)."""
    target = tmp_path / "run"
    shutil.copytree(FIXTURES / "run", target)
    return str(target)




@pytest.fixture
def torch_rng():
    """Loading a frame sets torch's global generator: restored afterwards, for the other tests."""
    with torch.random.fork_rng(devices=[]):
        yield


# ------------------------------------------------------------------------------- the fixtures


def test_fixtures_were_written_by_the_ragged_buffer_code_and_pickle_ragged_values_by_rebuild_ragged():
    assert EXPECTED["written_by"]["commit"].startswith("92126af")
    assert EXPECTED["written_by"]["ragged-buffer"] == "0.4.8"
    for blob in (envs_blob(str(FIXTURES / "run"))[1], (FIXTURES / "parallel_run_envs.dill").read_bytes()):
        # Ragged values are pickled as calls of entmachin.ragged.arrays._rebuild_ragged(flat, lengths);
        # nothing names the ragged_buffer package, so loading never needs it.
        assert b"entmachin.ragged.arrays" in blob and b"_rebuild_ragged" in blob
        assert b"ragged_buffer" not in blob and b"RaggedBuffer" not in blob


# ------------------------------------------------------------------------------- buffers


def test_old_buffer_file_loads_every_row_with_its_ragged_lengths_and_features():
    expected = EXPECTED["buffer"]
    buffer = Buffer.load(str(FIXTURES / "buffer.entbuf"), allow_pickle=True)
    assert type(buffer) is Buffer
    assert (buffer.size(), buffer.buffer_size) == (expected["size"], expected["buffer_size"])
    assert (buffer._storage.pos, buffer._storage.n_written) == (expected["pos"], expected["n_written"])
    assert schema_summary(buffer) == expected["schema"]
    assert all_rows(buffer) == expected["rows"]
    # What the file holds (expected.json has every value): rows of 1 to 3 mines, an episode won.
    assert expected["rows"]["state.entities.Mine"]["lengths"] == [2, 3, 1, 2, 1, 3]
    assert expected["rows"]["reward"][4] == [1.0] and expected["rows"]["info"][0] == {"step": 1, "tag": "s1"}


def test_old_buffer_file_keeps_its_random_state():
    buffer = Buffer.load(str(FIXTURES / "buffer.entbuf"), allow_pickle=True)
    n, values = buffer.sample_batch(3)
    assert {"n": n, **rows_summary(buffer, values)} == EXPECTED["buffer"]["next_sample"]


def test_old_buffer_file_with_custom_attributes_still_needs_allow_pickle():
    with pytest.raises(ValueError, match=r"custom attribute\(s\) \['info'\] with dill"):
        Buffer.load(str(FIXTURES / "buffer.entbuf"))


def test_old_buffer_file_takes_new_rows_after_its_old_ones():
    buffer = Buffer.load(str(FIXTURES / "buffer.entbuf"), allow_pickle=True)
    envs = EnvList(lambda: MineSweeper(**EXPECTED["buffer_env"]), 2, seed=99)
    space = envs.action_space()
    obs = envs.reset()
    actions = random_actions(obs, space, np.random.default_rng(99))
    after = envs.act(actions)
    step = Transition(state=to_state(obs, space), action={"action": actions}, next_state=to_state(after, space),
                      reward=np.asarray(after.reward, np.float32), terminal=np.asarray(after.done, np.bool_),
                      info={"step": 99, "tag": "new"})
    alone = Buffer(2)
    alone.append(step)
    buffer.append(step)  # the ring is full: the two oldest rows go
    old = EXPECTED["buffer"]["rows"]
    assert all_rows(buffer) == joined_rows(slice_rows(old, 2, 6), all_rows(alone))


def test_old_prioritized_buffer_file_loads_rows_priorities_and_settings():
    expected = EXPECTED["prioritized"]
    buffer = PrioritizedBuffer.load(str(FIXTURES / "prioritized.entbuf"))  # raw arrays only: no allow_pickle
    assert type(buffer) is PrioritizedBuffer
    assert (buffer.size(), buffer.buffer_size) == (expected["size"], expected["buffer_size"])
    assert schema_summary(buffer) == expected["schema"]
    assert all_rows(buffer) == expected["rows"]
    assert buffer._tree.leaves[: buffer.size()].tolist() == expected["priorities"]
    assert {k: getattr(buffer, k) for k in expected["settings"]} == expected["settings"]


def test_old_prioritized_buffer_file_draws_the_same_next_sample():
    buffer = PrioritizedBuffer.load(str(FIXTURES / "prioritized.entbuf"))
    n, values, index, weight = buffer.sample_batch(4, sample_attrs=["reward"])
    expected = EXPECTED["prioritized"]["next_sample"]
    assert (n, values[0].tolist(), index.tolist()) == (expected["n"], expected["reward"], expected["index"])
    np.testing.assert_allclose(weight, expected["is_weight"], rtol=1e-6)


# ------------------------------------------------------------------------------- a frame checkpoint


def old_ppo():
    """A PPO built as the fixture's was (its weights then come from the file)."""
    expected = EXPECTED["ppo"]
    envs = EnvList(MineSweeper, 2, seed=0)
    torch.manual_seed(1)  # other initial weights than the saved ones
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(**expected["net"]))
    return PPO(net, net.critic(), getattr(torch.optim, expected["optimizer"]), nn.MSELoss(), **expected["settings"])


def test_old_ppo_checkpoint_loads_parameters_counters_and_generators(torch_rng):
    expected = EXPECTED["ppo"]
    ppo = old_ppo()
    assert state_dict_checksum(ppo.actor)["sha256"] != expected["actor"]["sha256"]
    ppo.load(str(FIXTURES / "ppo"))
    assert state_dict_checksum(ppo.actor) == expected["actor"]
    assert state_dict_checksum(ppo.critic) == expected["critic"]
    assert ppo.n_updates == expected["n_updates"] == 1
    assert [{"lr": g["lr"], "n_params": len(g["params"])} for g in ppo.actor_optim.param_groups] == \
        expected["param_groups"]
    assert hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest() == expected["torch_rng_sha256"]
    assert ppo.training_counters()["shuffle_rng"] == expected["shuffle_rng"]


def test_old_ppo_checkpoint_acts_as_the_old_code_did(torch_rng):
    probe = EXPECTED["ppo"]["probe"]
    ppo = old_ppo()
    ppo.load(str(FIXTURES / "ppo"))
    envs = EnvList(MineSweeper, probe["n_envs"], seed=probe["env_seed"])
    state = to_state(envs.reset(), envs.action_space())
    result = ppo.act(state, deterministic=True, collect_stats=False)
    with torch.no_grad():
        value = ppo.criticize(state)
    assert {k: ragged_summary(v) for k, v in result.action.items()} == probe["actions"]
    np.testing.assert_allclose(result.log_prob_sum.numpy(), probe["log_prob_sum"], rtol=1e-5)
    np.testing.assert_allclose(value.numpy(), probe["value"], rtol=1e-5, atol=1e-6)


def test_old_ppo_checkpoint_trains_on(torch_rng):
    ppo = old_ppo()
    ppo.load(str(FIXTURES / "ppo"))
    before = [p.detach().clone() for p in ppo.actor.parameters()]
    stats = RolloutCollector(ppo, EnvList(MineSweeper, 2, seed=3), n_steps=2).collect()  # entropy_weight moves it
    ppo.update()
    assert stats.n_env_steps == 4 and ppo.n_updates == 2
    after = list(ppo.actor.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(before, after))


# ------------------------------------------------------------------------------- a run directory


def test_old_run_checkpoint_unpickles_environments_and_collector_state_with_their_ragged_values():
    expected = EXPECTED["run"]["snapshot"]
    snapshot = dill.loads(envs_blob(str(FIXTURES / "run"))[1])
    envs, last_obs, last_vec, _ = dill.loads(snapshot["envs"])
    for ragged in [*last_vec.features.values(), last_vec.action_masks[MOVE].actors, last_vec.action_masks[MOVE].mask]:
        assert_ragged_like(ragged)
        assert isinstance(ragged, RaggedArray)  # _rebuild_ragged builds entmachin's own arrays now
    assert vec_summary(last_vec) == expected["last_vec"]
    assert [env_summary(e) for e in envs] == expected["envs"]
    assert [float(o.reward) for o in last_obs] == expected["last_obs_rewards"]
    collector = snapshot["collector"]
    assert tree_summary(collector["state"]) == expected["collector_state"]
    assert (collector["returns"].tolist(), collector["lengths"].tolist(), collector["total_env_steps"]) == \
        (expected["returns"], expected["lengths"], expected["total_env_steps"])


def test_old_run_resume_restores_models_environments_and_episodes_in_progress(tmp_path, caplog, torch_rng):
    expected = EXPECTED["run"]
    run_dir = copy_run(tmp_path)
    runner = Runner(load_run_config(run_dir), run_dir, resume=True, progress=False, trust_checkpoint=True)
    with caplog.at_level(logging.WARNING):
        runner._build()  # train()'s set-up: builds the run and restores its latest checkpoint
    try:
        # Written before environment state was signed: restored only because the user says to trust it.
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "--trust-checkpoint: unpickling" in warnings[0] and "not signed" in warnings[0]
        assert runner.state.env_steps == runner.collector.total_env_steps == expected["version"] == 8
        # the state as written; fields added since (log.best's record) read as their defaults
        assert vars(runner.state) | {"format": 1} == {**expected["runner_state"], "best": None}
        assert state_dict_checksum(runner.frame.actor) == expected["actor"]
        assert state_dict_checksum(runner.frame.critic) == expected["critic"]
        assert tree_summary(runner.collector._state) == expected["snapshot"]["collector_state"]
        assert [env_summary(e) for e in runner.envs.envs] == expected["snapshot"]["envs"]
        assert vec_summary(runner.envs._last_vec) == expected["snapshot"]["last_vec"]
        assert vec_summary(runner.envs.act(defuse_actions(runner.envs._last_vec))) == expected["after_defuse"]
    finally:
        runner.envs.close()


def test_old_run_resumes_as_a_foreign_one_without_unpickling_its_environments(tmp_path, caplog, torch_rng,
                                                                              monkeypatch):
    import dill

    expected = EXPECTED["run"]
    run_dir = copy_run(tmp_path)
    before = {p: open(p, "rb").read() for p in glob.glob(os.path.join(run_dir, "**"), recursive=True)
              if os.path.isfile(p)}
    monkeypatch.setattr(dill, "loads", lambda *a, **k: pytest.fail("resume unpickled an unsigned blob"))
    runner = Runner(load_run_config(run_dir), run_dir, resume=True, progress=False)
    with caplog.at_level(logging.WARNING):
        runner._build()
    try:
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "envs_8." in warnings[0] and "not signed" in warnings[0]
        assert "--trust-checkpoint" in warnings[0]
        assert runner.state.env_steps == runner.collector.total_env_steps == expected["version"] == 8
        assert state_dict_checksum(runner.frame.actor) == expected["actor"]  # the networks are data: restored
        assert runner.collector._state is None  # the episodes start afresh
    finally:
        runner.envs.close()
    assert {p: open(p, "rb").read() for p in before} == before


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory):
    """The fixture's run resumed with today's code for one more rollout: (runner, result, run_dir)."""
    run_dir = copy_run(tmp_path_factory.mktemp("resumed"))
    config = load_run_config(run_dir)
    total = EXPECTED["run"]["resumed_total_steps"]
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, total_steps=total))
    with torch.random.fork_rng(devices=[]):
        runner = Runner(config, run_dir, resume=True, progress=False, trust_checkpoint=True)
        result = runner.train()
    return runner, result, run_dir


def test_old_run_resumed_continues_its_episodes_and_counters(resumed_run):
    runner, result, run_dir = resumed_run
    snapshot = EXPECTED["run"]["snapshot"]
    assert (result.env_steps, result.stopped) == (16, None) and result.final_eval["episodes"] == 2
    assert (runner.state.env_steps, runner.state.iterations) == (16, 2)
    for env, before in zip(runner.envs.envs, snapshot["envs"]):
        now = env_summary(env)
        assert now["time_limit_t"] == [before["time_limit_t"][0] + 4]  # 4 more steps of the same episode
        assert all(mine in before["mines"] for mine in now["mines"])  # mines never move; a new episode places new ones
    checkpoints = os.path.join(run_dir, "checkpoints")
    assert latest_version(checkpoints) == 16
    frame, _ = make_frame(runner.config, runner.envs.obs_space(), runner.envs.action_space())
    with torch.random.fork_rng(devices=[]):
        read_frame_checkpoint(frame, checkpoints).apply()
    assert state_dict_checksum(frame.actor) == state_dict_checksum(runner.frame.actor)


def test_old_run_reads_back_sequential_and_eager_as_it_ran_and_its_resumed_config_says_so(resumed_run):
    """The run predates rollout.overlap and model.compile: resumed on a machine where `auto` would
    overlap or compile, it must not (its sampled actions would not repeat)."""
    runner, _, run_dir = resumed_run
    assert (runner.config.rollout.overlap, runner.config.model.compile) == (False, False)
    with open(os.path.join(run_dir, "config.yaml")) as f:
        text = f.read()
    header, body = text.split("\nenv:")[0], yaml.safe_load(text)
    assert (body["rollout"]["overlap"], body["model"]["compile"]) == (False, False)  # now written out
    assert "# model.compile: the network runs eagerly." in header
    assert "# rollout.overlap:" in header


def test_old_run_resumed_continues_as_the_old_code_did(resumed_run):
    """Same environments, counters and sampled actions as 92126af resuming the same run (both on CPU)."""
    runner, result, run_dir = resumed_run
    continued = EXPECTED["run"]["continued"]
    assert {k: getattr(runner.state, k) for k in continued["state"]} == continued["state"]
    assert [env_summary(e) for e in runner.envs.envs] == continued["envs"]
    assert sorted(n for n in os.listdir(os.path.join(run_dir, "checkpoints")) if n.endswith(".json")) == \
        continued["checkpoints"]


def test_old_run_evaluates_as_the_old_code_did(tmp_path, torch_rng):
    expected = EXPECTED["run"]["eval"]
    result = evaluate_checkpoint(copy_run(tmp_path), expected["episodes"], expected["deterministic"], None)
    assert (list(result.returns), list(result.lengths)) == (expected["returns"], expected["lengths"])


def test_old_run_plays_with_its_agent_as_the_old_code_did(tmp_path, monkeypatch, torch_rng):
    expected = EXPECTED["run"]["play"]
    run_dir = copy_run(tmp_path)
    answers = iter(["a"] * expected["answers"])
    out = io.StringIO()

    def fake_input(prompt=""):
        out.write(prompt)
        try:
            answer = next(answers)
        except StopIteration:
            raise EOFError from None
        out.write(answer + "\n")
        return answer

    monkeypatch.setattr(builtins, "input", fake_input)
    with contextlib.redirect_stdout(out):
        assert play(None, run_dir, expected["seed"]) == 0
    assert out.getvalue().replace(run_dir, "RUN_DIR") == expected["transcript"]


# ------------------------------------------------------------------------------- a parallel run's environments


def test_old_parallel_run_state_unpickles_every_workers_environments():
    expected = EXPECTED["parallel_run"]
    snapshot = dill.loads((FIXTURES / "parallel_run_envs.dill").read_bytes())
    assert tree_summary(snapshot["collector"]["state"]) == expected["collector_state"]
    parallel = dill.loads(snapshot["envs"])
    assert [list(s) for s in parallel["split"]] == expected["split"]
    assert vec_summary(parallel["last_vec"]) == expected["last_vec"]
    workers = []
    for worker in parallel["workers"]:
        envs, _, last_vec, _ = dill.loads(worker)
        workers.append({"envs": [env_summary(e) for e in envs], "last_vec": vec_summary(last_vec)})
    assert workers == expected["workers"]


def test_old_parallel_run_state_restores_into_worker_processes():
    expected = EXPECTED["parallel_run"]
    snapshot = dill.loads((FIXTURES / "parallel_run_envs.dill").read_bytes())
    factory = EnvFactory(EnvSection(name="MineSweeper", max_episode_steps=12))
    envs = ParallelEnvList(factory, 2, 2, seed=0, start_method="fork")  # fast; the state is the same
    try:
        envs.set_state(snapshot["envs"])
        last_vec = dill.loads(snapshot["envs"])["last_vec"]
        assert vec_summary(envs.act(defuse_actions(last_vec))) == expected["after_defuse"]
    finally:
        envs.close()
