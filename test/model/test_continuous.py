"""Continuous heads: bounded distributions (differential against torch.distributions), RogueNet with
continuous and mixed actions, and the refusals of Q-heads and DQN."""
import copy

import numpy as np
import pytest
import torch
from torch.distributions import Beta, Normal, TransformedDistribution
from torch.distributions.transforms import AffineTransform, TanhTransform

from entmachin.env import EnvList, to_state, to_vec_actions
from entmachin.frame import A2C, DQN, PPO
from entmachin.frame.collector import RolloutCollector
from entmachin.model import RogueNet
from entmachin.model.config import RogueNetConfig
from entmachin.model.continuous import EPS, ContinuousActionsUnsupported, bounded, deterministic_point
from test.model._zoo import Fleet

KINDS = ["beta", "squashed_gaussian"]


def _reference(kind, params, low, high):
    if kind == "beta":
        a, b = params.chunk(2, -1)
        dist = Beta(1 + torch.nn.functional.softplus(a), 1 + torch.nn.functional.softplus(b))
        return TransformedDistribution(dist, [AffineTransform(low, high - low)])
    mean, log_std = params.chunk(2, -1)
    return TransformedDistribution(Normal(mean, log_std.clamp(-5, 2).exp()),
                                   [TanhTransform(), AffineTransform((low + high) / 2, (high - low) / 2)])


@pytest.mark.parametrize("kind", KINDS)
def test_log_probabilities_equal_torch_distributions_and_values_stay_in_bounds(kind):
    torch.manual_seed(0)
    n = 2000
    params = torch.randn(n, 4) * 0.5
    low = torch.tensor([[-1.0, 0.0]]).expand(n, 2)
    high = torch.tensor([[1.0, 3.0]]).expand(n, 2)
    out = bounded(kind, params, low, high)
    assert out.action.shape == (n, 2) and out.log_prob.shape == (n, 1) and out.entropy.shape == (n, 1)
    assert (out.action >= low).all() and (out.action <= high).all()
    ref = _reference(kind, params.double(), low.double(), high.double()).log_prob(out.action.double()).sum(-1)
    # Away from the ends, where float32 cannot tell tanh(u) from 1.
    unit = (out.action - low) / (high - low)
    inner = ((unit > 1e-3) & (unit < 1 - 1e-3)).all(-1)
    assert inner.float().mean() > 0.9
    assert torch.allclose(out.log_prob[inner, 0].double(), ref[inner], atol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_a_sampled_value_is_scored_as_its_stored_copy_is(kind):
    torch.manual_seed(1)
    params = torch.randn(500, 6) * 3
    low, high = torch.full((500, 3), -2.0), torch.full((500, 3), 5.0)
    out = bounded(kind, params, low, high)
    again = bounded(kind, params, low, high, action=out.action.clone())
    assert torch.equal(again.log_prob, out.log_prob)


@pytest.mark.parametrize("kind", KINDS)
def test_entropy_matches_the_mean_negative_log_probability(kind):
    torch.manual_seed(2)
    params = torch.tensor([[0.3, -0.2, 0.5, 0.1]]).expand(40000, 4)
    low, high = torch.tensor([[-1.0, 0.0]]).expand(40000, 2), torch.tensor([[1.0, 4.0]]).expand(40000, 2)
    out = bounded(kind, params, low, high)
    assert abs(out.entropy.mean().item() - (-out.log_prob).mean().item()) < 0.03
    if kind == "beta":  # closed form: every row the same
        assert torch.allclose(out.entropy, out.entropy[:1].expand_as(out.entropy))


def test_the_squashed_gaussian_entropy_estimate_has_the_entropy_gradient():
    """Widening a squashed Gaussian already spread over its bounds lowers its entropy (mass piles at
    the ends); the estimate's gradient says so, where a Gaussian entropy would say the opposite."""
    torch.manual_seed(3)
    log_std = torch.tensor([2.0], requires_grad=True)
    params = torch.cat([torch.zeros(1), log_std]).expand(20000, 2)
    out = bounded("squashed_gaussian", params, torch.full((20000, 1), -1.0), torch.full((20000, 1), 1.0))
    out.entropy.mean().backward()
    assert log_std.grad.item() < 0


@pytest.mark.parametrize("kind", KINDS)
def test_deterministic_point_and_values_at_or_beyond_the_bounds(kind):
    params = torch.tensor([[0.0, 0.0], [8.0, -8.0]])
    low, high = torch.tensor([[-1.0], [-1.0]]), torch.tensor([[3.0], [3.0]])
    point = deterministic_point(kind, params, low, high)
    assert point[0, 0].item() == pytest.approx(1.0, abs=1e-6)  # the middle of symmetric parameters
    assert -1.0 <= point[1, 0].item() <= 3.0
    out = bounded(kind, params, low, high, deterministic=True)
    assert torch.equal(out.action, point)
    # Stored values exactly at the bounds are scored inside them, finitely.
    ends = bounded(kind, params, low, high, action=torch.tensor([[-1.0], [3.0]]))
    assert torch.isfinite(ends.log_prob).all()
    assert EPS < 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_a_value_with_equal_bounds_is_fixed_and_contributes_nothing(kind):
    params = torch.randn(10, 4, requires_grad=True)
    low = torch.tensor([[0.5, -1.0]]).expand(10, 2)
    high = torch.tensor([[0.5, 1.0]]).expand(10, 2)
    out = bounded(kind, params, low, high)
    assert (out.action[:, 0] == 0.5).all()
    free = bounded(kind, params[:, [1, 3]], low[:, 1:], high[:, 1:], action=out.action[:, 1:])
    assert torch.allclose(out.log_prob, free.log_prob)
    (out.log_prob.sum() + out.entropy.sum()).backward()
    assert torch.isfinite(params.grad).all()


@pytest.mark.parametrize("kind", KINDS)
def test_rogue_net_acts_within_narrowed_bounds_and_rescores(kind):
    torch.manual_seed(0)
    envs = EnvList(Fleet, 6, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=16, n_layer=1, continuous=kind))
    obs = envs.reset()
    for _ in range(8):
        state = to_state(obs, envs.action_space())
        out = net(state["entities"], state["action_masks"])
        steer = out.action["steer"].data
        assert steer.dtype == torch.float32 and steer.shape[1] == 2
        assert (steer[:, 0] >= -0.5).all() and (steer[:, 0] <= 1.0).all()
        assert out.action["wind"].data.shape == (6, 1) and out.action["flag"].data.dtype == torch.int64
        again = net(state["entities"], state["action_masks"], action=out.action)
        for name in out.log_prob:
            assert torch.equal(again.log_prob[name].data, out.log_prob[name].data)
        total = sum(lp.data.sum() for lp in out.log_prob.values())
        assert torch.allclose(out.log_prob_sum.sum(), total)
        obs = envs.act(to_vec_actions(out.action))
    det = net(state["entities"], state["action_masks"], deterministic=True)
    assert torch.equal(det.action["steer"].data, net(state["entities"], state["action_masks"],
                                                     deterministic=True).action["steer"].data)


def test_rogue_net_refuses_bad_bounds_and_non_finite_given_values():
    envs = EnvList(Fleet, 2, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=16, n_layer=1))
    state = to_state(envs.reset(), envs.action_space())
    out = net(state["entities"], state["action_masks"])
    bad = copy.deepcopy(state["action_masks"])
    bad["steer"]["high"] = type(bad["steer"]["high"])._wrap(bad["steer"]["high"].as_array() + 5,
                                                            bad["steer"]["high"].size1())
    with pytest.raises(ValueError, match=r"action_masks\['steer'\].*value 'turn' \(dimension 0\).*outside the space"):
        net(state["entities"], bad)
    given = {name: rt.to_ragged_array() for name, rt in out.action.items()}
    values = given["steer"].as_array().copy()
    values[0, 1] = np.nan
    given["steer"] = type(given["steer"])._wrap(values, given["steer"].size1())
    with pytest.raises(ValueError, match=r"action\['steer'\] row 0 actor 0 value 'speed' \(dimension 1\) is nan"):
        net(state["entities"], state["action_masks"], action=given)


def test_q_heads_dqn_and_probability_tables_refuse_continuous_actions():
    envs = EnvList(Fleet, 2, seed=0)
    space = envs.action_space()
    with pytest.raises(ContinuousActionsUnsupported, match="action 'steer' is continuous.*PPO or A2C"):
        RogueNet(envs.obs_space(), space, q_head="plain")
    net = RogueNet(envs.obs_space(), space, RogueNetConfig(d_model=16, n_layer=1))
    with pytest.raises(ContinuousActionsUnsupported, match="DQN.*action 'steer' is continuous|action 'steer'"):
        DQN(net, copy.deepcopy(net), torch.optim.Adam, torch.nn.MSELoss())
    state = to_state(envs.reset(), space)
    with pytest.raises(ContinuousActionsUnsupported, match="'steer' is continuous"):
        net.probabilities(state["entities"], state["action_masks"])


@pytest.mark.parametrize("frame_class", [PPO, A2C])
def test_ppo_and_a2c_collect_and_train_continuous_rows_and_refuse_bad_ones(frame_class):
    torch.manual_seed(0)
    envs = EnvList(Fleet, 4, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=16, n_layer=1))
    ppo = frame_class(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss(), batch_size=16, actor_update_times=2,
                      critic_update_times=2, seed=0)
    obs = envs.reset()
    steps = []
    for _ in range(4):
        state = to_state(obs, envs.action_space())
        with torch.no_grad():
            out = net(state["entities"], state["action_masks"])
        obs = envs.act(to_vec_actions(out.action))
        steps.append(dict(state=state, action={"action": {k: v.to_ragged_array() for k, v in out.action.items()}},
                          next_state=to_state(obs, envs.action_space()), reward=obs.reward, terminal=obs.done))
    bad = copy.deepcopy(steps)
    values = bad[2]["action"]["action"]["steer"]
    arr = values.as_array().copy()
    arr[0, 0] = 7.0
    bad[2]["action"]["action"]["steer"] = type(values)._wrap(arr, values.size1())
    with pytest.raises(ValueError, match=r"holds 7\.0 for actor 0, value 'turn' \(dimension 0\); expected a finite "
                                         r"value in \[-0\.5, 1\.0\]"):
        ppo.store_rollout(bad)
    collector = RolloutCollector(ppo, envs, n_steps=8)
    heads = {name: net.heads[net.action_names.index(name)] for name in ("steer", "wind", "flag")}
    before = {name: [p.detach().clone() for p in head.parameters()] for name, head in heads.items()}
    collector.collect()
    ppo.update()
    for name, head in heads.items():  # every head learns: the continuous ones' parameters and the choice's
        assert any(not torch.equal(a, b) for a, b in zip(before[name], head.parameters())), name


def test_log_probabilities_score_given_continuous_values_as_forward_does():
    torch.manual_seed(0)
    envs = EnvList(Fleet, 3, seed=1)
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=16, n_layer=1))
    state = to_state(envs.reset(), envs.action_space())
    out = net(state["entities"], state["action_masks"])
    continuous = {name: out.action[name] for name in ("steer", "wind")}
    tables, value = net.log_probabilities(state["entities"], state["action_masks"], continuous=continuous, value=True)
    for name in ("steer", "wind"):
        assert torch.allclose(tables[name].data, out.log_prob[name].data, atol=1e-6)
    assert tables["flag"].data.shape[1] == 2 and value.shape == (3, 1)
    with pytest.raises(ContinuousActionsUnsupported, match="pass continuous="):
        net.log_probabilities(state["entities"], state["action_masks"])


@pytest.mark.parametrize("deterministic", [False, True])
def test_probabilities_and_values_come_from_one_trunk_pass_as_probabilities_and_forward_give_them(deterministic):
    torch.manual_seed(0)
    envs = EnvList(Fleet, 4, seed=2)
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=16, n_layer=1))
    state = to_state(envs.reset(), envs.action_space())
    passes = []
    net.trunk.register_forward_hook(lambda *_: passes.append(1))
    torch.manual_seed(7)
    tables, values = net.probabilities_and_values(state["entities"], state["action_masks"],
                                                  deterministic=deterministic)
    assert len(passes) == 1 and set(tables) == {"flag"} and set(values) == {"steer", "wind"}
    expected = net.probabilities(state["entities"], {"flag": state["action_masks"]["flag"]})
    assert torch.equal(tables["flag"].data, expected["flag"].data)
    torch.manual_seed(7)  # the same random state: forward draws the same values
    drawn = net(state["entities"], {n: state["action_masks"][n] for n in ("steer", "wind")},
                deterministic=deterministic).action
    for name in ("steer", "wind"):
        assert torch.equal(values[name].data, drawn[name].data)
        assert torch.equal(values[name].lengths, drawn[name].lengths)


@pytest.mark.parametrize("kind", KINDS)
def test_a_non_finite_value_from_the_policy_is_refused_naming_action_actor_and_value(kind):
    envs = EnvList(Fleet, 2, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=16, n_layer=1, continuous=kind))
    with torch.no_grad():
        net.heads[net.action_names.index("steer")].proj.bias[0] = float("nan")  # a parameter of the first value
    state = to_state(envs.reset(), envs.action_space())
    with torch.no_grad():
        out = net(state["entities"], state["action_masks"])
    with pytest.raises(ValueError, match=r"actions\['steer'\] row 0, actor 0, value 'turn' \(dimension 0\): nan is not "
                                         r"finite"):
        envs.act(to_vec_actions(out.action))
