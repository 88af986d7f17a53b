"""DQN / DQNPer over entities: RogueNet's Q-heads, masks, targets against a plain loop, rollouts."""
import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from entmachin.env import CategoricalActionSpace, Entity, EnvList, ObsSpace, SelectEntityActionSpace
from entmachin.env.examples import ENV_REGISTRY
from entmachin.frame import DQN, DQNPer, RolloutCollector
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayF32, RaggedArrayI64

OBS = ObsSpace(entities={"A": Entity(["x"]), "B": Entity(["y"])})
ACTIONS = {"move": CategoricalActionSpace(["l", "r", "u"]), "pick": SelectEntityActionSpace()}
SMALL = RogueNetConfig(d_model=16, n_layer=1, n_head=2, d_qk=8)


def ragged(cls, arrays):
    flat = np.concatenate(arrays) if arrays else np.zeros((0, 1))
    return cls.from_flattened(np.ascontiguousarray(flat), np.array([len(a) for a in arrays], dtype=np.int64))


def random_state(rng, n_rows):
    """Rows of 1-3 ``A`` (actors of both actions) and 0-2 ``B`` (actees), with random masks."""
    feats_a, feats_b, actors, masks, actees, pairs = [], [], [], [], [], []
    for _ in range(n_rows):
        n_a, n_b = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        feats_a.append(rng.standard_normal((n_a, 1)).astype(np.float32))
        feats_b.append(rng.standard_normal((n_b, 1)).astype(np.float32))
        actors.append(np.arange(n_a, dtype=np.int64)[:, None])
        mask = rng.random((n_a, 3)) < 0.5
        mask[np.arange(n_a), rng.integers(0, 3, n_a)] = True
        masks.append(mask)
        actees.append(np.arange(n_a, n_a + n_b, dtype=np.int64)[:, None])
        pair = rng.random((n_a, n_b)) < 0.5
        pair[np.arange(n_a), rng.integers(0, n_b, n_a)] = True
        pairs.append(pair.reshape(-1, 1))
    return {"entities": {"A": ragged(RaggedArrayF32, feats_a), "B": ragged(RaggedArrayF32, feats_b)},
            "action_masks": {
                "move": {"actors": ragged(RaggedArrayI64, actors), "mask": ragged(RaggedArrayBool, masks)},
                "pick": {"actors": ragged(RaggedArrayI64, actors), "actees": ragged(RaggedArrayI64, actees),
                         "actee_mask": ragged(RaggedArrayBool, pairs)}}}, masks, pairs


def make(cls=DQN, q_head="plain", **kwargs):
    torch.manual_seed(0)
    net = RogueNet(OBS, ACTIONS, SMALL, q_head=q_head)
    kwargs.setdefault("seed", 0)
    return cls(net, copy.deepcopy(net), torch.optim.Adam, nn.MSELoss(reduction="sum"), **kwargs)


@pytest.mark.parametrize("q_head", ["plain", "dueling"])
def test_q_values_are_minus_inf_exactly_where_forbidden(q_head):
    state, masks, pairs = random_state(np.random.default_rng(0), 4)
    net = make(q_head=q_head).qnet
    out = net.q_values(state["entities"], state["action_masks"])
    move = out["move"].data
    assert move.shape == (sum(len(m) for m in masks), 3)
    assert torch.equal(torch.isfinite(move), torch.from_numpy(np.concatenate(masks)))
    pick = out["pick"]
    width = pick.data.shape[1]
    start = 0
    for mask, pair in zip(masks, pairs):  # each row's pairs: [n_a * n_b, 1] row-major
        n_a = len(mask)
        n_b = len(pair) // n_a
        expected = np.zeros((n_a, width), dtype=bool)
        expected[:, :n_b] = pair.reshape(n_a, n_b)
        assert torch.equal(torch.isfinite(pick.data[start : start + n_a]), torch.from_numpy(expected))
        start += n_a


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 1.0), st.sampled_from(["plain", "dueling"]))
def test_masked_choices_are_never_chosen(seed, epsilon, q_head):
    rng = np.random.default_rng(seed)
    state, masks, pairs = random_state(rng, 3)
    frame = make(q_head=q_head, epsilon=epsilon, seed=seed % 1000)
    for chosen in (frame.act_discrete_with_noise(state), frame.act_discrete(state)):
        move = chosen["move"].data[:, 0].numpy()
        assert np.concatenate(masks)[np.arange(len(move)), move].all()
        pick, i = chosen["pick"].data[:, 0].numpy(), 0
        for mask, pair in zip(masks, pairs):
            grid = pair.reshape(len(mask), -1)
            for a in range(len(mask)):
                assert grid[a, pick[i]]
                i += 1


def transitions(rng, n_steps=3, n_rows=3):
    steps = []
    state = random_state(rng, n_rows)[0]
    for t in range(n_steps):
        after = random_state(rng, n_rows)[0]
        n_actors = state["action_masks"]["move"]["actors"].size1()
        n_actees = state["action_masks"]["pick"]["actees"].size1()
        move = [np.array([[int(rng.choice(np.flatnonzero(m)))] for m in mask], dtype=np.int64) for mask in
                np.split(state["action_masks"]["move"]["mask"].as_array(), np.cumsum(n_actors)[:-1])]
        pick = []
        pairs = np.split(state["action_masks"]["pick"]["actee_mask"].as_array()[:, 0],
                         np.cumsum(n_actors * n_actees)[:-1])
        for n_a, n_b, pair in zip(n_actors, n_actees, pairs):
            grid = pair.reshape(n_a, n_b)
            pick.append(np.array([[int(rng.choice(np.flatnonzero(g)))] for g in grid], dtype=np.int64))
        steps.append({"state": state, "action": {"action": {"move": ragged(RaggedArrayI64, move),
                                                            "pick": ragged(RaggedArrayI64, pick)}},
                      "next_state": after, "reward": rng.standard_normal(n_rows).astype(np.float32),
                      "terminal": rng.random(n_rows) < 0.3, "truncated": rng.random(n_rows) < 0.2})
        state = after
    return steps


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("mode", ["fixed_target", "double"])
def test_entity_update_loss_matches_a_plain_loop(mode, reduction):
    rng = np.random.default_rng(5)
    frame = make(mode=mode, actor_reduction=reduction, discount=0.9, batch_size=9)
    with torch.no_grad():
        for p in frame.qnet_target.parameters():
            p.add_(0.05 * torch.randn_like(p))
    frame.store_rollout(transitions(rng))
    _, (state, action, reward, next_state, terminal, discount) = frame.replay_buffer.sample_batch(
        9, sample_method="all", sample_attrs=["state", "action", "reward", "next_state", "terminal", "discount"])

    def per_row(out, pick=None):
        """Per row: the chosen (pick: 'taken' / a dict of online tables for double) values, by loops."""
        rows = []
        for b in range(9):
            total = 0.0
            for name in ("move", "pick"):
                grid = out[name][b]  # this row's [n_actors, width]
                values = []
                for a in range(grid.shape[0]):
                    if pick == "taken":
                        values.append(float(grid[a, int(action.action[name][b][a, 0])]))
                    elif pick is None:
                        values.append(float(grid[a].max()))
                    else:
                        values.append(float(grid[a, int(pick[name][b][a].argmax())]))
                if values:
                    total += sum(values) / (len(values) if reduction == "mean" else 1)
            rows.append(total)
        return torch.tensor(rows)

    with torch.no_grad():
        q = per_row(frame.qnet.q_values(state.entities, state.action_masks), "taken")
        target_out = frame.qnet_target.q_values(next_state.entities, next_state.action_masks)
        online_out = frame.qnet.q_values(next_state.entities, next_state.action_masks)
        best = per_row(target_out, online_out if mode == "double" else None)
    y = reward[:, 0] + torch.where(terminal[:, 0], 0.0, discount[:, 0] * best)
    assert frame.update() == pytest.approx(float(((q - y) ** 2).sum()), rel=1e-4)


def test_rollouts_of_minesweeper_train_dqnper_with_a_dueling_rogue_net():
    envs = EnvList(lambda: ENV_REGISTRY["MineSweeper"](orbital_cannon=True), 4, seed=0)
    torch.manual_seed(0)
    net = RogueNet(envs.obs_space(), envs.action_space(), SMALL, q_head="dueling")
    frame = DQNPer(net, copy.deepcopy(net), torch.optim.Adam, nn.MSELoss(reduction="none"), batch_size=16, seed=0,
                   n_step=3)
    collector = RolloutCollector(frame, envs, n_steps=8)
    collector.collect()
    before = frame.replay_buffer._tree.total()
    loss = frame.update()
    assert np.isfinite(loss) and frame.replay_buffer.size() == 32
    assert frame.replay_buffer._tree.total() != before  # priorities fed back
    envs.close()


def test_entity_bad_outputs_raise():
    state, _, _ = random_state(np.random.default_rng(0), 2)
    frame = make()
    with pytest.raises(RuntimeError, match=r"RogueNet.q_values: this network has no Q-heads"):
        RogueNet(OBS, ACTIONS, SMALL).q_values(state["entities"], state["action_masks"])
    original = frame.qnet.q_values

    def missing(entities, action_masks, visible=None):
        out = original(entities, action_masks, visible)
        del out["pick"]
        return out

    frame.qnet.q_values = missing
    with pytest.raises(ValueError, match=r"DQN.act_discrete: the Q-network's output has NoneType for action 'pick'; "
                                         r"expected a ragged \[n_actors, n_choices\]"):
        frame.act_discrete(state)

    def unmasked(entities, action_masks, visible=None):
        out = original(entities, action_masks, visible)
        out["move"] = out["move"].with_data(torch.zeros_like(out["move"].data))
        return out

    frame.qnet.q_values = unmasked
    with pytest.raises(ValueError, match=r"output ignores the mask: action 'move' actor \d+ \(row \d\)"):
        frame.act_discrete(state)
    with pytest.raises(ValueError, match=r"RogueNet: q_head must be None, 'plain' or 'dueling', got 'triple'"):
        RogueNet(OBS, ACTIONS, SMALL, q_head="triple")
