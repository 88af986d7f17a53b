"""Per-entity memory: one state per entity id, kept by ``EntityRows`` while acting and linked by handle when a
sequence is unrolled at once; both give the same log-probabilities, values and states."""
import numpy as np
import pytest
import torch

from entmachin.env import EnvList, to_state
from entmachin.env.examples import Conveyor
from entmachin.frame.collector import default_actions
from entmachin.frame.entity_memory import EntityRows
from entmachin.frame.memory import MemoryRows
from entmachin.frame.safe_call import safe_call
from entmachin.model.config import MemoryConfig, RogueNetConfig
from entmachin.model.rogue_net import RogueNet
from entmachin.ragged import trees
from entmachin.ragged.tensor import tree_to_torch


def _net(kind, size=6):
    torch.manual_seed(0)
    env = Conveyor(n_items=3)
    net = RogueNet(env.obs_space(), env.action_space(),
                   RogueNetConfig(d_model=16, memory=MemoryConfig(kind=kind, size=size, per_entity=True)))
    for core in (net.memory, net.entity_memory):  # zero at first (a fresh network acts as the feed-forward one)
        for p in core.out.parameters():
            torch.nn.init.normal_(p, std=0.5)
    return net


def _act(net, n_envs, n_steps, seed=0):
    """Acts ``n_steps`` steps of ``n_envs`` Conveyor rows with sampled actions, carrying both kinds of state:
    each step's full input (the states given with it) and output."""
    envs = EnvList(lambda: Conveyor(n_items=3), n_envs, seed=seed)
    rows = MemoryRows(net.memory_size, n_envs)
    entities = EntityRows(net.entity_memory_size, n_envs, ["Item"])
    obs = envs.reset()
    inputs, outs = [], []
    with torch.no_grad():
        for _ in range(n_steps):
            state = {**rows.state(tree_to_torch(to_state(obs, envs.action_space()))), **entities.entries(obs)}
            out = safe_call(net, state)
            inputs.append(state)
            outs.append(out)
            obs = envs.act(default_actions(out)[1])
            rows.advance(out, obs.done)
            entities.advance(out, obs)
    envs.close()
    return inputs, outs


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_a_sequence_unrolled_at_once_equals_the_steps_taken_one_by_one(kind):
    """Items arrive, wait out of their kind's sight, are sorted and leave; episodes (6 steps) end inside the
    12-step sequences. The unroll links each item's appearances by handle and starts each from the state
    stored with its first appearance in the sequence: the same log-probabilities and values as acting."""
    net = _net(kind)
    n_envs, n_steps = 3, 12
    inputs, outs = _act(net, n_envs, n_steps)
    stacked = trees.stack(inputs, str)  # time-major: row t * B + b
    first = stacked["memory"].clone()
    first[n_envs:] = 0.0  # only the first step's row state is read
    with torch.no_grad():
        whole = safe_call(net, {**stacked, "memory": first}, {"action": trees.stack(
            [{"sort": o.action["sort"]} for o in outs], str)}, {"sequence_length": n_steps})
        value = safe_call(net.critic(), {**stacked, "memory": first}, {"sequence_length": n_steps})
        step_values = torch.cat([safe_call(net.critic(), s) for s in inputs])
    step_lp = torch.cat([o.log_prob["sort"].data for o in outs])
    assert step_lp.numel() == n_envs * 6  # three sorts in each of two episodes a row
    torch.testing.assert_close(whole.log_prob["sort"].data, step_lp, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(value, step_values, atol=1e-6, rtol=1e-6)
    # A later appearance reads the unrolled state, not the one stored with it: corrupting those changes nothing.
    later = {k: v for k, v in stacked["entity_memory"].items()}
    data = later["Item"].data.clone()
    firsts = _first_appearances(stacked, n_envs, n_steps)
    data[~firsts] = 123.0
    later["Item"] = later["Item"].with_data(data)
    with torch.no_grad():
        again = safe_call(net, {**stacked, "memory": first, "entity_memory": later}, {"action": trees.stack(
            [{"sort": o.action["sort"]} for o in outs], str)}, {"sequence_length": n_steps})
    torch.testing.assert_close(again.log_prob["sort"].data, step_lp, atol=1e-6, rtol=1e-6)


def _first_appearances(stacked, n_envs, n_steps):
    """bool [n_items]: the item token is its entity's first in its sequence and episode."""
    handles = stacked["entity_handles"]["Item"]
    rows = handles.batch_index.numpy()
    start = stacked["episode_start"].numpy().reshape(n_steps, n_envs)
    episode = np.cumsum(start, axis=0).reshape(-1)
    seen, out = set(), []
    for k, h in enumerate(handles.data[:, 0].tolist()):
        key = (rows[k] % n_envs, episode[rows[k]], h)
        out.append(key not in seen)
        seen.add(key)
    return torch.tensor(out)


def test_an_entitys_state_changes_what_the_policy_does_for_it_alone():
    net = _net("gru")
    inputs, _ = _act(net, 2, 4)  # step 3: every item on the belt, one of them sorted
    state = inputs[3]
    with torch.no_grad():
        a = safe_call(net, state, {"deterministic": True})
        changed = dict(state["entity_memory"])
        changed["Item"] = changed["Item"].with_data(torch.randn_like(changed["Item"].data))
        b = safe_call(net, {**state, "entity_memory": changed}, {"action": a.action})
    assert not torch.allclose(a.log_prob["sort"].data, b.log_prob["sort"].data)
    n_items = state["entities"]["Item"].data.shape[0]
    assert set(a.entity_memory) == {"Item"} and a.entity_memory["Item"].shape == (n_items, 6)


def test_missing_or_misshapen_entity_inputs_are_named():
    net = _net("gru")
    inputs, _ = _act(net, 2, 2)
    state = dict(inputs[1])
    with pytest.raises(ValueError, match="keeps a state per entity .* no 'entity_memory' was given"):
        safe_call(net, {k: v for k, v in state.items() if k != "entity_memory"})
    wrong = {"Item": state["entity_memory"]["Item"].with_data(torch.zeros(state["entity_memory"]["Item"].data.shape[0],
                                                                          5))}
    with pytest.raises(ValueError, match=r"entity_memory\['Item'\]: shape \(4, 5\); expected \[4, 6\]"):
        safe_call(net, {**state, "entity_memory": wrong})
    with pytest.raises(ValueError, match=r"\['Robot'\] are not entity types"):
        safe_call(net, {**state, "entity_memory": {**state["entity_memory"], "Robot": state["entity_memory"]["Item"]}})
    both = trees.stack(inputs, str)
    with pytest.raises(ValueError, match=r"entity_handles are needed .* \(sequence_length=2\)"):
        safe_call(net, {k: v for k, v in both.items() if k != "entity_handles"}, {"sequence_length": 2})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_unrolls_the_entities_as_the_cpu_does():
    """The entities' states given on the CPU move to the card; a sequence's log-probabilities and values match
    the CPU's (the links between appearances are found on the host, used on the card)."""
    net = _net("lstm")
    inputs, outs = _act(net, 3, 12)
    stacked = trees.stack(inputs, str)
    action = {"action": trees.stack([{"sort": o.action["sort"]} for o in outs], str)}
    with torch.no_grad():
        cpu = safe_call(net, stacked, action, {"sequence_length": 12})
        net.cuda()
        card = safe_call(net, stacked, action, {"sequence_length": 12})
    torch.testing.assert_close(card.log_prob["sort"].data.cpu(), cpu.log_prob["sort"].data, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(card.entity_memory["Item"].cpu(), cpu.entity_memory["Item"], atol=1e-5, rtol=1e-5)


def test_an_entity_type_absent_from_the_batch_takes_no_states():
    """MineSweeper's cannons are absent from many rows, and from whole batches: their states are empty."""
    from entmachin.env.examples import MineSweeper

    torch.manual_seed(0)
    envs = EnvList(MineSweeper, 2, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space(),
                   RogueNetConfig(d_model=16, memory=MemoryConfig(size=4, per_entity=True)))
    rows, entities = MemoryRows(4, 2), EntityRows(4, 2, list(envs.obs_space().entities))
    obs = envs.reset()
    with torch.no_grad():
        for _ in range(3):
            state = {**rows.state(tree_to_torch(to_state(obs, envs.action_space()))), **entities.entries(obs)}
            out = safe_call(net, state)
            obs = envs.act(default_actions(out)[1])
            rows.advance(out, obs.done)
            entities.advance(out, obs)
    counts = {t: state["entities"][t].data.shape[0] for t in state["entities"]}
    assert {t: tuple(v.shape) for t, v in out.entity_memory.items()} == {t: (n, 4) for t, n in counts.items()}
    envs.close()
