"""Each check done once: rows checked when stored are not checked again by update(), and what
update() reads of them is checked when they are stored."""
import copy
from functools import partial

import numpy as np
import pytest
import torch
from torch import nn

import entmachin.model.rogue_net as rogue_net
from entmachin.env import EnvList
from entmachin.env.examples import MineSweeper
from entmachin.frame import A2C, DQN, PPO, RolloutCollector
from entmachin.frame.store_checks import trusted_inputs
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model.inputs import DeferredChecks
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayI64
from test.frame.test_dqn_entities import make as make_entity_dqn
from test.frame.test_dqn_entities import transitions

SMALL = RogueNetConfig(d_model=16, n_layer=1, n_head=2, d_qk=8)


def _envs():
    return EnvList(partial(MineSweeper, orbital_cannon=True), num_envs=4, seed=3)


@pytest.fixture
def counted(monkeypatch):
    """Counts RogueNet's value checks and the calls that would have run them."""
    calls = {"check_masks": 0, "check_actions": 0, "raise_first": 0, "checked calls": 0, "trusted calls": 0}

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    original = RogueNet._checks

    def checks(self):
        out = original(self)
        calls["checked calls" if out.enabled else "trusted calls"] += 1
        return out

    monkeypatch.setattr(rogue_net, "check_masks", counting("check_masks", rogue_net.check_masks))
    monkeypatch.setattr(rogue_net, "check_actions", counting("check_actions", rogue_net.check_actions))
    monkeypatch.setattr(DeferredChecks, "raise_first", counting("raise_first", DeferredChecks.raise_first))
    monkeypatch.setattr(RogueNet, "_checks", checks)
    return calls


def _ppo():
    net = RogueNet(_envs().obs_space(), _envs().action_space(), SMALL)
    return PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=16, actor_update_times=3,
               critic_update_times=3, value_clip=0.2, seed=1)


def _a2c():
    envs = _envs()
    actor = RogueNet(envs.obs_space(), envs.action_space(), SMALL)
    critic = RogueNet(envs.obs_space(), envs.action_space(), SMALL).critic()
    return A2C(actor, critic, torch.optim.Adam, nn.MSELoss(), batch_size=16, actor_update_times=2,
               critic_update_times=3, seed=1)


def _dqn():
    net = RogueNet(_envs().obs_space(), _envs().action_space(), SMALL, q_head="plain")
    return DQN(net, copy.deepcopy(net), torch.optim.Adam, nn.MSELoss(), batch_size=16, mode="double", seed=1)


@pytest.mark.parametrize("make", [_ppo, _a2c, _dqn], ids=["PPO", "A2C", "DQN"])
def test_update_runs_no_value_check_of_stored_rows(make, counted):
    torch.manual_seed(0)
    frame = make()
    collector = RolloutCollector(frame, _envs(), n_steps=8)
    collector.collect()  # act and store_rollout: checked
    assert counted["check_masks"] > 0 and counted["checked calls"] > 0 and counted["raise_first"] > 0
    for key in counted:
        counted[key] = 0
    frame.update()
    assert counted["trusted calls"] > 0  # the update called the networks...
    assert counted["checked calls"] == counted["check_masks"] == counted["check_actions"] == 0  # ...trusting them
    # nor of the Q-network's outputs: non-finite values fall under the steps' one finite check.
    assert counted["raise_first"] == 0
    collector.collect()  # outside update() the networks check again
    assert counted["checked calls"] > 0 and counted["check_masks"] > 0


def test_trusted_inputs_enters_each_model_once_and_leaves_in_reverse():
    log = []

    class Trusting(nn.Module):
        def __init__(self, name):
            super().__init__()
            self.name = name

        def trusted_inputs(self):
            outer = self

            class Entry:
                def __enter__(self):
                    log.append(("enter", outer.name))

                def __exit__(self, *exc):
                    log.append(("exit", outer.name))

            return Entry()

    a, b, plain = Trusting("a"), Trusting("b"), nn.Linear(2, 2)
    with pytest.raises(KeyError):
        with trusted_inputs(a, nn.DataParallel(b), plain, a, b, None):
            assert log == [("enter", "a"), ("enter", "b")]
            raise KeyError("inside")
    assert log == [("enter", "a"), ("enter", "b"), ("exit", "b"), ("exit", "a")]


def test_trusted_inputs_of_rogue_nets_wrapped_or_bound():
    envs = _envs()
    net = RogueNet(envs.obs_space(), envs.action_space(), SMALL, q_head="plain")
    other = copy.deepcopy(net)
    with trusted_inputs(nn.DataParallel(net), net.critic(), other.q_values):
        assert net.inputs_trusted() and other.inputs_trusted()
    assert not net.inputs_trusted() and not other.inputs_trusted()


# ------------------------------------------------------- what a Q-frame's update reads of next_state


def _forbid_all_next_moves(steps, t, row):
    """Step ``t``'s next_state with every ``move`` choice of the first actor of ``row`` forbidden."""
    after = steps[t]["next_state"]
    move = after["action_masks"]["move"]
    mask = move["mask"].as_array().copy()
    start = int(np.cumsum(move["actors"].size1())[row] - move["actors"].size1()[row])
    mask[start] = False
    changed = dict(after["action_masks"], move=dict(move, mask=RaggedArrayBool.from_flattened(mask, move["mask"].size1())))
    steps[t]["next_state"] = dict(after, action_masks=changed)


def _bootstrapping():
    steps = transitions(np.random.default_rng(5), n_steps=2, n_rows=3)
    for step in steps:
        step["terminal"] = np.zeros(3, bool)
        step["truncated"] = np.zeros(3, bool)
    return steps  # the last step's rows bootstrap from their next_state


def test_dqn_refuses_a_bootstrap_next_state_whose_actor_has_no_allowed_choice():
    steps = _bootstrapping()
    _forbid_all_next_moves(steps, 1, 2)
    frame = make_entity_dqn(batch_size=3)
    with pytest.raises(ValueError, match=r"^DQN.store_rollout\[1\]\['next_state'\]\['action_masks'\]\['move'\] row 2 "
                                         r"leaves actor 0 without an allowed choice; every actor needs one$"):
        frame.store_rollout(steps)
    assert frame.replay_buffer.size() == 0
    frame.store_rollout(_bootstrapping())
    frame.update()


def test_dqn_refuses_a_bootstrap_next_state_actor_out_of_range():
    steps = _bootstrapping()
    after = steps[1]["next_state"]
    actors = after["action_masks"]["pick"]["actors"]
    index = actors.as_array().copy()
    index[-1] = 99
    pick = dict(after["action_masks"]["pick"], actors=RaggedArrayI64.from_flattened(index, actors.size1()))
    steps[1]["next_state"] = dict(after, action_masks=dict(after["action_masks"], pick=pick))
    with pytest.raises(ValueError, match=r"DQN.store_rollout\[1\]\['next_state'\]\['action_masks'\]\['pick'\]"
                                         r"\['actors'\] row 2 holds 99; expected an entity index in \[0, \d\)"):
        make_entity_dqn(batch_size=3).store_rollout(steps)


def test_actor_critic_frames_do_not_read_next_state_masks():
    steps = _bootstrapping()
    _forbid_all_next_moves(steps, 1, 2)
    net = make_entity_dqn(batch_size=3).qnet  # only the critic reads next_state, at store time
    frame = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), seed=0)
    frame.store_rollout(steps)
    assert frame.replay_buffer.size() == 6


def test_visible_must_have_one_value_per_entity():
    steps = _bootstrapping()
    state = steps[0]["state"]
    lengths = state["entities"]["A"].size1().copy()
    lengths[1] += 1
    visible = RaggedArrayBool.from_flattened(np.ones((int(lengths.sum()), 1), bool), lengths)
    steps[0]["state"] = dict(state, visible={"A": visible})
    steps[1]["state"] = dict(steps[1]["state"], visible={"A": RaggedArrayBool.from_flattened(
        np.ones((int(steps[1]["state"]["entities"]["A"].size1().sum()), 1), bool),
        steps[1]["state"]["entities"]["A"].size1())})
    with pytest.raises(ValueError, match=r"DQN.store_rollout\[0\]\['state'\]\['visible'\]\['A'\] row 1 has \d items, "
                                         r"but \['entities'\]\['A'\] has \d in that row; one per entity"):
        make_entity_dqn(batch_size=3).store_rollout(steps)
