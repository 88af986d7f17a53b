"""``RaggedTensorViews``: what a ``RaggedTensor`` reads off its four tensors, and the torch helpers
its constructors derive them with.

A mixin of :class:`entmachin.ragged.tensor.RaggedTensor`: index views (``starts``, ``ends``,
``inverse``, ``positions``), sizes, and copies into other forms (one tensor per sequence,
padded tensors with their mask, ragged arrays), none of which builds a new ``RaggedTensor``.
``offsets_from_lengths`` and ``batch_index_of`` compute ``offsets`` ``[n + 1]`` and
``batch_index`` ``[n_items]`` from ``lengths`` ``[n]``; ``check_data`` checks that items are
at least 2-D.
"""

from typing import Any, List, Tuple

import torch

from entmachin.ragged.arrays import RaggedArray, ragged_from_arrays
from entmachin.ragged.interop import to_ragged_buffer

__all__ = ["RaggedTensorViews", "batch_index_of", "check_data", "offsets_from_lengths"]

_BUFFER_DTYPES = (torch.float32, torch.int64, torch.bool)


def offsets_from_lengths(lengths: torch.Tensor) -> torch.Tensor:
    return torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, dim=0)])  # [n + 1]


def batch_index_of(lengths: torch.Tensor, n_items: int) -> torch.Tensor:
    sequence_ids = torch.arange(lengths.shape[0], device=lengths.device)  # [n]
    return torch.repeat_interleave(sequence_ids, lengths, output_size=n_items)  # [n_items]


def check_data(data: torch.Tensor, where: str) -> torch.Tensor:
    if data.dim() < 2:
        raise ValueError(
            f"{where} must be at least 2-D [n_items, ...], got shape {tuple(data.shape)}; "
            "use data[:, None] for one feature per item"
        )
    return data


class RaggedTensorViews:
    """Index views, sizes and copies into other forms for :class:`~entmachin.ragged.tensor.RaggedTensor`,
    whose fields are the four tensors below."""

    __slots__ = ()
    data: torch.Tensor  # [n_items, ...]
    lengths: torch.Tensor  # [n]
    offsets: torch.Tensor  # [n + 1]
    batch_index: torch.Tensor  # [n_items]

    # ------------------------------------------------------------------------- properties

    @property
    def starts(self) -> torch.Tensor:
        """``[n]`` index in ``data`` of each sequence's first item (``offsets[:-1]``)."""
        return self.offsets[:-1]

    @property
    def ends(self) -> torch.Tensor:
        """``[n]`` index in ``data`` one past each sequence's last item (``offsets[1:]``)."""
        return self.offsets[1:]

    @property
    def inverse(self) -> torch.Tensor:
        """``[n_items]`` sequence of each item (``batch_index``)."""
        return self.batch_index

    @property
    def positions(self) -> torch.Tensor:
        """``[n_items]`` position of each item within its sequence."""
        item_ids = torch.arange(self.n_items, device=self.device)  # [n_items]
        return item_ids - self.offsets[self.batch_index]

    @property
    def device(self) -> torch.device:
        return self.data.device

    @property
    def dtype(self) -> torch.dtype:
        return self.data.dtype

    @property
    def trailing_shape(self) -> Tuple[int, ...]:
        """The per-item shape, ``data.shape[1:]``."""
        return tuple(self.data.shape[1:])

    @property
    def n_items(self) -> int:
        return self.data.shape[0]

    @property
    def max_length(self) -> int:
        """The longest sequence's length (0 without sequences)."""
        return int(self.lengths.max()) if len(self) else 0

    def __len__(self) -> int:
        return self.lengths.shape[0]

    # ------------------------------------------------------------------------ conversions

    def to_ragged_array(self) -> RaggedArray:
        """Copies to a ragged array on the CPU (2-D float32, int64 or bool data only)."""
        where = "RaggedTensor.to_ragged_array"
        if self.dtype not in _BUFFER_DTYPES:
            raise TypeError(
                f"{where}: data is {self.dtype}; ragged arrays hold float32, int64 or bool; "
                "call .to(dtype) first"
            )
        if self.data.dim() != 2:
            raise ValueError(
                f"{where}: ragged arrays hold [n_items, n_features], but data has shape "
                f"{tuple(self.data.shape)}; reshape the data first"
            )
        return ragged_from_arrays(self.data.detach().cpu().numpy(), self.lengths.cpu().numpy())

    def to_ragged_buffer(self) -> Any:
        """Copies to one of ragged-buffer's ``RaggedBuffer*`` (that optional package must be
        installed); see :meth:`to_ragged_array` for entmachin's own."""
        return to_ragged_buffer(self.to_ragged_array())

    def to_list(self) -> List[torch.Tensor]:
        """Splits into one ``[len_i, ...]`` tensor per sequence."""
        return list(torch.split(self.data, self.lengths.tolist()))

    def padded(self, pad_value: Any = 0) -> Tuple[torch.Tensor, torch.Tensor]:
        """Pads every sequence to the longest one; differentiable with respect to ``data``.

        Returns:
            ``(padded, mask)`` with ``mask[i, j]`` True for real items.

        Shape:
            padded: ``[n, max_length, ...]``; mask: bool ``[n, max_length]``.
        """
        max_length = self.max_length
        shape = (len(self), max_length, *self.trailing_shape)
        padded = self.data.new_full(shape, pad_value)  # [n, max_length, ...]
        padded[self.batch_index, self.positions] = self.data
        steps = torch.arange(max_length, device=self.device)  # [max_length]
        mask = steps[None, :] < self.lengths[:, None]  # [n, max_length]
        return padded, mask
