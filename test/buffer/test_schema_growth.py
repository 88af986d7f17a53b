"""Schemas of real entity environments: keys of ragged subtrees that appear or vanish after the first append."""

import pickle

import numpy as np
import pytest
import torch

from entmachin.buffer import Buffer, PrioritizedBuffer, Transition
from entmachin.ragged import RaggedTensor, ragged_from_arrays

WIDTHS = {"Robot": 2, "Coin": 3}


def _ragged(counts, width, fill, dtype=np.float32):
    counts = np.asarray(counts, np.int64)
    return ragged_from_arrays(np.full((int(counts.sum()), width), fill, dtype), counts)


def _step(step, counts, actions=("move",), n_rows=None, dense=False):
    """One transition; ``counts`` maps entity type -> per-row counts (types left out are absent).

    Entity features hold the step number, so samples can be traced back to their step.
    """
    n_rows = n_rows or len(next(iter(counts.values())))
    entities = {etype: _ragged(c, WIDTHS[etype], step) for etype, c in counts.items()}
    masks = {name: {"actors": _ragged([1] * n_rows, 1, 0, np.int64)} for name in actions}
    state = {"entities": entities, "action_masks": masks}
    if dense:
        state["global"] = np.full((n_rows, 1), step, np.float32)
    action = {"action": {name: _ragged([1] * n_rows, 1, step, np.int64) for name in actions}}
    return Transition(state, action, {}, np.full(n_rows, float(step), np.float32), np.zeros(n_rows, np.bool_))


def _all(buffer):
    # every row oldest first (Buffer.sample_batch: PrioritizedBuffer samples by priority only)
    _, (state, action, reward) = Buffer.sample_batch(buffer, 0, sample_method="all", sample_attrs=["state", "action", "reward"])
    return state, action, reward


@pytest.mark.parametrize("cls", [Buffer, PrioritizedBuffer])
def test_an_entity_type_that_appears_later_adds_a_column(cls):
    buffer = cls(10, seed=0)
    buffer.append(_step(0, {"Robot": [1, 2]}))
    buffer.append(_step(1, {"Robot": [1], "Coin": [2]}))  # the coin spawns
    buffer.append(_step(2, {"Robot": [0, 1]}))  # and is gone again
    state, _, reward = _all(buffer)
    coin = state.entities["Coin"]
    assert isinstance(coin, RaggedTensor) and coin.trailing_shape == (3,)
    assert coin.lengths.tolist() == [0, 0, 2, 0, 0]  # earlier and later rows: zero-length sequences
    assert coin.data.tolist() == [[1.0] * 3] * 2
    assert state.entities["Robot"].lengths.tolist() == [1, 2, 1, 0, 1]
    assert reward[:, 0].tolist() == [0, 0, 1, 2, 2]
    with pytest.raises(ValueError, match=r"state\['entities'\]\['Coin'\] is a RaggedArrayF32 of 1 sequences of 4 features.*float32 items of shape \(3,\)"):
        buffer.append(Transition({"entities": {"Coin": _ragged([1], 4, 0)}}, {}, {}, 0.0, False))
    with pytest.raises(ValueError, match=r"state\['entities'\]\['Coin'\] is a RaggedArrayI64"):
        buffer.append(Transition({"entities": {"Coin": _ragged([1], 3, 0, np.int64)}}, {}, {}, 0.0, False))
    assert buffer.size() == 5


def test_new_columns_survive_wrap_around_sampling_and_save_load(tmp_path):
    buffer = PrioritizedBuffer(5, seed=0)
    rng = np.random.default_rng(0)
    history = []  # per row: (step, n_coins)
    for step in range(14):
        n_rows = int(rng.integers(1, 3))
        robots = rng.integers(0, 3, n_rows)
        counts = {"Robot": robots}
        coins = rng.integers(0, 3, n_rows) if step >= 3 and step % 3 else None
        if coins is not None:
            counts["Coin"] = coins
        actions = ("move", "shoot") if step >= 6 else ("move",)  # an action that appears later
        buffer.append(_step(step, counts, actions=actions, n_rows=n_rows))
        history += [(step, 0 if coins is None else int(c), name_count) for c, name_count in
                    zip(coins if coins is not None else [0] * n_rows, [len(actions)] * n_rows)]
    live = history[-5:]
    for loaded in (buffer, PrioritizedBuffer.load(_saved(buffer, tmp_path)), pickle.loads(pickle.dumps(buffer))):
        state, action, reward = _all(loaded)
        assert reward[:, 0].tolist() == [float(s) for s, _, _ in live]
        assert state.entities["Coin"].lengths.tolist() == [c for _, c, _ in live]
        assert torch.all(state.entities["Coin"].data == torch.repeat_interleave(reward[:, 0], state.entities["Coin"].lengths)[:, None])
        shoot = action.action["shoot"]
        assert shoot.lengths.tolist() == [1 if n == 2 else 0 for _, _, n in live]
        assert state.action_masks["shoot"]["actors"].lengths.tolist() == shoot.lengths.tolist()
        n, batch, index, _ = loaded.sample_batch(16, sample_attrs=["state", "reward"])
        coins = batch[0].entities["Coin"]
        assert coins.lengths.tolist() == [live[-5 + i][1] for i in index - (loaded._storage.n_written - 5)]
    loaded.append(_step(99, {"Robot": [1], "Coin": [1]}, actions=("move", "shoot")))
    assert _all(loaded)[0].entities["Coin"].lengths.tolist()[-1] == 1


def _saved(buffer, tmp_path):
    path = str(tmp_path / "grown")
    buffer.save(path)
    return path


def test_store_episode_grows_the_schema_only_if_every_transition_is_stored():
    buffer = Buffer(10)
    buffer.append(_step(0, {"Robot": [1]}))
    schema = buffer.schema
    bad = _step(2, {"Robot": [1]})
    bad.state["entities"]["Robot"] = _ragged([1], 5, 0)
    with pytest.raises(ValueError, match=r"store_episode: episode\[1\]: state\['entities'\]\['Robot'\]"):
        buffer.store_episode([_step(1, {"Robot": [1], "Coin": [1]}), bad])
    assert buffer.size() == 1 and buffer.schema is schema  # nothing stored, no column added
    buffer.store_episode([_step(1, {"Robot": [1]}), _step(2, {"Robot": [1], "Coin": [2]}), _step(3, {"Robot": [2], "Coin": [1]})])
    state, _, _ = _all(buffer)
    assert state.entities["Coin"].lengths.tolist() == [0, 0, 2, 1]


def test_new_keys_outside_ragged_subtrees_still_raise_naming_the_key():
    buffer = Buffer(4)
    buffer.append(_step(0, {"Robot": [1]}, dense=True))
    wrong = _step(1, {"Robot": [1]}, dense=True)
    wrong.state["other"] = _ragged([1], 2, 0)  # state holds a dense leaf: not a ragged subtree
    with pytest.raises(ValueError, match=r"state has keys \['other'\] that the buffer's schema .* lacks; expected keys \['action_masks', 'entities', 'global'\]"):
        buffer.append(wrong)
    dense_in_ragged = _step(1, {"Robot": [1]}, dense=True)
    dense_in_ragged.state["entities"]["Coin"] = np.zeros((1, 3), np.float32)
    with pytest.raises(ValueError, match=r"state\['entities'\]\['Coin'\] is a new key holding a ndarray of shape \(1, 3\).*must hold ragged values"):
        buffer.append(dense_in_ragged)
    dict_with_dense = _step(1, {"Robot": [1]}, dense=True)
    dict_with_dense.state["action_masks"]["shoot"] = {"actors": _ragged([1], 1, 0, np.int64), "mask": np.ones((1, 2), bool)}
    with pytest.raises(ValueError, match=r"state\['action_masks'\]\['shoot'\]\['mask'\] is a new key holding a ndarray"):
        buffer.append(dict_with_dense)
    assert buffer.size() == 1 and "Coin" not in buffer.schema.templates["state"]["entities"]


def test_a_later_append_lacking_ragged_keys_stores_zero_length_sequences():
    buffer = Buffer(6)
    buffer.append(_step(0, {"Robot": [1], "Coin": [2]}, actions=("move", "shoot"), dense=True))
    buffer.append(_step(1, {"Robot": [2]}, actions=("move",), dense=True))  # no coin, no shoot mask or action
    no_entities = _step(2, {"Robot": [1]}, dense=True)
    del no_entities.state["entities"]  # a whole ragged subtree absent
    buffer.append(no_entities)
    state, action, _ = _all(buffer)
    assert state.entities["Coin"].lengths.tolist() == [2, 0, 0]
    assert state.entities["Robot"].lengths.tolist() == [1, 2, 0]
    assert state.action_masks["shoot"]["actors"].lengths.tolist() == [1, 0, 0]
    assert action.action["shoot"].lengths.tolist() == [1, 0, 0]
    no_global = _step(3, {"Robot": [1]}, dense=True)
    del no_global.state["global"]  # a dense leaf is never optional
    with pytest.raises(ValueError, match=r"state\['global'\] is missing"):
        buffer.append(no_global)


def test_an_empty_ragged_dict_at_the_first_append_can_grow():
    buffer = Buffer(4)
    buffer.append(Transition({"entities": {}}, {"action": {}}, {}, 0.0, False))
    buffer.append(Transition({"entities": {"Robot": _ragged([2], 2, 1)}}, {"action": {"move": _ragged([1], 1, 1, np.int64)}}, {}, 1.0, False))
    state, action, _ = _all(buffer)
    assert state.entities["Robot"].lengths.tolist() == [0, 2] and action.action["move"].lengths.tolist() == [0, 1]


def test_a_dense_fast_path_buffer_gaining_a_ragged_column_leaves_the_fast_path():
    buffer = Buffer(4)
    step = {"state": {"x": torch.zeros(1, 2)}, "action": {}, "next_state": {"x": torch.zeros(1, 2)}, "reward": 0.0, "terminal": False}
    buffer.append(step)
    assert buffer._fast is not None
    buffer.append({**step, "action": {"move": _ragged([1], 1, 3, np.int64)}})
    assert buffer._fast is None
    buffer.append(step)
    _, (action,) = buffer.sample_batch(0, sample_method="all", sample_attrs=["action"])
    assert action.move.lengths.tolist() == [0, 1, 0] and action.move.data.tolist() == [[3]]


def test_a_new_key_must_be_a_str():
    buffer = Buffer(4)
    buffer.append({"state": {"entities": {"Robot": _ragged([1], 2, 0)}}, "action": {}, "next_state": {}, "reward": 0.0, "terminal": False})
    with pytest.raises(TypeError, match=r"state\['entities'\] has a key 7; keys must be str"):
        buffer.append({"state": {"entities": {7: _ragged([1], 2, 0)}}, "action": {}, "next_state": {}, "reward": 0.0, "terminal": False})
