"""Data-parallel A2C / PPO updates: every rank holds part of each minibatch, all take the same step.

Attach a :class:`DataParallel` to a frame (``frame.data_parallel = DataParallel(collectives)``) on every rank, with
the same config everywhere, and each ``update()`` steps as one frame holding all ranks' rows would (to rounding),
although each rank only holds its own rows: advantages are normalised with the moments of every rank's rows
(:meth:`~DataParallel.normalized`); each rank's losses are re-weighted so that their average over the ranks is the
loss of the whole minibatch (:meth:`~DataParallel.weigh`), which makes averaging the gradients over the ranks
(:meth:`~DataParallel.average_gradients`, after the backward pass and before clipping) right when ranks hold
different numbers of actors; ``target_kl`` stops every rank at the same minibatch, the approximate KL being global.

The frame's ``data_parallel`` attribute is the only link (None: single process, nothing changes); every rank must
run the same number of minibatches with the same flags, which holds when they store the same number of rows and
share the config.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, List, Optional, Sequence

import torch
from torch import nn

from entmachin.frame.gae import Losses
from entmachin.distributed.collectives import Collectives
from entmachin.frame.summary import UpdateStats
from entmachin.model.input_norm import InputNorm

__all__ = ["DataParallel"]


class DataParallel:
    """The collectives one data-parallel ``A2C`` / ``PPO`` update needs (see the module doc).

    Args:
        collectives: the ranks' :class:`~entmachin.distributed.collectives.Collectives`.
    """

    def __init__(self, collectives: Collectives) -> None:
        self.collectives = collectives

    @property
    def world_size(self) -> int:
        """The number of ranks (the collectives')."""
        return self.collectives.world_size

    @property
    def rank(self) -> int:
        """This process's rank, 0 to ``world_size - 1`` (the collectives')."""
        return self.collectives.rank

    # ------------------------------------------------------------------ hooks of A2C._minibatch / UpdateSteps.step

    def normalized(self, advantage: torch.Tensor, row: Optional[torch.Tensor]) -> torch.Tensor:
        """:func:`entmachin.frame.gae.normalized` with the moments of the rows that have units on all ranks:
        ``advantage`` holds each row's advantage, ``row`` the row of each unit (None: every row has units).

        Shape:
            advantage: ``[B]``; row: ``[n_units]`` or None; returns ``[B]``.
        """
        values = (advantage if row is None else advantage[row.unique()]).double()  # [n_rows_with_units]
        moments = torch.stack([values.new_tensor(float(values.numel())), values.sum()])  # [2]
        count, total = self.collectives.all_reduce_sum(moments).tolist()
        mean = total / count if count else 0.0
        squares = self.collectives.all_reduce_sum(((values - mean) ** 2).sum().reshape(1))  # [1]
        if count == 0:
            return advantage
        std = math.sqrt(float(squares) / count) if count > 1 else 0.0
        return (advantage - mean) / (std + 1e-8)  # [B]

    def weigh(self, losses: Losses, n_units: int, n_rows: int, criterion: Any) -> Losses:
        """This rank's losses, means over its own units and rows, re-weighted so that their average over the ranks is
        the loss of the whole minibatch: the policy loss, entropy and clip fraction by ``n_units * world_size /
        n_units_all``, the value loss likewise by rows (by ``world_size`` when the criterion sums); the approximate
        KL becomes the global one.

        Args:
            losses: this rank's minibatch losses (``entmachin.frame.gae.Losses``; None terms stay None).
            n_units: units (actors, or rows for dense actors) of this rank's minibatch (0 without a policy loss).
            n_rows: rows of this rank's minibatch.
            criterion: the value criterion; ``reduction == "sum"`` sums over rows, anything else is taken as a mean.
        """
        kl = losses.approx_kl
        local = [float(n_units), float(n_rows), 0.0 if kl is None else float(kl) * n_units]
        n_all, rows_all, kl_sum = self.collectives.all_reduce_sum(torch.tensor(local, dtype=torch.float64)).tolist()
        size = self.world_size
        unit_w = n_units * size / n_all if n_all else 1.0
        row_w = float(size) if getattr(criterion, "reduction", "mean") == "sum" else (
            n_rows * size / rows_all if rows_all else 1.0)

        def scaled(term: Optional[torch.Tensor], weight: float) -> Optional[torch.Tensor]:
            return term if term is None or weight == 1.0 else term * weight

        return losses._replace(
            policy=scaled(losses.policy, unit_w), value=scaled(losses.value, row_w),
            entropy=scaled(losses.entropy, unit_w), clip_fraction=scaled(losses.clip_fraction, unit_w),
            approx_kl=None if kl is None else kl.new_tensor(kl_sum / n_all if n_all else 0.0),
        )

    def average_gradients(self, params: Sequence[nn.Parameter], terms: Sequence[torch.Tensor]) -> None:
        """Averages ``params``' gradients over the ranks, in one flat all-reduce.

        A parameter without a gradient counts as zero; one that has none on any rank keeps ``grad = None`` (as in one
        process). If a term of ``terms`` is non-finite on any rank, every rank's gradients become NaN, so that every
        rank skips the step (the frame's finite check) and weights never diverge.
        """
        params = list(dict.fromkeys(params))  # a parameter shared by two steps is reduced once
        if not params:
            return
        has = [p.grad is not None for p in params]
        dtype, device = params[0].dtype, params[0].device
        finite = torch.stack([torch.isfinite(t.detach()).all() for t in terms]).all() if terms else \
            torch.ones((), dtype=torch.bool, device=device)
        parts = [p.grad.reshape(-1).to(dtype) if h else torch.zeros(p.numel(), dtype=dtype, device=device)
                 for p, h in zip(params, has)]
        flags = torch.tensor([float(h) for h in has], dtype=dtype, device=device)  # [n_params]
        flat = torch.cat(parts + [flags, (~finite).to(dtype).reshape(1)])  # [n_grads + n_params + 1]
        self.collectives.all_reduce_sum(flat)
        n_grads = flat.shape[0] - len(params) - 1
        grads = flat[:n_grads] / self.world_size  # [n_grads]
        if float(flat[-1]) > 0:
            grads.fill_(float("nan"))
        for p, grad, anywhere in zip(params, grads.split([p.numel() for p in params]), flat[n_grads:-1].tolist()):
            p.grad = grad.view_as(p).to(p.dtype).clone() if anywhere > 0 else None

    def broadcast_modules(self, modules: Iterable[nn.Module], src: int = 0) -> None:
        """Gives every rank rank ``src``'s parameters and buffers of ``modules`` (identical initial weights); a tensor
        two modules share is sent once."""
        tensors = {id(t): t for module in modules for t in [*module.parameters(), *module.buffers()]}
        with torch.no_grad():
            for tensor in tensors.values():  # a tensor shared by two modules is sent once
                self.collectives.broadcast(tensor.data, src)

    def snapshot_input_stats(self, modules: Iterable[nn.Module]) -> List[torch.Tensor]:
        """The running statistics of every ``InputNorm`` of ``modules``, before a rollout."""
        return [_stats_of(norm).clone() for norm in _norms(modules)]

    def merge_input_stats(self, modules: Iterable[nn.Module], before: List[torch.Tensor]) -> None:
        """Merges what every rank's ``InputNorm``s of ``modules`` learned since ``before`` (what
        :meth:`snapshot_input_stats` returned for the same ``modules``) into every rank.

        Each rank's statistics are ``before`` merged with its own rollout; the rollout's part is taken back out
        (count, mean and sum of squared deviations of Chan et al.'s pairwise form) and the ranks' parts are merged
        into ``before`` in rank order, in float64, so every rank ends with the statistics of all the ranks' items.

        Raises:
            ValueError: ``before`` holds another number of snapshots than ``modules`` has ``InputNorm``s.
        """
        norms = _norms(modules)
        if len(norms) != len(before):
            raise ValueError(f"DataParallel.merge_input_stats: {len(before)} snapshots for {len(norms)} InputNorms")
        if not norms:
            return
        gathered = self.collectives.all_gather(torch.cat([_stats_of(norm) for norm in norms]))  # [sum(1 + 2 F)]
        offset = 0
        for norm, start in zip(norms, before):
            width = start.shape[0]
            merged = start
            for rank_stats in gathered:
                merged = _merge(merged, _unmerge(rank_stats[offset : offset + width], start))
            offset += width
            count, mean, squares = _split(merged)
            with torch.no_grad():
                norm.count.fill_(int(round(float(count))))
                norm.mean.copy_(mean)
                norm.squares_sum.copy_(squares)

    def reduce_stats(self, stats: UpdateStats) -> UpdateStats:
        """``stats`` with its losses and diagnostics averaged over the ranks (finite values only).

        ``skipped_steps`` is the most any rank skipped: every rank skips the same steps (a non-finite value anywhere
        skips the step everywhere), and a step skipped on every rank is one skipped step of the update, not one per
        rank.
        """
        fields = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "explained_variance")
        values = [getattr(stats, f) for f in fields]
        local = [v if math.isfinite(v) else 0.0 for v in values] + [1.0 if math.isfinite(v) else 0.0 for v in values]
        total = self.collectives.all_reduce_sum(torch.tensor(local, dtype=torch.float64)).tolist()
        skipped = self.collectives.all_gather(torch.tensor([stats.skipped_steps], dtype=torch.int64))
        k = len(fields)
        averaged = {f: total[i] / total[k + i] if total[k + i] else math.nan for i, f in enumerate(fields)}
        return stats._replace(**averaged, skipped_steps=max(int(s) for s in skipped))


def _norms(modules: Iterable[nn.Module]) -> List[InputNorm]:
    """Every ``InputNorm`` of ``modules``, once each."""
    return list({id(m): m for module in modules for m in module.modules() if isinstance(m, InputNorm)}.values())


def _stats_of(norm: InputNorm) -> torch.Tensor:
    """``[1 + 2 n_features]`` float64: count, mean, squares_sum."""
    return torch.cat([norm.count.reshape(1).to(torch.float64), norm.mean.detach(), norm.squares_sum.detach()])


def _split(stats: torch.Tensor):
    n = (stats.shape[0] - 1) // 2
    return stats[0], stats[1 : 1 + n], stats[1 + n :]


def _merge(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Statistics of the union of two disjoint sets of items (Chan, Golub and LeVeque)."""
    (na, ma, sa), (nb, mb, sb) = _split(a), _split(b)
    total = na + nb
    if float(total) == 0:
        return a.clone()
    delta = mb - ma  # [n_features]
    mean = ma + delta * (nb / total)  # [n_features]
    squares = sa + sb + delta**2 * (na * nb / total)  # [n_features]
    return torch.cat([total.reshape(1), mean, squares])


def _unmerge(whole: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
    """The statistics ``rest`` such that ``_merge(part, rest) == whole``."""
    (nw, mw, sw), (np_, mp, sp) = _split(whole), _split(part)
    n = nw - np_
    if float(n) <= 0:
        return torch.zeros_like(whole)
    mean = (nw * mw - np_ * mp) / n  # [n_features]
    delta = mean - mp  # [n_features]
    squares = (sw - sp - delta**2 * (np_ * n / nw)).clamp(min=0.0)  # [n_features]
    return torch.cat([n.reshape(1), mean, squares])
