"""Running input normalisation that only learns inside an explicit ``collecting_stats()`` context.

rogue-net updated its running statistics on every training-mode forward, so re-evaluating a
PPO minibatch moved them. Here statistics change only inside ``with collecting_stats(model):``
(or ``model.collecting_stats()`` on RogueNet and the MLPs), after the forward that saw the
batch has normalised it with the old statistics.
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn


class InputNorm(nn.Module):
    """Normalises features with their running mean and standard deviation, then clips.

    The statistics (``count``, ``mean``, ``squares_sum``) are buffers, so they live in
    ``state_dict``; ``mean`` and ``squares_sum`` are float64 so that long runs keep precision
    (casting the module with ``.half()`` would cast them too: don't). Until two items have been
    seen the input passes through unchanged (apart from clipping); features whose standard
    deviation is 0 are only centred.

    The statistics never absorb NaN or infinity: a batch holding one raises ``ValueError``
    naming the feature and the item, before anything is merged (a model fed by data from
    outside entmachin's environments is protected as well). Raising rather than skipping the
    bad rows is deliberate: a non-finite input also makes the forward's output non-finite, so
    a run that carried on would train on garbage; the error stops it at the cause.

    Args:
        n_features: width of the last dimension of the input.
        clip: normalised values are clipped to ``[-clip, clip]``.
        name: what the input is, for error messages (e.g. ``"RogueNet input of entities['Mine']"``).
        feature_names: the ``n_features`` names of the features, for error messages.

    Shape:
        input: ``[..., n_features]``; output: the same shape and dtype.

    Raises:
        ValueError: from ``forward`` inside ``collecting_stats()`` (or ``update``), when the
            input holds NaN or infinity.
    """

    count: torch.Tensor
    mean: torch.Tensor
    squares_sum: torch.Tensor

    def __init__(
        self, n_features: int, clip: float = 5.0, *, name: str = "InputNorm",
        feature_names: Optional[Sequence[str]] = None,
    ) -> None:
        super().__init__()
        if feature_names is not None and len(feature_names) != n_features:
            raise ValueError(
                f"InputNorm({name!r}): feature_names has {len(feature_names)} names for {n_features} features"
            )
        self.n_features = n_features
        self.clip = clip
        self.name = name
        self.feature_names = list(feature_names) if feature_names is not None else None
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("mean", torch.zeros(n_features, dtype=torch.float64))  # [n_features]
        self.register_buffer("squares_sum", torch.zeros(n_features, dtype=torch.float64))  # [n_features]
        self.frozen = False
        self._collecting = 0
        # (statistics tensors, their versions, dtype) -> (mean, std) in that dtype; see _shift_scale.
        self._cache: Optional[Tuple[Any, torch.Tensor, torch.Tensor]] = None

    def extra_repr(self) -> str:
        return f"{self.n_features}, clip={self.clip}, frozen={self.frozen}"

    def freeze(self) -> None:
        """Stop updating the statistics, even inside ``collecting_stats()``."""
        self.frozen = True

    def unfreeze(self) -> None:
        """Let ``collecting_stats()`` update the statistics again."""
        self.frozen = False

    @property
    def collecting(self) -> bool:
        """Whether the next forward updates the statistics."""
        return self._collecting > 0 and not self.frozen

    def std(self) -> torch.Tensor:
        """``[n_features]`` float64 standard deviation (1 where undefined or 0)."""
        denominator = (self.count - 1).clamp(min=1).to(torch.float64)
        std = torch.sqrt(self.squares_sum / denominator)  # [n_features]
        return torch.where((std > 0) & (self.count > 1), std, torch.ones_like(std))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (``[..., n_features]``) normalised and clipped, in its shape and dtype; inside
        ``collecting_stats()`` its items are merged into the statistics first.

        Raises:
            ValueError: ``x``'s last dimension is not ``n_features`` wide, or (while collecting) it holds NaN
                or infinity.
        """
        if x.shape[-1] != self.n_features:
            raise ValueError(
                f"InputNorm: expected inputs with {self.n_features} features in the last dimension, "
                f"got shape {tuple(x.shape)}"
            )
        mean, std = self._shift_scale(x.dtype)  # [n_features] each
        out = ((x - mean) / std).clamp(-self.clip, self.clip)  # [..., n_features]
        if self.collecting:
            self.update(x.detach())
        return out

    def _shift_scale(self, dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
        """The mean and standard deviation the forward uses, in ``dtype``, computed again only
        when the statistics changed: a dozen small float64 ops per forward otherwise.

        The key holds the statistics tensors themselves (so that a ``.to()`` or an assignment,
        which replaces them, misses) and their version counters (bumped by every in-place
        change: ``update``, ``load_state_dict``, ``copy_``).
        """
        stats = (self.count, self.mean, self.squares_sum)
        key = (stats, tuple(t._version for t in stats), dtype)
        cache = self._cache
        if cache is not None and cache[0][1] == key[1] and cache[0][2] == dtype and all(
                a is b for a, b in zip(cache[0][0], stats)):
            return cache[1], cache[2]
        # Plain tensors even under inference_mode: the forward's backward may save them.
        with torch.inference_mode(False), torch.no_grad():
            mean = torch.where(self.count > 1, self.mean, torch.zeros_like(self.mean)).to(dtype)  # [n_features]
            std = self.std().to(dtype)  # [n_features]
        self._cache = (key, mean, std)
        return mean, std

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merges a batch into the statistics (Chan, Golub and LeVeque's pairwise update).

        Shape:
            x: ``[..., n_features]``; every leading index is one sample.

        Raises:
            ValueError: ``x`` holds NaN or infinity (the statistics are left unchanged).
        """
        x = x.reshape(-1, self.n_features).to(torch.float64)  # [n, n_features]
        n = x.shape[0]
        if n == 0:
            return
        finite = torch.isfinite(x)  # [n, n_features]
        if not bool(finite.all()):
            self._refuse(x, finite)
        batch_mean = x.mean(dim=0)  # [n_features]
        batch_squares = ((x - batch_mean) ** 2).sum(dim=0)  # [n_features]
        old = self.count.to(torch.float64)
        total = old + n
        delta = batch_mean - self.mean  # [n_features]
        self.mean += delta * (n / total)
        self.squares_sum += batch_squares + delta**2 * (old * n / total)
        self.count += n

    def _refuse(self, x: torch.Tensor, finite: torch.Tensor) -> None:
        item, column = (int(k) for k in torch.nonzero(~finite)[0])
        feature = self.feature_names[column] if self.feature_names is not None else f"#{column}"
        n_bad = int((~finite).any(dim=1).sum())
        raise ValueError(
            f"{self.name}: item {item} has {float(x[item, column])} in feature '{feature}' (column {column}), "
            f"and {n_bad} of the batch's {x.shape[0]} items hold NaN or infinity; running input statistics "
            "never absorb them, so the batch was refused and the statistics are unchanged. Find where the "
            "value came from (an environment's observation, a feature computed from it)"
        )


def input_norms(module: nn.Module) -> List[InputNorm]:
    """Every ``InputNorm`` inside ``module``, in ``modules()`` order.

    This walks the module tree; callers that enter ``collecting_stats`` on every step (the
    frames' ``act``) find the norms once and use :func:`collecting_stats_of`.
    """
    return [m for m in module.modules() if isinstance(m, InputNorm)]


def collecting_stats(module: nn.Module) -> ContextManager[None]:
    """Lets every ``InputNorm`` inside ``module`` update its statistics within the block.

    Example:
        >>> with collecting_stats(model):
        ...     out = model(**state)   # normalises with the old statistics, then updates them
    """
    return collecting_stats_of(input_norms(module))


@contextlib.contextmanager
def collecting_stats_of(norms: Sequence["InputNorm"]) -> Iterator[None]:
    """:func:`collecting_stats` over given ``InputNorm``s (for callers that found them once)."""
    for norm in norms:
        norm._collecting += 1
    try:
        yield
    finally:
        for norm in norms:
            norm._collecting -= 1


class NormalisedModule(nn.Module):
    """Adds ``collecting_stats()``, ``freeze()`` and ``unfreeze()`` over a module's ``InputNorm``s."""

    def collecting_stats(self) -> contextlib.AbstractContextManager:
        """Context in which forwards update the running input statistics (see ``InputNorm``)."""
        return collecting_stats(self)

    def freeze(self) -> None:
        """Freezes every running input normalisation of this module."""
        for m in input_norms(self):
            m.freeze()

    def unfreeze(self) -> None:
        """Unfreezes every running input normalisation of this module."""
        for m in input_norms(self):
            m.unfreeze()
