"""``PrioritizedBuffer``: proportional prioritized replay (Schaul et al., 2016) over a ``SumTree``.

Row ``j`` is sampled with probability ``P(j) = p_j / sum_i p_i`` where ``p_j = (|e_j| + epsilon)
** alpha`` is its stored priority; importance weights ``w_j = (N P(j)) ** -beta`` are divided
by the largest weight of the batch, and ``beta`` grows by ``beta_increment_per_sampling`` after
every sample, up to 1.

Example:
    >>> buffer = PrioritizedBuffer(10_000)
    >>> for transition in transitions:
    ...     buffer.append(transition)  # new rows get the current maximum priority
    >>> n, batch, index, is_weight = buffer.sample_batch(256)
    >>> td_error = ...  # from the batch, weighting the loss by is_weight
    >>> buffer.update_priority(td_error.abs(), index)
"""

import logging
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from entmachin.buffer.buffer import Buffer
from entmachin.buffer.checking import Checked, TransitionLike
from entmachin.buffer.sampling import check_batch_size, collate
from entmachin.buffer.sum_tree import SumTree

__all__ = ["PrioritizedBuffer"]

logger = logging.getLogger(__name__)


def _check_param(name: str, value: Any, low: float, high: float = np.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"PrioritizedBuffer: {name} must be a number, got {type(value).__name__}")
    if not low <= float(value) <= high:
        raise ValueError(f"PrioritizedBuffer: {name} must be in [{low}, {high}], got {value}")
    return float(value)


def _as_float_array(value: Any, where: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{where}: priorities must be real numbers, got {arr.dtype}")
    return arr.astype(np.float64, copy=False).reshape(-1)  # [n]


def _check_priorities(priorities: np.ndarray, where: str) -> None:
    if not priorities.size or (priorities.min() >= 0 and priorities.max() < np.inf):  # NaN fails both
        return
    bad = ~np.isfinite(priorities) | (priorities < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{where}: priorities must be finite and >= 0, got {priorities[i]} at position {i}"
        )


class PrioritizedBuffer(Buffer):
    """A ring ``Buffer`` whose rows are sampled in proportion to their priority.

    Args:
        buffer_size: rows kept.
        buffer_device: where the stored data live, and the default device of samples.
        epsilon: added to every priority so that none is zero.
        alpha: how much priorities matter (0: uniform sampling).
        beta: initial importance-weight exponent (1: full correction).
        beta_increment_per_sampling: added to ``beta`` after each sample, up to 1.
        seed: seeds the buffer's own random generator.
        allow_nonfinite: store NaN and ±inf instead of refusing them (see ``Buffer``).
    """

    def __init__(
        self,
        buffer_size: int,
        buffer_device: Union[str, torch.device] = "cpu",
        epsilon: float = 1e-2,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_increment_per_sampling: float = 0.001,
        *,
        seed: Optional[int] = None,
        allow_nonfinite: bool = False,
    ) -> None:
        super().__init__(buffer_size, buffer_device, seed=seed, allow_nonfinite=allow_nonfinite)
        self.epsilon = _check_param("epsilon", epsilon, 0.0)
        self.alpha = _check_param("alpha", alpha, 0.0)
        self.beta = _check_param("beta", beta, 0.0, 1.0)
        self.beta_increment_per_sampling = _check_param("beta_increment_per_sampling", beta_increment_per_sampling, 0.0)
        self.curr_beta = self.beta
        self._tree = SumTree(self.buffer_size)

    def _priority_weights(self, priorities: np.ndarray) -> np.ndarray:
        return (priorities + self.epsilon) ** self.alpha  # [n]

    def _default_weight(self) -> float:
        """The weight of a new row: the largest stored weight (1 in an empty buffer)."""
        return self._tree.max() if self.size() else 1.0

    # --------------------------------------------------------------------------- writes

    def append(self, transition: TransitionLike, priority: Any = None, required_attrs: Sequence[str] = ()) -> None:
        """Stores a transition; its rows get ``priority`` or else the current maximum priority.

        Args:
            transition: a ``TransitionBase`` or a dict, as for ``Buffer.append``.
            priority: None, a number for every row, or ``[n_rows]`` numbers (e.g. |TD error|).
            required_attrs: attribute names the transition must have (Machin's argument).

        Raises:
            ValueError: as ``Buffer.append``; or NaN, infinite, negative priorities, or a
                number of priorities other than 1 or the transition's rows.
        """
        item = self._extract(transition, "append", required_attrs=required_attrs)
        n_rows = item.n_rows
        weights = None
        if priority is not None:
            priorities = _as_float_array(priority, "append")
            _check_priorities(priorities, "append")
            if priorities.shape[0] not in (1, n_rows):
                raise ValueError(
                    f"append: got {priorities.shape[0]} priorities for a transition of {n_rows} rows"
                )
            weights = self._priority_weights(priorities)
        self._store(item, weights)

    def _write(self, item: Checked) -> int:
        """Writes checked rows at the current maximum priority (``store_episode`` uses it)."""
        return self._store(item, None)

    def _store(self, item: Checked, weights: Optional[np.ndarray]) -> int:
        if weights is None:
            weights = np.array([self._default_weight()])  # [1]
        first = Buffer._write(self, item)
        slots = (first + np.arange(item.n_rows, dtype=np.int64)) % self.buffer_size  # [n_rows]
        self._tree.update(slots, np.broadcast_to(weights, slots.shape))
        return first

    def clear(self) -> None:
        """Removes every row and resets ``beta``; the schema stays fixed."""
        super().clear()
        self._tree.clear()
        self.curr_beta = self.beta

    def update_priority(self, priorities: Any, indexes: Any) -> None:
        """Sets the priorities of sampled rows; rows overwritten since they were sampled are skipped.

        Args:
            priorities: ``[n]`` finite numbers >= 0 (e.g. |TD error|), array or tensor.
            indexes: ``[n]`` the ``index`` that :meth:`sample_batch` returned.

        Raises:
            ValueError: lengths differ, or NaN, infinite or negative priorities.
            TypeError: non-numeric priorities or non-integer indexes.
        """
        priorities = _as_float_array(priorities, "update_priority")
        ids = np.asarray(indexes.cpu() if isinstance(indexes, torch.Tensor) else indexes).reshape(-1)
        if ids.size and ids.dtype.kind not in "iu":
            raise TypeError(f"update_priority: indexes must be the integer index from sample_batch, got {ids.dtype}")
        if priorities.shape[0] != ids.shape[0]:
            raise ValueError(
                f"update_priority: got {priorities.shape[0]} priorities for {ids.shape[0]} indexes"
            )
        _check_priorities(priorities, "update_priority")
        if self._storage is None or ids.size == 0:
            return
        slots, alive = self._storage.slots_of_ids(ids.astype(np.int64, copy=False))
        if not alive.all():
            logger.debug("update_priority: skipped %d rows overwritten since sampling", int((~alive).sum()))
        if alive.all():
            self._tree.update_unchecked(slots, self._priority_weights(priorities))
        else:
            self._tree.update_unchecked(slots[alive], self._priority_weights(priorities[alive]))

    # ------------------------------------------------------------------ saving / loading

    def _save_state(self) -> Tuple[dict, list]:
        """Settings and ``beta`` for the file header, and the priorities of slots ``0..size-1``."""
        state = {
            "epsilon": self.epsilon,
            "alpha": self.alpha,
            "beta": self.beta,
            "beta_increment_per_sampling": self.beta_increment_per_sampling,
            "curr_beta": self.curr_beta,
        }
        return state, [torch.from_numpy(self._tree.leaves[: self.size()].copy())]

    def _load_state(self, state: dict, arrays: list, where: str) -> None:
        """Restores ``curr_beta`` and the priorities :meth:`_save_state` saved."""
        (leaves,) = arrays
        if leaves.shape != (self.size(),) or leaves.dtype != torch.float64:
            raise ValueError(
                f"{where}: the file holds priorities {leaves.dtype} {tuple(leaves.shape)}, expected float64 ({self.size()},)"
            )
        bad = ~torch.isfinite(leaves) | (leaves < 0)  # [size]
        if bool(bad.any()):
            raise ValueError(f"{where}: priorities must be finite and >= 0, the file holds {float(leaves[bad][0])}")
        curr_beta = state.get("curr_beta")
        if isinstance(curr_beta, bool) or not isinstance(curr_beta, (int, float)) or not 0 <= curr_beta <= 1:
            raise ValueError(f"{where}: the header's curr_beta is {curr_beta!r}; expected a number in [0, 1]")
        self._tree.update(np.arange(self.size()), leaves.numpy())
        self.curr_beta = float(curr_beta)

    @classmethod
    def _from_header(cls, header: dict, device: Union[str, torch.device]) -> "PrioritizedBuffer":
        state = header["prioritized"]
        names = ("epsilon", "alpha", "beta", "beta_increment_per_sampling")
        return cls(header["buffer_size"], device, **{name: state[name] for name in names},
                   allow_nonfinite=header.get("allow_nonfinite", False))

    # --------------------------------------------------------------------------- reads

    def sample_batch(
        self,
        batch_size: int,
        concatenate: bool = True,
        device: Union[str, torch.device, None] = None,
        sample_attrs: Optional[Sequence[str]] = None,
        additional_concat_attrs: Optional[Sequence[str]] = None,
    ) -> Tuple[int, Optional[tuple], Optional[np.ndarray], Optional[np.ndarray]]:
        """Samples ``batch_size`` rows (with replacement) by stratified prioritized sampling.

        The total priority is cut into ``batch_size`` equal segments and one row is drawn from
        each (uniformly over the rows when every priority is zero). The other arguments mean what they
        mean for ``Buffer.sample_batch``; there is no ``sample_method``.

        Args:
            batch_size: rows drawn; 0 draws none.
            concatenate: concatenate every leaf over the sampled rows (dense values along dim 0, ragged
                values into one ``RaggedTensor``); if False, return per-sample lists.
            device: where samples go (default: ``buffer_device``).
            sample_attrs: attributes to return, in order (default: all); ``"*"`` collects the custom
                attributes not named elsewhere into a dict.
            additional_concat_attrs: custom attributes to turn into ``[n, -1]`` tensors.

        Returns:
            ``(n, batch, index, is_weight)``: ``batch`` as ``Buffer.sample_batch`` returns it,
            ``index`` ``[n]`` int64 row ids to pass to :meth:`update_priority`, ``is_weight``
            ``[n]`` float32 importance weights (largest 1); ``(0, None, None, None)`` when the
            buffer is empty or ``batch_size`` is 0.
        """
        batch_size = check_batch_size(batch_size, "sample_batch")
        size = self.size()
        if size == 0 or batch_size == 0:
            return 0, None, None, None
        total = self._tree.total()
        if total > 0:
            values = self._rng.random(batch_size)  # [n] one value in each of n equal segments
            values += np.arange(batch_size)
            values *= total / batch_size
            slots, priority = self._tree.find_unchecked(values)  # [n], [n]
            # (N P(j)) ** -beta divided by its maximum, which belongs to the smallest priority
            is_weight = np.power(priority.min() / priority, self.curr_beta)  # [n]
        else:  # every priority is zero (epsilon = 0): sample uniformly
            slots = self._rng.integers(0, size, batch_size, dtype=np.int64)
            is_weight = np.ones(batch_size)
        self.curr_beta = min(1.0, self.curr_beta + self.beta_increment_per_sampling)
        target = self.buffer_device if device is None else torch.device(device)
        batch = collate(self._storage, slots, concatenate, target, sample_attrs, additional_concat_attrs)
        return batch_size, batch, self._storage.ids_of(slots), is_weight.astype(np.float32)
