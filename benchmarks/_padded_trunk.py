"""The padded-trunk section of ``bench_rogue_net.py``: RogueNet's ragged attention against
``nn.TransformerEncoderLayer`` over padded rows, on the same embedding and heads.

See ``bench_rogue_net.py`` for what is measured.
"""
from __future__ import annotations

import contextlib
import statistics
from typing import Any, Dict, List

import numpy as np
import torch
from _device import clock, describe
from torch import nn

from entmachin.env import CategoricalActionSpace, Entity, ObsSpace, SelectEntityActionSpace
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model.layout import RowLayout
from entmachin.ragged.tensor import RaggedTensor

OBS_SPACE = ObsSpace(entities={"Unit": Entity(["x", "y", "hp", "team"]), "Item": Entity(["x", "y"])})
ACTION_SPACE = {"move": CategoricalActionSpace(["n", "e", "s", "w", "stay"]), "pick": SelectEntityActionSpace()}


class PaddedTrunk(nn.Module):
    """Pads each row to the longest and runs ``nn.TransformerEncoderLayer``s with a key padding mask."""

    def __init__(self, config: RogueNetConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(config.d_model, config.n_head, 4 * config.d_model, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(config.n_layer)
        )
        self.relpos = None

    def forward(self, x: torch.Tensor, layout: RowLayout, visible=None, positions=None) -> torch.Tensor:
        rows, t_max = layout.batch_index, int(layout.lengths.max())
        pos = torch.arange(layout.n_tokens, device=x.device) - layout.starts[rows]  # [n_tokens] position in the row
        padded = x.new_zeros(layout.n_rows, t_max, x.shape[1]).index_put((rows, pos), x)  # [B, T, d]
        pad_mask = torch.arange(t_max, device=x.device)[None, :] >= layout.lengths[:, None]  # [B, T] True = padding
        for layer in self.layers:
            padded = layer(padded, src_key_padding_mask=pad_mask)
        return padded[rows, pos]  # [n_tokens, d]


def make_batch(counts: np.ndarray, rng: np.random.Generator) -> Dict:
    """A batch with ``counts[i]`` entities in row ``i`` (3/4 units, 1/4 items); every unit moves and picks."""
    n_units = np.maximum(1, (counts * 3) // 4)
    n_items = counts - n_units
    units = RaggedTensor.from_lengths(torch.randn(int(n_units.sum()), 4), n_units)
    items = RaggedTensor.from_lengths(torch.randn(int(n_items.sum()), 2), n_items)

    def indices(ranges, lengths):  # int64 ragged [n, 1] holding the concatenated ranges
        flat = np.concatenate([np.arange(a, b) for a, b in ranges]).astype(np.int64)  # [n]
        return RaggedTensor.from_lengths(torch.from_numpy(flat)[:, None], lengths)

    actors = indices([(0, n) for n in n_units], n_units)
    actees = indices([(u, u + i) for u, i in zip(n_units, n_items)], n_items)
    # Rows without items have nothing to pick: their units do not pick.
    pickers = np.where(n_items > 0, n_units, 0)
    pick_actors = indices([(0, n) for n in pickers], pickers)
    masks = {
        "move": {"actors": actors},
        "pick": {"actors": pick_actors, "actees": actees},
    }
    move = RaggedTensor.from_lengths(torch.from_numpy(rng.integers(0, 5, int(n_units.sum())))[:, None], n_units)
    pick_choice = np.concatenate([rng.integers(0, max(i, 1), p) for p, i in zip(pickers, n_items)]).astype(np.int64)
    pick = RaggedTensor.from_lengths(torch.from_numpy(pick_choice)[:, None], pickers)
    return {"entities": {"Unit": units, "Item": items}, "action_masks": masks, "action": {"move": move, "pick": pick}}


def _to(tree: Any, device: torch.device) -> Any:
    """Every ``RaggedTensor`` of ``tree`` on ``device``."""
    return {k: _to(v, device) for k, v in tree.items()} if isinstance(tree, dict) else tree.to(device)


def step(net: RogueNet, batch: Dict, bf16: bool) -> None:
    net.zero_grad(set_to_none=True)
    device_type = net.value_head.weight.device.type
    ctx = torch.autocast(device_type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with ctx:
        out = net(batch["entities"], batch["action_masks"], action=batch["action"])
    out.log_prob_sum.sum().backward()


def measure(nets: Dict[str, RogueNet], batch: Dict, bf16: bool, repeats: int, device: torch.device
            ) -> Dict[str, float]:
    for net in nets.values():  # warm-up
        step(net, batch, bf16)
    now = clock(device)
    times: Dict[str, List[float]] = {name: [] for name in nets}
    for _ in range(repeats):
        for name, net in nets.items():
            start = now()
            step(net, batch, bf16)
            times[name].append(now() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def run_padded(args: Any, device: torch.device) -> None:
    """Prints the padded-trunk table (fp32 and bf16 autocast, two entity-count cases)."""
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    config = RogueNetConfig()
    ragged = RogueNet(OBS_SPACE, ACTION_SPACE, config)
    padded = RogueNet(OBS_SPACE, ACTION_SPACE, config)
    padded.load_state_dict(ragged.state_dict(), strict=False)
    padded.trunk = PaddedTrunk(config)
    ragged.to(device)
    padded.to(device)
    nets = {"ragged": ragged, "padded": padded}
    cases = {
        f"U[1,{args.max_entities}]": rng.integers(1, args.max_entities + 1, args.rows),
        f"fixed {args.fixed}": np.full(args.rows, args.fixed),
    }
    print(f"ragged vs padded trunk on {describe(device)}: {args.rows} rows, config {config}, inputs converted "
          "before timing")
    print(f"{'case':<14}{'dtype':<7}{'tokens':>8}{'ragged tok/s':>15}{'padded tok/s':>15}{'ratio':>8}")
    for case, counts in cases.items():
        batch = _to(make_batch(counts.astype(np.int64), rng), device)
        n_tokens = int(counts.sum())
        for bf16 in (False, True):
            seconds = measure(nets, batch, bf16, args.repeats, device)
            rate = {name: n_tokens / s for name, s in seconds.items()}
            print(f"{case:<14}{'bf16' if bf16 else 'fp32':<7}{n_tokens:>8}{rate['ragged']:>15,.0f}"
                  f"{rate['padded']:>15,.0f}{rate['ragged'] / rate['padded']:>8.2f}")
