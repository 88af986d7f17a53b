"""Exporting a network with memory: the state as the graph's input and output, kept per game by OnnxPolicy,
in parity with PyTorch over whole episodes."""
import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from entmachin.deploy import OnnxPolicy  # noqa: E402
from entmachin.env import EnvList, to_state  # noqa: E402
from entmachin.env.examples import Recall  # noqa: E402
from entmachin.frame.memory import MemoryRows  # noqa: E402
from entmachin.frame.safe_call import safe_call  # noqa: E402
from entmachin.model import RogueNet  # noqa: E402
from entmachin.model.config import MemoryConfig, RogueNetConfig  # noqa: E402
from entmachin.run.export import export_policy  # noqa: E402


def _net(kind):
    torch.manual_seed(1)
    env = Recall(delay=2)
    net = RogueNet(env.obs_space(), env.action_space(),
                   RogueNetConfig(d_model=16, n_layer=1, memory=MemoryConfig(kind=kind, size=6)))
    torch.nn.init.normal_(net.memory.out.weight, std=0.5)  # zero at first: the state must reach the heads here
    return net.eval()


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_whole_episodes_give_the_states_probabilities_and_actions_of_pytorch(kind, tmp_path):
    net = _net(kind)
    path = str(tmp_path / "policy.onnx")
    export_policy(net, path)
    policy = OnnxPolicy(path)
    assert policy.memory_size == net.memory_size and policy.metadata["memory"]["kind"] == kind
    envs = EnvList(lambda: Recall(delay=2), 4, seed=0)
    space = envs.action_space()
    vec = envs.reset()
    torch_rows = MemoryRows(net.memory_size, 4)
    onnx_memory, onnx_start = np.zeros((4, net.memory_size), np.float32), np.ones(4, np.bool_)
    checked, ended = 0, 0
    for _ in range(15):  # five episodes of three steps per row, the states carried by each side
        state = to_state(vec, space)
        with torch.no_grad():
            out = safe_call(net, torch_rows.state(state), {"deterministic": True})
        graph = policy.outputs(vec, memory=onnx_memory, episode_start=onnx_start)
        np.testing.assert_allclose(graph["memory_out"], out.memory.numpy(), atol=1e-5, rtol=0)
        chosen = out.action["choose"].data[:, 0].numpy()
        if chosen.size:
            probs = graph["probs/choose"]  # [A, 4]
            np.testing.assert_allclose(probs[np.arange(chosen.size), chosen],
                                       out.log_prob["choose"].data[:, 0].exp().numpy(), atol=1e-5, rtol=0)
            top = np.sort(probs, axis=1)
            untied = top[:, -1] - top[:, -2] > 1e-5
            np.testing.assert_array_equal(graph["argmax/choose"][untied], chosen[untied])
            checked += int(untied.sum())
        batch = policy.act_batch(vec)  # its own rows' states, kept inside
        np.testing.assert_array_equal(batch["choose"].as_array().reshape(-1), chosen)
        vec = envs.act({"choose": out.action["choose"].to_ragged_array()})
        torch_rows.advance(out, vec.done)
        onnx_memory, onnx_start = graph["memory_out"], np.asarray(vec.done, np.bool_)
        ended += int(vec.done.sum())
    envs.close()
    assert checked >= 8 and ended >= 16


def test_act_keeps_a_state_per_game_and_reset_begins_an_episode(tmp_path):
    net = _net("gru")
    path = str(tmp_path / "policy.onnx")
    export_policy(net, path)
    policy = OnnxPolicy(path)
    games = {key: Recall(delay=2) for key in ("a", "b")}
    for key, env in games.items():
        env.seed(0 if key == "a" else 1)
    seen = {key: [env.reset()] for key, env in games.items()}
    for _ in range(2):  # the two games' steps interleaved: each keeps its own state
        for key, env in games.items():
            policy.act(seen[key][-1], game=key)
            seen[key].append(env.act({}))
    state_a = policy._games["a"].memory.copy()
    solo = OnnxPolicy(path)
    for obs in seen["a"][:2]:
        solo.act(obs, game="only")
    np.testing.assert_allclose(solo._games["only"].memory, state_a, atol=1e-6)
    policy.reset("a")
    assert "a" not in policy._games and "b" in policy._games
    policy.reset()
    assert not policy._games and policy._rows is None


def test_a_state_of_another_shape_is_named(tmp_path):
    path = str(tmp_path / "policy.onnx")
    export_policy(_net("lstm"), path)
    policy = OnnxPolicy(path)
    envs = EnvList(lambda: Recall(delay=2), 2, seed=0)
    vec = envs.reset()
    with pytest.raises(ValueError, match=r"memory has shape \(2, 6\); this policy's state is \[2, 12\]"):
        policy.outputs(vec, memory=np.zeros((2, 6), np.float32))
    envs.close()
