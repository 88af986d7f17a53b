"""RogueNet end to end: the forward contract, row independence, value path, state_dict, devices."""
import pytest
import torch

from entmachin.env import EnvList, to_state, to_vec_actions
from entmachin.env.examples import ENV_REGISTRY
from entmachin.model import RogueNet, RogueNetConfig, RogueNetOutput
from entmachin.ragged.tensor import RaggedTensor
from test.model._zoo import ACTION_SPACE, NO_GLOBAL_ACTIONS, OBS_SPACE, zoo_observations, zoo_state


def _net(config=RogueNetConfig(), action_space=ACTION_SPACE, seed=0):
    torch.manual_seed(seed)
    net = RogueNet(OBS_SPACE, action_space, config)
    torch.nn.init.normal_(net.value_head.weight)  # non-zero value so that the value is tested too
    return net


def _run(net, state, **kwargs):
    return net(state["entities"], state["action_masks"], state.get("visible"), **kwargs)


def _row(rt: RaggedTensor, i: int) -> torch.Tensor:
    return rt[i]


def test_forward_contract():
    net = _net()
    state = zoo_state(zoo_observations(0, 6))
    out = _run(net, state)
    assert isinstance(out, RogueNetOutput)
    assert out._fields[:5] == ("action", "log_prob", "entropy", "log_prob_sum", "entropy_sum")
    total_lp, total_ent = torch.zeros(6), torch.zeros(6)
    for name in ACTION_SPACE:
        actors = state["action_masks"][name]["actors"]
        for field, dtype in (("action", torch.int64), ("log_prob", torch.float32), ("entropy", torch.float32)):
            rt = getattr(out, field)[name]
            assert isinstance(rt, RaggedTensor) and rt.dtype == dtype and rt.trailing_shape == (1,)
            assert rt.lengths.tolist() == actors.size1().tolist()
        for i in range(6):
            total_lp[i] += _row(out.log_prob[name], i).sum()
            total_ent[i] += _row(out.entropy[name], i).sum()
    assert out.log_prob_sum.shape == out.entropy_sum.shape == (6, 1)
    torch.testing.assert_close(out.log_prob_sum[:, 0], total_lp)
    torch.testing.assert_close(out.entropy_sum[:, 0], total_ent)
    assert (out.log_prob_sum <= 0).all() and (out.entropy_sum >= 0).all()


def test_sampling_and_reevaluation_agree():
    net = _net()
    state = zoo_state(zoo_observations(1, 8))
    out = _run(net, state)
    again = _run(net, state, action=out.action)
    for name in ACTION_SPACE:
        assert torch.equal(again.action[name].data, out.action[name].data)
        torch.testing.assert_close(again.log_prob[name].data, out.log_prob[name].data, rtol=0, atol=1e-6)
        torch.testing.assert_close(again.entropy[name].data, out.entropy[name].data, rtol=0, atol=1e-6)
    # The stored form {"action": {...}} and ragged buffers are accepted too.
    stored = {"action": {k: v.to_ragged_array() for k, v in out.action.items()}}
    torch.testing.assert_close(_run(net, state, action=stored).log_prob_sum, out.log_prob_sum)


def test_deterministic_takes_the_most_likely_allowed_choice():
    net = _net(seed=3)
    state = zoo_state(zoo_observations(2, 8))
    best = _run(net, state, deterministic=True)
    assert all(torch.equal(best.action[k].data, _run(net, state, deterministic=True).action[k].data) for k in ACTION_SPACE)
    for _ in range(5):
        sampled = _run(net, state)
        for name in ACTION_SPACE:
            assert (best.log_prob[name].data >= sampled.log_prob[name].data - 1e-6).all()


def test_rows_are_independent():
    net = _net(seed=1)
    obs = zoo_observations(3, 7)
    base = zoo_state(obs)
    out, value = _run(net, base, deterministic=True), net.value(base["entities"])
    for j, replacement in ((2, zoo_observations(99, 1, max_units=9, max_trees=9)[0]),
                           (5, zoo_observations(98, 1, empty=True)[0])):
        changed = list(obs)
        changed[j] = replacement
        state = zoo_state(changed)
        out2, value2 = _run(net, state, deterministic=True), net.value(state["entities"])
        for i in range(7):
            if i == j:
                continue
            torch.testing.assert_close(out2.log_prob_sum[i], out.log_prob_sum[i], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(out2.entropy_sum[i], out.entropy_sum[i], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(value2[i], value[i], atol=1e-6, rtol=1e-6)
            for name in ACTION_SPACE:
                assert torch.equal(_row(out2.action[name], i), _row(out.action[name], i))


def test_perturbing_features_of_another_row_changes_nothing():
    net = _net(seed=2)
    state = zoo_state(zoo_observations(4, 5))
    out = _run(net, state, deterministic=True)
    units = RaggedTensor.from_ragged_array(state["entities"]["Unit"])
    noisy = units.data.clone()
    noisy[units.batch_index == 1] += 10.0
    perturbed = dict(state, entities=dict(state["entities"], Unit=units.with_data(noisy)))
    out2 = _run(net, perturbed, deterministic=True)
    rows = [i for i in range(5) if i != 1]
    torch.testing.assert_close(out2.log_prob_sum[rows], out.log_prob_sum[rows], atol=1e-6, rtol=1e-6)


def test_invisible_entities_do_not_reach_visible_actors():
    net = _net(seed=4, action_space={"move": ACTION_SPACE["move"]})
    state = zoo_state(zoo_observations(5, 6), {"move": ACTION_SPACE["move"]})
    out = _run(net, state, deterministic=True)
    trees = RaggedTensor.from_ragged_array(state["entities"]["Tree"])
    hidden = ~RaggedTensor.from_ragged_array(state["visible"]["Tree"]).data[:, 0]
    assert hidden.any()
    moved = trees.data.clone()
    moved[hidden] += 50.0
    perturbed = dict(state, entities=dict(state["entities"], Tree=trees.with_data(moved)))
    out2 = _run(net, perturbed, deterministic=True)
    torch.testing.assert_close(out2.log_prob_sum, out.log_prob_sum, atol=1e-6, rtol=1e-6)
    # ... while the value, which sees every entity, does change.
    assert not torch.allclose(net.value(perturbed["entities"]), net.value(state["entities"]))


def test_value_ignores_visibility_and_critic_shares_the_network():
    net = _net()
    state = zoo_state(zoo_observations(6, 5))
    value = net.value(state["entities"])
    assert value.shape == (5, 1) and value.dtype == torch.float32
    torch.testing.assert_close(net.value(state["entities"], state["visible"]), value)
    critic = net.critic()
    torch.testing.assert_close(critic(state["entities"], state["visible"]), value)
    assert {id(p) for p in critic.parameters()} == {id(p) for p in net.parameters()}
    fresh = RogueNet(OBS_SPACE, ACTION_SPACE)
    assert (fresh.value(state["entities"]) == 0).all()  # zero-initialised value head


@pytest.mark.parametrize("with_visible", [False, True])
def test_forward_with_value_equals_forward_and_value(with_visible):
    net = _net()
    state = zoo_state(zoo_observations(6, 5))
    visible = state["visible"] if with_visible else None
    given = _run(net, state).action
    out, value = net.forward_with_value(state["entities"], state["action_masks"], visible, action=given)
    expected = net(state["entities"], state["action_masks"], visible, action=given)
    for name in expected.log_prob:
        torch.testing.assert_close(out.log_prob[name].data, expected.log_prob[name].data, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(out.entropy[name].data, expected.entropy[name].data, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(value, net.value(state["entities"]), atol=1e-6, rtol=1e-6)
    calls = []
    net.trunk.register_forward_hook(lambda *args: calls.append(1))
    net.forward_with_value(state["entities"], state["action_masks"], visible, action=given)
    assert len(calls) == (2 if with_visible else 1)  # the value sees invisible entities: a pass of its own
    assert net.critic().shared_actor is net


def test_statistics_move_only_inside_collecting_stats():
    net = _net()
    state = zoo_state(zoo_observations(7, 5))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    out = _run(net, state)
    _run(net, state, action=out.action)
    net.value(state["entities"])
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    with net.collecting_stats():
        _run(net, state)
    changed = [k for k, v in net.state_dict().items() if not torch.equal(v, before[k])]
    assert changed and all(k.endswith(("count", "mean", "squares_sum")) for k in changed)
    with net.critic().collecting_stats():
        net.critic()(state["entities"])
    net.freeze()
    frozen = {k: v.clone() for k, v in net.state_dict().items()}
    with net.collecting_stats():
        _run(net, state)
    assert all(torch.equal(v, frozen[k]) for k, v in net.state_dict().items())


def test_state_dict_round_trip_gives_identical_outputs():
    net = _net(seed=5)
    state = zoo_state(zoo_observations(8, 6))
    with net.collecting_stats():
        out = _run(net, state)
    copy = RogueNet(OBS_SPACE, ACTION_SPACE)
    copy.load_state_dict(net.state_dict())
    again = _run(copy, state, action=out.action)
    torch.testing.assert_close(again.log_prob_sum, _run(net, state, action=out.action).log_prob_sum, rtol=0, atol=0)
    assert torch.equal(copy.value(state["entities"]), net.value(state["entities"]))


def test_ragged_tensor_inputs_equal_ragged_buffer_inputs():
    net = _net()
    state = zoo_state(zoo_observations(9, 4))

    def convert(tree):
        if isinstance(tree, dict):
            return {k: convert(v) for k, v in tree.items()}
        return RaggedTensor.from_ragged_array(tree)

    out = _run(net, state, deterministic=True)
    out2 = _run(net, convert(state), deterministic=True)
    assert torch.equal(out.log_prob_sum, out2.log_prob_sum)


def test_zero_actors_zero_entities_and_empty_rows():
    net = _net(action_space=NO_GLOBAL_ACTIONS)
    obs = zoo_observations(10, 2, empty=True) + zoo_observations(10, 1, max_units=0)
    state = zoo_state(obs, NO_GLOBAL_ACTIONS)
    out = _run(net, state)
    for name in NO_GLOBAL_ACTIONS:
        assert out.action[name].n_items == 0 and out.action[name].lengths.tolist() == [0, 0, 0]
    assert torch.equal(out.log_prob_sum, torch.zeros(3, 1))
    assert net.value(state["entities"]).shape == (3, 1)
    again = _run(net, state, action=out.action)
    assert again.log_prob_sum.shape == (3, 1)
    # An entity type missing from the dict counts as zero entities of that type.
    no_flags = torch.from_numpy(state["entities"]["Flag"].size1() == 0)
    assert no_flags.any()
    partial = {k: v for k, v in state["entities"].items() if k != "Flag"}
    torch.testing.assert_close(net.value(partial)[no_flags], net.value(state["entities"])[no_flags])


def test_gradients_are_finite_under_masks():
    net = _net()
    state = zoo_state(zoo_observations(11, 6))
    out = _run(net, state)
    loss = -(out.log_prob_sum.sum() + 0.01 * out.entropy_sum.sum()) + net.value(state["entities"]).sum()
    loss.backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("pooling", ["mean", "max", "meanmax"])
def test_pooling_variants_run(pooling):
    net = _net(RogueNetConfig(pooling=pooling))
    state = zoo_state(zoo_observations(12, 5) + zoo_observations(13, 1, empty=True))
    out = _run(net, state)
    again = _run(net, state, action=out.action)
    torch.testing.assert_close(again.log_prob_sum, out.log_prob_sum)
    assert net.value(state["entities"]).shape == (6, 1)


@pytest.mark.parametrize("name", list(ENV_REGISTRY))
def test_every_example_environment(name):
    env = EnvList(ENV_REGISTRY[name], 3, seed=0)
    space = env.action_space()
    net = RogueNet(env.obs_space(), space, RogueNetConfig(d_model=16, n_layer=1))
    obs = env.reset()
    for _ in range(2):
        state = to_state(obs, space)
        with net.collecting_stats():
            out = net(state["entities"], state["action_masks"], state.get("visible"))
        again = net(state["entities"], state["action_masks"], state.get("visible"), action=out.action)
        assert again.log_prob_sum.shape == (len(env), 1)  # a row per environment, or per seat of a game
        assert net.value(state["entities"], state.get("visible")).shape == (len(env), 1)
        obs = env.act(to_vec_actions(out.action))


def test_the_model_follows_its_parameters_dtype():
    net = _net().double()
    state = zoo_state(zoo_observations(14, 4))
    out = _run(net, state)
    assert out.log_prob_sum.dtype == torch.float32  # log-probabilities are computed in float32
    assert net.value(state["entities"]).dtype == torch.float64


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_outputs_match_cpu():
    net = _net()
    state = zoo_state(zoo_observations(15, 6))
    cpu = _run(net, state, deterministic=True)
    net.cuda()
    gpu = _run(net, state, deterministic=True)  # ragged buffers on the CPU are moved to the model's device
    assert gpu.log_prob_sum.device.type == "cuda"
    torch.testing.assert_close(gpu.log_prob_sum.cpu(), cpu.log_prob_sum, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(net.value(state["entities"]).cpu(), net.cpu().value(state["entities"]), atol=1e-4,
                               rtol=1e-4)
