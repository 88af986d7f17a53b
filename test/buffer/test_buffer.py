"""Buffer: Machin's sample_batch contract, ring semantics, schema checks and ownership."""

import numpy as np
import pytest
import torch

from entmachin.buffer import Buffer, Transition, TransitionBase
from entmachin.ragged import arrdict


def _step(i, n_rows=1, **custom):
    """Row values encode their step number i, so samples can be traced back."""
    rows = torch.arange(i, i + n_rows, dtype=torch.float32)[:, None]  # [n_rows, 1]
    return dict(
        state={"state": rows.repeat(1, 3)},
        action={"action": rows.long()},
        next_state={"state": rows.repeat(1, 3) + 1},
        reward=float(i) if n_rows == 1 else rows.clone(),
        terminal=bool(i % 2) if n_rows == 1 else (rows % 2).bool(),
        **custom,
    )


def _filled(n=5, buffer_size=10):
    buffer = Buffer(buffer_size, seed=0)
    for i in range(n):
        buffer.append(_step(i, info=i * 10, tag=f"t{i}"))
    return buffer


def _pick_first_and_last(buffer, batch_size):
    return [0, buffer.size() - 1]


METHODS = {"random_unique": 3, "random": 3, "all": 5, _pick_first_and_last: 2}
ATTRS = [None, ["state", "reward"], ["state", "*"], ["*", "info"], ["reward"], ["terminal", "action", "next_state"]]


@pytest.mark.parametrize("method, expected_n", list(METHODS.items()), ids=lambda m: getattr(m, "__name__", str(m)))
@pytest.mark.parametrize("concatenate", [True, False])
@pytest.mark.parametrize("sample_attrs", ATTRS, ids=str)
def test_sample_batch_contract(method, expected_n, concatenate, sample_attrs):
    buffer = _filled()
    n, values = buffer.sample_batch(3, concatenate=concatenate, sample_method=method, sample_attrs=sample_attrs)
    assert n == expected_n
    names = buffer.schema.keys if sample_attrs is None else sample_attrs
    assert isinstance(values, tuple) and len(values) == len(names)
    steps = None
    for name, value in zip(names, values):
        if name in ("state", "next_state", "action"):
            assert isinstance(value, arrdict) and list(value) == [name if name != "next_state" else "state"]
            leaf = next(iter(value.values()))
            width, dtype = (1, torch.int64) if name == "action" else (3, torch.float32)
            if concatenate:
                assert leaf.shape == (n, width) and leaf.dtype == dtype
                rows = leaf[:, 0]
            else:
                assert len(leaf) == n and all(x.shape == (1, width) and x.dtype == dtype for x in leaf)
                rows = torch.cat(leaf)[:, 0]
            rows = rows.float() - (1 if name == "next_state" else 0)
            steps = rows if steps is None else steps
            assert torch.equal(rows, steps)  # every attribute comes from the same rows
        elif name in ("reward", "terminal"):
            dtype = torch.float32 if name == "reward" else torch.bool
            if concatenate:
                assert value.shape == (n, 1) and value.dtype == dtype
            else:
                assert len(value) == n and all(type(x) is (float if name == "reward" else bool) for x in value)
        elif name == "*":
            named = set(names)
            assert set(value) == {"info", "tag"} - named
            assert all(isinstance(v, list) and len(v) == n for v in value.values())
        else:
            assert isinstance(value, list) and len(value) == n
            if steps is not None:
                expected = {"info": [int(s) * 10 for s in steps], "tag": [f"t{int(s)}" for s in steps]}
                assert value == expected[name]
    if method == "all" and steps is not None:
        assert steps.tolist() == [0, 1, 2, 3, 4]  # oldest first
    if method is _pick_first_and_last and steps is not None:
        assert steps.tolist() == [0, 4]


@pytest.mark.parametrize("method", list(METHODS), ids=lambda m: getattr(m, "__name__", str(m)))
@pytest.mark.parametrize("concatenate", [True, False])
def test_empty_buffer_returns_nothing(method, concatenate):
    assert Buffer(4).sample_batch(8, concatenate=concatenate, sample_method=method) == (0, None)
    buffer = _filled()
    buffer.clear()
    assert buffer.size() == 0
    assert buffer.sample_batch(8, concatenate=concatenate, sample_method=method) == (0, None)


def test_batch_zero():
    buffer = _filled()
    assert buffer.sample_batch(0) == (0, None)
    assert buffer.sample_batch(0, sample_method="random") == (0, None)
    assert buffer.sample_batch(0, sample_method="all")[0] == 5  # "all" ignores batch_size, as in Machin
    assert buffer.sample_batch(0, sample_method=lambda b, n: [])[0] == 0


def test_random_unique_is_unique_and_capped():
    buffer = _filled()
    n, (state,) = buffer.sample_batch(100, sample_attrs=["state"])
    assert n == 5 and sorted(state.state[:, 0].tolist()) == [0, 1, 2, 3, 4]
    n, (state,) = buffer.sample_batch(100, sample_method="random", sample_attrs=["state"])
    assert n == 100


def test_sample_batch_argument_errors():
    buffer = _filled()
    with pytest.raises(ValueError, match="batch_size must be >= 0, got -1"):
        buffer.sample_batch(-1)
    with pytest.raises(ValueError, match="batch_size must be >= 0"):
        Buffer(3).sample_batch(-1)
    with pytest.raises(TypeError, match="batch_size must be an int, got float"):
        buffer.sample_batch(2.0)
    with pytest.raises(ValueError, match="sample_attrs names unknown attribute 'rewards'"):
        buffer.sample_batch(2, sample_attrs=["state", "rewards"])
    with pytest.raises(ValueError, match="additional_concat_attrs names unknown attribute 'nope'"):
        buffer.sample_batch(2, additional_concat_attrs=["nope"])
    with pytest.raises(ValueError, match="sample_method must be one of"):
        buffer.sample_batch(2, sample_method="prioritized")
    with pytest.raises(ValueError, match="sample_method must be one of"):
        Buffer(3).sample_batch(2, sample_method="prioritized")
    with pytest.raises(TypeError, match="sample_method must be a str or a callable"):
        buffer.sample_batch(2, sample_method=3)
    with pytest.raises(ValueError, match=r"rows must be in \[0, 5\)"):
        buffer.sample_batch(2, sample_method=lambda b, n: [0, 5])
    with pytest.raises(ValueError, match="must return a 1-D sequence of int row indices"):
        buffer.sample_batch(2, sample_method=lambda b, n: [0.5])
    with pytest.raises(ValueError, match="cannot form a tensor"):
        buffer.sample_batch(2, sample_attrs=["tag"], additional_concat_attrs=["tag"])


def test_additional_concat_attrs():
    buffer = _filled()
    n, (info, rest) = buffer.sample_batch(
        2, sample_method="all", sample_attrs=["info", "*"], additional_concat_attrs=["info"]
    )
    assert torch.equal(info, torch.tensor([[0], [10], [20], [30], [40]]))
    assert rest == {"tag": ["t0", "t1", "t2", "t3", "t4"]}
    _, (info,) = buffer.sample_batch(2, concatenate=False, sample_method="all", sample_attrs=["info"], additional_concat_attrs=["info"])
    assert info == [0, 10, 20, 30, 40]


def test_ring_overwrites_oldest_rows():
    buffer = Buffer(4, seed=0)
    for i in range(10):
        buffer.append(_step(i))
    assert buffer.size() == 4 and len(buffer) == 4
    _, (state, reward) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state", "reward"])
    assert state.state[:, 0].tolist() == [6, 7, 8, 9] and reward[:, 0].tolist() == [6, 7, 8, 9]


def test_multi_row_transitions_wrap_around():
    buffer = Buffer(5, seed=0)
    for i in range(0, 12, 3):
        buffer.append(_step(i, n_rows=3))
    assert buffer.size() == 5
    _, (state, terminal) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state", "terminal"])
    assert state.state[:, 0].tolist() == [7, 8, 9, 10, 11]
    assert terminal[:, 0].tolist() == [True, False, True, False, True]
    with pytest.raises(ValueError, match="holds 6 rows, more than the buffer's buffer_size 5"):
        buffer.append(_step(0, n_rows=6))


def test_constructor_checks_buffer_size():
    with pytest.raises(ValueError, match="buffer_size must be an int >= 1, got 0"):
        Buffer(0)


def test_dict_with_missing_standard_keys_raises_on_first_append():
    with pytest.raises(ValueError, match=r"a dict transition needs the keys .* missing \['terminal'\]"):
        Buffer(3).append({"state": {}, "action": {}, "next_state": {}, "reward": 1.0})
    with pytest.raises(TypeError, match="expected a Transition or a dict, got list"):
        Buffer(3).append([1, 2])


@pytest.mark.parametrize(
    "change, error, match",
    [
        (dict(state={"state": torch.zeros(1, 4)}), ValueError, r"state\['state'\] is a Tensor of shape \(1, 4\).*expects a tensor or array \[n_rows, 3\] of dtype torch.float32"),
        (dict(state={"state": torch.zeros(1, 3, dtype=torch.float64)}), ValueError, r"state\['state'\] is a Tensor of shape \(1, 3\) and dtype torch.float64"),
        (dict(state={"state": np.zeros((1, 3))}), ValueError, r"state\['state'\] is a ndarray of shape \(1, 3\) and dtype float64"),
        (dict(state={"other": torch.zeros(1, 3)}), ValueError, r"state has keys \['other'\] that the buffer's schema .* lacks; expected keys \['state'\]"),
        (dict(state={"state": torch.zeros(1, 3), "extra": torch.zeros(1, 1)}), ValueError, r"state has keys \['extra'\]"),
        (dict(state={}), ValueError, r"state\['state'\] is missing"),
        (dict(state=torch.zeros(1, 3)), TypeError, r"state should be a dict"),
        (dict(state={"state": [[0.0, 0.0, 0.0]]}), TypeError, r"state\['state'\] is a list"),
        (dict(reward=True), TypeError, r"sub attribute 'reward' is a bool True; .* expects a scalar of dtype torch.float32"),
        (dict(terminal=1.0), TypeError, r"sub attribute 'terminal' is a float"),
        (dict(reward=torch.ones(1, 2)), TypeError, r"sub attribute 'reward' is a Tensor .* expects a scalar of dtype torch.float32 \(or a \[n_rows, 1\]"),
        (dict(reward=torch.ones(1, 1, dtype=torch.float64)), TypeError, r"sub attribute 'reward' is a Tensor"),
        (dict(reward=1.0, extra=2), ValueError, r"attributes differ from the buffer's schema .* unexpected \['extra'\]"),
        (dict(info=torch.ones(1)), TypeError, "custom attribute 'info' holds a Tensor"),
    ],
)
def test_schema_mismatch_raises_naming_the_key(change, error, match):
    buffer = Buffer(4)
    buffer.append(_step(0, info=1))
    step = _step(1, info=2)
    step.update(change)
    with pytest.raises(error, match=match):
        buffer.append(step)
    assert buffer.size() == 1


def test_schema_mismatch_of_missing_attribute_and_rows():
    buffer = Buffer(4)
    buffer.append(_step(0))
    step = _step(1)
    del step["reward"]
    with pytest.raises(ValueError, match=r"missing \['reward'\], unexpected \[\]"):
        buffer.append(step)
    step = _step(1, n_rows=2)
    step["reward"] = 1.0
    with pytest.raises(ValueError, match="reward holds 1 rows, but earlier values hold 2"):
        buffer.append(step)
    other = TransitionBase(["state"], [], [], [{"state": torch.zeros(1, 3)}], [], [])
    with pytest.raises(ValueError, match="the transition has major/sub/custom attributes"):
        buffer.append(other)


def test_store_episode_is_all_or_nothing():
    buffer = Buffer(10)
    episode = [_step(i) for i in range(4)]
    episode[2]["state"] = {"state": torch.zeros(1, 5)}
    with pytest.raises(ValueError, match=r"store_episode: episode\[2\]: state\['state'\]"):
        buffer.store_episode(episode)
    assert buffer.size() == 0  # the first transition fixed the schema, nothing was stored
    buffer.store_episode([Transition(**_step(i)) for i in range(3)] + [_step(3)])
    assert buffer.size() == 4
    with pytest.raises(TypeError, match="expected a list of transitions, got dict"):
        buffer.store_episode(_step(0))
    with pytest.raises(ValueError, match=r"episode\[1\]: the transition holds 11 rows, more than the buffer's buffer_size 10"):
        buffer.store_episode([_step(0), _step(1, n_rows=11)])
    assert buffer.size() == 4


def test_stored_data_is_owned_by_the_buffer():
    buffer = Buffer(4)
    state = torch.zeros(1, 3)
    arr = np.zeros((1, 1), np.int64)
    step = dict(state={"state": state}, action={"action": arr}, next_state={"state": state}, reward=0.0, terminal=False)
    buffer.append(step)  # the one-row fast path
    many = Transition(**_step(0, n_rows=2))
    buffer.append({k: many[k] for k in many.keys()})  # the general path
    state += 1
    arr += 1
    many.state["state"] += 100
    _, (s, a) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state", "action"])
    assert s.state[:, 0].tolist() == [0, 0, 1] and a.action[:, 0].tolist() == [0, 0, 1]
    s.state += 50  # samples are copies too
    _, (s,) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state"])
    assert s.state[:, 0].tolist() == [0, 0, 1]


def test_fast_and_general_paths_agree():
    fast, general = Buffer(8), Buffer(8)
    for i in range(6):
        fast.append(_step(i, info=i))
        general.append(Transition(**_step(i, info=i)))
    a = fast.sample_batch(0, sample_method="all")[1]
    b = general.sample_batch(0, sample_method="all")[1]
    for x, y in zip(a, b):
        if isinstance(x, dict):
            assert all(torch.equal(x[k], y[k]) for k in x)
        elif isinstance(x, torch.Tensor):
            assert torch.equal(x, y)
        else:
            assert x == y


def test_gradients_and_numpy_inputs():
    buffer = Buffer(4)
    step = _step(0)
    step["state"] = {"state": torch.zeros(1, 3, requires_grad=True)}
    buffer.append(step)
    step = _step(1)
    step["state"] = {"state": np.ones((1, 3), np.float32)}
    buffer.append(step)
    _, (s,) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state"])
    assert not s.state.requires_grad and s.state[:, 0].tolist() == [0, 1]


def test_custom_transition_base_and_dicts_read_by_schema():
    buffer = Buffer(4)
    t = TransitionBase(["obs"], ["value"], ["tag"], [{"x": np.zeros((2, 4), np.float32)}], [np.ones((2, 1))], ["a"])
    buffer.append(t)
    buffer.append({"obs": {"x": np.ones((1, 4), np.float32)}, "value": np.zeros((1, 1)), "tag": "b"})
    n, (value, tag) = buffer.sample_batch(0, sample_method="all", sample_attrs=["value", "tag"])
    assert n == 3 and value[:, 0].tolist() == [1, 1, 0] and tag == ["a", "a", "b"]


def test_device_argument_and_repr():
    buffer = _filled()
    _, (state,) = buffer.sample_batch(2, device="cpu", sample_attrs=["state"])
    assert state.state.device.type == "cpu"
    assert "Buffer(size=5, buffer_size=10" in repr(buffer)
    assert buffer.storage_nbytes() > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_buffer_on_gpu():
    buffer = Buffer(4, buffer_device="cuda")
    for i in range(6):
        buffer.append(_step(i))
    _, (state, reward) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state", "reward"])
    assert state.state.is_cuda and state.state[:, 0].tolist() == [2, 3, 4, 5]
    _, (state,) = buffer.sample_batch(2, device="cpu", sample_attrs=["state"])
    assert not state.state.is_cuda


def test_scalar_and_one_column_sub_attributes_mix():
    buffer = Buffer(8)
    buffer.append(_step(0))  # reward: a float scalar
    buffer.append(_step(1, n_rows=2))  # reward: a [2, 1] tensor of the same dtype
    step = _step(3)
    step["reward"] = np.full(1, 3.0, np.float32)  # a [1] array
    buffer.append(step)
    _, (reward,) = buffer.sample_batch(0, sample_method="all", sample_attrs=["reward"])
    assert reward[:, 0].tolist() == [0, 1, 2, 3]
    dense_first = Buffer(4)
    step = _step(0)
    step["reward"] = torch.zeros(1, 1)
    dense_first.append(step)
    dense_first.append(_step(1))  # a scalar fits a [n_rows, 1] column as one row
    _, (reward,) = dense_first.sample_batch(0, sample_method="all", sample_attrs=["reward"])
    assert reward[:, 0].tolist() == [0, 1]


def test_fast_path_copies_views_and_falls_back_cleanly():
    buffer = Buffer(3)
    buffer.append(_step(0))
    wide = torch.arange(6, dtype=torch.float32).view(1, 6)
    step = _step(1)
    step["state"] = {"state": wide[:, ::2]}  # a non-contiguous view
    buffer.append(step)
    step = _step(2)
    step["next_state"] = {"state": torch.full((1, 3), 9.0, requires_grad=True)}  # general path
    buffer.append(step)
    step = _step(3)
    step["reward"] = 3  # an int into the float column: general path
    buffer.append(step)
    wide += 100
    _, (state, next_state, reward) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state", "next_state", "reward"])
    assert state.state.tolist() == [[0, 2, 4], [2, 2, 2], [3, 3, 3]]
    assert next_state.state[1].tolist() == [9, 9, 9] and reward[:, 0].tolist() == [1, 2, 3]


@pytest.mark.parametrize("as_numpy", [False, True])
def test_fast_path_reads_rows_at_any_offset_and_stride(as_numpy):
    """The fast path reads a row's bytes where its view starts, in row-major order."""
    grid = torch.arange(40, dtype=torch.float32).view(4, 10)  # [4, 10]
    views = [grid[2:3, 4:7], grid[1:2, ::3][:, :3], grid[:3, 5].view(1, 3), grid[0:1, 7:]]  # each [1, 3]
    ids = torch.arange(8, dtype=torch.int64).view(2, 4)[1:, 1:2]  # [1, 1], at an offset
    buffer = Buffer(8)
    buffer.append(_step(0))
    for i, view in enumerate(views):
        step = _step(i + 1)
        step["state"] = {"state": view.numpy() if as_numpy else view}
        step["action"] = {"action": ids.numpy() if as_numpy else ids}
        assert buffer._fast.append(step)
    grid += 100  # the buffer holds copies
    ids += 100
    _, (state, action) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state", "action"])
    assert state.state[1:].tolist() == [[24, 25, 26], [10, 13, 16], [5, 15, 25], [7, 8, 9]]
    assert action.action[1:, 0].tolist() == [5] * 4


@pytest.mark.parametrize("first", ["scalar", "vector", "column"])
def test_sub_attributes_are_stored_and_sampled_as_n_by_1_whatever_the_form(first):
    """A number, a [B] array and a [B, 1] array are the same sub attribute column ([n, 1], Machin's shape)."""
    forms = {
        "scalar": lambda i: float(i),
        "vector": lambda i: np.full(1, float(i), np.float32),  # [1]
        "column": lambda i: torch.full((1, 1), float(i)),  # [1, 1]
    }
    order = [first] + [f for f in forms if f != first]
    buffer = Buffer(8)
    for i, form in enumerate(order * 2):
        step = _step(i)
        step["reward"] = forms[form](i)
        step["terminal"] = np.array([i % 2 == 1]) if form == "vector" else bool(i % 2)
        buffer.append(step)
    step = _step(6, n_rows=2)
    step["reward"] = torch.tensor([6.0, 7.0])  # [B] for a two-row transition
    step["terminal"] = torch.tensor([False, True])
    buffer.append(step)
    _, (reward, terminal) = buffer.sample_batch(0, sample_method="all", sample_attrs=["reward", "terminal"])
    assert reward.shape == (8, 1) and reward[:, 0].tolist() == list(range(8))
    assert terminal.shape == (8, 1) and terminal[:, 0].tolist() == [i % 2 == 1 for i in range(8)]
    _, (reward,) = buffer.sample_batch(0, concatenate=False, sample_method="all", sample_attrs=["reward"])
    assert len(reward) == 8
    with pytest.raises(TypeError, match=r"sub attribute 'reward' is a Tensor of shape \(1, 2\)"):
        buffer.append({**_step(9), "reward": torch.zeros(1, 2)})
