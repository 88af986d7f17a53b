"""ragged-buffer's values in entmachin: converted without loss at every door, same results.

Runs where the optional ragged-buffer package is installed (``entmachin[ragged-buffer]``,
Python < 3.12); the shim's tests run where it is not.
"""

import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.ragged import RaggedArrayBool, RaggedArrayF32, RaggedArrayI64, as_ragged_array, ragged_buffer_available
from entmachin.ragged import to_ragged_buffer

needs_ragged_buffer = pytest.mark.skipif(not ragged_buffer_available(), reason="ragged-buffer is not installed")
OURS = {np.float32: RaggedArrayF32, np.int64: RaggedArrayI64, np.bool_: RaggedArrayBool}


def theirs(dtype):
    import ragged_buffer

    return {np.float32: ragged_buffer.RaggedBufferF32, np.int64: ragged_buffer.RaggedBufferI64,
            np.bool_: ragged_buffer.RaggedBufferBool}[dtype]


def both(dtype, flat, lengths):
    flat, lengths = np.asarray(flat, dtype), np.asarray(lengths, np.int64)
    return OURS[dtype].from_flattened(flat, lengths), theirs(dtype).from_flattened(flat, lengths)


def same(ours, rb):
    assert type(ours) is OURS[rb.as_array().dtype.type]
    assert ours.size1().tolist() == rb.size1().tolist() and ours.size2() == rb.size2()
    np.testing.assert_array_equal(ours.as_array(), rb.as_array())


cases = st.tuples(st.sampled_from([np.float32, np.int64, np.bool_]), st.lists(st.integers(0, 4), max_size=6),
                  st.integers(1, 3), st.integers(0, 2**16))


def make(case):
    dtype, lengths, width, seed = case
    flat = np.random.default_rng(seed).normal(size=(sum(lengths), width)) * 5
    return both(dtype, flat > 0 if dtype is np.bool_ else flat.astype(dtype), lengths)


@needs_ragged_buffer
@settings(max_examples=50, deadline=None)
@given(cases, st.data())
def test_round_trip_and_every_shared_operation_agree(case, data):
    ours, rb = make(case)
    same(as_ragged_array(rb), rb)
    back = to_ragged_buffer(ours)
    assert type(back) is type(rb) and back == rb
    assert (ours.size0(), ours.items(), len(ours)) == (rb.size0(), rb.items(), len(rb))
    for dim in (0, 1):
        same(ours.indices(dim), rb.indices(dim))
    same(ours.flat_indices(), rb.flat_indices())
    if ours.size0():
        picks = np.array(data.draw(st.lists(st.integers(0, ours.size0() - 1), max_size=6)), dtype=np.int64)
        same(ours[picks], rb[picks])
        same(ours[int(picks[0]) if picks.size else 0], rb[int(picks[0]) if picks.size else 0])
    import ragged_buffer

    for dim in (0, 1, 2):
        same(__import__("entmachin.ragged.array", fromlist=["cat"]).cat([ours, ours], dim), ragged_buffer.cat([rb, rb], dim))
    if ours.dtype != np.bool_:
        same(ours + ours, rb + rb)
        same(ours * 3, rb * 3)
    assert ours == rb and not (ours != rb)


@needs_ragged_buffer
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=40))
def test_padpack_packs_as_ragged_buffer(lengths):
    ours, rb = both(np.int64, np.arange(sum(lengths))[:, None], lengths)  # one feature: right there
    packed, expected = ours.padpack(), rb.padpack()
    assert (packed is None) == (expected is None)
    if packed is not None:
        for a, b in zip(packed, expected):
            np.testing.assert_array_equal(a, b)


@needs_ragged_buffer
def test_ragged_buffer_values_pickle_and_unpickle_as_entmachin_arrays():
    _, rb = both(np.float32, [[1.0], [2.0], [3.0]], [2, 1])
    as_ragged_array(rb)  # meeting one registers the reducer
    back = pickle.loads(pickle.dumps(rb))
    assert type(back) is RaggedArrayF32 and back.size1().tolist() == [2, 1]


def _example_obs(name, seed):
    from entmachin.env import EnvList, random_actions
    from entmachin.env.examples import ENV_REGISTRY

    envs = EnvList(ENV_REGISTRY[name], num_envs=4, seed=seed)
    obs = envs.reset()
    for _ in range(seed % 3):  # a few steps in, where some episodes have ended
        obs = envs.act(random_actions(obs, envs.action_space(), np.random.default_rng(seed)))
    return envs, obs


def _as_ragged_buffers(vec):
    """The same VecObs, written as entity-gym-style code writes it: ragged-buffer values."""
    from entmachin.env import VecCategoricalActionMask, VecContinuousActionMask, VecObs, VecSelectEntityActionMask

    rb = to_ragged_buffer
    masks = {}
    for name, m in vec.action_masks.items():
        if isinstance(m, VecContinuousActionMask):
            masks[name] = VecContinuousActionMask(rb(m.actors), rb(m.low), rb(m.high))
            continue
        mask = None if m.mask is None else rb(m.mask)
        masks[name] = (VecSelectEntityActionMask(rb(m.actors), rb(m.actees), mask)
                       if isinstance(m, VecSelectEntityActionMask) else VecCategoricalActionMask(rb(m.actors), mask))
    return VecObs({k: rb(v) for k, v in vec.features.items()}, {k: rb(v) for k, v in vec.visible.items()},
                  masks, vec.reward.copy(), vec.done.copy(), dict(vec.metrics))


def _example_names():
    from entmachin.env.examples import ENV_REGISTRY

    return list(ENV_REGISTRY)


@needs_ragged_buffer
@pytest.mark.parametrize("seed, name", list(enumerate(_example_names())))
def test_a_vec_obs_of_ragged_buffers_gives_the_same_state_buffer_rows_and_rogue_net_output(seed, name):
    from entmachin.buffer import Buffer, Transition
    from entmachin.env import to_state, to_vec_actions
    from entmachin.frame import safe_call
    from entmachin.model import RogueNet, RogueNetConfig
    from entmachin.ragged import ragged_equal, trees

    envs, vec = _example_obs(name, seed)
    space = envs.action_space()
    theirs_vec = _as_ragged_buffers(vec)
    ours, converted = to_state(vec, space), to_state(theirs_vec, space)
    for (path, a), (_, b) in zip(trees.leaves(ours), trees.leaves(converted)):
        assert type(b) is type(a) and ragged_equal(a, b), path

    raw = {"entities": {k: to_ragged_buffer(v) for k, v in ours["entities"].items()},
           "visible": {k: to_ragged_buffer(v) for k, v in ours.get("visible", {}).items()},
           "action_masks": {n: {k: to_ragged_buffer(v) for k, v in m.items()} for n, m in ours["action_masks"].items()}}
    torch.manual_seed(0)
    net = RogueNet(envs.obs_space(), space, RogueNetConfig(d_model=8, n_layer=1))
    with torch.no_grad():
        out = safe_call(net, ours)
        torch.manual_seed(1)  # the same draws for a squashed Gaussian's entropy estimate in both calls
        scored = safe_call(net, ours, {"action": out.action})
        torch.manual_seed(1)
        again = safe_call(net, raw, {"action": {k: to_ragged_buffer(v.to_ragged_array()) for k, v in out.action.items()}})
    assert torch.equal(again.log_prob_sum, scored.log_prob_sum) and torch.equal(again.entropy_sum, scored.entropy_sum)

    buffers = [Buffer(buffer_size=16, seed=0) for _ in range(2)]
    for buffer, state in zip(buffers, (ours, raw)):
        rows = len(envs)  # a row per environment, or per seat of a game
        buffer.append(Transition(state, {"action": to_vec_actions(out.action)}, state, np.zeros(rows, np.float32),
                                 np.zeros(rows, bool)))
    sampled = [buffer.sample_batch(16, sample_method="all", sample_attrs=["state"])[1][0] for buffer in buffers]
    ours_rows, their_rows = (dict(trees.leaves(rows)) for rows in sampled)
    assert ours_rows.keys() == their_rows.keys()
    for path, a in ours_rows.items():
        b = their_rows[path]
        assert torch.equal(a.data, b.data) and torch.equal(a.lengths, b.lengths), path

    actions = {k: to_ragged_buffer(v) for k, v in to_vec_actions(out.action).items()}
    stepped = envs.act(actions)  # ragged-buffer actions step an EnvList
    assert len(stepped) == len(envs)


def test_the_shim_gives_entmachin_arrays_only_where_ragged_buffer_is_absent():
    script = (
        "import sys; from entmachin.ragged import shim, RaggedArrayF32\n"
        "installed = shim.install()\n"
        "import ragged_buffer\n"
        "print(installed, ragged_buffer.RaggedBufferF32 is RaggedArrayF32)\n"
        "if installed:\n"
        "    import numpy as np\n"
        "    b = ragged_buffer.RaggedBuffer.from_flattened(np.zeros((3, 2), np.float32), np.array([1, 2]))\n"
        "    print(type(b).__name__, ragged_buffer.cat([b, b]).size1().tolist())\n"
        "    print(ragged_buffer.RaggedBuffer[np.float32] is ragged_buffer.RaggedBuffer)\n"  # entity-gym's annotations
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split("\n")
    if ragged_buffer_available():
        assert out[0] == "False False"
    else:
        assert out[:3] == ["True True", "RaggedArrayF32 [1, 2, 1, 2]", "True"]


def test_to_ragged_buffer_without_the_package_names_the_extra():
    if ragged_buffer_available():
        pytest.skip("ragged-buffer is installed")
    with pytest.raises(ImportError, match=r"entmachin\[ragged-buffer\]"):
        to_ragged_buffer(RaggedArrayF32(2))
