"""The bare arithmetic of a RogueNet step, on preallocated dense tensors (``bench_rogue_net_bound.py``).

For one workload of ``bench_rogue_net.py`` this builds the same layers as both networks
(per-type input normalisation -> Linear -> ReLU -> LayerNorm; ``n_layer`` pre-norm blocks with
a fused QKV Linear, attention, projection, LayerNorm, MLP up, GELU, MLP down; the action heads)
and runs them on tensors made once, outside the timed region, with no ragged bookkeeping: no
conversion from ragged arrays, no validation, no index computations, no gathers of actors
(the actors are the first tokens, the actees the next ones, laid out densely). Only the
attention part differs between the variants:

* ``exact``: the tokens are ordered by row length, and every distinct length gets one
  unmasked ``scaled_dot_product_attention`` call over rows of exactly that length (the
  unpadded per-row shapes: no padding, no mask; one call per distinct length);
* ``buckets``: entmachin's attention plan (``plan_attention``: buckets of similar lengths,
  narrow rows packed ``group`` per sequence with a block-diagonal mask), with the calls and
  masks RogueNet makes; queries, keys and values reach the grid by one ``index_copy`` per
  bucket and the output leaves it by one ``index_select`` (the least a padded call needs);
* ``padpack``: rogue-net's arithmetic: ``padpack`` sequences (rows packed into sequences as
  long as the longest row, as ragged-buffer's ``padpack`` packs them for rogue-net:
  ``entmachin.ragged.array.padpack``), its explicit ``q @ k.T``, ``masked_fill``, softmax, ``att @ v``,
  reached by one gather each way.

``train`` workloads run forward + backward of the summed log-probabilities of given actions;
``infer`` workloads run the forward under ``no_grad`` and sample (exponential race, as
RogueNet). The smallest of the three is the bound a network with this arithmetic can reach.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from entmachin.model.attention import plan_attention
from entmachin.model.layout import build_layout
from entmachin.ragged.array import padpack

VARIANTS = ("exact", "buckets", "padpack")


class _Batch:
    """What one batch of a workload looks like, as dense tensors."""

    def __init__(self, batch: Dict[str, Any], spaces: Dict[str, Any], d_model: int, device: torch.device) -> None:
        entities = batch["entities"]
        self.features = {name: torch.from_numpy(entities[name].as_array().copy()).to(device) if name in entities
                         else torch.zeros(0, len(f), device=device) for name, f in spaces["entities"].items()}  # [n, f]
        lengths = sum(np.asarray(entities[name].size1(), dtype=np.int64) for name in entities)  # [B]
        self.lengths = lengths
        self.n_rows = lengths.shape[0]
        self.n_tokens = int(lengths.sum())
        order = np.argsort(-lengths, kind="stable")
        self.sorted_lengths = lengths[order]  # [B]
        self.actions: List[Tuple[str, int, Any]] = []  # (kind, n_actors, mask or select-entity layout)
        for name, space in spaces["actions"].items():
            masks = batch["action_masks"][name]
            n_actors = int(masks["actors"].items())
            if space["kind"] == "categorical":
                mask = torch.from_numpy(masks["mask"].as_array().copy()).to(device) if "mask" in masks else None
                self.actions.append(("categorical", n_actors, mask))
            else:
                a_len = np.asarray(masks["actors"].size1(), dtype=np.int64)  # [B]
                e_len = np.asarray(masks["actees"].size1(), dtype=np.int64)[a_len > 0]  # [n_actors]
                if a_len.max(initial=0) > 1:
                    raise ValueError(f"_bare_arithmetic: action '{name}' has rows with several actors")
                width = int(e_len.max(initial=0))
                slot = np.concatenate([i * width + np.arange(n) for i, n in enumerate(e_len)] + [np.zeros(0, np.int64)])
                allowed = np.zeros(n_actors * width, dtype=bool)
                allowed[slot] = True
                self.actions.append(("select", n_actors, (width, int(e_len.sum()), torch.from_numpy(slot).to(device),
                                                          torch.from_numpy(allowed).view(n_actors, width).to(device))))
        self.given = [torch.from_numpy(batch["action"][name].as_array()[:, 0].copy()).to(device)
                      if "action" in batch else None for name in spaces["actions"]]
        # Plans of each variant, made here (outside the timed region).
        self.layout = build_layout(lengths, device)
        self.plans = plan_attention(self.layout, None)
        counts = np.bincount(self.sorted_lengths, minlength=1)
        self.exact = [(int(t), int(counts[t])) for t in range(len(counts) - 1, 0, -1) if counts[t]]
        index, batch_of, inverse = padpack(lengths) or (None, None, None)
        if index is None:  # every row as long: one plain view
            t = int(lengths.max())
            self.padpack = (torch.arange(self.n_tokens, device=device), None, torch.arange(self.n_tokens, device=device),
                            self.n_rows, t)
        else:
            tb = torch.from_numpy(batch_of)  # [n_seq, T], nan for padding
            mask = (tb[:, :, None] != tb[:, None, :])[:, None]  # [n_seq, 1, T, T] True: masked out
            self.padpack = (torch.from_numpy(index.reshape(-1)).to(device), mask.to(device),
                            torch.from_numpy(inverse).to(device), index.shape[0], index.shape[1])


class BareNet(nn.Module):
    """The layers of RogueNet for one workload's spaces (see the module docstring)."""

    def __init__(self, spaces: Dict[str, Any], d_model: int, n_layer: int, n_head: int, d_qk: int) -> None:
        super().__init__()
        self.d_model, self.n_head = d_model, n_head
        self.embed = nn.ModuleList()
        for features in spaces["entities"].values():
            if features:
                self.embed.append(nn.Sequential(nn.Linear(len(features), d_model), nn.ReLU(), nn.LayerNorm(d_model)))
            else:
                self.embed.append(nn.Embedding(1, d_model))
        self.blocks = nn.ModuleList()
        for _ in range(n_layer):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(d_model), "qkv": nn.Linear(d_model, 3 * d_model),
                "proj": nn.Linear(d_model, d_model), "ln2": nn.LayerNorm(d_model),
                "up": nn.Linear(d_model, 4 * d_model), "down": nn.Linear(4 * d_model, d_model)}))
        self.heads = nn.ModuleList()
        for space in spaces["actions"].values():
            if space["kind"] == "categorical":
                self.heads.append(nn.Linear(d_model, len(space["choices"])))
            else:
                self.heads.append(nn.ModuleList([nn.Linear(d_model, d_qk), nn.Linear(d_model, d_qk)]))

    def attend(self, qkv: torch.Tensor, b: _Batch, variant: str) -> torch.Tensor:
        """Self-attention of ``qkv`` ``[n_tokens, 3 * d_model]`` -> ``[n_tokens, d_model]``."""
        h, d = self.n_head, self.d_model // self.n_head
        if variant == "exact":
            outs, start = [], 0
            for t, n in b.exact:
                part = qkv[start:start + n * t].view(n, t, 3, h, d).permute(2, 0, 3, 1, 4)  # 3 x [n, h, t, d]
                y = F.scaled_dot_product_attention(part[0], part[1], part[2])  # [n, h, t, d]
                outs.append(y.transpose(1, 2).reshape(n * t, self.d_model))
                start += n * t
            return torch.cat(outs) if len(outs) > 1 else outs[0]
        if variant == "buckets":
            outs, start = [], 0
            for plan in b.plans:
                bucket = plan.bucket
                part = qkv[start:start + bucket.n_tokens]
                start += bucket.n_tokens
                n_seq = -(-bucket.n_rows // plan.group)
                length = plan.group * bucket.width
                valid = bucket.valid
                if valid is not None or n_seq * length != bucket.n_tokens:
                    if valid is None:
                        valid = torch.arange(bucket.n_tokens, device=qkv.device)
                    part = part.new_zeros(n_seq * length, part.shape[1]).index_copy(0, valid, part)
                else:
                    valid = None
                q, k, v = part.view(n_seq, length, 3, h, d).permute(2, 0, 3, 1, 4)
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=plan.mask)  # [n_seq, h, L, d]
                y = y.transpose(1, 2).reshape(n_seq * length, self.d_model)
                outs.append(y if valid is None else y.index_select(0, valid))
            return torch.cat(outs) if len(outs) > 1 else outs[0]
        index, mask, inverse, n_seq, t = b.padpack
        q, k, v = qkv[index].view(n_seq, t, 3, h, d).permute(2, 0, 3, 1, 4)  # 3 x [n_seq, h, T, d]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # [n_seq, h, T, T]
        if mask is not None:
            att = att.masked_fill(mask, -1e9)
        y = att.softmax(dim=-1) @ v  # [n_seq, h, T, d]
        return y.transpose(1, 2).reshape(n_seq * t, self.d_model)[inverse]

    def forward(self, b: _Batch, inputs: List[torch.Tensor], variant: str, sample: bool) -> torch.Tensor:
        parts = []
        for emb, x in zip(self.embed, inputs):
            if isinstance(emb, nn.Embedding):
                parts.append(emb.weight.expand(x.shape[0], -1))
            else:
                parts.append(emb(x.clamp(-5.0, 5.0)))
        x = torch.cat(parts)  # [n_tokens, d_model]
        for blk in self.blocks:
            x = x + blk["proj"](self.attend(blk["qkv"](blk["ln1"](x)), b, variant))
            x = x + blk["down"](F.gelu(blk["up"](blk["ln2"](x))))
        total = x.new_zeros(())
        start = 0
        for head, (kind, n_actors, choices), given in zip(self.heads, b.actions, b.given):
            if n_actors == 0:
                continue
            actors = x[start:start + n_actors]  # [n_actors, d_model]
            if kind == "categorical":
                logits = head(actors)  # [n_actors, n_choices]
                if choices is not None:
                    logits = logits.masked_fill(~choices, float("-inf"))
            else:
                width, n_actees, slot, allowed = choices
                keys = head[1](x[start + n_actors:start + n_actors + n_actees])  # [n_actees, d_qk]
                keys = keys.new_zeros(n_actors * width, keys.shape[1]).index_copy(0, slot, keys)
                query = head[0](actors)[:, None, :]  # [n_actors, 1, d_qk]
                logits = torch.bmm(query, keys.view(n_actors, width, -1).transpose(1, 2))[:, 0]  # [n_actors, W]
                logits = (logits / math.sqrt(keys.shape[-1])).masked_fill(~allowed, float("-inf"))
            log_p = logits.log_softmax(-1)
            if sample:
                race = torch.empty_like(log_p).exponential_()
                action = (log_p.exp() / race).argmax(-1, keepdim=True)
            else:
                action = given[:, None]
            total = total + log_p.gather(1, action).sum()
        return total


def bare_step(spaces: Dict[str, Any], batches: List[Dict[str, Any]], mode: str, variant: str,
              d_model: int, n_layer: int, n_head: int, d_qk: int,
              device: torch.device = torch.device("cpu")) -> Callable[[], None]:
    """A callable running one step of ``variant`` over ``batches`` on ``device`` (see the module docstring)."""
    torch.manual_seed(0)
    net = BareNet(spaces, d_model, n_layer, n_head, d_qk).to(device)
    prepared = []
    for batch in batches:
        b = _Batch(batch, spaces, d_model, device)
        mean = {n: x.mean(0) for n, x in b.features.items()}
        std = {n: x.std(0).clamp_min(1e-3) if x.shape[0] > 1 else torch.ones(x.shape[1], device=device)
               for n, x in b.features.items()}
        prepared.append((b, [b.features[n] for n in spaces["entities"]], [mean[n] for n in spaces["entities"]],
                         [std[n] for n in spaces["entities"]]))

    def step() -> None:
        for b, inputs, means, stds in prepared:
            normed = [(x - m) / s for x, m, s in zip(inputs, means, stds)]
            if mode == "train":
                net.zero_grad(set_to_none=True)
                net(b, normed, variant, sample=False).backward()
            else:
                with torch.no_grad():
                    net(b, normed, variant, sample=True)

    return step
