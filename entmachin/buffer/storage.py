"""``RingStorage``: columnar ring storage in rows for one schema.

Rows are written at ``pos`` and wrap around; once ``size == capacity`` every write overwrites
the oldest rows. While the ring is not full its rows are slots ``0..size-1``; once full, all
slots are live. Every row also has an *id*: the number of rows written before it since the
storage was created (``clear`` keeps counting), so an id names one row for good and tells
whether it has been overwritten since (see ``PrioritizedBuffer.update_priority``).
"""

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import torch

from entmachin.buffer.columns import CustomColumn, RaggedColumn, make_column
from entmachin.buffer.schema import Schema

__all__ = ["RingStorage"]


class RingStorage:
    """Pre-allocated columns for every leaf of a schema, written as a ring of ``capacity`` rows.

    Args:
        schema: what each row holds.
        capacity: rows kept before the oldest are overwritten.
        device: where the columns live.
    """

    def __init__(self, schema: Schema, capacity: int, device: torch.device) -> None:
        self.schema = schema
        self.capacity = capacity
        self.device = torch.device(device)
        self.columns = [make_column(spec, capacity, self.device) for spec in schema.leaves]
        self._ragged = [isinstance(c, RaggedColumn) for c in self.columns]
        self.customs = [CustomColumn(capacity) for _ in schema.custom_attr]
        # every column dense with a numpy view on the host: the one-row fast path may write them
        self.host_arrays = all(getattr(c, "array", None) is not None for c in self.columns)
        self.pos = 0
        self.size = 0
        self.n_written = 0

    def grow(self, schema: Schema) -> None:
        """Adopts a grown schema (``growth.grow_schema``): a column for each new leaf.

        New leaves are ragged, and a new ragged column's rows are all zero-length sequences.
        """
        for spec in schema.leaves[len(self.columns) :]:
            column = make_column(spec, self.capacity, self.device)
            self.columns.append(column)
            self._ragged.append(isinstance(column, RaggedColumn))
        self.host_arrays = all(getattr(c, "array", None) is not None for c in self.columns)
        self.schema = schema

    # --------------------------------------------------------------------------- writes

    def write(self, n_rows: int, values: Sequence[Any], customs: Sequence[Any]) -> int:
        """Writes one transition's checked values (``Schema.extract``'s output).

        Returns:
            The first slot written (the rows fill ``n_rows`` slots from it, wrapping around).
        """
        capacity, slot = self.capacity, self.pos
        if n_rows > capacity:
            raise ValueError(
                f"append: the transition holds {n_rows} rows, more than the buffer's buffer_size "
                f"{capacity}; use a larger buffer_size"
            )
        if self.size + n_rows <= capacity:
            tail_slot = 0 if self.size else -1
        else:
            tail_slot = (slot + n_rows) % capacity if n_rows < capacity else -1
        for column, ragged, value in zip(self.columns, self._ragged, values):
            if ragged:
                if value is None:
                    column.write(slot, None, None, n_rows, tail_slot)
                else:
                    column.write(slot, value[0], value[1], n_rows, tail_slot)
            else:
                column.write(slot, value, n_rows)
        for column, value in zip(self.customs, customs):
            column.write(slot, value, n_rows)
        self.pos = (slot + n_rows) % capacity
        self.size = min(self.size + n_rows, capacity)
        self.n_written += n_rows
        return slot

    def clear(self) -> None:
        """Forgets every row (ids keep counting); memory stays allocated."""
        self.pos = 0
        self.size = 0
        for column in self.customs:
            column.clear()
        for column, ragged in zip(self.columns, self._ragged):
            if ragged:
                column.head = 0

    # --------------------------------------------------------------------------- reads

    @property
    def oldest(self) -> int:
        """Slot of the oldest live row."""
        return self.pos if self.size == self.capacity else 0

    def slots_of_rows(self, rows: np.ndarray) -> np.ndarray:
        """Slots of rows given by age order (0 = oldest live row)."""
        oldest = self.oldest
        return rows if oldest == 0 else (rows + oldest) % self.capacity

    def ids_of(self, slots: np.ndarray) -> np.ndarray:
        """Ids of the rows in ``slots``."""
        oldest, first_id = self.oldest, self.n_written - self.size
        if oldest == 0:
            return slots + first_id  # [n]
        return (slots - oldest) % self.capacity + first_id  # [n] age + id of the oldest row

    def slots_of_ids(self, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(slots, alive)``: where rows ``ids`` are, and whether they are still stored."""
        age = ids - (self.n_written - self.size)  # [n] 0 = oldest live row
        alive = age.view(np.uint64) < self.size  # [n] (a negative age wraps to a huge unsigned one)
        oldest = self.oldest
        if oldest == 0:
            return age, alive  # slot = age wherever alive
        age += oldest
        return age % self.capacity, alive

    def gather(self, slots: np.ndarray) -> List[Any]:
        """Every leaf of the rows ``slots``: tensors ``[n, *shape]`` / ``RaggedTensor``s."""
        return [column.gather(slots) for column in self.columns]

    def gather_custom(self, index: int, slots: np.ndarray) -> List[Any]:
        """The values of custom attribute ``index`` for the rows ``slots``."""
        return self.customs[index].gather(slots)

    def nbytes(self) -> Dict[str, int]:
        """Bytes held by each leaf's column (custom objects not counted)."""
        return {spec.name: column.nbytes for spec, column in zip(self.schema.leaves, self.columns)}
