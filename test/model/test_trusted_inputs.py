"""RogueNet.trusted_inputs: the same results without the value checks, and only where entered."""
import threading

import numpy as np
import pytest
import torch

import entmachin.model.rogue_net as rogue_net
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model.inputs import DeferredChecks
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayI64
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state

SMALL = RogueNetConfig(d_model=16, n_layer=2, n_head=2, d_qk=8)


def _net(q_head=None, seed=0):
    torch.manual_seed(seed)
    net = RogueNet(OBS_SPACE, ACTION_SPACE, SMALL, q_head=q_head)
    torch.nn.init.normal_(net.value_head.weight)  # a value that is not zero everywhere
    return net


def _state(seed=0, n=6, visibility=True):
    return zoo_state(zoo_observations(seed, n, visibility=visibility))


@pytest.fixture
def counted(monkeypatch):
    """Counts the value checks RogueNet runs: check_masks, check_actions and the syncs that decide them."""
    calls = {"check_masks": 0, "check_actions": 0, "raise_first": 0}

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(rogue_net, "check_masks", counting("check_masks", rogue_net.check_masks))
    monkeypatch.setattr(rogue_net, "check_actions", counting("check_actions", rogue_net.check_actions))
    monkeypatch.setattr(DeferredChecks, "raise_first", counting("raise_first", DeferredChecks.raise_first))
    return calls


def _equal(a, b):
    """Bit for bit, through tuples, dicts and ragged tensors."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _equal(a[k], b[k])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _equal(x, y)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    elif a is None:  # an output a network without memory leaves empty
        assert b is None
    else:  # RaggedTensor
        assert torch.equal(a.data, b.data) and torch.equal(a.lengths, b.lengths)


def _calls(net, state, given):
    """Every entry point on ``state``: each a function of no arguments, reseeded so that sampling repeats."""
    e, m, v = state["entities"], state["action_masks"], state.get("visible")
    critic = net.critic()
    return {
        "forward sampling": lambda: net(e, m, v),
        "forward given": lambda: net(e, m, v, action=given),
        "forward deterministic": lambda: net(e, m, v, deterministic=True),
        "forward_with_value": lambda: net.forward_with_value(e, m, None, action=given),
        "forward_with_value visible": lambda: net.forward_with_value(e, m, v, action=given),
        "value": lambda: net.value(e),
        "critic": lambda: critic(e, v),
        "q_values": lambda: net.q_values(e, m, v),
    }


@pytest.mark.parametrize("q_head", ["plain", "dueling"])
@pytest.mark.parametrize("seed", [0, 3])
def test_trusted_results_are_bit_for_bit_those_of_the_checked_path(q_head, seed, counted):
    net = _net(q_head, seed)
    state = _state(seed)
    given = net(state["entities"], state["action_masks"], state.get("visible")).action
    for name, call in _calls(net, state, given).items():
        torch.manual_seed(7)
        syncs = counted["raise_first"]
        checked = call()
        assert counted["raise_first"] > syncs, name  # the checked path decides its checks
        before = dict(counted)
        with net.trusted_inputs():
            torch.manual_seed(7)
            trusted = call()
        assert counted == before, name  # no check ran, no sync decided one
        _equal(checked, trusted)


def test_gradients_are_those_of_the_checked_path():
    net = _net("plain")
    state = _state(1)
    given = net(state["entities"], state["action_masks"], state.get("visible")).action
    grads = []
    for trusted in (False, True):
        net.zero_grad()
        with net.trusted_inputs() if trusted else torch.enable_grad():
            out, value = net.forward_with_value(state["entities"], state["action_masks"], action=given)
            q = net.q_values(state["entities"], state["action_masks"])
        finite = torch.cat([x.data[torch.isfinite(x.data)] for x in q.values()])
        (out.log_prob_sum.sum() + value.sum() + finite.sum()).backward()
        grads.append([p.grad.clone() for p in net.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def _forbid_everything(state):
    """``state`` with every choice of the first unit's ``move`` forbidden."""
    move = state["action_masks"]["move"]
    mask = move["mask"].as_array().copy()
    assert mask.shape[0] > 0
    mask[0] = False
    masks = dict(state["action_masks"], move=dict(move, mask=RaggedArrayBool.from_flattened(mask, move["mask"].size1())))
    return dict(state, action_masks=masks)


def _forbidden_action(net, state):
    """A valid output's actions with the first ``move`` changed to a choice its mask forbids."""
    out = net(state["entities"], state["action_masks"], state.get("visible"))
    mask = state["action_masks"]["move"]["mask"].as_array()
    row = int(np.flatnonzero(~mask[0])[0])
    action = {k: v for k, v in out.action.items()}
    data = action["move"].data.clone()
    data[0, 0] = row
    action["move"] = action["move"].with_data(data)
    return action


def _state_with_a_forbidden_choice():
    for seed in range(50):
        state = _state(seed)
        mask = state["action_masks"]["move"]["mask"].as_array()
        if mask.shape[0] and not mask[0].all():
            return state
    raise AssertionError("no zoo state has a forbidden move")


def test_invalid_masks_and_actions_are_refused_outside_the_block(counted):
    net = _net()
    state = _state_with_a_forbidden_choice()
    bad_action = _forbidden_action(net, state)
    bad_masks = _forbid_everything(state)
    e, v = state["entities"], state.get("visible")
    with pytest.raises(ValueError, match=r"action\['move'\] row \d+ actor 0 chose \d, which its mask forbids"):
        net(e, state["action_masks"], v, action=bad_action)
    with pytest.raises(ValueError, match=r"action_masks\['move'\]\['mask'\] row \d+ forbids every choice of actor 0"):
        net(e, bad_masks["action_masks"], v)
    nan = dict(e, Unit=e["Unit"].__class__.from_flattened(np.full_like(e["Unit"].as_array(), np.nan),
                                                           e["Unit"].size1()))
    with pytest.raises(ValueError, match=r"entities\['Unit'\] row \d+ entity 0 has nan"):
        net.value(nan)
    with net.trusted_inputs():  # undefined results, but nothing checks them
        net(e, state["action_masks"], v, action=bad_action)
    with pytest.raises(RuntimeError, match="inside"):
        with net.trusted_inputs():
            raise RuntimeError("inside")
    assert not net.inputs_trusted()
    with pytest.raises(ValueError, match="which its mask forbids"):  # the checks are back after an exception
        net(e, state["action_masks"], v, action=bad_action)
    with pytest.raises(ValueError, match="forbids every choice"):
        net.critic().net(e, bad_masks["action_masks"], v)


def test_structural_checks_still_run_inside_the_block():
    net = _net("plain")
    state = _state(2)
    e, m = state["entities"], state["action_masks"]
    wide = dict(e, Tree=e["Tree"].__class__.from_flattened(np.zeros((e["Tree"].items(), 3), np.float32),
                                                           e["Tree"].size1()))
    short = dict(m, move=dict(m["move"], actors=RaggedArrayI64.from_flattened(
        m["move"]["actors"].as_array()[:0], np.zeros(2, np.int64))))
    with net.trusted_inputs():
        with pytest.raises(ValueError, match=r"entities\['Tree'\] has items of shape \(3,\)"):
            net.value(wide)
        with pytest.raises(ValueError, match="is not an entity type"):
            net.value(dict(e, Rock=e["Tree"]))
        with pytest.raises(ValueError, match=r"action_masks\['move'\]\['mask'\] has 6 rows, but .* has 2"):
            net.q_values(e, short)
        with pytest.raises(ValueError, match="unknown action"):
            net(e, dict(m, jump=m["move"]))


def test_blocks_nest_and_the_critic_view_shares_its_network():
    net = _net()
    critic = net.critic()
    assert not net.inputs_trusted() and not critic.inputs_trusted()
    with critic.trusted_inputs():
        assert net.inputs_trusted() and critic.inputs_trusted()
        with net.trusted_inputs() as entered:
            assert entered is net
        assert net.inputs_trusted()
    assert not net.inputs_trusted() and not critic.inputs_trusted()
    other = _net()
    with net.trusted_inputs():
        assert not other.inputs_trusted()


def test_other_threads_calls_are_checked():
    net = _net()
    state = _state_with_a_forbidden_choice()
    bad_action = _forbidden_action(net, state)
    seen = {}

    def other():
        seen["trusted"] = net.inputs_trusted()
        try:
            net(state["entities"], state["action_masks"], state.get("visible"), action=bad_action)
        except ValueError as e:
            seen["error"] = str(e)

    with net.trusted_inputs():
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert net.inputs_trusted()
    assert seen["trusted"] is False and "which its mask forbids" in seen["error"]


def test_data_parallel_replicas_carry_the_trust_of_the_thread_that_made_them():
    """nn.DataParallel replicates in the caller's thread and runs each replica in a worker thread."""
    net = _net()
    critic = net.critic()

    def replicate(module):  # what torch.nn.parallel.replicate does to each module of the tree
        replicas = {id(m): m._replicate_for_data_parallel() for m in module.modules()}
        for m in module.modules():
            for key, child in m._modules.items():
                replicas[id(m)]._modules[key] = replicas[id(child)]
        return replicas[id(module)]

    outside = replicate(critic)
    with net.trusted_inputs():
        inside = replicate(critic)
        inside_net = replicate(net)
    seen = {}
    thread = threading.Thread(target=lambda: seen.update(
        inside=inside.inputs_trusted(), inside_net=inside_net.inputs_trusted(), outside=outside.inputs_trusted()))
    thread.start()
    thread.join()
    assert seen == {"inside": True, "inside_net": True, "outside": False}
    assert not net.inputs_trusted()
