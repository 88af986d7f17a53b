"""Transitions: checks, copies, assignment and device moves."""

import numpy as np
import pytest
import torch

from entmachin.buffer import Transition, TransitionBase
from entmachin.ragged import RaggedTensor, ragged_from_arrays, ragged_to_arrays


def _step(n_rows=1, **custom):
    return dict(
        state={"state": torch.zeros(n_rows, 3)},
        action={"action": torch.zeros(n_rows, 1, dtype=torch.int64)},
        next_state={"state": torch.ones(n_rows, 3)},
        reward=1.0 if n_rows == 1 else torch.ones(n_rows, 1),
        terminal=False if n_rows == 1 else torch.zeros(n_rows, 1, dtype=torch.bool),
        **custom,
    )


def test_default_transition_attributes_and_order():
    t = Transition(**_step(zeta=1, alpha="a"))
    assert t.major_attr == ["state", "action", "next_state"]
    assert t.sub_attr == ["reward", "terminal"]
    assert t.custom_attr == ["alpha", "zeta"]  # custom attributes are ordered by name
    assert t.keys() == ["state", "action", "next_state", "reward", "terminal", "alpha", "zeta"]
    assert len(t) == 7 and "alpha" in t and t.has_keys(["state", "zeta"]) and not t.has_keys(["x"])
    assert t.n_rows == 1
    assert t["alpha"] == "a" and t.zeta == 1
    assert t.state["state"].shape == (1, 3) and t.state.state is t.state["state"]


def test_many_rows_per_transition():
    t = Transition(**_step(4))
    assert t.n_rows == 4


def test_values_are_copied_and_callers_data_untouched():
    state = torch.zeros(1, 3, requires_grad=True)
    arr = np.zeros((1, 2), np.float32)
    flat = np.zeros((2, 2), np.float32)
    buf = ragged_from_arrays(flat, [2])
    info = {"list": [1, 2]}
    step = dict(state={"s": state, "a": arr}, action={"r": buf}, next_state={}, reward=1.0, terminal=False)
    t = Transition(**step, info=info)
    with torch.no_grad():
        state += 5
    arr += 5
    info["list"].append(3)
    assert not t.state.s.requires_grad
    assert float(t.state.s.sum()) == 0.0 and float(t.state.a.sum()) == 0.0
    assert t.info == {"list": [1, 2]}
    assert set(step["state"]) == {"s", "a"}  # the caller's dict is not replaced or mutated
    assert step["state"]["s"] is state


def test_attribute_and_item_assignment_really_assign():
    t = Transition(**_step())
    t.reward = 2.5
    assert t.reward == 2.5
    t["reward"] = 3.5
    assert t["reward"] == 3.5
    new_state = {"state": torch.full((1, 3), 7.0)}
    t.state = new_state
    new_state["state"] += 1
    assert float(t.state["state"][0, 0]) == 7.0


def test_assignment_is_checked():
    t = Transition(**_step())
    with pytest.raises(ValueError, match=r"sub attribute 'reward' holds 2 rows, but state\['state'\] holds 1"):
        t.reward = torch.ones(2, 1)
    assert t.reward == 1.0  # unchanged after a failed assignment
    with pytest.raises(AttributeError, match="cannot set 'rewards'; attributes are fixed"):
        t.rewards = 1.0
    with pytest.raises(KeyError, match="cannot set 'rewards'"):
        t["rewards"] = 1.0
    with pytest.raises(TypeError, match="terminal must be a bool"):
        t.terminal = 1


def test_unknown_attribute_access_raises():
    t = Transition(**_step())
    with pytest.raises(AttributeError, match="has no attribute 'rewards'"):
        t.rewards
    with pytest.raises(KeyError, match="'rewards' is not an attribute"):
        t["rewards"]


@pytest.mark.parametrize(
    "change, error, match",
    [
        (dict(reward=torch.ones(2, 1)), ValueError, r"sub attribute 'reward' holds 2 rows, but state\['state'\] holds 1"),
        (dict(next_state={"state": torch.ones(2, 3)}), ValueError, r"major attribute next_state\['state'\] holds 2 rows, but state\['state'\] holds 1"),
        (dict(state={"state": 1.0}), TypeError, r"major attribute state\['state'\]: expected a tensor or array"),
        (dict(state={"state": torch.tensor(1.0)}), TypeError, r"major attribute state\['state'\]: expected a tensor"),
        (dict(state=[1, 2]), TypeError, "major attribute state: expected a dict"),
        (dict(state={1: torch.zeros(1, 3)}), TypeError, "keys must be str"),
        (dict(reward="high"), TypeError, "sub attribute 'reward': expected a scalar"),
        (dict(reward=ragged_from_arrays(np.zeros((1, 1), np.float32), [1])), TypeError, "ragged values belong in a major attribute"),
        (dict(terminal=0), TypeError, "terminal must be a bool or a bool tensor"),
        (dict(terminal=torch.zeros(1, 1)), TypeError, "terminal must be a bool or a bool tensor"),
        (dict(info=torch.zeros(1)), TypeError, "custom attribute 'info' holds a Tensor"),
        (dict(info={"nested": [torch.zeros(1)]}), TypeError, "custom attribute 'info' holds a Tensor"),
    ],
)
def test_invalid_transitions_raise(change, error, match):
    step = _step()
    step.update(change)
    with pytest.raises(error, match=match):
        Transition(**step)


def test_zero_rows_and_scalar_with_many_rows_raise():
    with pytest.raises(ValueError, match="holds 0 rows"):
        Transition(**_step(0))
    step = _step(2)
    step["reward"] = 1.0
    with pytest.raises(ValueError, match=r"sub attribute 'reward' is a scalar \(one row\), but state\['state'\] holds 2 rows"):
        Transition(**step)


def test_transition_base_checks_names():
    with pytest.raises(ValueError, match="1 major attribute names but 0 values"):
        TransitionBase(["a"], [], [], [], [], [])
    with pytest.raises(ValueError, match="attribute name 'to' is a method name"):
        TransitionBase(["to"], [], [], [{}], [], [])
    with pytest.raises(ValueError, match="attribute name 'a' is given twice"):
        TransitionBase(["a"], ["a"], [], [{}], [1.0], [])
    with pytest.raises(ValueError, match="must be identifiers not starting with '_'"):
        TransitionBase(["_a"], [], [], [{}], [], [])


def test_custom_transition_base():
    t = TransitionBase(["obs"], ["value", "gae"], ["tag"], [{"x": np.zeros((2, 4))}], [np.zeros(2), np.ones((2, 1))], ["t"])
    assert t.n_rows == 2 and t.keys() == ["obs", "value", "gae", "tag"]


def test_ragged_rows_are_sequences():
    ents = ragged_from_arrays(np.arange(6, dtype=np.float32).reshape(3, 2), [2, 0, 1])
    t = Transition({"entities": {"Robot": ents}}, {}, {}, np.zeros(3, np.float32), np.zeros(3, bool))
    assert t.n_rows == 3
    flat, lengths = ragged_to_arrays(t.state.entities.Robot)
    assert lengths.tolist() == [2, 0, 1] and flat.tolist() == [[0, 1], [2, 3], [4, 5]]
    rt = RaggedTensor.from_lengths(torch.ones(3, 2), [1, 1, 1])
    t.next_state = {"entities": {"Robot": rt}}
    assert t.next_state.entities.Robot is not rt and len(t.next_state.entities.Robot) == 3


def test_to_moves_numpy_and_ragged_to_tensors():
    ents = ragged_from_arrays(np.zeros((2, 2), np.float32), [2])
    t = Transition({"e": ents, "d": np.zeros((1, 2))}, {}, {}, torch.ones(1, 1), False)
    assert t.to("cpu") is t
    assert isinstance(t.state.e, RaggedTensor) and isinstance(t.state.d, torch.Tensor)
    assert isinstance(t.reward, torch.Tensor) and t.terminal is False
    assert "Transition(n_rows=1" in repr(t)


def test_from_data_makes_the_named_attributes_major_and_the_rest_sub():
    data = {"state": {"x": torch.zeros(2, 3)}, "reward": torch.ones(2, 1), "action": {"a": torch.zeros(2, 1)}}
    t = TransitionBase.from_data(data, ("state", "action"))
    assert type(t) is TransitionBase and t.n_rows == 2
    assert (t.major_attr, t.sub_attr, t.custom_attr) == (["state", "action"], ["reward"], [])
