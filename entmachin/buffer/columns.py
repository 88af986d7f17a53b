"""Columns: the pre-allocated per-leaf storage of a ring buffer.

Every column is indexed by *slot* (``0 <= slot < capacity``); the ring (``storage.py``) decides
which slots a write fills. Data live in a torch tensor on the buffer's device; on the CPU the
column reads and writes a numpy view of that tensor, which is much cheaper per call.

* ``DenseColumn`` holds ``[capacity, *shape]`` (scalars use shape ``(1,)``).
* ``RaggedColumn`` holds the items of all rows back to back in one ``[item_capacity, *shape]``
  array, plus each row's first item and length. Items are written in the order rows are, so
  the items of the rows still alive always form one contiguous run of *virtual addresses*
  (``physical = virtual % item_capacity``); a row never straddles the end of the array (the
  write skips to the start instead). The array grows by 1/8 when the live run plus the new
  items no longer fit, so memory stays within about 1.125x of the largest live run.
* ``CustomColumn`` holds one Python object per slot.

Columns pickle (and deep-copy) their tensors; the numpy views are rebuilt on unpickling, so
they keep sharing memory with the tensors.
"""

from typing import Any, List, Optional, Tuple

import numpy as np
import torch

from entmachin.buffer.schema import LeafSpec
from entmachin.ragged import RaggedTensor

__all__ = ["DenseColumn", "RaggedColumn", "CustomColumn", "make_column"]

_GROWTH = 1.125
_MIN_ITEMS = 256


def _host_view(tensor: torch.Tensor, spec: LeafSpec) -> Optional[np.ndarray]:
    return tensor.numpy() if tensor.device.type == "cpu" and spec.np_dtype is not None else None


def _without_view(state: dict) -> dict:
    """A column's state for pickling: the numpy view would unpickle as a copy, so it is rebuilt."""
    state = dict(state)
    del state["array"]
    return state


def _to_tensor(value: Any, device: torch.device) -> torch.Tensor:
    if isinstance(value, np.ndarray):  # a read-only array is copied: torch warns about sharing one
        value = torch.from_numpy(value if value.flags.writeable else value.copy())
    return value.to(device)


class DenseColumn:
    """``[capacity, *shape]`` values, one row per slot."""

    def __init__(self, spec: LeafSpec, capacity: int, device: torch.device) -> None:
        self.spec = spec
        self.tensor = torch.empty((capacity, *spec.shape), dtype=spec.dtype, device=device)  # [capacity, *shape]
        self.array = _host_view(self.tensor, spec)

    def write(self, slot: int, value: Any, n: int) -> None:
        """Writes ``n`` rows (an array/tensor ``[n, *shape]`` or a scalar for one row) from ``slot``."""
        end, capacity = slot + n, self.tensor.shape[0]
        if self.array is not None:
            if end <= capacity:
                self.array[slot:end] = value
            else:
                split = capacity - slot
                self.array[slot:] = value[:split]
                self.array[: end - capacity] = value[split:]
            return
        value = torch.as_tensor(value, dtype=self.tensor.dtype).to(self.tensor.device)
        if end <= capacity:
            self.tensor[slot:end] = value
        else:
            split = capacity - slot
            self.tensor[slot:] = value[:split]
            self.tensor[: end - capacity] = value[split:]

    def __getstate__(self) -> dict:
        return _without_view(self.__dict__)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.array = _host_view(self.tensor, self.spec)

    def gather(self, slots: np.ndarray) -> torch.Tensor:
        """Returns the rows of ``slots`` in order, ``[n, *shape]``, on the buffer's device."""
        if self.array is not None:
            return torch.from_numpy(self.array.take(slots, axis=0))  # [n, *shape]
        index = torch.from_numpy(slots).to(self.tensor.device)  # [n]
        return self.tensor.index_select(0, index)  # [n, *shape]

    def export(self, slots: np.ndarray) -> Tuple[torch.Tensor]:
        """The rows of ``slots`` as CPU tensors, for saving."""
        return (self.gather(slots).cpu(),)

    def load(self, parts: Tuple[torch.Tensor, ...], first: int) -> None:
        """Writes :meth:`export`'s rows (oldest first) from slot ``first`` on."""
        (rows,) = parts
        self.write(first, rows.numpy() if self.array is not None else rows, rows.shape[0])

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()


class RaggedColumn:
    """Variable-length rows: items back to back, with each row's start and length."""

    def __init__(self, spec: LeafSpec, capacity: int, device: torch.device) -> None:
        self.spec = spec
        self.device = torch.device(device)
        self.starts = np.zeros(capacity, dtype=np.int64)  # [capacity] virtual address of first item
        self.lengths = np.zeros(capacity, dtype=np.int64)  # [capacity] items per row
        self.head = 0  # virtual address one past the newest item
        self._allocate(0)

    def _allocate(self, n_items: int) -> None:
        self.tensor = torch.empty((n_items, *self.spec.shape), dtype=self.spec.dtype, device=self.device)
        self.array = _host_view(self.tensor, self.spec)

    def __getstate__(self) -> dict:
        return _without_view(self.__dict__)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.array = _host_view(self.tensor, self.spec)

    @property
    def item_capacity(self) -> int:
        return self.tensor.shape[0]

    def write(self, slot: int, flat: Any, lengths: np.ndarray, n: int, tail_slot: int) -> None:
        """Writes ``n`` rows from ``slot``.

        Args:
            slot: first slot written (the rows may wrap around the end of the ring).
            flat: ``[n_items, *shape]`` items of the new rows, or None for zero-length rows.
            lengths: ``[n]`` items per new row (ignored when ``flat`` is None).
            n: number of rows.
            tail_slot: the oldest row that survives this write, or -1 when none does; the
                items of rows older than it are free.
        """
        if flat is None:
            n_items, lengths = 0, np.zeros(n, dtype=np.int64)
        else:
            n_items = flat.shape[0]
        tail = self.starts[tail_slot] if tail_slot >= 0 else self.head
        start, capacity = self.head, self.item_capacity
        if n_items and capacity:
            offset = start % capacity
            if offset + n_items > capacity:  # keep the rows contiguous: continue at the next lap
                start += capacity - offset
        if start + n_items - tail > capacity:
            self._rebase(tail, self.head - tail + n_items)
            start = self.head
        capacity = self.item_capacity
        if n == 1:
            self.starts[slot] = start
            self.lengths[slot] = n_items
        else:
            starts = np.empty(n, dtype=np.int64)  # [n]
            starts[0] = start
            np.cumsum(lengths[:-1], out=starts[1:])
            starts[1:] += start
            _ring_assign(self.starts, slot, starts)
            _ring_assign(self.lengths, slot, lengths)
        if n_items:
            offset = start % capacity
            if self.array is not None:
                self.array[offset : offset + n_items] = flat
            else:
                self.tensor[offset : offset + n_items] = _to_tensor(flat, self.device)
        self.head = start + n_items

    def _rebase(self, tail: int, required: int) -> None:
        """Moves the live run ``[tail, head)`` to the start of a larger array."""
        old, old_capacity = self.tensor, self.item_capacity
        span = self.head - tail
        self._allocate(max(int(required * _GROWTH), required + 16, _MIN_ITEMS))
        if span:
            first = tail % old_capacity
            head_part = min(span, old_capacity - first)
            self.tensor[:head_part] = old[first : first + head_part]
            self.tensor[head_part:span] = old[: span - head_part]
        self.starts -= tail
        self.head = span

    def gather(self, slots: np.ndarray) -> RaggedTensor:
        """Returns the rows of ``slots`` in order as one ``RaggedTensor`` (sequence i = row i)."""
        n = slots.shape[0]
        lengths = self.lengths.take(slots)  # [n]
        offsets = np.zeros(n + 1, dtype=np.int64)  # [n + 1]
        np.cumsum(lengths, out=offsets[1:])
        batch_index = np.repeat(np.arange(n, dtype=np.int64), lengths)  # [n_items]
        capacity = self.tensor.shape[0] or 1
        shift = self.starts.take(slots) % capacity - offsets[:-1]  # [n]
        items = np.arange(offsets[-1]) + shift.take(batch_index)  # [n_items]
        if self.array is not None:
            data = torch.from_numpy(self.array.take(items, axis=0))  # [n_items, *shape]
            return RaggedTensor.trusted(data, torch.from_numpy(lengths), torch.from_numpy(offsets), torch.from_numpy(batch_index))
        data = self.tensor.index_select(0, torch.from_numpy(items).to(self.device))  # [n_items, *shape]
        return RaggedTensor.trusted(data, *(torch.from_numpy(a).to(self.device) for a in (lengths, offsets, batch_index)))

    def export(self, slots: np.ndarray) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(flat, lengths)`` of the rows of ``slots`` as CPU tensors, for saving."""
        rows = self.gather(slots)
        return rows.data.cpu(), rows.lengths.cpu()

    def load(self, parts: Tuple[torch.Tensor, ...], first: int) -> None:
        """Writes :meth:`export`'s rows (oldest first) from slot ``first`` on, items compacted."""
        flat, lengths = parts
        if lengths.dtype != torch.int64 or bool((lengths < 0).any()) or int(lengths.sum()) != flat.shape[0]:
            raise ValueError(
                f"{self.spec.name}: saved lengths do not describe the {flat.shape[0]} saved items"
            )
        self.head = 0
        self.write(first, flat.numpy() if self.array is not None else flat, lengths.numpy(), lengths.shape[0], -1)

    @property
    def nbytes(self) -> int:
        """Bytes held: items (including free space) plus the per-row starts and lengths."""
        return self.tensor.numel() * self.tensor.element_size() + self.starts.nbytes + self.lengths.nbytes


class CustomColumn:
    """One Python object per slot (the custom attribute value of that row's transition)."""

    def __init__(self, capacity: int) -> None:
        self.objects = np.empty(capacity, dtype=object)  # [capacity]

    def write(self, slot: int, value: Any, n: int) -> None:
        capacity = self.objects.shape[0]
        for i in range(slot, slot + n):
            self.objects[i % capacity] = value

    def gather(self, slots: np.ndarray) -> List[Any]:
        return self.objects.take(slots).tolist()

    def clear(self) -> None:
        self.objects.fill(None)


def _ring_assign(target: np.ndarray, slot: int, values: np.ndarray) -> None:
    end, capacity = slot + values.shape[0], target.shape[0]
    if end <= capacity:
        target[slot:end] = values
    else:
        split = capacity - slot
        target[slot:] = values[:split]
        target[: end - capacity] = values[split:]


def make_column(spec: LeafSpec, capacity: int, device: torch.device) -> Any:
    """A ``RaggedColumn`` for ragged leaves, else a ``DenseColumn``."""
    cls = RaggedColumn if spec.kind == "ragged" else DenseColumn
    return cls(spec, capacity, device)
