"""The pieces of A2C's and PPO's losses: an actor's log-probabilities and entropies flattened to
*units* (rows for dense actors, actors for ragged ones, each with its row), the old log-probabilities
of the stored rows, advantage normalisation over the rows that have units, and the statistics an
update reports."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

import numpy as np
import torch

from entmachin.ragged.tensor import RaggedTensor

__all__ = ["Losses", "Units", "units_of", "OldLogProbs", "old_log_probs", "old_units", "cat_old", "normalized",
           "acting_rows", "mean_of", "explained_variance", "REPORTED"]

# Per action name, one RaggedTensor over all rows (ragged actors), or a [N] tensor (dense ones).
OldLogProbs = Union[torch.Tensor, Dict[str, RaggedTensor]]

# The Losses fields an update reports, in UpdateStats' order.
REPORTED = ("policy", "value", "entropy", "approx_kl", "clip_fraction")

# Rows per no-grad pass when computing old log-probabilities (at least batch_size).
_OLD_LOG_PROB_ROWS = 4096


class Losses(NamedTuple):
    """One minibatch's losses (None: not computed on this minibatch) and diagnostics.

    ``policy_parts`` names the terms of the policy loss (``"policy loss"``, ``"entropy"``) so that a
    non-finite step can say which one went wrong.
    """

    policy: Optional[torch.Tensor]
    value: Optional[torch.Tensor]
    policy_parts: Dict[str, torch.Tensor]
    entropy: Optional[torch.Tensor]
    approx_kl: Optional[torch.Tensor]
    clip_fraction: Optional[torch.Tensor]


class Units(NamedTuple):
    """An actor's log-probabilities and entropies flattened to units.

    Attributes:
        log_prob: ``[n_units]``.
        entropy: ``[n_units]`` or None when the actor returns no entropy.
        row: ``[n_units]`` int64 row of each unit; None for dense actors (unit ``i`` is row ``i``).
        per_actor: per action name ``RaggedTensor`` of log-probs (ragged actors), else None.
    """

    log_prob: torch.Tensor
    entropy: Optional[torch.Tensor]
    row: Optional[torch.Tensor]
    per_actor: Optional[Dict[str, RaggedTensor]]


def _flatten(values: Mapping[str, Any], names: List[str], where: str, n_rows: int) -> List[RaggedTensor]:
    out = []
    for name in names:
        value = values.get(name) if isinstance(values, Mapping) else None
        if not isinstance(value, RaggedTensor):
            raise TypeError(f"{where}[{name!r}] is a {type(value).__name__}; expected a RaggedTensor [n_actors, 1]")
        if len(value) != n_rows or value.data.numel() != value.n_items:
            raise ValueError(
                f"{where}[{name!r}] has {len(value)} rows and data of shape {tuple(value.data.shape)}; "
                f"expected {n_rows} rows of [n_actors, 1]"
            )
        out.append(value)
    return out


def _dense(value: Any, n_rows: int, where: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where} is a {type(value).__name__}; expected a tensor [B] or [B, 1]")
    if value.numel() != n_rows or value.dim() > 2 or (value.dim() == 2 and value.shape[1] != 1):
        raise ValueError(f"{where} has shape {tuple(value.shape)}; expected [B] or [B, 1] with B = {n_rows}")
    return value.reshape(n_rows)  # [B]


def units_of(result: Any, n_rows: int, need_entropy: bool, where: str) -> Units:
    """Reads ``(action, log_prob, entropy, ...)`` from an actor's result.

    Raises:
        TypeError / ValueError: the result is not a tuple of at least two values, shapes do not
            fit ``n_rows``, or ``need_entropy`` and the actor returns no entropy.
    """
    if not isinstance(result, (tuple, list)) or len(result) < 2:
        raise TypeError(
            f"{where}: the actor returned a {type(result).__name__}; expected a tuple "
            "(action, log_prob, entropy, ...)"
        )
    log_prob = result[1]
    entropy = result[2] if len(result) > 2 else None
    if need_entropy and entropy is None:
        raise ValueError(
            f"{where}: entropy_weight is set, but the actor returns no entropy; return "
            "(action, log_prob, entropy) or set entropy_weight=None"
        )
    if isinstance(log_prob, Mapping):
        names = list(log_prob)
        lps = _flatten(log_prob, names, f"{where}: log_prob", n_rows)
        flat = torch.cat([lp.data.reshape(-1) for lp in lps]) if lps else torch.zeros(0)  # [n_units]
        row = torch.cat([lp.batch_index for lp in lps]) if lps else torch.zeros(0, dtype=torch.int64)  # [n_units]
        ent = None
        if entropy is not None:
            if not isinstance(entropy, Mapping):
                raise TypeError(f"{where}: log_prob is per actor, but entropy is a {type(entropy).__name__}")
            ents = _flatten(entropy, names, f"{where}: entropy", n_rows)
            ent = torch.cat([e.data.reshape(-1) for e in ents]) if ents else flat.new_zeros(0)  # [n_units]
        return Units(flat, ent, row.to(flat.device), dict(zip(names, lps)))
    flat = _dense(log_prob, n_rows, f"{where}: log_prob")  # [B]
    ent = None if entropy is None else _dense(entropy, n_rows, f"{where}: entropy")  # [B]
    return Units(flat, ent, None, None)


def acting_rows(action: Any, n_rows: int) -> Optional[np.ndarray]:
    """Bool ``[n_rows]``: the rows of an entity action tree (every leaf a ``RaggedTensor`` of actors) with at
    least one actor; None where every row has one or the actions are dense (every row is a unit)."""
    leaves: List[RaggedTensor] = []
    pending = [action]
    while pending:
        node = pending.pop()
        if isinstance(node, RaggedTensor):
            leaves.append(node)
        elif isinstance(node, Mapping):
            pending.extend(node.values())
        else:
            return None
    if not leaves:
        return None
    acting = (sum(leaf.lengths for leaf in leaves) > 0).cpu().numpy()  # [N]
    return None if acting.all() else acting


def old_log_probs(eval_act: Callable[[Any, Any], Any], state: Any, action: Any, rows: np.ndarray,
                  batch_size: int, where: str) -> OldLogProbs:
    """Log-probabilities of the stored actions at ``rows`` (sorted int64), without gradients, in
    passes of at least ``batch_size`` rows through ``eval_act(state, action)``."""
    chunk = max(batch_size, _OLD_LOG_PROB_ROWS)
    parts: List[Units] = []
    with torch.no_grad():
        for start in range(0, rows.shape[0], chunk):
            index = torch.from_numpy(rows[start : start + chunk])  # [chunk]
            parts.append(units_of(eval_act(state[index], action[index]), index.shape[0], False, where))
    return cat_old(parts)


def old_units(old: OldLogProbs, index: torch.Tensor) -> torch.Tensor:
    """The old log-probs of rows ``index`` flattened like :func:`units_of` flattens new ones.

    Shape:
        index: ``[B]``; returns ``[n_units]``.
    """
    if isinstance(old, torch.Tensor):
        return old[index.to(old.device)]  # [B]
    parts = [rt[index].data.reshape(-1) for rt in old.values()]
    return torch.cat(parts) if parts else torch.zeros(0)  # [n_units]


def cat_old(chunks: List[Units]) -> OldLogProbs:
    """Joins the per-chunk log-probs of a batched pass over all rows (detached)."""
    if chunks[0].per_actor is None:
        return torch.cat([c.log_prob.detach() for c in chunks])  # [N]
    names = list(chunks[0].per_actor)
    return {name: RaggedTensor.cat([c.per_actor[name].detach() for c in chunks]) for name in names}


def normalized(advantage: torch.Tensor, row: Optional[torch.Tensor]) -> torch.Tensor:
    """Normalises row advantages over the rows that have units (all rows for dense actors,
    whose ``row`` is None).

    Shape:
        advantage: ``[B]``; row: ``[n_units]`` or None; returns ``[B]``.
    """
    if row is not None:
        has_units = torch.zeros_like(advantage, dtype=torch.bool)  # [B]
        has_units[row] = True
        values = advantage[has_units]  # [n_rows_with_actors]
    else:
        values = advantage
    if values.numel() == 0:
        return advantage
    mean = values.mean()
    std = values.std(unbiased=False) if values.numel() > 1 else values.new_zeros(())
    return (advantage - mean) / (std + 1e-8)  # [B]


def mean_of(values: List[torch.Tensor]) -> float:
    """Mean of the finite values among scalar tensors (nan if none), with one host sync."""
    if not values:
        return math.nan
    stacked = torch.stack([v.reshape(()).float() for v in values]).cpu().double()  # [n]
    finite = stacked[torch.isfinite(stacked)]  # [n_finite]
    return float(finite.mean()) if finite.numel() else math.nan


def explained_variance(target: torch.Tensor, value: torch.Tensor) -> float:
    """``1 - Var(target - value) / Var(target)`` over every stored row (CleanRL's diagnostic)."""
    variance = float(target.var(unbiased=False))
    if not variance > 0:
        return math.nan
    return 1.0 - float((target - value).var(unbiased=False)) / variance
