"""``RaggedTensor``: a batch of variable-length sequences stored in one torch tensor."""

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import torch

from entmachin.ragged.interop import as_ragged_array
from entmachin.ragged.arrays import as_lengths, is_ragged, is_ragged_array, sequence_indices
from entmachin.ragged.tensor_views import RaggedTensorViews, batch_index_of, check_data, offsets_from_lengths

__all__ = ["RaggedTensor", "is_ragged", "ragged_tensor_equal", "to_ragged_tensor", "tree_to_torch"]

_FIELDS = ("data", "lengths", "offsets", "batch_index")


@dataclass(frozen=True, eq=False, slots=True)
class RaggedTensor(RaggedTensorViews):
    """A batch of ``n`` sequences of ``[len_i, ...]`` items, stored back to back in ``data``.

    Build one with :meth:`from_lengths`, :meth:`from_ragged_array`, :meth:`from_list` or
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
        for name in _FIELDS:
            value = getattr(self, name)
            if not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"RaggedTensor.{name}: expected a torch.Tensor, got {type(value).__name__}"
                )
        check_data(self.data, "RaggedTensor.data")
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
        return (RaggedTensor, tuple(getattr(self, name) for name in _FIELDS))

    # ----------------------------------------------------------------------- constructors

    @classmethod
    def trusted(
        cls, data: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, batch_index: torch.Tensor
    ) -> "RaggedTensor":
        """Builds a ragged tensor of ``data``, ``lengths``, ``offsets`` and ``batch_index`` without checking
        them, for hot paths that derive the four tensors from each other (int64, consistent, all on
        ``data``'s device) by construction.

        The constructor's checks cost about as much as gathering a small batch; anything built
        from user input must use the checked constructors instead.
        """
        ragged = object.__new__(cls)
        for name, value in zip(_FIELDS, (data, lengths, offsets, batch_index)):
            object.__setattr__(ragged, name, value)
        return ragged

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
        where = "RaggedTensor.from_lengths"
        data = check_data(torch.as_tensor(data), f"{where}: data")
        if isinstance(lengths, torch.Tensor):
            lengths = lengths.cpu()  # validated on the host: one small copy
        checked = as_lengths(lengths, where)  # [n]
        total = int(checked.sum())
        if total != data.shape[0]:
            raise ValueError(
                f"{where}: lengths sum to {total} items, but data has {data.shape[0]} items "
                f"(shape {tuple(data.shape)})"
            )
        lengths = torch.tensor(checked, dtype=torch.int64, device=data.device)  # [n], a copy
        return cls(data, lengths, offsets_from_lengths(lengths), batch_index_of(lengths, total))

    @classmethod
    def from_ragged_array(cls, buf: Any, device: Any = None) -> "RaggedTensor":
        """Copies ``buf``, a ragged array (entmachin's or ragged-buffer's; float32, int64 or bool), to
        ``device`` (default: the CPU); anything else raises ``TypeError``."""
        if not is_ragged_array(buf):
            raise TypeError(
                f"RaggedTensor.from_ragged_array: expected a ragged array, got {type(buf).__name__}"
            )
        buf = as_ragged_array(buf)
        lengths = np.array(buf.size1())  # [n]
        tensors = [
            torch.from_numpy(np.array(buf.as_array())),  # [n_items, n_features], a copy of its own
            torch.from_numpy(lengths),
            torch.from_numpy(np.array(buf.offsets)),  # [n + 1]
            torch.from_numpy(np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)),  # [n_items]
        ]
        if device is not None and torch.device(device) != tensors[0].device:
            tensors = [t.to(device) for t in tensors]
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
            seqs: the sequences; each at least 2-D with a leading length dimension, all with
                the same trailing shape, dtype and device.
            trailing_shape: the per-item shape. Required when ``seqs`` is empty (the result
                then has ``data`` of shape ``[0, *trailing_shape]`` and dtype ``dtype`` or
                float32); checked against the sequences otherwise.
            dtype: cast every sequence to this dtype.
            device: put the result on this device (default: where the sequences are).
        """
        where = "RaggedTensor.from_list"
        if len(seqs) == 0:
            if trailing_shape is None:
                raise ValueError(
                    f"{where}: an empty list needs trailing_shape= "
                    "(the per-item shape, e.g. (n_features,))"
                )
            data = torch.zeros(
                (0, *trailing_shape), dtype=dtype or torch.float32, device=device
            )  # [0, *trailing_shape]
            return cls.from_lengths(data, [])
        tensors = [torch.as_tensor(s, dtype=dtype, device=device) for s in seqs]
        first = tensors[0]
        expected = tuple(first.shape[1:] if trailing_shape is None else trailing_shape)
        for i, t in enumerate(tensors):
            if t.dim() < 2 or tuple(t.shape[1:]) != expected:
                raise ValueError(
                    f"{where}: seqs[{i}] has shape {tuple(t.shape)}; expected [len_i, *{expected}]"
                    " (at least 2-D, the same trailing shape for every sequence)"
                )
            if t.dtype != first.dtype or t.device != first.device:
                raise TypeError(
                    f"{where}: seqs[{i}] is {t.dtype} on {t.device}, but seqs[0] is "
                    f"{first.dtype} on {first.device}; pass dtype= / device= to convert"
                )
        lengths = [t.shape[0] for t in tensors]  # [n]
        return cls.from_lengths(torch.cat(tensors), lengths)  # data: [n_items, ...]

    @classmethod
    def cat(cls, raggeds: Sequence["RaggedTensor"], rows: Optional[Sequence[Any]] = None) -> "RaggedTensor":
        """Concatenates the sequences of several ragged tensors, in order.

        Args:
            raggeds: the ragged tensors, with the same item shape, dtype and device.
            rows: optional, one entry per ragged tensor: None for all of its sequences, or an
                int64 array / tensor of the sequences to take from it, in that order. Each
                item is copied once, straight into the result (no intermediate selection).
        """
        raggeds = list(raggeds)
        if not raggeds:
            raise ValueError("RaggedTensor.cat: expected at least one RaggedTensor, got none")
        for i, rt in enumerate(raggeds):
            if not isinstance(rt, RaggedTensor):
                raise TypeError(
                    f"RaggedTensor.cat: raggeds[{i}] is a {type(rt).__name__}, not a RaggedTensor"
                )
            got, want = rt._item_kind(), raggeds[0]._item_kind()
            if got != want:
                raise ValueError(
                    f"RaggedTensor.cat: raggeds[{i}] has items {got}, but raggeds[0] has {want}"
                )
        if rows is not None and any(r is not None for r in rows):
            return cls._cat_rows(raggeds, rows)
        lengths = torch.cat([rt.lengths for rt in raggeds])  # [n]
        shifts = np.cumsum([0] + [len(rt) for rt in raggeds[:-1]]).tolist()
        batch_index = torch.cat(
            [rt.batch_index + shift for rt, shift in zip(raggeds, shifts)]
        )  # [n_items]
        data = torch.cat([rt.data for rt in raggeds])  # [n_items, ...]
        return cls(data, lengths, offsets_from_lengths(lengths), batch_index)

    @classmethod
    def _cat_rows(cls, raggeds: List["RaggedTensor"], rows: Sequence[Any]) -> "RaggedTensor":
        """``cat`` of the sequences ``rows[i]`` of each ``raggeds[i]``: one copy of each item."""
        device = raggeds[0].device
        picks = [None if r is None else torch.as_tensor(r, dtype=torch.int64, device=device) for r in rows]
        lengths = torch.cat([rt.lengths if r is None else rt.lengths[r] for rt, r in zip(raggeds, picks)])  # [n]
        offsets = offsets_from_lengths(lengths)  # [n + 1]
        n_items = int(offsets[-1])
        data = raggeds[0].data.new_empty((n_items, *raggeds[0].trailing_shape))  # [n_items, ...]
        at = 0
        for rt, r in zip(raggeds, picks):
            if r is None:
                data[at:at + rt.n_items].copy_(rt.data)
                at += rt.n_items
                continue
            part = rt.lengths[r]  # [m]
            part_offsets = offsets_from_lengths(part)  # [m + 1]
            m_items = int(part_offsets[-1])
            owner = batch_index_of(part, m_items)  # [m_items]
            source = rt.starts[r][owner] + torch.arange(m_items, device=device) - part_offsets[owner]  # [m_items]
            torch.index_select(rt.data, 0, source, out=data[at:at + m_items])
            at += m_items
        return cls.trusted(data, lengths, offsets, batch_index_of(lengths, n_items))

    def row_range(self, start: int, stop: int) -> "RaggedTensor":
        """Sequences ``start`` to ``stop`` (exclusive) as a view: ``data`` is shared, not copied.

        Raises:
            IndexError: the range is not within ``[0, len(self)]``.
        """
        if not 0 <= start <= stop <= len(self):
            raise IndexError(f"RaggedTensor.row_range: [{start}, {stop}) is not within the {len(self)} sequences")
        first, last = self.offsets[start].item(), self.offsets[stop].item()
        return RaggedTensor.trusted(self.data[first:last], self.lengths[start:stop],
                                    self.offsets[start:stop + 1] - first, self.batch_index[first:last] - start)

    def _item_kind(self) -> str:
        return f"{self.trailing_shape} {self.dtype} on {self.device}"

    # Here rather than in RaggedTensorViews: @dataclass writes a __repr__ for a class that lacks its own.
    def __repr__(self) -> str:
        return (
            f"RaggedTensor(n_sequences={len(self)}, n_items={self.n_items}, "
            f"trailing_shape={self.trailing_shape}, dtype={self.dtype}, device={self.device})"
        )

    # ------------------------------------------------------------------------ new data

    def with_data(self, data: torch.Tensor) -> "RaggedTensor":
        """Returns a ragged tensor with the same sequences and new per-item ``data``.

        Example:
            ``rt.with_data(linear(rt.data))`` applies a layer to every item.
        """
        if not isinstance(data, torch.Tensor) or data.dim() < 1 or data.shape[0] != self.n_items:
            got = tuple(data.shape) if isinstance(data, torch.Tensor) else type(data).__name__
            raise ValueError(
                f"RaggedTensor.with_data: expected a tensor [n_items={self.n_items}, ...], "
                f"got {got}"
            )
        index_tensors = (self.lengths, self.offsets, self.batch_index)
        device = data.device
        if any(t.device != device for t in index_tensors):
            index_tensors = tuple(t.to(device) for t in index_tensors)
        return RaggedTensor(data, *index_tensors)

    def to(self, *args: Any, **kwargs: Any) -> "RaggedTensor":
        """Forwards to ``data.to``; index tensors follow to the new device (keeping int64)."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self.with_data(data)

    def detach(self) -> "RaggedTensor":
        """Returns a ragged tensor whose data is detached from the autograd graph."""
        return self.with_data(self.data.detach())

    # --------------------------------------------------------------------------- indexing

    def __getitem__(self, index: Any) -> Union[torch.Tensor, "RaggedTensor"]:
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()  # validated on the host, like every other index
        resolved = sequence_indices(index, len(self), "RaggedTensor[...]")
        if isinstance(resolved, int):
            start, end = self.offsets[resolved : resolved + 2].tolist()
            return self.data[start:end]
        return self._gather(torch.from_numpy(resolved).to(self.device))

    def _gather(self, index: torch.Tensor) -> "RaggedTensor":
        """Selects sequences ``index`` (int64, in range, on ``self.device``) in one gather."""
        lengths = self.lengths[index]  # [m]
        offsets = offsets_from_lengths(lengths)  # [m + 1]
        n_items = int(offsets[-1])
        batch_index = batch_index_of(lengths, n_items)  # [n_items]
        item_ids = torch.arange(n_items, device=self.device)  # [n_items]
        source = self.starts[index][batch_index] + item_ids - offsets[batch_index]  # [n_items]
        return RaggedTensor(self.data[source], lengths, offsets, batch_index)


def to_ragged_tensor(value: Any, device: Any = None, where: str = "to_ragged_tensor") -> RaggedTensor:
    """Returns a ragged array or a ``RaggedTensor`` as a ``RaggedTensor`` on ``device``.

    Args:
        value: the ragged value; a ``RaggedTensor`` already on ``device`` is returned as is.
        device: where the result lives; None leaves a ``RaggedTensor`` where it is and puts a
            converted buffer on the CPU.
        where: prefix for the error message, e.g. ``"RogueNet.forward: entities['Robot']"``.

    Raises:
        TypeError: ``value`` is not ragged (a dense tensor has no row boundaries).
    """
    if isinstance(value, RaggedTensor):
        return value if device is None else value.to(device)
    if is_ragged_array(value):
        return RaggedTensor.from_ragged_array(value, device)
    raise TypeError(
        f"{where}: expected a ragged array or RaggedTensor with one sequence per row, "
        f"got {type(value).__name__}"
    )


def tree_to_torch(tree: Mapping[str, Any]) -> Dict[str, Any]:
    """A tree (nested dicts of row values) whose numpy arrays became tensors and whose
    ragged array leaves became ``RaggedTensor``s, on the CPU.

    Arrays are shared with their tensors (``torch.from_numpy``; a read-only array is copied),
    ragged arrays are copied once, torch leaves are kept as they are; other leaves (and
    arrays of dtypes torch lacks) are left for the caller's checks to name.
    """
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        if type(value) is torch.Tensor:  # the common leaf, kept (before the slower Mapping check)
            out[key] = value
        elif isinstance(value, Mapping):
            out[key] = tree_to_torch(value)
        elif isinstance(value, np.ndarray):
            try:
                out[key] = torch.from_numpy(value if value.flags.writeable else value.copy())
            except TypeError:
                out[key] = value
        elif is_ragged_array(value):
            out[key] = RaggedTensor.from_ragged_array(value)
        else:
            out[key] = value
    return out


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
