"""``RolloutBuffer``: the on-policy frames' buffer, which keeps a frame's rollout by reference.

An on-policy frame stores one rollout, trains on all of it and clears it. Copying that rollout
into ring columns only to read every row back in order would copy every entity feature twice
more. ``RolloutBuffer`` is a :class:`~entmachin.buffer.Buffer` that holds the rows of a
:meth:`append_trusted` made while it is empty as they were given, and hands them back with
:meth:`held`: no copy between the frame's storing step and its ``update()``.

Everything else is ``Buffer``'s, unchanged: before any other operation reads or adds rows
(``append``, a second ``append_trusted``, ``store_episode``, ``sample_batch``, ``save``,
``storage_nbytes``, ``schema``, pickling), the held rows move into the columns, checked and
placed exactly as ``Buffer.append_trusted`` places them. A frame that stores several episodes
before an update therefore behaves as it would with a ``Buffer``.

Example:
    >>> buffer = RolloutBuffer(1000)
    >>> buffer.append_trusted({"state": {"x": torch.zeros(4, 2)}, "reward": torch.ones(4, 1)}, ["state"])
    >>> buffer.size(), buffer.held()["reward"].shape
    (4, torch.Size([4, 1]))
"""

from collections.abc import Mapping
from typing import Any, Dict, Optional, Sequence, Tuple

import torch

from entmachin.buffer.buffer import Buffer
from entmachin.ragged import trees

__all__ = ["RolloutBuffer"]


def _to_device(tree: Mapping[str, Any], device: torch.device) -> Dict[str, Any]:
    """The tree with its torch leaves on ``device`` (leaves already there are not copied)."""
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out[key] = _to_device(value, device)
        else:
            to = getattr(value, "to", None)
            out[key] = value if to is None or getattr(value, "device", device) == device else to(device)
    return out


class RolloutBuffer(Buffer):
    """A :class:`~entmachin.buffer.Buffer` that holds its first trusted rows by reference.

    Args and raises: as ``Buffer``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: Optional[Tuple[Dict[str, Any], Tuple[str, ...], int]] = None

    def append_trusted(self, data: Mapping[str, object], major_attr: Sequence[str]) -> None:
        """Holds ``data`` as given when the buffer is empty; otherwise as ``Buffer.append_trusted``
        (``major_attr`` names the attributes of ``data`` that are dicts of values, as there).

        Held rows are not copied (torch leaves not on ``buffer_device`` are moved there): the
        caller hands them over and must not modify them afterwards. They must be torch values,
        as ``sample_batch`` returns them (tensors ``[n, ...]``, ``RaggedTensor``s, dicts of
        them); anything else takes ``Buffer``'s path.
        """
        n_rows = trees.n_rows(data, "append_trusted")
        if self.size() == 0 and n_rows <= self.buffer_size and _all_torch(data):
            self._held = (_to_device(data, self.buffer_device), tuple(major_attr), n_rows)
            return
        self._spill()
        super().append_trusted(data, major_attr)

    def held(self) -> Optional[Dict[str, Any]]:
        """The rows held by reference, if they are all the buffer holds: the dict given to
        :meth:`append_trusted` (not a copy: read it, don't modify it); else None."""
        return None if self._held is None else self._held[0]

    def _spill(self) -> None:
        """Moves the held rows into the columns (one copy), as ``Buffer.append_trusted`` would."""
        if self._held is not None:
            data, major_attr, _ = self._held
            self._held = None
            try:
                super().append_trusted(data, major_attr)
            except BaseException:
                self._held = (data, major_attr, _)
                raise

    # Every other operation is Buffer's, on the rows in the columns.

    def append(self, *args: Any, **kwargs: Any) -> None:
        self._spill()
        super().append(*args, **kwargs)

    def store_episode(self, *args: Any, **kwargs: Any) -> None:
        self._spill()
        super().store_episode(*args, **kwargs)

    def sample_batch(self, *args: Any, **kwargs: Any) -> Tuple[int, Optional[tuple]]:
        self._spill()
        return super().sample_batch(*args, **kwargs)

    def save(self, path: str) -> None:
        self._spill()
        super().save(path)

    def size(self) -> int:
        return self._held[2] if self._held is not None else super().size()

    def clear(self) -> None:
        self._held = None
        super().clear()

    @property
    def schema(self) -> Any:
        self._spill()
        return self._schema

    def storage_nbytes(self) -> int:
        self._spill()
        return super().storage_nbytes()

    def __getstate__(self) -> dict:
        self._spill()
        return super().__getstate__()


def _all_torch(tree: Mapping[str, Any]) -> bool:
    kinds = (trees.TENSOR, trees.RAGGED_TENSOR)
    return all(trees.leaf_kind(leaf) in kinds for _, leaf in trees.leaves(tree))
