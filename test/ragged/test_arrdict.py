"""Tests for ``arrdict``."""

import copy
import pickle

import dill
import numpy as np
import pytest
import torch

from entmachin.ragged.arrays import n_sequences, ragged_from_arrays, ragged_to_arrays
from entmachin.ragged.arrdict import arrdict
from entmachin.ragged.tensor import RaggedTensor, ragged_tensor_equal


def make():
    return arrdict(
        obs={"Robot": np.arange(12.0).reshape(4, 3), "mask": torch.ones(4, 1, dtype=torch.bool)},
        reward=torch.arange(4.0),
    )


def test_item_and_attribute_access():
    d = make()
    assert isinstance(d, dict) and isinstance(d.obs, arrdict)
    assert d.obs is d["obs"] and d.obs.Robot is d["obs"]["Robot"]
    d.value = torch.zeros(4)
    assert "value" in d and d["value"] is d.value
    del d.value
    assert "value" not in d
    assert dict.get(d, "reward") is d.reward and set(d) == {"obs", "reward"}
    assert "Robot" in dir(d.obs)


def test_nested_plain_dicts_become_arrdicts():
    d = arrdict({"a": {"b": {"c": 1}}})
    assert type(d.a) is arrdict and type(d.a.b) is arrdict and d.a.b.c == 1
    d["x"] = {"y": 2}
    d.update(z={"w": 3})
    d.setdefault("s", {"t": 4})
    d |= {"u": {"v": 5}}
    merged = d | {"m": {"n": 6}}
    for key in ("x", "z", "s", "u"):
        assert type(d[key]) is arrdict
    assert type(merged) is arrdict and type(merged.m) is arrdict and "m" not in d
    copied = d.copy()
    assert type(copied) is arrdict and copied.a is not d.a and copied.a.b.c == 1


def test_indexing_is_forwarded_to_every_leaf():
    d = make()
    d.ragged = ragged_from_arrays(np.arange(5, dtype=np.int64)[:, None], [1, 0, 2, 2])
    d.rt = RaggedTensor.from_lengths(torch.arange(5.0)[:, None], [1, 0, 2, 2])
    picked = d[[2, 0]]
    np.testing.assert_array_equal(picked.obs.Robot, d.obs.Robot[[2, 0]])
    assert picked.reward.tolist() == [2.0, 0.0]
    assert ragged_to_arrays(picked.ragged)[1].tolist() == [2, 1]
    assert picked.rt.lengths.tolist() == [2, 1]
    sliced = d[1:3]
    assert sliced.reward.tolist() == [1.0, 2.0] and n_sequences(sliced.ragged) == 2
    assert d[torch.tensor([3])].obs.mask.shape == (1, 1)
    assert d[np.array([True, False, False, True])].reward.tolist() == [0.0, 3.0]
    assert d[0].reward.item() == 0.0
    assert arrdict()[0] == arrdict()


def test_index_assignment_writes_into_every_leaf():
    d = make()
    d[1:3] = {"obs": {"Robot": np.zeros((2, 3)), "mask": torch.zeros(2, 1, dtype=torch.bool)},
              "reward": torch.tensor([-1.0, -2.0])}
    assert d.reward.tolist() == [0.0, -1.0, -2.0, 3.0]
    assert d.obs.Robot[1:3].sum() == 0 and d.obs.mask.sum() == 2


def test_to_and_map():
    d = make()
    d.rt = RaggedTensor.from_lengths(torch.zeros(2, 1), [2])
    d.count = 3
    wide = d.to(torch.float64)
    assert wide.reward.dtype == torch.float64 and wide.rt.dtype == torch.float64
    assert wide.obs.mask.dtype == torch.float64
    assert wide.obs.Robot is d.obs.Robot and wide.count == 3  # leaves without .to stay
    assert d.reward.dtype == torch.float32
    doubled = d.map(lambda v: v if isinstance(v, RaggedTensor) else v * 2)
    assert doubled.count == 6 and doubled.reward.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert type(doubled.obs) is arrdict
    assert list(d.leaves()) == ["obs.Robot", "obs.mask", "reward", "rt", "count"]


def test_repr_shows_shapes_not_values():
    d = make()
    d.empty = {}
    d.ragged = ragged_from_arrays(np.zeros((3, 2), np.float32), [1, 2])
    d.count = 7
    assert repr(d) == (
        "arrdict:\n"
        "obs       arrdict:\n"
        "          Robot    ndarray((4, 3), float64)\n"
        "          mask     Tensor((4, 1), torch.bool)\n"
        "reward    Tensor((4,), torch.float32)\n"
        "empty     arrdict: {}\n"
        "ragged    RaggedArrayF32(n_sequences=2, n_items=3, n_features=2)\n"
        "count     7"
    )
    assert str(arrdict()) == "arrdict: {}"
    rt = RaggedTensor.from_lengths(torch.zeros(2, 1), [2])
    assert repr(arrdict(rt=rt)) == f"arrdict:\nrt    {rt!r}"


@pytest.mark.parametrize("roundtrip", [
    lambda d: pickle.loads(pickle.dumps(d)),
    lambda d: pickle.loads(pickle.dumps(d, protocol=0)),
    lambda d: dill.loads(dill.dumps(d)),
    copy.deepcopy,
])
def test_pickle_round_trips(roundtrip):
    d = make()
    d.ragged = ragged_from_arrays(np.zeros((3, 2), np.float32), [1, 2])
    d.rt = RaggedTensor.from_lengths(torch.arange(3.0)[:, None], [1, 2])
    back = roundtrip(d)
    assert type(back) is arrdict and type(back.obs) is arrdict
    np.testing.assert_array_equal(back.obs.Robot, d.obs.Robot)
    assert torch.equal(back.reward, d.reward)
    assert ragged_to_arrays(back.ragged)[1].tolist() == [1, 2]
    assert ragged_tensor_equal(back.rt, d.rt)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda d: d.missing, AttributeError,
         r"arrdict has no attribute or key 'missing'; keys are \['obs', 'reward'\]"),
        (lambda d: d["missing"], KeyError,
         r"'missing' is not a key of this arrdict; keys are \['obs', 'reward'\]"),
        (lambda d: delattr(d, "missing"), AttributeError, r"arrdict has no attribute or key 'missing'"),
        (lambda d: setattr(d, "items", 1), AttributeError,
         r"arrdict: 'items' is a method name; assign with d\['items'\] = ... instead"),
        (lambda d: d.update({1: 2}), TypeError, r"arrdict: arrdict keys must be str, got int 1"),
        (lambda d: d.setdefault(1, 2), TypeError, r"arrdict.setdefault: arrdict keys must be str"),
        (lambda d: d.__setitem__(0, 1), TypeError,
         r"arrdict\[index\] = value: value must be a dict/arrdict with the same keys"),
        (lambda d: d.__setitem__(0, {"obs": 1}), ValueError,
         r"arrdict\[index\] = value: value has keys \['obs'\], expected \['obs', 'reward'\]"),
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(make())
