"""Behaviour cloning with per-entity memory: recorded ids numbered per episode, each sequence's entities
started from the states the replay of its episode's earlier steps reached."""
import numpy as np
import pytest
import torch

pytest.importorskip("pyarrow")

from entmachin.data import Dataset  # noqa: E402
from entmachin.env import CategoricalAction  # noqa: E402
from entmachin.env.examples import Conveyor  # noqa: E402
from entmachin.frame import BC, evaluate  # noqa: E402
from entmachin.frame.bc_sequences import entity_handles  # noqa: E402
from entmachin.model.config import MemoryConfig, RogueNetConfig  # noqa: E402
from entmachin.model.rogue_net import RogueNet  # noqa: E402
from entmachin.ragged.tensor import RaggedTensor  # noqa: E402
from entmachin.run.cloning import discounted_returns, episode_order  # noqa: E402
from entmachin.run.record import record  # noqa: E402
from test.frame.test_bc_memory import minibatch_as_replayed  # noqa: E402

_kinds = {}


def demonstrate(observation, action_space, rng):
    """Conveyor's optimal demonstrator: it remembers each item's kind by its id from the item's arrival and
    sorts it by that kind. Ids repeat from episode to episode, and an arrival overwrites the old kind, so it
    records one environment at a time (``num_envs=1``)."""
    items = observation.features["Item"]
    for k, item in enumerate(observation.ids["Item"]):
        if items[k][2]:  # its arrival: the kind shows
            _kinds[item] = int(np.argmax(items[k][:2]))
    mask = observation.actions["sort"]
    if not mask.actor_ids:
        return {}
    return {"sort": CategoricalAction(actors=list(mask.actor_ids), indices=np.array([_kinds[mask.actor_ids[0]]]),
                                      index_to_label=action_space["sort"].index_to_label)}


def conveyor_rows(directory, policy, episodes, seed=0):
    """The acting rows of recorded Conveyor episodes in episode order, their returns, episode ids, and their
    state with the entities' numbers (``entity_handles``)."""
    out = record("Conveyor", policy, episodes, str(directory), seed=seed, num_envs=1, progress=False)
    rows = Dataset(out.directory).read()
    order, ids = episode_order(rows, np.flatnonzero(~rows.final), "test")
    rows = rows.take(order)
    state = rows.state()
    counts = {"Item": np.asarray(state["entities"]["Item"].size1())}
    state["entity_handles"] = entity_handles(rows.ids, counts, ids, "test")
    return rows, state, discounted_returns(Dataset(out.directory).read(), 0.99)[order], ids


def _bc(per_entity=True, memory=True, **settings):
    torch.manual_seed(0)
    e = Conveyor()
    config = MemoryConfig(size=16, per_entity=per_entity) if memory else None
    net = RogueNet(e.obs_space(), e.action_space(), RogueNetConfig(d_model=16, n_layer=1, memory=config))
    options = dict(batch_size=160, actor_update_times=4, critic_update_times=4, actor_learning_rate=1e-2,
                   critic_learning_rate=1e-2, seed=0)
    return BC(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss(), **{**options, **settings})


def test_recorded_ids_are_numbered_per_episode_in_order_of_first_appearance():
    ids = {"A": [[7], [8, 7], [7]], "B": [[], [9], []]}
    counts = {"A": np.array([1, 2, 1]), "B": np.array([0, 1, 0])}
    handles = entity_handles(ids, counts, np.array([0, 0, 1]), "test")
    assert handles["A"].as_array()[:, 0].tolist() == [0, 1, 0, 0]  # 7, then 8 is new; a new episode starts over
    assert handles["B"].as_array()[:, 0].tolist() == [2]  # (numbered after the row's earlier types)
    with pytest.raises(ValueError, match=r"bc.data: d: the rows keep no ids of 'A' entities \(ids/A\)"):
        entity_handles({}, counts, np.array([0, 0, 1]), "bc.data: d")
    with pytest.raises(ValueError, match="row 1 has 2 'A' entities but 0 recorded ids"):
        entity_handles({"A": [[7], None, [7]], "B": ids["B"]}, counts, np.array([0, 0, 1]), "test")
    with pytest.raises(ValueError, match=r"row 1: entity id 7 names a 'B' entity, but earlier in this episode"):
        entity_handles({"A": [[7], [8, 6], [7]], "B": [[], [7], []]}, counts, np.array([0, 0, 1]), "test")


def _replay(net, held):
    """Each episode of ``held`` stepped one row at a time from its start, carrying the row's state and each
    entity's by its number (as ``EntityRows`` does while acting): every actor's negative log-likelihood of
    its recorded choice, and every row's value."""
    nll, values = [], np.zeros(held.n_rows, np.float32)
    size = net.entity_memory_size
    with torch.no_grad():
        for r in range(held.n_rows):
            one = held.take(np.array([r]))
            start = r == 0 or held.episodes[r] != held.episodes[r - 1]
            if start:
                state, kept = torch.zeros(1, net.memory_size), {}
            numbers = one.state["entity_handles"]["Item"].as_array()[:, 0].tolist()
            given = torch.stack([kept.get(h, torch.zeros(size)) for h in numbers]) if numbers else torch.zeros(0, size)
            keywords = dict(memory=state, episode_start=torch.tensor([[start]]), sequence_length=1,
                            entity_memory={"Item": RaggedTensor.from_lengths(given, [len(numbers)])})
            tables, value = net.log_probabilities(one.state["entities"], one.state["action_masks"], value=True,
                                                  **keywords)
            log_p = tables["sort"].data
            if log_p.shape[0]:
                nll.append(-log_p[0, int(one.action["sort"].as_array()[0, 0])])
            values[r] = float(value[0, 0])
            out = net(one.state["entities"], one.state["action_masks"], None, one.action, **keywords)
            state = out.memory
            kept.update(zip(numbers, out.entity_memory["Item"]))
    return torch.stack(nll), torch.from_numpy(values)


@pytest.mark.parametrize("length", [2, 3, None])
def test_the_loss_of_sequences_is_the_loss_of_a_step_by_step_replay_carrying_each_entitys_state(tmp_path, length):
    """Random episodes of Conveyor, a network whose per-entity states change its choices: every sequence of
    one minibatch, its row state and its entities' states recomputed over the steps before it, scores each
    actor as the step-by-step replay does (items out of sight between their arrival and their sorting)."""
    rows, state, returns, ids = conveyor_rows(tmp_path / "random", "random", 5, seed=1)
    bc = _bc(sequence_length=length, distill_weight=0.0)
    net = bc.actor
    torch.nn.init.normal_(net.entity_memory.out.weight)  # the entities' states move the choices
    torch.nn.init.normal_(net.entity_memory.cell.weight_ih)
    bc.store_rows(state, rows.action, returns, episodes=ids)
    held = bc._held
    policy, _, _, nll, _ = minibatch_as_replayed(bc, length, _replay)
    policy.backward()
    assert net.entity_memory.cell.weight_hh.grad.abs().sum() > 0  # the gradient reaches the per-entity core
    loss, _ = bc.accuracy(held, rows_per_pass=7)
    assert loss == pytest.approx(float(nll.mean()), abs=1e-5)


def test_rows_without_entity_numbers_are_refused_by_name(tmp_path):
    rows, state, returns, ids = conveyor_rows(tmp_path / "random", "random", 2)
    del state["entity_handles"]
    with pytest.raises(ValueError, match=r"per_entity\); pass state\['entity_handles'\]"):
        _bc().store_rows(state, rows.action, returns, episodes=ids)


@pytest.mark.usefixtures("one_thread")
def test_cloning_sorts_by_each_items_remembered_kind_with_per_entity_memory_and_not_without(tmp_path):
    """The demonstrator remembers each item's kind by its id: a clone with per-entity memory does too (>= 0.95
    return), a feed-forward clone cannot tell the items apart when it sorts and stays near 1/2."""
    rows, state, returns, ids = conveyor_rows(tmp_path / "demo", "test.frame.test_bc_entity_memory:demonstrate", 150)
    figures = {}
    for memory in (True, False):
        bc = _bc(memory=memory, actor_update_times=150, critic_update_times=150)
        bc.store_rows(state, rows.action, returns, episodes=ids)
        bc.update()
        figures[memory] = evaluate(bc, Conveyor, 200, seed=7).mean
    assert figures[True] >= 0.95 and figures[False] < 0.65, figures
