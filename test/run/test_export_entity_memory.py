"""Exporting per-entity memory (``model.memory.per_entity``): each entity type's states as the graph's inputs and
outputs, kept by id by OnnxPolicy, in parity with the network carried by EntityRows over whole Conveyor episodes
(ids shuffled at every step, items leaving); an environment that breaks the ids' contract is named."""
import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from entmachin.deploy import OnnxPolicy  # noqa: E402
from entmachin.env import EnvList, batch_obs, to_state  # noqa: E402
from entmachin.env.action import CategoricalAction, CategoricalActionMask, CategoricalActionSpace  # noqa: E402
from entmachin.env.environment import Entity, Observation, ObsSpace  # noqa: E402
from entmachin.env.examples import Conveyor  # noqa: E402
from entmachin.frame.collector import default_actions  # noqa: E402
from entmachin.frame.entity_memory import EntityRows  # noqa: E402
from entmachin.frame.memory import MemoryRows  # noqa: E402
from entmachin.frame.safe_call import safe_call  # noqa: E402
from entmachin.model.config import MemoryConfig, RogueNetConfig  # noqa: E402
from entmachin.model.rogue_net import RogueNet  # noqa: E402
from entmachin.ragged.tensor import tree_to_torch  # noqa: E402
from entmachin.run.export import export_policy  # noqa: E402


def _net(kind, obs_space=None, action_space=None):
    torch.manual_seed(0)
    env = Conveyor(n_items=3)
    net = RogueNet(obs_space or env.obs_space(), action_space or env.action_space(),
                   RogueNetConfig(d_model=16, memory=MemoryConfig(kind=kind, size=6, per_entity=True)))
    for core in (net.memory, net.entity_memory):  # zero at first: the states must reach the heads here
        for p in core.out.parameters():
            torch.nn.init.normal_(p, std=0.5)
    return net.eval()


def _exported(net, tmp_path):
    path = str(tmp_path / "policy.onnx")
    export_policy(net, path)
    return OnnxPolicy(path)


def _torch_step(net, rows, entities, vec, space):
    entries = entities.entries(vec)
    state = {**rows.state(tree_to_torch(to_state(vec, space))), **entries}
    with torch.no_grad():
        return safe_call(net, state, {"deterministic": True}), entries


def _close(a, b):
    np.testing.assert_allclose(a, b.numpy() if isinstance(b, torch.Tensor) else b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_whole_episodes_give_the_states_log_probabilities_and_actions_of_pytorch(kind, tmp_path):
    net = _net(kind)
    policy = _exported(net, tmp_path)
    assert policy.entity_memory_size == net.entity_memory_size == policy.metadata["entity_memory"]["state_size"]
    n = 4
    envs = EnvList(lambda: Conveyor(n_items=3), n, seed=0)
    space = envs.action_space()
    rows, entities = MemoryRows(net.memory_size, n), EntityRows(net.entity_memory_size, n, ["Item"])
    vec = envs.reset()
    checked, ended = 0, 0
    for _ in range(18):  # three episodes of six steps per row
        out, entries = _torch_step(net, rows, entities, vec, space)
        # the graph, given the states EntityRows gives the network
        graph = policy.outputs(vec, memory=rows.memory.numpy(), episode_start=rows.episode_start.numpy().reshape(-1),
                               entity_memory={"Item": entries["entity_memory"]["Item"].data.numpy()})
        _close(graph["memory_out"], out.memory)
        _close(graph["entity_memory_out/Item"], out.entity_memory["Item"])
        chosen = out.action["sort"].data[:, 0].numpy()
        batch = policy.act_batch(vec)  # the states kept by the policy itself, by id
        _close(policy._next[0], out.memory)
        _close(policy._next[1]["Item"], out.entity_memory["Item"])
        if chosen.size:
            probs = graph["probs/sort"]  # [A, 2]
            _close(np.log(probs[np.arange(chosen.size), chosen]), out.log_prob["sort"].data[:, 0])
            untied = np.abs(probs[:, 0] - probs[:, 1]) > 1e-5
            np.testing.assert_array_equal(graph["argmax/sort"][untied], chosen[untied])
            np.testing.assert_array_equal(batch["sort"].as_array().reshape(-1)[untied], chosen[untied])
            checked += int(untied.sum())
        vec = envs.act(default_actions(out)[1])
        rows.advance(out, vec.done)
        entities.advance(out, vec)
        ended += int(vec.done.sum())
    envs.close()
    assert checked >= 30 and ended == 3 * n


def _episode(seed):
    env = Conveyor(n_items=3)
    env.seed(seed)
    seen = [env.reset()]
    while not seen[-1].done:
        sorting = seen[-1].actions["sort"].actor_ids
        seen.append(env.act({"sort": _keep(sorting)}))
    return seen


def _keep(actors):
    return CategoricalAction(actors=list(actors), indices=np.zeros(len(actors), np.int64),
                             index_to_label=["keep", "discard"])


def test_act_keeps_each_games_entities_by_id_as_pytorch_does_and_reset_forgets_them(tmp_path):
    net = _net("gru")
    policy = _exported(net, tmp_path)
    games = {"a": _episode(0), "b": _episode(1)}
    space = Conveyor().action_space()
    torch_rows, torch_entities = MemoryRows(net.memory_size, 1), EntityRows(net.entity_memory_size, 1, ["Item"])
    for step in range(len(games["a"]) - 1):  # the two games' steps interleaved: each keeps its own states
        policy.act(games["b"][step], game="b")
        policy.act(games["a"][step], game="a")
        vec = batch_obs([games["a"][step]], policy.obs_space, space)
        vec.ids = [games["a"][step].ids]
        out, _ = _torch_step(net, torch_rows, torch_entities, vec, space)
        _close(policy._games["a"].memory, out.memory)
        _close(policy._next[1]["Item"], out.entity_memory["Item"])
        if step + 2 < len(games["a"]):  # the last observation ends the episode: nothing follows
            following = batch_obs([games["a"][step + 1]], policy.obs_space, space)
            following.ids = [games["a"][step + 1].ids]
            torch_rows.advance(out, following.done)
            torch_entities.advance(out, following)
    assert policy._games["a"].entities.index[0] and policy._games["b"].entities.index[0]
    policy.reset("a")
    assert "a" not in policy._games and "b" in policy._games
    policy.reset()
    assert not policy._games and policy._rows is None


class _Pair:
    """An observation space of two entity types, for ids that break their contract."""

    space = ObsSpace(entities={"A": Entity(["x"]), "B": Entity(["y"])})
    actions = {"go": CategoricalActionSpace(["a", "b"])}

    @staticmethod
    def obs(a_ids, b_ids, ids=True):
        features = {"A": np.ones((len(a_ids), 1), np.float32), "B": np.ones((len(b_ids), 1), np.float32)}
        return Observation(features=features, ids={"A": a_ids, "B": b_ids} if ids else {},
                           actions={"go": CategoricalActionMask(actor_ids=[])}, reward=0.0, done=False)


def test_ids_that_break_their_contract_are_named(tmp_path):
    policy = _exported(_net("lstm", _Pair.space, _Pair.actions), tmp_path)
    policy.act(_Pair.obs([7], []), game="g")
    with pytest.raises(ValueError, match=r"game 'g': entity memory: row 0: entity id 7 names a 'B' entity, but "
                                         r"earlier in this episode it named a 'A' one"):
        policy.act(_Pair.obs([], [7]), game="g")
    policy.reset("g")
    policy.act(_Pair.obs([], [7]), game="g")  # a new episode: the id may name another entity
    with pytest.raises(ValueError, match=r"game 'i': entity memory: row 0: 1 'A' entities but 0 ids"):
        policy.act(_Pair.obs([7], [], ids=False), game="i")
    vec = batch_obs([_Pair.obs([7], []), _Pair.obs([7, 8], [])], _Pair.space, _Pair.actions)
    assert vec.ids == [{"A": [7], "B": []}, {"A": [7, 8], "B": []}]  # batch_obs keeps them
    vec.ids = None  # a batch that crossed worker processes carries none
    with pytest.raises(ValueError, match=r"act_batch: these observations carry no entity ids \(VecObs.ids\)"):
        policy.act_batch(vec)
    vec.ids = [{"A": [7], "B": []}, {"A": [7, 7], "B": []}]  # act() refuses such an observation before (validator)
    with pytest.raises(ValueError, match="act_batch: entity memory: row 1: entity id 7 is given twice in one "
                                         "observation"):
        policy.act_batch(vec)


def test_entity_states_of_another_shape_or_type_are_named(tmp_path):
    policy = _exported(_net("lstm", _Pair.space, _Pair.actions), tmp_path)
    vec = batch_obs([_Pair.obs([7], [8, 9])], _Pair.space, _Pair.actions)
    with pytest.raises(ValueError, match=r"entity_memory\['B'\] has shape \(2, 6\); this policy's per-entity state "
                                         r"is \[2, 12\]"):
        policy.outputs(vec, entity_memory={"B": np.zeros((2, 6), np.float32)})
    with pytest.raises(ValueError, match=r"entity_memory has states for \['C'\]"):
        policy.outputs(vec, entity_memory={"C": np.zeros((1, 12), np.float32)})
    out = policy.outputs(vec)  # default: every entity seen the first time
    assert out["entity_memory_out/A"].shape == (1, 12) and out["entity_memory_out/B"].shape == (2, 12)
