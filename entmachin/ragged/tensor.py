"""``RaggedTensor``: a batch of variable-length sequences stored in one torch tensor."""

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from entmachin.ragged.arrays import (
    RaggedBuffer,
    is_ragged,
    is_ragged_buffer,
    ragged_from_arrays,
    ragged_to_arrays,
    sequence_indices,
)

__all__ = ["RaggedTensor", "is_ragged", "ragged_tensor_equal"]

_BUFFER_DTYPES = (torch.float32, torch.int64, torch.bool)


def _offsets_from_lengths(lengths: torch.Tensor) -> torch.Tensor:
    return torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, dim=0)])  # [n + 1]


def _batch_index(lengths: torch.Tensor, n_items: int) -> torch.Tensor:
    sequence_ids = torch.arange(lengths.shape[0], device=lengths.device)  # [n]
    return torch.repeat_interleave(sequence_ids, lengths, output_size=n_items)  # [n_items]


@dataclass(frozen=True, eq=False, slots=True)
class RaggedTensor:
    """A batch of ``n`` sequences of ``[len_i, ...]`` items, stored back to back in ``data``.

    Build one with :meth:`from_lengths`, :meth:`from_ragged_buffer`, :meth:`from_list` or
    :meth:`cat`; the raw constructor checks shapes, dtypes and devices but trusts that
    ``offsets`` and ``batch_index`` agree with ``lengths``. All four tensors live on the same
    device. Instances are immutable records; operations return new ones.

    Attributes:
        data: ``[n_items, ...]`` (at least 2-D) items of all sequences, in order.
        lengths: ``[n]`` int64 number of items of each sequence.
        offsets: ``[n + 1]`` int64 with ``offsets[0] == 0``: sequence ``i`` is
            ``data[offsets[i]:offsets[i + 1]]``.
        batch_index: ``[n_items]`` int64 sequence of each item.

    Example:
        Three sequences of 2-feature items, of lengths 2, 0 and 3::

            >>> rt = RaggedTensor.from_lengths(torch.arange(10.).view(5, 2), [2, 0, 3])
            >>> rt.data            # [n_items=5, 2]
            tensor([[0., 1.], [2., 3.],  [4., 5.], [6., 7.], [8., 9.]])
            >>> rt.lengths         # [n=3]
            tensor([2, 0, 3])
            >>> rt.offsets         # [n + 1]; starts == offsets[:-1], ends == offsets[1:]
            tensor([0, 2, 2, 5])
            >>> rt.batch_index     # [n_items]; also called ``inverse``
            tensor([0, 0, 2, 2, 2])
            >>> rt[2]              # the items of sequence 2
            tensor([[4., 5.], [6., 7.], [8., 9.]])
            >>> rt[[2, 0]].lengths
            tensor([3, 2])

    Indexing: ``rt[i]`` with an int returns the tensor of sequence ``i``; an index array,
    list, boolean mask or slice returns a ``RaggedTensor`` of those sequences in that order.
    As with :func:`entmachin.ragged.arrays.take`, negative indices raise ``ValueError``
    (no wrap-around) and indices ``>= len(rt)`` raise ``IndexError``.
    """

    data: torch.Tensor
    lengths: torch.Tensor
    offsets: torch.Tensor
    batch_index: torch.Tensor

    def __post_init__(self) -> None:
        for name in ("data", "lengths", "offsets", "batch_index"):
            value = getattr(self, name)
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"RaggedTensor.{name}: expected a torch.Tensor, got {type(value).__name__}")
        if self.data.dim() < 2:
            raise ValueError(
                f"RaggedTensor.data must be at least 2-D [n_items, ...], got shape "
                f"{tuple(self.data.shape)}; use data[:, None] for one feature per item"
            )
        if self.lengths.dim() != 1:
            raise ValueError(
                f"RaggedTensor.lengths: expected 1-D [n], got shape {tuple(self.lengths.shape)}"
            )
        n, n_items = self.lengths.shape[0], self.data.shape[0]
        expected = {"lengths": (n,), "offsets": (n + 1,), "batch_index": (n_items,)}
        for name, shape in expected.items():
            value = getattr(self, name)
            if value.dtype != torch.int64 or tuple(value.shape) != shape:
                raise ValueError(
                    f"RaggedTensor.{name}: expected int64 of shape {shape}, "
                    f"got {value.dtype} of shape {tuple(value.shape)}"
                )
            if value.device != self.data.device:
                raise ValueError(
                    f"RaggedTensor.{name} is on {value.device}, but data is on {self.data.device}"
                )

    def __reduce__(self) -> Any:
        # Explicit, because unpickling frozen slotted dataclasses fails on Python 3.10.
        return (RaggedTensor, (self.data, self.lengths, self.offsets, self.batch_index))

    # ----------------------------------------------------------------------- constructors

    @classmethod
    def from_lengths(cls, data: Any, lengths: Any) -> "RaggedTensor":
        """Builds a ragged tensor from back-to-back items and per-sequence lengths.

        Args:
            data: ``[n_items, ...]`` tensor (or array) of at least two dimensions.
            lengths: ``[n]`` non-negative integers summing to ``n_items``.

        Raises:
            ValueError: wrong dimensions, negative lengths, or lengths not summing to ``n_items``.
            TypeError: lengths are not integers.
        """
        data = torch.as_tensor(data)
        lengths = torch.as_tensor(lengths, device=data.device)
        if data.dim() < 2:
            raise ValueError(
                f"RaggedTensor.from_lengths: data must be at least 2-D [n_items, ...], got shape "
                f"{tuple(data.shape)}; use data[:, None] for one feature per item"
            )
        if lengths.dim() != 1:
            raise ValueError(
                f"RaggedTensor.from_lengths: lengths must be 1-D [n], got shape {tuple(lengths.shape)}"
            )
        if lengths.numel() == 0:
            lengths = lengths.to(torch.int64)
        elif lengths.dtype == torch.bool or lengths.is_floating_point() or lengths.is_complex():
            raise TypeError(f"RaggedTensor.from_lengths: lengths must hold integers, got {lengths.dtype}")
        lengths = lengths.to(torch.int64)  # [n]
        low, total = torch.stack([lengths.min(), lengths.sum()]).tolist() if len(lengths) else (0, 0)
        if low < 0:
            raise ValueError(f"RaggedTensor.from_lengths: lengths must be non-negative, got {low}")
        if total != data.shape[0]:
            raise ValueError(
                f"RaggedTensor.from_lengths: lengths sum to {total} items, but data has "
                f"{data.shape[0]} items (shape {tuple(data.shape)})"
            )
        return cls(data, lengths, _offsets_from_lengths(lengths), _batch_index(lengths, total))

    @classmethod
    def from_ragged_buffer(cls, buf: RaggedBuffer, device: Any = None) -> "RaggedTensor":
        """Converts a ``RaggedBuffer*`` (float32, int64 or bool) and moves it to ``device``."""
        if not is_ragged_buffer(buf):
            raise TypeError(
                f"RaggedTensor.from_ragged_buffer: expected a RaggedBuffer*, got {type(buf).__name__}"
            )
        flat, lengths = ragged_to_arrays(buf)  # [n_items, n_features], [n]
        offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)  # [n + 1]
        np.cumsum(lengths, out=offsets[1:])
        batch_index = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)  # [n_items]
        tensors = [torch.from_numpy(a).to(device) for a in (flat, lengths, offsets, batch_index)]
        return cls(*tensors)

    @classmethod
    def from_list(
        cls,
        seqs: Sequence[Any],
        *,
        trailing_shape: Optional[Sequence[int]] = None,
        dtype: Optional[torch.dtype] = None,
        device: Any = None,
    ) -> "RaggedTensor":
        """Builds a ragged tensor from a list of ``[len_i, ...]`` tensors or arrays.

        Args:
            seqs: the sequences; each at least 1-D with a leading length dimension, all with the
                same trailing shape and dtype.
            trailing_shape: the per-item shape. Required when ``seqs`` is empty (the result then
                has ``data`` of shape ``[0, *trailing_shape]``, dtype ``dtype`` or float32);
                otherwise checked against the sequences when given.
            dtype: cast every sequence to this dtype.
            device: put the result on this device (default: where the sequences are).
        """
        if len(seqs) == 0:
            if trailing_shape is None:
                raise ValueError(
                    "RaggedTensor.from_list: an empty list needs trailing_shape= "
                    "(the per-item shape, e.g. (n_features,))"
                )
            data = torch.zeros((0, *trailing_shape), dtype=dtype or torch.float32, device=device)
            return cls.from_lengths(data, torch.zeros(0, dtype=torch.int64))
        tensors = [torch.as_tensor(s, dtype=dtype, device=device) for s in seqs]
        first = tensors[0]
        expected = tuple(first.shape[1:]) if trailing_shape is None else tuple(trailing_shape)
        for i, t in enumerate(tensors):
            if t.dim() < 2 or tuple(t.shape[1:]) != expected:
                raise ValueError(
                    f"RaggedTensor.from_list: seqs[{i}] has shape {tuple(t.shape)}; expected "
                    f"[len_i, *{expected}] (at least 2-D, same trailing shape for every sequence)"
                )
            if t.dtype != first.dtype or t.device != first.device:
                raise TypeError(
                    f"RaggedTensor.from_list: seqs[{i}] is {t.dtype} on {t.device}, but seqs[0] is "
                    f"{first.dtype} on {first.device}; pass dtype= / device= to convert"
                )
        lengths = torch.tensor([t.shape[0] for t in tensors], dtype=torch.int64, device=first.device)
        return cls.from_lengths(torch.cat(tensors), lengths)

    @classmethod
    def cat(cls, raggeds: Sequence["RaggedTensor"]) -> "RaggedTensor":
        """Concatenates the sequences of several ragged tensors, in order."""
        raggeds = list(raggeds)
        if not raggeds:
            raise ValueError("RaggedTensor.cat: expected at least one RaggedTensor, got an empty list")
        first = raggeds[0]
        for i, rt in enumerate(raggeds):
            if not isinstance(rt, RaggedTensor):
                raise TypeError(f"RaggedTensor.cat: raggeds[{i}] is a {type(rt).__name__}, not a RaggedTensor")
            if rt.trailing_shape != first.trailing_shape or rt.dtype != first.dtype or rt.device != first.device:
                raise ValueError(
                    f"RaggedTensor.cat: raggeds[{i}] has items {rt.trailing_shape} {rt.dtype} on "
                    f"{rt.device}, but raggeds[0] has {first.trailing_shape} {first.dtype} on {first.device}"
                )
        lengths = torch.cat([rt.lengths for rt in raggeds])  # [n]
        sequence_shifts = np.cumsum([0] + [len(rt) for rt in raggeds[:-1]]).tolist()
        batch_index = torch.cat(
            [rt.batch_index + shift for rt, shift in zip(raggeds, sequence_shifts)]
        )  # [n_items]
        data = torch.cat([rt.data for rt in raggeds])  # [n_items, ...]
        return cls(data, lengths, _offsets_from_lengths(lengths), batch_index)

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
        item_ids = torch.arange(self.n_items, device=self.data.device)  # [n_items]
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

    def __repr__(self) -> str:
        return (
            f"RaggedTensor(n_sequences={len(self)}, n_items={self.n_items}, "
            f"trailing_shape={self.trailing_shape}, dtype={self.dtype}, device={self.device})"
        )

    # ------------------------------------------------------------------------ conversions

    def to_ragged_buffer(self) -> RaggedBuffer:
        """Copies to a ``RaggedBuffer*`` on the CPU (2-D float32, int64 or bool data only)."""
        if self.dtype not in _BUFFER_DTYPES:
            raise TypeError(
                f"RaggedTensor.to_ragged_buffer: data is {self.dtype}; ragged buffers hold "
                "float32, int64 or bool; call .to(dtype) first"
            )
        if self.data.dim() != 2:
            raise ValueError(
                f"RaggedTensor.to_ragged_buffer: ragged buffers hold [n_items, n_features], "
                f"but data has shape {tuple(self.data.shape)}; reshape the data first"
            )
        return ragged_from_arrays(self.data.detach().cpu().numpy(), self.lengths.cpu().numpy())

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
        padded = self.data.new_full((len(self), max_length, *self.trailing_shape), pad_value)  # [n, max_length, ...]
        padded[self.batch_index, self.positions] = self.data
        steps = torch.arange(max_length, device=self.device)  # [max_length]
        mask = steps[None, :] < self.lengths[:, None]  # [n, max_length]
        return padded, mask

    def with_data(self, data: torch.Tensor) -> "RaggedTensor":
        """Returns a ragged tensor with the same sequences and new per-item ``data``.

        Example:
            ``rt.with_data(linear(rt.data))`` applies a layer to every item.
        """
        if not isinstance(data, torch.Tensor) or data.dim() < 1 or data.shape[0] != self.n_items:
            shape = tuple(data.shape) if isinstance(data, torch.Tensor) else type(data).__name__
            raise ValueError(
                f"RaggedTensor.with_data: expected a tensor [n_items={self.n_items}, ...], got {shape}"
            )
        device = data.device
        return RaggedTensor(data, self.lengths.to(device), self.offsets.to(device), self.batch_index.to(device))

    def to(self, *args: Any, **kwargs: Any) -> "RaggedTensor":
        """Forwards to ``data.to``; index tensors follow to the new device (keeping int64)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return self.with_data(data)

    def detach(self) -> "RaggedTensor":
        """Returns a ragged tensor whose data is detached from the autograd graph."""
        return self.with_data(self.data.detach())

    # -------------------------------------------------------------------------- indexing

    def __getitem__(self, index: Any) -> Union[torch.Tensor, "RaggedTensor"]:
        n = len(self)
        if isinstance(index, torch.Tensor):
            if index.dim() == 0 and index.dtype != torch.bool:
                index = int(index)
            else:
                return self._gather(self._check_index_tensor(index.to(self.device)))
        resolved = sequence_indices(index, n, "RaggedTensor[...]")
        if isinstance(resolved, int):
            start, end = self.offsets[resolved : resolved + 2].tolist()
            return self.data[start:end]
        return self._gather(torch.from_numpy(resolved).to(self.device))

    def _check_index_tensor(self, index: torch.Tensor) -> torch.Tensor:
        n = len(self)
        if index.dim() != 1:
            raise ValueError(f"RaggedTensor[...]: index arrays must be 1-D, got shape {tuple(index.shape)}")
        if index.dtype == torch.bool:
            if index.shape[0] != n:
                raise IndexError(
                    f"RaggedTensor[...]: boolean mask has length {index.shape[0]}, expected {n} sequences"
                )
            return torch.nonzero(index).flatten()  # [n_selected]
        if index.numel() == 0:
            return index.new_zeros(0, dtype=torch.int64)  # [0]; torch.tensor([]) is float
        if index.is_floating_point() or index.is_complex():
            raise TypeError(f"RaggedTensor[...]: index arrays must hold integers, got dtype {index.dtype}")
        index = index.to(torch.int64)  # [n_selected]
        if index.numel():
            low, high = torch.stack(torch.aminmax(index)).tolist()
            if low < 0:
                raise ValueError(f"RaggedTensor[...]: negative indices are not supported, got {low}")
            if high >= n:
                raise IndexError(f"RaggedTensor[...]: index {high} is out of range for {n} sequences")
        return index

    def _gather(self, index: torch.Tensor) -> "RaggedTensor":
        """Selects sequences ``index`` (int64, in range, on ``self.device``) in one gather."""
        lengths = self.lengths[index]  # [m]
        offsets = _offsets_from_lengths(lengths)  # [m + 1]
        n_items = int(offsets[-1])
        batch_index = _batch_index(lengths, n_items)  # [n_items]
        item_ids = torch.arange(n_items, device=self.device)  # [n_items]
        source = self.starts[index][batch_index] + item_ids - offsets[batch_index]  # [n_items]
        return RaggedTensor(self.data[source], lengths, offsets, batch_index)


def ragged_tensor_equal(a: Any, b: Any) -> bool:
    """Returns whether two ragged tensors hold the same sequences (dtype, shape and values).

    Float NaNs compare equal to each other; ``b`` is compared on ``a``'s device.
    """
    if not (isinstance(a, RaggedTensor) and isinstance(b, RaggedTensor)):
        return False
    if a.dtype != b.dtype or a.data.shape != b.data.shape or len(a) != len(b):
        return False
    b = b.to(a.device)
    if not torch.equal(a.lengths, b.lengths):
        return False
    if a.data.is_floating_point() or a.data.is_complex():
        return bool(((a.data == b.data) | (a.data.isnan() & b.data.isnan())).all())
    return torch.equal(a.data, b.data)
