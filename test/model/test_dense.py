"""DenseNet: RogueNet's surface over an MLP for dense states (global features, global actions)."""
from typing import Dict, Optional

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from entmachin.env import (
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionSpace,
    GymnasiumVecEnv,
    ObsSpace,
    to_state,
)
from entmachin.frame import A2C, PPO, RolloutCollector
from entmachin.model import DenseNet, DenseNetCritic, InputNorm, RogueNetOutput
from entmachin.model.config import RogueNetConfig
from entmachin.model.continuous import deterministic_point
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayF32, RaggedArrayI64
from entmachin.ragged.tensor import RaggedTensor

KINDS = ["beta", "squashed_gaussian"]
OBS = ObsSpace(global_features=["x", "y", "z"])
SPACE = {
    "move": GlobalContinuousActionSpace(low=[-1.0, 0.0], high=[1.0, 5.0], names=["steer", "throttle"]),
    "jump": GlobalCategoricalActionSpace(["no", "low", "high"]),
}


def ragged(cls, rows, width):
    flat = np.array([v for row in rows for v in row], dtype=cls.dtype).reshape(-1, width)  # [n_items, width]
    return cls.from_flattened(flat, np.array([len(r) for r in rows], dtype=np.int64))


def state(n_rows: int = 5, seed: int = 0, actors: Optional[list] = None, mask=None, low=None, high=None) -> Dict:
    """A canonical dense state: one item of 3 features per row, the __global__ actor in ``actors`` rows;
    ``mask`` / ``low`` / ``high``: the same values for every actor."""
    rng = np.random.default_rng(seed)
    acting = list(range(n_rows)) if actors is None else actors

    def per_actor(value):
        return [[value] if r in acting else [] for r in range(n_rows)]

    move = {"actors": ragged(RaggedArrayI64, per_actor([0]), 1)}
    if low is not None:
        move["low"] = ragged(RaggedArrayF32, per_actor(low), 2)
        move["high"] = ragged(RaggedArrayF32, per_actor(high), 2)
    jump = {"actors": ragged(RaggedArrayI64, per_actor([0]), 1)}
    if mask is not None:
        jump["mask"] = ragged(RaggedArrayBool, per_actor(mask), 3)
    features = rng.normal(size=(n_rows, 1, 3)).astype(np.float32) * 3 + 1
    return {"entities": {"__global__": ragged(RaggedArrayF32, features.tolist(), 3)},
            "action_masks": {"move": move, "jump": jump}}


def net(kind: str = "beta", **options) -> DenseNet:
    torch.manual_seed(0)
    return DenseNet(OBS, SPACE, continuous=kind, **options)


def call(model, s, **kwargs) -> RogueNetOutput:
    return model(s["entities"], s["action_masks"], **kwargs)


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_and_per_row_sums(kind):
    out = call(net(kind), state(5, actors=[0, 2, 3]))
    assert isinstance(out, RogueNetOutput)
    move, jump = out.action["move"], out.action["jump"]
    assert isinstance(move, RaggedTensor) and move.data.shape == (3, 2) and move.data.dtype == torch.float32
    assert jump.data.shape == (3, 1) and jump.data.dtype == torch.int64
    assert move.lengths.tolist() == [1, 0, 1, 1, 0]
    for table in (out.log_prob, out.entropy):
        assert {name: t.data.shape for name, t in table.items()} == {"move": (3, 1), "jump": (3, 1)}
    assert out.log_prob_sum.shape == out.entropy_sum.shape == (5, 1)
    expected = torch.zeros(5, 1)
    for name in ("move", "jump"):
        expected = expected.index_add(0, out.log_prob[name].batch_index, out.log_prob[name].data)
    torch.testing.assert_close(out.log_prob_sum, expected)
    assert out.log_prob_sum[[1, 4]].eq(0).all()  # rows without actors contribute nothing


@pytest.mark.parametrize("kind", KINDS)
def test_sampled_values_stay_within_the_space_and_the_narrowed_bounds(kind):
    torch.manual_seed(1)
    values = call(net(kind), state(400)).action["move"].data  # [400, 2]
    assert (values[:, 0] >= -1).all() and (values[:, 0] <= 1).all()
    assert (values[:, 1] >= 0).all() and (values[:, 1] <= 5).all()
    assert values.std(dim=0).min() > 0.1  # sampled, not fixed
    out = call(net(kind), state(3, low=[0.5, 1.0], high=[0.75, 1.0]))  # the throttle fixed at 1 by equal bounds
    move = out.action["move"].data
    assert ((move[:, 0] >= 0.5) & (move[:, 0] <= 0.75)).all() and (move[:, 1] == 1.0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_rescoring_the_sampled_actions_gives_their_log_probabilities(kind):
    model, s = net(kind), state(6, actors=[0, 1, 3, 5], mask=[True, False, True])
    out = call(model, s)
    assert set(out.action["jump"].data[:, 0].tolist()) <= {0, 2}
    again = call(model, s, action=out.action)
    for name in ("move", "jump"):
        assert torch.equal(again.action[name].data, out.action[name].data)
        assert torch.equal(again.log_prob[name].data, out.log_prob[name].data)  # an update's first ratio is 1
    assert torch.equal(again.log_prob_sum, out.log_prob_sum)
    stored = {name: a.to_ragged_array() for name, a in out.action.items()}  # as the buffer holds them
    assert torch.equal(call(model, s, action=stored).log_prob_sum, out.log_prob_sum)


@pytest.mark.parametrize("kind", KINDS)
def test_deterministic_actions_are_the_distributions_points(kind):
    model, s = net(kind), state(4)
    first, second = call(model, s, deterministic=True), call(model, s, deterministic=True)
    assert torch.equal(first.action["move"].data, second.action["move"].data)
    h = model.trunk.features(torch.tensor(s["entities"]["__global__"].as_array()))  # [4, 64]
    head = model.heads[model.action_names.index("move")]
    low, high = torch.tensor([[-1.0, 0.0]]).expand(4, 2), torch.tensor([[1.0, 5.0]]).expand(4, 2)
    torch.testing.assert_close(first.action["move"].data, deterministic_point(kind, head.proj(h), low, high))
    logits = model.heads[model.action_names.index("jump")].proj(h)  # [4, 3]
    assert first.action["jump"].data[:, 0].tolist() == logits.argmax(-1).tolist()


def test_the_default_distribution_is_rogue_nets():
    assert DenseNet(OBS, SPACE).continuous == RogueNetConfig().continuous


def test_value_critic_view_and_one_pass_for_both():
    model, s = net(), state(5)
    value = model.value(s["entities"])
    assert value.shape == (5, 1) and value.dtype == torch.float32
    critic = model.critic()
    assert isinstance(critic, DenseNetCritic) and critic.shared_actor is model
    assert {id(p) for p in critic.parameters()} <= {id(p) for p in model.parameters()}
    torch.testing.assert_close(critic(s["entities"]), value)
    out, joint = model.forward_with_value(s["entities"], s["action_masks"], deterministic=True)
    torch.testing.assert_close(joint, value)
    assert torch.equal(out.action["move"].data, call(model, s, deterministic=True).action["move"].data)
    value.sum().backward()
    assert model.value_head.weight.grad is not None


def test_input_statistics_learn_only_while_collecting():
    model, s = net(), state(8)
    norm = next(m for m in model.modules() if isinstance(m, InputNorm))
    call(model, s)
    model.value(s["entities"])
    model.critic()(s["entities"])
    assert int(norm.count) == 0
    with model.collecting_stats():
        call(model, s)
    assert int(norm.count) == 8
    expected = s["entities"]["__global__"].as_array().astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(norm.mean.numpy(), expected, rtol=1e-6)
    assert not any(isinstance(m, InputNorm) for m in net(normalize_inputs=False).modules())


def test_hidden_sizes_and_activation():
    model = DenseNet(OBS, SPACE, d_hidden=(16, 8, 4), activation="relu")
    linears = [m for m in model.trunk.hidden if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(3, 16), (16, 8), (8, 4)]
    assert all(isinstance(m, nn.ReLU) for m in model.trunk.hidden if not isinstance(m, nn.Linear))
    assert len(DenseNet(OBS, {}).heads) == 0  # a value-only network, as a separate critic is


@pytest.mark.parametrize("obs_space, action_space, error, match", [
    (ObsSpace(global_features=["x"], entities={"Mine": Entity(["x"])}), {}, ValueError,
     r"entity types \['Mine'\]; DenseNet reads global features only \(use RogueNet"),
    (ObsSpace(), SPACE, ValueError, "no global features"),
    (OBS, {"move": CategoricalActionSpace(["a", "b"])}, TypeError,
     r"action_space\['move'\] is a CategoricalActionSpace; a dense network takes global actions only"),
])
def test_spaces_it_refuses(obs_space, action_space, error, match):
    with pytest.raises(error, match=match):
        DenseNet(obs_space, action_space)
    with pytest.raises(ValueError, match=r"continuous must be one of \['beta', 'squashed_gaussian'\]"):
        DenseNet(OBS, SPACE, continuous="gaussian")


def _bad_inputs():
    s = state(2)
    two = ragged(RaggedArrayF32, [[[0, 0, 0], [1, 1, 1]], []], 3)
    nan = ragged(RaggedArrayF32, [[[0, np.nan, 0]], [[1, 1, 1]]], 3)
    wide = ragged(RaggedArrayF32, [[[0, 0]], [[1, 1]]], 2)
    move = ragged(RaggedArrayF32, [[[0, 1]], [[0, 1]]], 2)
    choice = {"move": move, "jump": ragged(RaggedArrayI64, [[[0]], [[3]]], 1)}
    zeros = ragged(RaggedArrayI64, [[[0]], [[0]]], 1)
    inf = {"move": ragged(RaggedArrayF32, [[[0, np.inf]], [[0, 1]]], 2), "jump": zeros}
    masks = dict(s["action_masks"], jump={"actors": ragged(RaggedArrayI64, [[[1]], [[0]]], 1)})
    return [
        ({"__global__": two}, s["action_masks"], None, r"must hold exactly one item per row, got row lengths \[2, 0\]"),
        ({"__global__": nan}, s["action_masks"], None, r"row 0 has a non-finite value in feature 'y'"),
        ({"__global__": wide}, s["action_masks"], None, r"declares 3 \(\['x', 'y', 'z'\]\)"),
        (dict(s["entities"], Mine=two), s["action_masks"], None, r"entities\['Mine'\] is an entity type"),
        (s["entities"], dict(s["action_masks"], fly=s["action_masks"]["jump"]), None, r"'fly'\]: unknown action"),
        (s["entities"], masks, None, r"the __global__ entity \(index 0 in a row without entities\)"),
        (s["entities"], s["action_masks"], choice, r"action\['jump'\] holds a choice outside \[0, 3\)"),
        (s["entities"], s["action_masks"], inf, r"action\['move'\] actor 0 has inf in value 'throttle'"),
        (s["entities"], s["action_masks"], {"move": choice["move"]}, r"action\['jump'\] is missing"),
        (s["entities"], state(2, low=[-2.0, 0.0], high=[1.0, 5.0])["action_masks"], None,
         r"'move'\]: the bounds of actor 0 in value 'steer' are not finite, crossed or outside the space's"),
    ]


@pytest.mark.parametrize("entities, masks, action, match", _bad_inputs())
def test_inputs_that_do_not_fit_are_refused(entities, masks, action, match):
    with pytest.raises(ValueError, match=match):
        net()(entities, masks, action=action)


def test_trusted_inputs_skip_the_value_checks_only():
    model, s = net(), state(2, mask=[True, False, True])
    move = ragged(RaggedArrayF32, [[[0, 1]], [[0, 1]]], 2)
    forbidden = {"move": move, "jump": ragged(RaggedArrayI64, [[[1]], [[0]]], 1)}
    with pytest.raises(ValueError, match=r"action\['jump'\]: actor 0's choice is one its mask forbids"):
        call(model, s, action=forbidden)
    with model.critic().trusted_inputs():  # the view enters its network's block
        assert model.inputs_trusted()
        out = call(model, s, action=forbidden)  # not checked: the forbidden choice scores -inf
        assert out.log_prob["jump"].data[0, 0] == -np.inf
        with pytest.raises(ValueError, match="declares 3"):  # what the shapes tell is still checked
            model({"__global__": ragged(RaggedArrayF32, [[[0, 0]], [[1, 1]]], 2)}, s["action_masks"])
    assert not model.inputs_trusted()


@pytest.mark.parametrize("frame, kind", [(PPO, "beta"), (A2C, "squashed_gaussian")])
def test_a_frame_collects_stores_and_updates_on_pendulum(frame, kind):
    torch.manual_seed(0)
    envs = GymnasiumVecEnv(lambda: gym.make("Pendulum-v1", max_episode_steps=8), 3, seed=0)
    model = DenseNet(envs.obs_space(), envs.action_space(), d_hidden=(16,), continuous=kind)
    agent = frame(model, model.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=12, entropy_weight=-0.01, seed=0)
    collector = RolloutCollector(agent, envs, n_steps=8)
    stats = collector.collect()
    assert stats.n_env_steps == 24 and stats.episode_lengths == (8, 8, 8)  # truncated by gymnasium, bootstrapped
    stored = agent.replay_buffer
    assert stored.size() == 24
    before = [p.detach().clone() for p in model.parameters()]
    assert np.isfinite(agent.update()).all()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    norm = next(m for m in model.modules() if isinstance(m, InputNorm))
    assert int(norm.count) == 24  # the acting passes' rows, not the update's re-evaluations
    state = to_state(envs.reset(), envs.action_space())
    with torch.no_grad():
        action = model(state["entities"], state["action_masks"], deterministic=True).action["action"].data
    assert ((action >= -2) & (action <= 2)).all()
