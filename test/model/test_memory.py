"""RogueNet's memory: one recurrent state per game row, the same step by step as over a whole sequence."""
import numpy as np
import pytest
import torch

from entmachin.env import EnvList, random_actions, to_state
from entmachin.env.examples import Recall
from entmachin.frame.safe_call import safe_call
from entmachin.model.config import MemoryConfig, RogueNetConfig
from entmachin.model.rogue_net import RogueNet
from entmachin.ragged import trees


def _net(kind, size=6, **config):
    torch.manual_seed(0)
    env = Recall()
    net = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=16, memory=MemoryConfig(kind=kind,
                                                                                                        size=size),
                                                                       **config))
    for p in net.memory.out.parameters():  # zero at first (a fresh network acts as the feed-forward one)
        torch.nn.init.normal_(p, std=0.5)
    return net


def _episodes(n_envs, n_steps, seed=0):
    """``n_steps`` steps of ``n_envs`` Recall rows with random choices: the states and the rows that ended."""
    envs = EnvList(Recall, n_envs, seed=seed)
    space = envs.action_space()
    rng = np.random.default_rng(seed)
    obs = envs.reset()
    states, done = [], [np.zeros(n_envs, dtype=bool)]
    for _ in range(n_steps):
        states.append(to_state(obs, space))
        obs = envs.act(random_actions(obs, space, rng))
        done.append(obs.done.copy())
    envs.close()
    return states, np.stack(done[:-1])  # episode_start of step t: the row's episode ended at step t - 1


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_a_sequence_unrolled_at_once_equals_the_steps_taken_one_by_one(kind):
    """Acting carries the state step by step (resetting where an episode begins); training unrolls the
    same steps as one time-major sequence from the first step's state: the same log-probabilities, values
    and final state."""
    net = _net(kind)
    n_envs, n_steps = 3, 12  # Recall's episodes are 5 steps: resets inside the sequence
    states, start = _episodes(n_envs, n_steps)
    memory = torch.randn(n_envs, net.memory_size)  # a state carried in from before the sequence
    outs, values, carried = [], [], memory
    with torch.no_grad():
        for t, state in enumerate(states):
            begin = torch.from_numpy(start[t])[:, None]
            given = carried.masked_fill(begin, 0.0)
            out = safe_call(net, {**state, "memory": given, "episode_start": begin})
            values.append(safe_call(net.critic(), {**state, "memory": given, "episode_start": begin}))
            outs.append(out)
            carried = out.memory
        stacked = trees.stack(states, str)  # time-major: row t * B + b
        begin = torch.from_numpy(start.reshape(-1))[:, None]
        first = torch.zeros(n_envs * n_steps, net.memory_size)
        first[:n_envs] = memory.masked_fill(begin[:n_envs], 0.0)
        action = {"choose": trees.stack([{"a": o.action["choose"]} for o in outs], str)["a"]}
        whole = safe_call(net, {**stacked, "memory": first, "episode_start": begin}, {"action": action},
                          {"sequence_length": n_steps})
        value = safe_call(net.critic(), {**stacked, "memory": first, "episode_start": begin},
                          {"sequence_length": n_steps})
    step_lp = torch.cat([o.log_prob["choose"].data for o in outs])
    assert step_lp.numel() > 0
    torch.testing.assert_close(whole.log_prob["choose"].data, step_lp, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(value, torch.cat(values), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(whole.memory, carried, atol=1e-6, rtol=1e-6)


def test_the_state_changes_what_the_policy_does():
    """The memory reaches the heads: the same observation with another state gives other probabilities."""
    net = _net("gru")
    states, _ = _episodes(2, 5)
    state = states[4]  # the choosing step
    begin = torch.zeros(2, 1, dtype=torch.bool)
    with torch.no_grad():
        one = safe_call(net, {**state, "memory": torch.zeros(2, 6), "episode_start": begin})
        again = safe_call(net, {**state, "memory": torch.zeros(2, 6), "episode_start": begin}, {"action": one.action})
        other = safe_call(net, {**state, "memory": torch.ones(2, 6), "episode_start": begin}, {"action": one.action})
    assert not torch.allclose(again.log_prob["choose"].data, other.log_prob["choose"].data)


def test_episode_start_ignores_the_state_given():
    net = _net("lstm")
    states, _ = _episodes(2, 1)
    begin = torch.ones(2, 1, dtype=torch.bool)
    with torch.no_grad():
        a = safe_call(net, {**states[0], "memory": torch.zeros(2, 12), "episode_start": begin})
        b = safe_call(net, {**states[0], "memory": torch.randn(2, 12), "episode_start": begin},
                      {"action": a.action})
    torch.testing.assert_close(a.log_prob["choose"].data, b.log_prob["choose"].data)
    torch.testing.assert_close(a.memory, b.memory)


def test_missing_wrong_or_ragged_recurrent_inputs_are_named():
    net = _net("gru")
    states, _ = _episodes(4, 1)
    begin = torch.zeros(4, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match="has memory .* no 'memory' was given"):
        safe_call(net, states[0])
    with pytest.raises(ValueError, match=r"memory has shape \(4, 5\); this network's state is \[B, 6\]"):
        safe_call(net, {**states[0], "memory": torch.zeros(4, 5), "episode_start": begin})
    with pytest.raises(ValueError, match="4 rows are not whole sequences of sequence_length=3"):
        safe_call(net, {**states[0], "memory": torch.zeros(4, 6), "episode_start": begin}, {"sequence_length": 3})
    with pytest.raises(TypeError, match="episode_start must be bool"):
        safe_call(net, {**states[0], "memory": torch.zeros(4, 6), "episode_start": begin.float()})


def test_a_network_without_memory_returns_no_state_and_a_fresh_one_acts_as_without():
    env = Recall()
    plain = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=16))
    states, _ = _episodes(2, 5)
    out = safe_call(plain, states[4])
    assert out.memory is None and plain.memory_size == 0
    torch.manual_seed(0)
    fresh = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=16, memory=MemoryConfig(size=4)))
    begin = torch.zeros(2, 1, dtype=torch.bool)
    with torch.no_grad():
        a = safe_call(fresh, {**states[4], "memory": torch.zeros(2, 4), "episode_start": begin})
        b = safe_call(fresh, {**states[4], "memory": torch.randn(2, 4), "episode_start": begin}, {"action": a.action})
    torch.testing.assert_close(a.log_prob["choose"].data, b.log_prob["choose"].data)  # the projection starts at 0


def test_memory_config_and_q_heads_are_checked():
    env = Recall()
    with pytest.raises(ValueError, match="kind: expected one of"):
        MemoryConfig(kind="rnn")
    with pytest.raises(ValueError, match="size: expected a positive int"):
        MemoryConfig(size=0)
    with pytest.raises(TypeError, match="per_entity: expected a bool"):
        MemoryConfig(per_entity=1)
    with pytest.raises(ValueError, match="memory .* Q-heads \\(DQN\\)"):
        RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(memory=MemoryConfig()), q_head="plain")
    assert RogueNetConfig.from_dict({"memory": {"kind": "lstm", "size": 8}}).memory == MemoryConfig(kind="lstm",
                                                                                                  size=8)
    with pytest.raises(ValueError, match="RogueNetConfig.memory.sise: unknown key"):
        RogueNetConfig.from_dict({"memory": {"sise": 8}})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_cuda_unrolls_as_the_cpu_does(kind):
    """The states given on the CPU move to the network's card; a sequence's log-probabilities, values and
    final state match the CPU's."""
    net = _net(kind)
    n_envs, n_steps = 3, 12
    states, start = _episodes(n_envs, n_steps)
    stacked = trees.stack(states, str)
    begin = torch.from_numpy(start.reshape(-1))[:, None]
    first = torch.zeros(n_envs * n_steps, net.memory_size)
    first[:n_envs] = torch.randn(n_envs, net.memory_size).masked_fill(begin[:n_envs], 0.0)
    rows = {**stacked, "memory": first, "episode_start": begin}
    with torch.no_grad():
        cpu = safe_call(net, rows, {"sequence_length": n_steps, "deterministic": True})
        cpu_value = safe_call(net.critic(), rows, {"sequence_length": n_steps})
        net.cuda()
        gpu = safe_call(net, rows, {"action": cpu.action, "sequence_length": n_steps})
        gpu_value = safe_call(net.critic(), rows, {"sequence_length": n_steps})
    assert gpu.memory.device.type == "cuda"  # on the network's device, as every output
    torch.testing.assert_close(gpu.log_prob["choose"].data.cpu(), cpu.log_prob["choose"].data, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gpu_value.cpu(), cpu_value, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gpu.memory.cpu(), cpu.memory, atol=1e-4, rtol=1e-4)
