"""Several ``InputNorm``s updated and read as one: their statistics packed side by side.

RogueNet normalises every entity type with its own ``InputNorm``; done one by one, the running
statistics cost about twenty small float64 ops per type on every collecting forward (the update,
then the mean and standard deviation computed again). ``NormPack`` keeps the norms' buffers as
views into one packed ``count`` / ``mean`` / ``squares_sum`` set, so that the merge and the
recomputation run once over all features. Each norm still owns its buffers (same ``state_dict``
keys and shapes; ``load_state_dict`` copies into the views), and the arithmetic is the same,
element by element, as ``InputNorm.update`` and ``InputNorm._shift_scale``: the statistics are
bit-identical to updating the norms one at a time.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import torch

from entmachin.model.input_norm import InputNorm


class NormPack:
    """Packs the statistics of ``norms`` (rebuilt whenever a norm's buffers were replaced).

    A norm's buffers stop being views of the pack when something assigns new tensors to them
    (``.to()``, ``.double()``, an assignment): the next call notices (by identity) and packs the
    current values again. In-place changes (``load_state_dict``, ``copy_``) land in the pack.

    Args:
        norms: the norms, in the order of the inputs given to :meth:`normalise` and :meth:`update`.
    """

    def __init__(self, norms: Sequence[InputNorm]) -> None:
        self.norms = list(norms)
        self.widths = [norm.n_features for norm in self.norms]
        self._views: Optional[List[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = None
        self._packed: Optional[Tuple[torch.Tensor, ...]] = None
        # (versions of every buffer, dtype) -> per-norm (mean, std) in that dtype.
        self._cache: Optional[Tuple[Any, List[Tuple[torch.Tensor, torch.Tensor]]]] = None

    def _pack(self) -> Tuple[torch.Tensor, ...]:
        """``(count [n_norms], mean [F], squares_sum [F], feature_norm [F])`` (each feature's
        norm), packing if needed."""
        views = self._views
        if views is not None and all(
            norm._buffers["count"] is c and norm._buffers["mean"] is m and norm._buffers["squares_sum"] is s
            for norm, (c, m, s) in zip(self.norms, views)
        ):
            return self._packed  # type: ignore[return-value]
        with torch.inference_mode(False), torch.no_grad():
            count = torch.stack([norm.count for norm in self.norms])  # [n_norms]
            mean = torch.cat([norm.mean for norm in self.norms])  # [F]
            squares = torch.cat([norm.squares_sum for norm in self.norms])  # [F]
            widths = torch.tensor(self.widths, dtype=torch.int64)  # [n_norms]
            feature_norm = torch.repeat_interleave(torch.arange(len(self.norms)), widths).to(count.device)  # [F]
        views, at = [], 0
        for k, (norm, width) in enumerate(zip(self.norms, self.widths)):
            view = (count[k], mean[at:at + width], squares[at:at + width])
            norm.count, norm.mean, norm.squares_sum = view
            views.append(view)
            at += width
        self._views = views
        self._packed = (count, mean, squares, feature_norm)
        self._cache = None
        return self._packed

    def shift_scale(self, dtype: torch.dtype) -> List[Tuple[torch.Tensor, torch.Tensor]]:
        """Per norm, the ``(mean, std)`` its forward uses, in ``dtype`` (as ``InputNorm._shift_scale``),
        computed for all norms at once and again only when some statistics changed."""
        count, mean, squares, feature_norm = self._pack()
        key = (tuple(t._version for view in self._views for t in view), dtype)  # type: ignore[union-attr]
        cache = self._cache
        if cache is not None and cache[0] == key:
            return cache[1]
        with torch.inference_mode(False), torch.no_grad():
            n = count.index_select(0, feature_norm)  # [F] each feature's count
            used = torch.where(n > 1, mean, torch.zeros_like(mean)).to(dtype)  # [F]
            denominator = (n - 1).clamp(min=1).to(torch.float64)  # [F]
            std = torch.sqrt(squares / denominator)  # [F]
            std = torch.where((std > 0) & (n > 1), std, torch.ones_like(std)).to(dtype)  # [F]
            out = list(zip(used.split(self.widths), std.split(self.widths)))
        self._cache = (key, out)
        return out

    def normalise(self, xs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        """Each ``xs[k]`` normalised and clipped by ``norms[k]`` with the current statistics.

        Shape:
            xs[k]: ``[n_k, norms[k].n_features]``; returns the same shapes and dtypes.
        """
        dtypes = {x.dtype for x in xs}
        by_dtype = {dtype: self.shift_scale(dtype) for dtype in dtypes}
        out = []
        for k, (norm, x) in enumerate(zip(self.norms, xs)):
            if x.shape[-1] != norm.n_features:
                raise ValueError(
                    f"InputNorm: expected inputs with {norm.n_features} features in the last dimension, "
                    f"got shape {tuple(x.shape)}"
                )
            mean, std = by_dtype[x.dtype][k]  # [n_features] each
            out.append(((x - mean) / std).clamp(-norm.clip, norm.clip))  # [n_k, n_features]
        return out

    @torch.no_grad()
    def update(self, xs: Sequence[torch.Tensor]) -> None:
        """Merges each ``xs[k]`` into ``norms[k]``'s statistics, all norms in one pass.

        The caller has checked that every input is finite (RogueNet's forward does, before the
        embedding); ``InputNorm.update`` checks it itself. Norms that are not collecting (frozen,
        or outside ``collecting_stats()``) keep their statistics.

        Shape:
            xs[k]: ``[n_k, norms[k].n_features]``.
        """
        collecting = [norm.collecting for norm in self.norms]
        if not any(collecting):
            return
        if not all(collecting):
            for norm, x, on in zip(self.norms, xs, collecting):
                if on:
                    norm.update(x.detach())
            return
        count, mean, squares, feature_norm = self._pack()
        with torch.inference_mode(False):
            batch_means, batch_squares, sizes = [], [], []
            for norm, x in zip(self.norms, xs):
                if x.dim() != 2:
                    x = x.reshape(-1, norm.n_features)
                x = x.to(torch.float64)  # [n, n_features]; no autograd under no_grad
                n = x.shape[0]
                if n == 0:
                    # No change: zero moments and zero count leave mean, squares_sum and count as
                    # they are (the ``clamp`` below keeps 0 / 0 out when the count is 0 too).
                    batch_mean = batch_square = x.new_zeros(norm.n_features)  # [n_features]
                else:
                    batch_mean = x.mean(dim=0)  # [n_features]
                    batch_square = ((x - batch_mean) ** 2).sum(dim=0)  # [n_features]
                batch_means.append(batch_mean)
                batch_squares.append(batch_square)
                sizes.append(n)
            batch_mean = torch.cat(batch_means)  # [F]
            batch_square = torch.cat(batch_squares)  # [F]
            if count.device.type == "cpu":
                n_norm = torch.tensor(sizes, dtype=torch.float64)  # [n_norms]
            else:  # filled on the device: a host-to-device copy of a pageable list would sync
                n_norm = torch.cat([mean.new_full((1,), k) for k in sizes])  # [n_norms]
            n = n_norm.index_select(0, feature_norm)  # [F] batch size of each feature's norm
            old = count.index_select(0, feature_norm).to(torch.float64)  # [F]
            total = (old + n).clamp_min(1.0)  # [F]; clamping changes nothing where the count is >= 1
            delta = batch_mean - mean  # [F]
            mean += delta * (total.reciprocal() * n)  # n / total, as InputNorm.update rounds it
            squares += batch_square + delta**2 * (old * n / total)
            count += n_norm.to(torch.int64)  # [n_norms]
