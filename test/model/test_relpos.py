"""Relative positional encoding against a direct per-pair reference, and translation."""
import math

import numpy as np
import pytest
import torch

from entmachin.model import RelposEncodingConfig, RogueNet, RogueNetConfig, TranslationConfig
from entmachin.model.attention import RaggedTransformer
from entmachin.model.layout import build_layout
from entmachin.model.relpos import RelativePositionEncoding, TokenPositions
from entmachin.ragged.tensor import RaggedTensor
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state


def _cell(rel, config):
    cell, stride = 0, 1
    for r, e in zip(rel, config.extent):
        c = int(round(float(min(max(r / config.scale, -e), e)))) + e
        cell += c * stride
        stride *= 2 * e + 1
    return cell


def _reference(trunk, relpos, x, layout, tokens):
    """Each row on its own, every pair's relative key and value looked up one by one."""
    config = relpos.config
    keys, values = relpos.keys.detach(), relpos.values.detach()
    outs = []
    for start, n in zip(layout.starts.tolist(), layout.lengths.tolist()):
        h = x[start : start + n]
        if n == 0:
            outs.append(h)
            continue
        pos, has = tokens.positions[start : start + n], tokens.has_position[start : start + n]
        offset = tokens.value_offset[start : start + n]
        cells = torch.full((n, n), relpos.n_cells - 1, dtype=torch.int64)
        for s in range(n):
            for t in range(n):
                if has[s] and has[t]:
                    cells[s, t] = _cell((pos[t] - pos[s]).tolist(), config)
        for block in trunk.blocks:
            mix = block.mix
            d, n_head = h.shape[1], mix.n_head
            qkv = mix.qkv(block.ln1(h)).view(n, 3, n_head, d // n_head).permute(1, 2, 0, 3)  # [3, h, n, dh]
            q, k, v = qkv
            logits = q @ k.transpose(-1, -2) / math.sqrt(d // n_head)
            logits = logits + torch.einsum("hsd,std->hst", q, keys[cells]) / math.sqrt(d // n_head)
            att = logits.softmax(-1)  # [h, n, n]
            y = att @ v + torch.einsum("hst,std->hsd", att, values[cells + offset[None, :]])
            h = h + mix.proj(y.transpose(0, 1).reshape(n, d))
            h = h + block.mlp(block.ln2(h))
        outs.append(h)
    return outs


@pytest.mark.parametrize("per_entity_values", [False, True])
# A 1-D grid of 3 cells goes through the tables, a 19 x 19 grid through direct gathers.
@pytest.mark.parametrize("extent, features", [((1,), ("x",)), ((9, 9), ("x", "y"))])
@pytest.mark.parametrize("overhead", [0, 4096])
def test_relpos_attention_matches_pairwise_reference(per_entity_values, extent, features, overhead):
    torch.manual_seed(0)
    config = RelposEncodingConfig(extent=extent, position_features=features, scale=0.5,
                                  per_entity_values=per_entity_values)
    relpos = RelativePositionEncoding(config, {"A": ["x", "y"], "B": ["y", "x", "z"], "C": []}, d_head=4)
    trunk = RaggedTransformer(RogueNetConfig(d_model=8, n_head=2, n_layer=2, relpos_encoding=config), relpos)
    for p in trunk.blocks.parameters():
        torch.nn.init.normal_(p, std=0.4)
    layout = build_layout(np.array([3, 0, 5, 1, 4, 4]), torch.device("cpu"), overhead)
    n = layout.n_tokens
    token_type = torch.randint(0, 3, (n,))
    positions = torch.cat([torch.randn(n, len(features)) * 3, torch.zeros(1, len(features))])  # [n + 1, p]
    has = torch.cat([token_type != 2, torch.zeros(1, dtype=torch.bool)])
    offset = torch.zeros(n + 1, dtype=torch.int64)
    if per_entity_values:
        offset[:n] = token_type * relpos.n_cells
    tokens = TokenPositions(positions, has, offset)
    x = torch.randn(n, 8)
    out = trunk(x, layout, None, tokens)
    expected = _reference(trunk, relpos, x, layout, tokens)
    for (start, length), want in zip(zip(layout.starts.tolist(), layout.lengths.tolist()), expected):
        torch.testing.assert_close(out[start : start + length], want, atol=1e-5, rtol=1e-5)


def test_relpos_model_runs_and_reevaluates():
    config = RogueNetConfig(relpos_encoding=RelposEncodingConfig(extent=[3, 3], position_features=["x", "y"]))
    torch.manual_seed(0)
    net = RogueNet(OBS_SPACE, ACTION_SPACE, config)
    state = zoo_state(zoo_observations(0, 5) + zoo_observations(1, 1, empty=True))
    out = net(state["entities"], state["action_masks"], state["visible"])
    again = net(state["entities"], state["action_masks"], state["visible"], action=out.action)
    torch.testing.assert_close(again.log_prob_sum, out.log_prob_sum)
    assert net.value(state["entities"]).shape == (6, 1)
    assert sum(1 for k in net.state_dict() if k.startswith("trunk.relpos.")) == 2


def _translate_reference(feats, ref_rows, indices, ref_indices, angle=None, dist=False):
    out = feats.copy()
    for i, row in enumerate(feats):
        origin = ref_rows[i]
        if origin is None:
            rel = row[indices]
        else:
            rel = row[indices] - origin[ref_indices]
            if angle is not None:
                c, s = math.cos(origin[angle]), math.sin(origin[angle])
                rel = np.array([c * rel[0] + s * rel[1], c * rel[1] - s * rel[0]])
        out[i, indices] = rel
    if dist:
        out = np.concatenate([out, np.linalg.norm(out[:, indices], axis=1, keepdims=True)], 1)
    return out


@pytest.mark.parametrize("rotate, dist", [(False, False), (True, True)])
def test_translation_matches_numpy(rotate, dist):
    from entmachin.model.translate import TranslatePositions
    from entmachin.env import Entity, ObsSpace

    space = ObsSpace(entities={"Hero": Entity(["heading", "x", "y"]), "Rock": Entity(["y", "size", "x"]),
                               "Sky": Entity(["size"])})
    config = TranslationConfig(reference_entity="Hero", position_features=["x", "y"],
                               rotation_angle_feature="heading" if rotate else None, add_dist_feature=dist)
    t = TranslatePositions(config, space)
    rng = np.random.default_rng(0)
    hero = RaggedTensor.from_lengths(torch.tensor(rng.normal(size=(3, 3)), dtype=torch.float32), [1, 0, 2])
    rock = RaggedTensor.from_lengths(torch.tensor(rng.normal(size=(5, 3)), dtype=torch.float32), [2, 2, 1])
    sky = RaggedTensor.from_lengths(torch.ones(1, 1), [0, 1, 0])
    out = t({"Hero": hero, "Rock": rock, "Sky": sky}, 3)
    heroes = [hero[0][0].numpy(), None, hero[2][0].numpy()]
    ref_rows = [heroes[r] for r in rock.batch_index.tolist()]
    expected = _translate_reference(rock.data.numpy(), ref_rows, [2, 0], [1, 2], 0 if rotate else None, dist)
    np.testing.assert_allclose(out["Rock"].numpy(), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(out["Hero"], hero.data) and torch.equal(out["Sky"], sky.data)
    assert t.n_extra_features("Rock") == int(dist) and t.n_extra_features("Hero") == 0


def test_translation_model_runs():
    config = RogueNetConfig(translation=TranslationConfig(reference_entity="Unit", position_features=["x", "y"],
                                                          add_dist_feature=True))
    net = RogueNet(OBS_SPACE, ACTION_SPACE, config)
    state = zoo_state(zoo_observations(2, 5))
    out = net(state["entities"], state["action_masks"], state["visible"])
    again = net(state["entities"], state["action_masks"], state["visible"], action=out.action)
    torch.testing.assert_close(again.log_prob_sum, out.log_prob_sum)


def test_deepcopy_keeps_the_relative_tables_shared_within_the_copy():
    import copy

    config = RogueNetConfig(relpos_encoding=RelposEncodingConfig(extent=[2, 2], position_features=["x", "y"]))
    net = RogueNet(OBS_SPACE, ACTION_SPACE, config)
    twin = copy.deepcopy(net)
    assert all(block.mix._relpos[0] is twin.trunk.relpos for block in twin.trunk.blocks)
    assert twin.trunk.relpos is not net.trunk.relpos
