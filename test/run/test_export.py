"""``entmachin export`` and ``entmachin.deploy``: parity with PyTorch, the command, bad input, no torch."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import entmachin  # noqa: E402
from entmachin.deploy import OnnxPolicy, PolicyFileError  # noqa: E402
from entmachin.env import (  # noqa: E402
    CategoricalAction, CategoricalActionMask, ContinuousAction, EnvList, GlobalContinuousAction, Observation,
    SelectEntityAction, VecCategoricalActionMask, batch_obs, to_state,
)
from entmachin.ragged.arrays import ragged_from_arrays  # noqa: E402
from entmachin.env.examples import MineSweeper  # noqa: E402
from entmachin.env.spaces import spaces_from_record, spaces_record  # noqa: E402
from entmachin.frame.checkpoint_files import manifest_versions  # noqa: E402
from entmachin.model import MLPActor, RogueNet  # noqa: E402
from entmachin.model.config import RogueNetConfig  # noqa: E402
from entmachin.model.q_mlp import MLPQNet  # noqa: E402
from entmachin.run.build import seeds  # noqa: E402
from entmachin.run.envs import EnvFactory  # noqa: E402
from entmachin.run.cli import main  # noqa: E402
from entmachin.run.config import load_config  # noqa: E402
from entmachin.run.evaluation import eval_options, evaluate_checkpoint, load_trained  # noqa: E402
from entmachin.run.export import ExportError, export_policy, inverse_cdf_sample  # noqa: E402
from entmachin.run.paths import bundled_config_path  # noqa: E402
from test.model._zoo import Fleet  # noqa: E402
from test.run.parity import MATRIX, TOLERANCE, Swing, check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The four representatives CI exports: categorical with relative positions and select-entity
# (MineSweeper), a DQN run's Q-heads, CherryPick (select-entity among featureless entities) and
# Fleet (Beta heads: continuous within narrowed bounds, global continuous, and categorical).
# And the two heads of a model.kind: mlp network (a global continuous action, as the bundled
# Pendulum-v1 config's, and a global categorical one).
CI = [("MineSweeper", "PPO", (), None), ("MineSweeper", "DQN", (), None), ("CherryPick", "PPO", (), None),
      next(m for m in MATRIX if m[0] == "test.model.test_continuous:Fleet" and "model.continuous=beta" in m[2]),
      next(m for m in MATRIX if m[0] == "test.run.parity:Swing" and "model.kind=mlp" in m[2]),
      next(m for m in MATRIX if m[0] == "MultiArmedBandit" and "model.kind=mlp" in m[2])]
TINY = ["--set", "train.total_steps=256", "--set", "log.checkpoint_interval=128", "--set", "log.eval_interval=128",
        "--set", "log.eval_episodes=4", "--set", "rollout.num_envs=8", "--set", "rollout.n_steps=16",
        "--set", "frame.batch_size=64", "--no-progress"]


def _assert_parity(result):
    assert result.observations >= 1000
    assert result.max_abs_diff <= TOLERANCE and result.continuous_diff <= TOLERANCE, result.row()
    assert result.mismatches == 0 and result.out_of_bounds == 0, result.row()
    # Ties (two choices within the tolerance: CherryPick's featureless entities tie exactly) are reported.
    assert result.argmax_equal + result.argmax_ties == result.actors, result.row()
    assert result.actors + result.values > 0, result.row()


@pytest.mark.parametrize("env,frame,overrides,label", CI, ids=[f"{e}-{f}" for e, f, _, _ in CI])
def test_parity_with_pytorch(env, frame, overrides, label, tmp_path):
    _assert_parity(check(env, frame, overrides, label, directory=str(tmp_path)))


@pytest.mark.slow
@pytest.mark.parametrize("env,frame,overrides,label", [m for m in MATRIX if m not in CI],
                         ids=[m[3] or m[0] for m in MATRIX if m not in CI])
def test_parity_with_pytorch_every_example(env, frame, overrides, label, tmp_path):
    _assert_parity(check(env, frame, overrides, label, directory=str(tmp_path)))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_network_on_a_gpu_exports_what_it_computes_there(tmp_path):
    _assert_parity(check("MineSweeper", "PPO", directory=str(tmp_path), device="cuda"))
    _assert_parity(check("MineSweeper", "DQN", directory=str(tmp_path), device="cuda"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A short MineSweeper run with checkpoints at 128 and 256 environment steps."""
    directory = str(tmp_path_factory.mktemp("runs") / "minesweeper")
    assert main(["train", "MineSweeper", "--run-dir", directory, *TINY]) == 0
    assert manifest_versions(os.path.join(directory, "checkpoints")) == [128, 256]
    return directory


def test_the_command_writes_the_latest_checkpoint_with_its_spaces(run_dir, tmp_path, capsys):
    out = str(tmp_path / "policy.onnx")
    assert main(["export", run_dir, "-o", out]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    policy = OnnxPolicy(out)
    env = MineSweeper()
    assert policy.kind == "rogue-net policy"
    assert policy.metadata["version"] == entmachin.__version__
    assert policy.metadata["env_steps"] == 256 and policy.metadata["env"] == "MineSweeper"
    assert spaces_record(policy.obs_space, policy.action_space) == spaces_record(env.obs_space(), env.action_space())
    assert not [f for f in os.listdir(tmp_path) if f != "policy.onnx"]  # no temporary file left


def test_the_command_exports_an_earlier_checkpoint_next_to_the_run(run_dir):
    target = os.path.join(run_dir, "policy.onnx")
    assert main(["export", run_dir, "--checkpoint", "128"]) == 0
    assert OnnxPolicy(target).metadata["env_steps"] == 128
    os.remove(target)


def test_what_cannot_be_exported_is_one_line_with_status_2(run_dir, tmp_path, capsys):
    empty = str(tmp_path / "no-checkpoints")
    shutil.copytree(run_dir, empty, ignore=shutil.ignore_patterns("checkpoints"))
    assert main(["export", empty]) == 2
    assert "holds no checkpoint" in capsys.readouterr().err
    assert main(["export", run_dir, "--checkpoint", "999"]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint of version 999" in err and len(err.strip().splitlines()) == 1
    assert main(["export", str(tmp_path / "nothing-here")]) == 2
    with pytest.raises(ExportError, match="cannot express a Linear"):
        export_policy(torch.nn.Linear(2, 2), str(tmp_path / "linear.onnx"))


def test_a_model_kind_mlp_run_exports_and_acts_within_its_bounds(tmp_path, capsys):
    run = str(tmp_path / "swing")
    assert main(["train", "test.run.parity:Swing", "--run-dir", run, "--set", "model.kind=mlp", "--set",
                 "model.continuous=beta", "--set", "rollout.num_envs=4", "--set", "rollout.n_steps=16", "--set",
                 "train.total_steps=64", "--set", "log.checkpoint_interval=64", "--set", "log.eval_interval=64",
                 "--set", "log.eval_episodes=2", "--set", "frame.batch_size=32", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["export", run]) == 0, capsys.readouterr().err
    policy = OnnxPolicy(os.path.join(run, "policy.onnx"))
    assert policy.kind == "dense-net policy" and policy.continuous == {"torque": "beta"}
    env = Swing()
    env.seed(0)
    assert -2.0 <= policy.act(env.reset(), deterministic=False)["torque"]["torque"] <= 2.0


def test_act_gives_the_actions_the_environment_takes(run_dir, tmp_path):
    frame, _, _ = load_trained(run_dir)
    path = str(tmp_path / "policy.onnx")
    export_policy(frame, path)
    policy = OnnxPolicy(path)
    env = MineSweeper()
    env.seed(3)
    obs, compared = env.reset(), 0
    for _ in range(30):
        actions = policy.act(obs)  # the most likely choices, as the frame's deterministic act
        vec = batch_obs([obs], env.obs_space(), env.action_space())
        (ours,) = [frame.act(to_state(vec, env.action_space()), deterministic=True, collect_stats=False)]
        for name, action in actions.items():
            chosen = ours.action[name].data.numpy()[:, 0]
            if isinstance(action, CategoricalAction):
                assert np.array_equal(action.indices, chosen)
            else:  # select-entity: positions in the actee list, handed to the environment as ids
                assert isinstance(action, SelectEntityAction)
                assert list(action.actees) == [obs.actions[name].actee_ids[c] for c in chosen]
            compared += len(chosen)
        obs = env.act(actions)
        if obs.done:
            obs = env.reset()
    assert compared > 30
    sampled = policy.act(obs, deterministic=False, rng=np.random.default_rng(0))
    again = policy.act(obs, deterministic=False, rng=np.random.default_rng(0))
    assert {k: str(v) for k, v in sampled.items()} == {k: str(v) for k, v in again.items()}


def _continuous_policy(env, kind, path):
    """A small RogueNet for ``env`` with ``kind`` heads (random weights, statistics of a few
    observations), and its export."""
    torch.manual_seed(0)
    net = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=16, n_layer=1, continuous=kind))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape) * 0.3)
    envs = EnvList(type(env), 8, seed=1)
    with torch.no_grad(), net.collecting_stats():
        state = to_state(envs.reset(), envs.action_space())
        net(state["entities"], state["action_masks"])
    envs.close()
    net.eval()
    export_policy(net, path)
    return net, OnnxPolicy(path)


@pytest.mark.parametrize("env_class,kind", [(Fleet, "beta"), (Fleet, "squashed_gaussian"), (Swing, "beta")],
                         ids=["Fleet-beta", "Fleet-squashed_gaussian", "Swing-beta"])
def test_act_on_continuous_actions_stays_within_each_actors_bounds(env_class, kind, tmp_path):
    """Fleet narrows each boat's bounds and has a global continuous and a categorical action; Swing's
    network has no entity types (its one token is __global__). Deterministic values are the
    network's ``deterministic=True`` ones; sampled ones are float32 within the narrowed bounds."""
    env = env_class()
    space = env.action_space()
    net, policy = _continuous_policy(env, kind, str(tmp_path / "policy.onnx"))
    assert policy.continuous == {name: kind for name in space if name != "flag"}
    env.seed(0)
    obs, rng, values, moved = env.reset(), np.random.default_rng(0), 0, 0
    for _ in range(12):
        vec = batch_obs([obs], env.obs_space(), space)
        state = to_state(vec, space)
        with torch.no_grad():
            ours = net(state["entities"], state["action_masks"], deterministic=True).action
        chosen = policy.act(obs)
        sampled = policy.act(obs, deterministic=False, rng=rng)
        for name, action in chosen.items():
            theirs = ours[name].data.numpy()
            if isinstance(action, CategoricalAction):
                assert np.array_equal(action.indices, theirs[:, 0])
                continue
            low, high = vec.action_masks[name].bounds(space[name])  # [n_actors, n_values] each
            if isinstance(action, GlobalContinuousAction):
                assert action.values.shape == (len(space[name]),)
                det, drawn = action.values[None, :], sampled[name].values[None, :]
            else:
                assert isinstance(action, ContinuousAction) and list(action.actors) == list(obs.ids["Boat"])
                det, drawn = action.values, sampled[name].values
            assert det.dtype == drawn.dtype == np.float32 and det.shape == drawn.shape == theirs.shape
            assert np.abs(det - theirs).max() <= TOLERANCE
            assert ((low <= drawn) & (drawn <= high) & (low <= det) & (det <= high)).all()
            values += drawn.size
            moved += int((drawn != det).sum())
        obs = env.act(sampled)
        obs = env.reset() if obs.done else obs
    assert values >= 12 and moved > values // 2


def _std_error(x):
    """Standard error of each column's standard deviation, from its fourth moment (a value squashed
    against a bound has heavy tails, where the normal rule understates it)."""
    x = x.astype(np.float64)
    var, m4 = x.var(0), ((x - x.mean(0)) ** 4).mean(0)
    return np.sqrt(np.maximum(m4 - var * var, 0.0) / len(x)) / (2 * np.sqrt(var) + 1e-12)


@pytest.mark.parametrize("kind", ["beta", "squashed_gaussian"])
def test_sampled_continuous_values_follow_the_networks_distribution(kind, tmp_path):
    """numpy's draws from the graph's parameters against torch's from the network, on 2,000 copies
    of one observation: the same mean and spread of every value, within 5 standard errors."""
    env = Fleet()
    net, policy = _continuous_policy(env, kind, str(tmp_path / "policy.onnx"))
    env.seed(0)
    vec = batch_obs([env.reset()] * 2000, env.obs_space(), env.action_space())
    state = to_state(vec, env.action_space())
    torch.manual_seed(1)
    with torch.no_grad():
        theirs = net(state["entities"], state["action_masks"]).action
    ours = policy.act_batch(vec, deterministic=False, rng=np.random.default_rng(1))
    for name in ("steer", "wind"):
        a, b = ours[name].as_array(), theirs[name].data.numpy()
        assert a.dtype == np.float32 and a.shape == b.shape
        mean_error = np.sqrt((a.var(0) + b.var(0)) / len(a))  # of the difference of the means
        std_error = np.sqrt(_std_error(a) ** 2 + _std_error(b) ** 2)
        assert (np.abs(a.mean(0) - b.mean(0)) <= 5 * mean_error).all(), (name, a.mean(0), b.mean(0))
        assert (np.abs(a.std(0) - b.std(0)) <= 5 * std_error).all(), (name, a.std(0), b.std(0))


def test_bad_continuous_masks_and_files_are_named(tmp_path):
    import onnx

    env = Fleet()
    path = str(tmp_path / "policy.onnx")
    _, policy = _continuous_policy(env, "beta", path)
    envs = EnvList(Fleet, 2, seed=0)
    vec = envs.reset()
    envs.close()
    steer = vec.action_masks["steer"]
    policy.act_batch(vec)
    vec.action_masks["steer"] = VecCategoricalActionMask(steer.actors)
    with pytest.raises(ValueError, match="action 'steer' has a VecCategoricalActionMask.*VecContinuousActionMask"):
        policy.act_batch(vec)
    wide = ragged_from_arrays(np.zeros((steer.actors.items(), 3), np.float32), steer.actors.size1(), np.float32)
    vec.action_masks["steer"] = type(steer)(steer.actors, wide, wide)
    with pytest.raises(ValueError, match="low bounds of action 'steer' have 3 values"):
        policy.act_batch(vec)
    high = steer.high.as_array().copy()
    high[0, 1] = 5.0  # the space's speed stops at 2
    vec.action_masks["steer"] = type(steer)(steer.actors, steer.low, ragged_from_arrays(high, steer.actors.size1(),
                                                                                       np.float32))
    with pytest.raises(ValueError, match=r"action 'steer', actor 0, value 'speed'.*\[0\.0, 2\.0\]"):
        policy.act_batch(vec)
    env.seed(0)
    obs = env.reset()
    obs.actions["wind"] = CategoricalActionMask()
    with pytest.raises(TypeError, match=r"actions\['wind'\] is a CategoricalActionMask.*GlobalContinuousActionMask"):
        policy.act(obs)
    model = onnx.load(path)
    kept = [p for p in model.metadata_props if p.key not in ("entmachin.continuous", "entmachin.checksum")]  # older
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    onnx.save(model, str(tmp_path / "old.onnx"))
    with pytest.raises(PolicyFileError, match="continuous action 'steer' has distribution None"):
        OnnxPolicy(str(tmp_path / "old.onnx"))


NO_TORCH = textwrap.dedent("""
    import json, sys
    sys.modules["torch"] = None  # importing torch now raises ImportError
    from entmachin.deploy import OnnxPolicy
    from entmachin.env import TimeLimit
    from entmachin.env.examples import ENV_REGISTRY
    args = json.loads(sys.argv[1])
    def make_env():
        env = ENV_REGISTRY[args["env"]](**args["kwargs"])
        return TimeLimit(env, args["limit"]) if args["limit"] else env
    result = OnnxPolicy(args["path"]).evaluate(make_env, args["episodes"], True, args["seed"],
                                                num_envs=args["num_envs"], max_steps=args["max_steps"])
    assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
    print(json.dumps(list(result.returns)))
""")


def test_an_exported_policy_evaluates_as_entmachin_eval_without_torch(tmp_path):
    """CherryPick (select-entity among featureless cherries): 100 episodes, returns that differ
    from one episode to the next, the same seeds and deterministic actions as ``entmachin eval``."""
    run = str(tmp_path / "cherrypick")
    assert main(["train", "CherryPick", "--run-dir", run, *TINY]) == 0
    path = str(tmp_path / "policy.onnx")
    assert main(["export", run, "-o", path]) == 0
    expected = evaluate_checkpoint(run, 100, True, None)
    _, config, _ = load_trained(run)
    options = eval_options(config, 100)
    args = {"env": config.env.name, "kwargs": dict(config.env.kwargs), "limit": config.env.max_episode_steps,
            "path": path, "episodes": 100, "seed": seeds(config)["eval"], "num_envs": options["num_envs"],
            "max_steps": options["max_steps"]}
    done = subprocess.run([sys.executable, "-c", NO_TORCH, json.dumps(args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    returns = json.loads(done.stdout)
    assert len(returns) == 100 and len(set(returns)) > 10
    flipped = [k for k, (a, b) in enumerate(zip(returns, expected.returns)) if a != b]
    assert len(flipped) <= 2, f"episodes {flipped} differ (a near-tie of two actions flips one)"
    assert abs(np.mean(returns) - expected.mean) <= 0.05 * max(1.0, abs(expected.mean))


def test_importing_deploy_never_imports_torch():
    code = "import sys, entmachin.deploy, entmachin.env.examples; assert 'torch' not in sys.modules, 'torch'"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


@pytest.fixture(scope="module")
def minesweeper_policy(tmp_path_factory):
    from entmachin.model import RogueNet

    env = MineSweeper()
    net = RogueNet(env.obs_space(), env.action_space())
    path = str(tmp_path_factory.mktemp("export") / "policy.onnx")
    export_policy(net, path)
    return OnnxPolicy(path)


def test_bad_observations_are_named(minesweeper_policy):
    env = MineSweeper()
    env.seed(0)
    obs = env.reset()
    unknown = Observation(features={**obs.features, "Dragon": np.zeros((1, 2), np.float32)}, ids=obs.ids,
                          actions=obs.actions, done=False, reward=0.0)
    with pytest.raises(ValueError, match="Dragon"):
        minesweeper_policy.act(unknown)
    wide = Observation(features={**obs.features, "Mine": np.zeros((len(obs.features["Mine"]), 5), np.float32)},
                       ids=obs.ids, actions=obs.actions, done=False, reward=0.0)
    with pytest.raises(ValueError, match="Mine"):
        minesweeper_policy.act(wide)
    moves = obs.actions["Move"]
    narrow = Observation(features=obs.features, ids=obs.ids, done=False, reward=0.0, actions={
        **obs.actions, "Move": CategoricalActionMask(actor_ids=moves.actor_ids, actor_types=moves.actor_types,
                                                     mask=np.ones((len(obs.features["Robot"]), 3), np.bool_))})
    with pytest.raises(ValueError, match="Move"):
        minesweeper_policy.act(narrow)


def test_bad_batches_are_named(minesweeper_policy):
    from entmachin.env.examples import CherryPick

    envs = EnvList(CherryPick, 2, seed=0)
    with pytest.raises(ValueError, match="unknown entity type 'Cherry'"):
        minesweeper_policy.act_batch(envs.reset())
    envs.close()
    envs = EnvList(MineSweeper, 2, seed=0)
    vec = envs.reset()
    envs.close()
    good = minesweeper_policy.act_batch(vec)
    assert set(good) == {"Move", "Fire Orbital Cannon"}
    vec.action_masks["Move"].mask = ragged_from_arrays(np.ones((vec.action_masks["Move"].actors.items(), 2), bool),
                                                       vec.action_masks["Move"].actors.size1(), np.bool_)
    with pytest.raises(ValueError, match="action 'Move' has 2 choices per actor"):
        minesweeper_policy.act_batch(vec)
    del vec.action_masks["Move"]
    with pytest.raises(ValueError, match="no mask for action 'Move'"):
        minesweeper_policy.act_batch(vec)
    with pytest.raises(TypeError, match="expected a VecObs"):
        minesweeper_policy.act_batch({"entities": {}})


def test_a_file_that_is_not_an_entmachin_export_is_named(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    text = tmp_path / "notes.onnx"
    text.write_text("not a model")
    with pytest.raises(PolicyFileError, match="notes.onnx"):
        OnnxPolicy(str(text))
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    other = str(tmp_path / "other.onnx")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, other)
    with pytest.raises(PolicyFileError, match="other.onnx.*not an entmachin export"):
        OnnxPolicy(other)


@pytest.mark.parametrize("dueling", [False, True])
def test_dense_models_export_with_parity(tmp_path, dueling):
    torch.manual_seed(0)
    actor = MLPActor(4, 5, normalize_inputs=True)
    qnet = MLPQNet(4, 5, normalize_inputs=True, dueling=dueling)
    state = torch.randn(300, 4) * 3 + 1
    mask = torch.rand(300, 5) < 0.6
    mask[torch.arange(300), torch.randint(0, 5, (300,))] = True
    noise = torch.rand(300)
    for model in (actor, qnet):
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape) * 0.5)
        with model.collecting_stats(), torch.no_grad():
            model(state)
        path = str(tmp_path / f"{type(model).__name__}.onnx")
        export_policy(model, path)
        policy = OnnxPolicy(path)
        out = dict(zip(policy._outputs, policy.session.run(None, {"state": state.numpy(), "mask": mask.numpy(),
                                                                    "noise": noise.numpy()})))
        with torch.no_grad():
            if model is actor:
                logits = actor.logits(actor.features(state))
                probs = logits.masked_fill(~mask, float("-inf")).log_softmax(-1).exp()
                assert np.abs(out["probs"] - probs.numpy()).max() <= TOLERANCE
                assert np.array_equal(out["sample"], inverse_cdf_sample(probs, mask, noise).numpy())
            else:
                q = qnet(state, mask)
                finite = torch.isfinite(q).numpy()
                assert np.array_equal(finite, np.isfinite(out["q"]))
                scale = max(1.0, float(q[q.isfinite()].abs().max()))
                assert np.abs(out["q"][finite] - q.numpy()[finite]).max() <= TOLERANCE * scale
                probs = q
            assert np.array_equal(out["argmax"], probs.argmax(1).numpy())
        assert np.array_equal(policy.act_dense(state.numpy(), mask.numpy()), out["argmax"])
    with pytest.raises(TypeError, match="act_dense"):
        policy.act(MineSweeper().reset())
    with pytest.raises(ValueError, match=r"expected \[B, 4\]"):
        policy.act_dense(np.zeros((2, 3), np.float32))


def test_spaces_round_trip_through_their_record():
    obs_space, action_space = EnvFactory(load_config(bundled_config_path("Skirmish")).env).spaces()
    again = spaces_from_record(json.loads(json.dumps(spaces_record(obs_space, action_space))))
    assert spaces_record(*again) == spaces_record(obs_space, action_space)
    with pytest.raises(ValueError, match="here: action 'x' is of unknown kind"):
        spaces_from_record({"entities": {}, "global_features": [], "actions": {"x": {"kind": "teleport"}}}, "here")


def test_a_two_player_run_exports_and_plays_every_seat(tmp_path):
    from entmachin.env.examples import RockPaperScissorsDuel

    run = str(tmp_path / "duel")
    assert main(["train", "RockPaperScissorsDuel", "--run-dir", run, *TINY]) == 0  # self-play with a pool
    path = str(tmp_path / "duel.onnx")
    assert main(["export", run, "-o", path]) == 0
    policy = OnnxPolicy(path)
    env = RockPaperScissorsDuel()
    env.seed(0)
    by_seat, games = env.reset(), 0
    while games < 5:
        by_seat = env.act({seat: policy.act(obs, deterministic=False) for seat, obs in by_seat.items()})
        if any(obs.done for obs in by_seat.values()):
            assert {obs.result for obs in by_seat.values()} <= {"win", "draw", "loss"}
            games += 1
            by_seat = env.reset()


def test_without_onnx_the_export_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.delitem(sys.modules, "entmachin.run.onnx_graph", raising=False)
    with pytest.raises(ExportError, match=r"pip install 'entmachin\[export\]'"):
        export_policy(MLPActor(2, 2), str(tmp_path / "policy.onnx"))
