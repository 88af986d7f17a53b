"""Ragged attention and pooling against padded, masked references with the same weights."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from entmachin.model.attention import RaggedTransformer, segment_pool
from entmachin.model.config import RogueNetConfig
from entmachin.model.layout import build_layout


def _stream_rows(x, layout):
    """Splits a stream-order tensor into per-row tensors in original row order."""
    starts, lengths = layout.starts.tolist(), layout.lengths.tolist()
    return [x[s : s + n] for s, n in zip(starts, lengths)]


def padded_reference(trunk, x, layout, visible=None):
    """The trunk computed row-padded to the longest row, with explicit masks and softmax."""
    rows = _stream_rows(x, layout)
    vis_rows = _stream_rows(visible, layout) if visible is not None else None
    n, t_max, d = len(rows), max([len(r) for r in rows] + [1]), x.shape[1]
    pad = x.new_zeros(n, t_max, d)  # [B, T, d]
    valid = torch.zeros(n, t_max, dtype=torch.bool)  # [B, T]
    vis = torch.ones(n, t_max, dtype=torch.bool)  # [B, T]
    for i, r in enumerate(rows):
        pad[i, : len(r)] = r
        valid[i, : len(r)] = True
        if vis_rows is not None:
            vis[i, : len(r)] = vis_rows[i]
    allowed = valid[:, None, :] & (~vis[:, :, None] | vis[:, None, :])  # [B, T, T]
    h_count = trunk.blocks[0].mix.n_head if trunk.blocks else 1
    for block in trunk.blocks:
        att_mod = block.mix
        h = block.ln1(pad)
        qkv = att_mod.qkv(h).view(n, t_max, 3, h_count, d // h_count)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # [B, h, T, dh]
        logits = q @ k.transpose(-1, -2) / math.sqrt(d // h_count)  # [B, h, T, T]
        logits = logits.masked_fill(~allowed[:, None], float("-inf"))
        att = torch.softmax(logits, -1).nan_to_num(0.0)  # padded query rows with no key -> 0
        y = (att @ v).transpose(1, 2).reshape(n, t_max, d)
        pad = pad + att_mod.proj(y)
        pad = pad + block.mlp(block.ln2(pad))
    return [pad[i, : len(r)] for i, r in enumerate(rows)]


def _random_case(rng, lengths, d_model=8, with_visible=False, overhead=4096):
    layout = build_layout(np.asarray(lengths), torch.device("cpu"), overhead)
    x = torch.randn(layout.n_tokens, d_model, generator=rng)  # [n_tokens, d_model]
    visible = None
    if with_visible:
        visible = torch.rand(layout.n_tokens, generator=rng) < 0.6  # [n_tokens]
    return layout, x, visible


@pytest.mark.parametrize("with_visible", [False, True])
@pytest.mark.parametrize(
    "lengths",
    [[3, 0, 1, 5, 5, 2], [0, 0], [1], [4, 4, 4], [7, 1, 0, 3, 3, 3, 12, 6, 2, 1], []],
)
def test_ragged_attention_matches_padded_reference(lengths, with_visible):
    torch.manual_seed(0)
    trunk = RaggedTransformer(RogueNetConfig(d_model=8, n_head=2, n_layer=2))
    for p in trunk.parameters():  # larger weights than the init, so attention is far from uniform
        torch.nn.init.normal_(p, std=0.5)
    rng = torch.Generator().manual_seed(1)
    layout, x, visible = _random_case(rng, lengths, with_visible=with_visible)
    out = trunk(x, layout, visible)  # [n_tokens, d_model]
    expected = padded_reference(trunk, x, layout, visible)
    for got, want in zip(_stream_rows(out, layout), expected):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=24),
    st.booleans(),
    st.integers(0, 2**16),
    st.sampled_from([0, 50, 4096]),
)
def test_ragged_attention_property(lengths, with_visible, seed, overhead):
    torch.manual_seed(seed)
    trunk = RaggedTransformer(RogueNetConfig(d_model=8, n_head=2, n_layer=1))
    for p in trunk.parameters():
        torch.nn.init.normal_(p, std=0.5)
    layout, x, visible = _random_case(
        torch.Generator().manual_seed(seed), lengths, with_visible=with_visible, overhead=overhead
    )
    out = trunk(x, layout, visible)
    for got, want in zip(_stream_rows(out, layout), padded_reference(trunk, x, layout, visible)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("group_width", [0, 6, 20, 1000])  # 0: never pack rows; 1000: pack a whole bucket
@pytest.mark.parametrize("with_visible", [False, True])
def test_rows_packed_into_one_sequence_stay_apart(monkeypatch, group_width, with_visible):
    monkeypatch.setattr("entmachin.model.attention.GROUP_WIDTH", group_width)
    torch.manual_seed(0)
    trunk = RaggedTransformer(RogueNetConfig(d_model=8, n_head=2, n_layer=2))
    for p in trunk.parameters():
        torch.nn.init.normal_(p, std=0.5)
    lengths = [3, 3, 3, 2, 1, 1, 0, 4, 4, 4, 4, 4]  # a bucket whose rows do not fill the last sequence
    layout, x, visible = _random_case(torch.Generator().manual_seed(2), lengths, with_visible=with_visible)
    x.requires_grad_(True)
    out = trunk(x, layout, visible)
    for got, want in zip(_stream_rows(out, layout), padded_reference(trunk, x, layout, visible)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    _stream_rows(out, layout)[1].sum().backward()  # row 1 shares a sequence with rows 0 and 2
    grads = _stream_rows(x.grad, layout)
    assert grads[1].abs().sum() > 0
    assert all(g.abs().sum() == 0 for i, g in enumerate(grads) if i != 1)
    assert torch.isfinite(x.grad).all()


def test_gradients_flow_only_within_rows():
    torch.manual_seed(0)
    trunk = RaggedTransformer(RogueNetConfig(d_model=8, n_head=2, n_layer=2))
    layout, x, _ = _random_case(torch.Generator().manual_seed(3), [4, 2, 5])
    x.requires_grad_(True)
    out = trunk(x, layout)
    row0 = _stream_rows(out, layout)[0]
    row0.sum().backward()
    grads = _stream_rows(x.grad, layout)
    assert grads[0].abs().sum() > 0
    assert grads[1].abs().sum() == 0 and grads[2].abs().sum() == 0


def _numpy_pool(h, batch_index, n_rows, op):
    out = np.zeros((n_rows, h.shape[1]), dtype=np.float64)
    for r in range(n_rows):
        items = h[batch_index == r]
        if len(items):
            out[r] = items.mean(0) if op == "mean" else items.max(0)
    return out


@pytest.mark.parametrize("op", ["mean", "max"])
def test_segment_pool_matches_numpy(op):
    rng = np.random.default_rng(0)
    h = rng.normal(size=(11, 3)).astype(np.float32)
    index = np.array([0, 0, 2, 2, 2, 4, 4, 4, 4, 4, 5])
    got = segment_pool(torch.from_numpy(h), torch.from_numpy(index), 7, op)
    np.testing.assert_allclose(got.numpy(), _numpy_pool(h, index, 7, op), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pooling", ["mean", "max", "meanmax"])
@pytest.mark.parametrize("with_visible", [False, True])
def test_pooling_trunk_matches_numpy_reference(pooling, with_visible):
    torch.manual_seed(0)
    trunk = RaggedTransformer(RogueNetConfig(d_model=8, n_head=2, n_layer=1, pooling=pooling))
    layout, x, visible = _random_case(torch.Generator().manual_seed(2), [3, 0, 1, 6], with_visible=with_visible)
    out = trunk(x, layout, visible).detach().numpy()

    block = trunk.blocks[0]
    pool = block.mix
    xs = x.numpy().astype(np.float64)
    h = pool.prepool(block.ln1(x)).detach().numpy().astype(np.float64)
    bi = layout.batch_index.numpy()
    ops = ["mean", "max"] if pooling == "meanmax" else [pooling]
    w, b = pool.proj.weight.detach().numpy(), pool.proj.bias.detach().numpy()

    def pooled(sel):
        parts = [_numpy_pool(h[sel], bi[sel], layout.n_rows, op) for op in ops]
        return np.concatenate(parts, 1) @ w.T + b  # [B, d]

    y = pooled(np.ones(len(bi), bool))[bi]
    if visible is not None:
        vis = visible.numpy()
        y = np.where(vis[:, None], pooled(vis)[bi], y)
    mid = torch.from_numpy((xs + y).astype(np.float32))
    expected = (mid + block.mlp(block.ln2(mid))).detach().numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert out.shape == (layout.n_tokens, 8)


def test_trunk_equals_torch_transformer_encoder_layers_with_the_same_weights():
    """An independent reference: PyTorch's own pre-norm encoder layers, rows padded with a key mask."""
    torch.manual_seed(0)
    config = RogueNetConfig(d_model=8, n_head=2, n_layer=2)
    trunk = RaggedTransformer(config)
    for p in trunk.parameters():
        torch.nn.init.normal_(p, std=0.3)
    layers = []
    for block in trunk.blocks:
        layer = torch.nn.TransformerEncoderLayer(8, 2, 32, dropout=0.0, activation="gelu", batch_first=True,
                                                 norm_first=True)
        with torch.no_grad():
            layer.self_attn.in_proj_weight.copy_(block.mix.qkv.weight)
            layer.self_attn.in_proj_bias.copy_(block.mix.qkv.bias)
            layer.self_attn.out_proj.weight.copy_(block.mix.proj.weight)
            layer.self_attn.out_proj.bias.copy_(block.mix.proj.bias)
            for mine, theirs in ((block.mlp[0], layer.linear1), (block.mlp[2], layer.linear2),
                                 (block.ln1, layer.norm1), (block.ln2, layer.norm2)):
                theirs.weight.copy_(mine.weight)
                theirs.bias.copy_(mine.bias)
        layers.append(layer.train())
    lengths = [5, 1, 3, 7, 7, 2]
    layout, x, _ = _random_case(torch.Generator().manual_seed(4), lengths, overhead=0)
    out = trunk(x, layout)
    padded = torch.zeros(len(lengths), max(lengths), 8)
    for i, row in enumerate(_stream_rows(x, layout)):
        padded[i, : len(row)] = row
    pad_mask = torch.arange(max(lengths))[None, :] >= torch.tensor(lengths)[:, None]  # [B, T]
    for layer in layers:
        padded = layer(padded, src_key_padding_mask=pad_mask)
    for i, got in enumerate(_stream_rows(out, layout)):
        torch.testing.assert_close(got, padded[i, : lengths[i]], atol=1e-5, rtol=1e-5)
