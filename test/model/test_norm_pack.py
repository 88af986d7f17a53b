"""NormPack: several InputNorms updated together, bit for bit as one by one; the norm lists
that collecting_stats() finds once per module tree."""
import copy

import numpy as np
import torch
from torch import nn

from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model.input_norm import InputNorm, NormalisedModule, collecting_stats, input_norms
from entmachin.model.norm_pack import NormPack
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state


def _batches(rng, widths, sizes):
    return [[torch.tensor(rng.normal(3.0, 2.0, size=(n, w)), dtype=torch.float32) for w in widths] for n in sizes]


def _norms(widths):
    return [InputNorm(w, clip=3.0) for w in widths]


def test_packed_update_and_normalisation_equal_one_norm_at_a_time_bit_for_bit():
    widths = (3, 1, 4)
    rng = np.random.default_rng(0)
    # A type with no items in a batch, and a first batch of one item (count 1: std undefined).
    batches = [[x[:1] for x in b] for b in _batches(rng, widths, [5])]
    batches += _batches(rng, widths, [7, 2])
    batches += [[b[0], b[1][:0], b[2]] for b in _batches(rng, widths, [9])]
    alone, together = _norms(widths), _norms(widths)
    pack = NormPack(together)
    for batch in batches:
        expected = []
        with collecting_stats_of_all(alone):
            for norm, x in zip(alone, batch):
                expected.append(norm(x))
        with collecting_stats_of_all(together):
            got = pack.normalise(batch)
            pack.update(batch)
        for e, g in zip(expected, got):
            assert torch.equal(e, g)
        for a, t in zip(alone, together):
            for key, value in a.state_dict().items():
                assert torch.equal(value, t.state_dict()[key]), key


def collecting_stats_of_all(norms):
    return collecting_stats(nn.ModuleList(norms))


def test_pack_follows_replaced_and_loaded_buffers_and_skips_frozen_norms():
    widths = (2, 3)
    rng = np.random.default_rng(1)
    norms = _norms(widths)
    pack = NormPack(norms)
    batch = _batches(rng, widths, [6])[0]
    with collecting_stats_of_all(norms):
        pack.update(batch)
    # .double() replaces the buffers: the pack packs the norms' current values again.
    for norm in norms:
        norm.double()
    other = _norms(widths)
    with collecting_stats_of_all(other):
        for norm, x in zip(other, batch):
            norm(x)
    for norm, source in zip(norms, other):
        norm.load_state_dict(source.state_dict())  # in place, into the pack
    assert all(torch.equal(a, b) for a, b in zip(pack.normalise(batch), [n(x) for n, x in zip(other, batch)]))
    norms[1].freeze()
    before = norms[1].state_dict()
    with collecting_stats_of_all(norms):
        pack.update(batch)
    assert int(norms[0].count) == 12
    for key, value in norms[1].state_dict().items():
        assert torch.equal(value, before[key])


def test_roguenet_checkpoints_keep_their_keys_and_load_into_the_packed_statistics():
    state = zoo_state(zoo_observations(0, 16))
    torch.manual_seed(0)
    old = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig())
    reference = {k: v.clone() for k, v in old.state_dict().items()}
    with torch.no_grad(), old.collecting_stats():
        old(state["entities"], state["action_masks"])
    assert {k: v.shape for k, v in old.state_dict().items()} == {k: v.shape for k, v in reference.items()}
    old.load_state_dict(reference)  # a checkpoint taken before any packing
    torch.manual_seed(0)
    fresh = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig())
    for net in (old, fresh):
        with torch.no_grad(), net.collecting_stats():
            torch.manual_seed(3)
            net(state["entities"], state["action_masks"])
    for key, value in fresh.state_dict().items():
        assert torch.equal(value, old.state_dict()[key]), key
    copied = copy.deepcopy(old)
    with torch.no_grad(), copied.collecting_stats():
        copied(state["entities"], state["action_masks"])
    assert int(copied.embedding.embeddings[0][0].count) == 2 * int(old.embedding.embeddings[0][0].count)


class _Holder(NormalisedModule):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(InputNorm(2), nn.Linear(2, 2))


def test_the_norm_list_follows_submodule_changes():
    holder = _Holder()
    assert input_norms(holder) == [holder.body[0]]
    holder.body[0] = InputNorm(2)  # nested replacement
    assert input_norms(holder) == [holder.body[0]]
    holder.extra = InputNorm(3)
    assert input_norms(holder) == [holder.body[0], holder.extra]
    with holder.collecting_stats():
        holder.extra(torch.ones(4, 3))
    assert int(holder.extra.count) == 4
