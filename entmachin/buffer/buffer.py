"""``Buffer``: a ring replay buffer of transitions, stored column by column.

Machin 0.4.2's user contract (``append``, ``size``, ``clear``, ``sample_batch``) over columnar
storage: each leaf of the transitions is one pre-allocated column (ragged leaves: items back to
back plus per-row lengths), so an append copies a few arrays and a sample is one gather per
leaf, with no per-step Python objects.

Example:
    >>> buffer = Buffer(1000)
    >>> for _ in range(10):
    ...     buffer.append({"state": {"state": torch.zeros(1, 4)}, "action": {"action": torch.zeros(1, 1)},
    ...                    "next_state": {"state": torch.zeros(1, 4)}, "reward": 1.0, "terminal": False})
    >>> n, (state, reward) = buffer.sample_batch(8, sample_attrs=["state", "reward"])
    >>> n, state.state.shape, reward.shape
    (8, torch.Size([8, 4]), torch.Size([8, 1]))
"""

import logging
from collections.abc import Iterable, Mapping
from typing import Optional, Sequence, Tuple, Union

import numpy as np
import torch

from entmachin.buffer.checking import Checked, TransitionLike, check_required, check_transition
from entmachin.buffer.fast_path import FastPath
from entmachin.buffer.sampling import SampleMethod, check_batch_size, choose_rows, collate
from entmachin.buffer.schema import Schema
from entmachin.buffer.storage import RingStorage
from entmachin.buffer.transition import TransitionBase
from entmachin.ragged.device import check_device

__all__ = ["Buffer"]

logger = logging.getLogger(__name__)


class Buffer:
    """A ring buffer of transition rows (not thread-safe).

    The first append fixes the schema: attribute names and kinds, and for every leaf whether
    it is dense or ragged, its dtype and its per-row (or per-item) shape. Later appends must
    match it, with two allowances for entity data: a ragged leaf missing from a later
    transition (an entity type absent from that step) is stored as zero-length sequences, and
    a new key inside a ragged subtree (a dict holding only ragged values: an entity type or an
    action that first appears later) adds a column whose earlier rows read as zero-length
    sequences and whose dtype and width are fixed from then on. A dict is read as a
    ``Transition`` on the first append and by the schema's attribute kinds afterwards. Sub
    attributes given as numbers, ``[B]`` or ``[B, 1]`` values are one ``[n, 1]`` column.

    Sizes are in rows: a transition of B rows takes B slots, and once ``buffer_size`` rows are
    stored each append overwrites the oldest ones. Stored data are copies owned by the buffer.

    NaN and ±inf in a floating leaf (a reward, a value, dense or ragged features) are refused
    at the door: the append raises naming the attribute and row, and stores nothing.

    Buffers pickle (``pickle``, ``dill``, ``copy.deepcopy``) with their rows, schema and random
    state, so they can move between processes.

    Args:
        buffer_size: rows kept.
        buffer_device: where the stored data live, and the default device of samples.
        seed: seeds the buffer's own random generator (None: fresh entropy).
        allow_nonfinite: store NaN and ±inf instead of refusing them (for data that holds
            them on purpose).

    Raises:
        ValueError: ``buffer_size`` is not a positive int, or ``buffer_device`` is not a device.
        RuntimeError: ``buffer_device`` is a CUDA device this torch build or machine lacks.
        TypeError: ``allow_nonfinite`` is not a bool.
    """

    def __init__(
        self,
        buffer_size: int,
        buffer_device: Union[str, torch.device] = "cpu",
        *,
        seed: Optional[int] = None,
        allow_nonfinite: bool = False,
    ) -> None:
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, (int, np.integer)) or buffer_size < 1:
            raise ValueError(f"Buffer: buffer_size must be an int >= 1, got {buffer_size!r}")
        if not isinstance(allow_nonfinite, (bool, np.bool_)):
            raise TypeError(f"{type(self).__name__}: allow_nonfinite must be a bool, got {allow_nonfinite!r}")
        self.allow_nonfinite = bool(allow_nonfinite)
        self.buffer_size = int(buffer_size)
        self.buffer_device = check_device(buffer_device, f"{type(self).__name__}: buffer_device")
        self._rng = np.random.default_rng(seed)
        self._schema: Optional[Schema] = None
        self._storage: Optional[RingStorage] = None
        self._fast: Optional[FastPath] = None

    # --------------------------------------------------------------------------- writes

    def append(self, transition: TransitionLike, required_attrs: Sequence[str] = ()) -> None:
        """Stores one transition (a ``TransitionBase`` or a dict) of one or more rows.

        Args:
            transition: the transition.
            required_attrs: attribute names the transition must have (Machin's argument, e.g.
                ``("state", "action", "next_state", "reward", "terminal")``); the schema
                already fixes every attribute after the first append.

        Raises:
            ValueError: the transition lacks a required attribute, does not match the schema
                (the message names the attribute and key, and what was expected), holds more
                rows than ``buffer_size``, or holds NaN or ±inf (see ``allow_nonfinite``).
            TypeError: a value of the wrong kind.
        """
        if required_attrs:
            check_required(transition, required_attrs, "append")
        fast = self._fast
        if fast is not None and fast.append(transition):
            return
        self._write(self._extract(transition, "append"))

    def append_trusted(self, data: Mapping[str, object], major_attr: Sequence[str]) -> None:
        """Appends rows whose values their caller has already checked (the trusted path).

        For code that validated the rows itself, as a frame's ``store_episode`` /
        ``store_rollout`` do. ``data`` maps attribute names to values (``major_attr`` name the
        dicts of values, every other attribute is a sub attribute); they are placed by the
        schema exactly as :meth:`append` places them (the first append fixes the schema from
        them), and what does not fit the schema still raises with nothing written, but no
        ``TransitionBase`` is built (it would copy every value) and nothing is scanned for NaN
        or ±inf. The values are copied into the buffer's columns before this returns. Users
        appending their own data call :meth:`append`.

        Raises:
            ValueError, TypeError: the values do not fit the schema or the buffer's size.
        """
        schema = self._schema if self._schema is not None else Schema.of_data(data, major_attr)
        self._write(check_transition(data, schema, "append_trusted", self.buffer_size, True))

    def store_episode(self, episode: Sequence[TransitionLike], required_attrs: Sequence[str] = ()) -> None:
        """Appends transitions in order; if any fails its check, none is stored.

        Args:
            episode: the transitions.
            required_attrs: attribute names every transition must have (as in :meth:`append`).

        Raises:
            ValueError, TypeError: as :meth:`append`, naming the failing position.
        """
        if isinstance(episode, (Mapping, TransitionBase)) or not isinstance(episode, Iterable):
            raise TypeError(
                f"store_episode: expected a list of transitions, got {type(episode).__name__}"
            )
        checked, schema = [], self._schema
        for i, transition in enumerate(episode):
            checked.append(self._extract(transition, f"store_episode: episode[{i}]", schema, required_attrs))
            schema = checked[-1].schema
        for item in checked:
            self._write(item)

    def _extract(
        self, transition: TransitionLike, where: str, schema: Optional[Schema] = None, required_attrs: Sequence[str] = ()
    ) -> Checked:
        """Checks a transition against ``schema`` (default: the buffer's); writes nothing.

        The first transition fixes a schema, and new keys of ragged subtrees grow it; either
        becomes the buffer's only when :meth:`_write` stores the rows.
        """
        schema = self._schema if schema is None else schema
        return check_transition(transition, schema, where, self.buffer_size, self.allow_nonfinite, required_attrs)

    def _write(self, item: Checked) -> int:
        """Writes checked values (adopting the schema they were checked against); returns the first slot written."""
        schema, values = item.schema, item.values
        if schema is not self._schema:
            self._adopt(schema)
        if len(values) < len(schema.leaves):  # checked before the schema grew: new leaves are empty
            values = values + [None] * (len(schema.leaves) - len(values))
        return self._storage.write(item.n_rows, values, item.customs)

    def _adopt(self, schema: Schema) -> None:
        """Makes ``schema`` (the first, or a grown one) the buffer's, adding its new columns."""
        self._schema = schema
        if self._storage is None:
            self._attach(RingStorage(schema, self.buffer_size, self.buffer_device))
        else:
            self._storage.grow(schema)
            self._attach(self._storage)

    def _attach(self, storage: RingStorage) -> None:
        self._storage = storage
        fast = storage.host_arrays
        self._fast = FastPath.build(self._schema, storage, not self.allow_nonfinite) if fast else None

    def __getstate__(self) -> dict:
        # The compiled fast path holds memoryviews of this buffer's columns (not picklable): rebuilt on unpickling.
        state = dict(self.__dict__)
        state["_fast"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._storage is not None:
            self._attach(self._storage)

    def size(self) -> int:
        """Rows stored."""
        return 0 if self._storage is None else self._storage.size

    def __len__(self) -> int:
        return self.size()

    def clear(self) -> None:
        """Removes every row; the schema stays fixed."""
        if self._storage is not None:
            self._storage.clear()

    @property
    def schema(self) -> Optional[Schema]:
        """The schema fixed by the first append (None before it)."""
        return self._schema

    def storage_nbytes(self) -> int:
        """Bytes held by the columns (custom attribute objects not counted)."""
        return 0 if self._storage is None else sum(self._storage.nbytes().values())

    # --------------------------------------------------------------------------- reads

    def sample_batch(
        self,
        batch_size: int,
        concatenate: bool = True,
        device: Union[str, torch.device, None] = None,
        sample_method: SampleMethod = "random_unique",
        sample_attrs: Optional[Sequence[str]] = None,
        additional_concat_attrs: Optional[Sequence[str]] = None,
    ) -> Tuple[int, Optional[tuple]]:
        """Samples rows and returns them attribute by attribute.

        Args:
            batch_size: rows wanted (``"random_unique"`` returns at most ``size()``).
            concatenate: concatenate every leaf over the sampled rows (dense values along
                dim 0, ragged values into one ``RaggedTensor`` whose sequence i belongs to
                sample i); if False, return per-sample lists.
            device: where samples go (default: ``buffer_device``).
            sample_method: ``"random_unique"``, ``"random"`` (with replacement), ``"all"``
                (every row, oldest first, ignoring ``batch_size``) or a callable
                ``f(buffer, batch_size)`` returning row indices by age (0 = oldest).
            sample_attrs: attributes to return, in order (default: all); ``"*"`` collects the
                custom attributes not named elsewhere into a dict.
            additional_concat_attrs: custom attributes to turn into ``[n, -1]`` tensors.

        Returns:
            ``(n, values)``: major attributes as ``arrdict``s, sub attributes as tensors
            ``[n, ...]`` (scalars as ``[n, 1]``), custom attributes as lists; ``(0, None)``
            when the buffer is empty or nothing is sampled.

        Raises:
            ValueError: a negative ``batch_size``, an unknown sample method or attribute.
            TypeError: a ``batch_size`` that is not an int.
        """
        batch_size = check_batch_size(batch_size, "sample_batch")
        if self._storage is None or self._storage.size == 0:
            self._check_method(sample_method)
            return 0, None
        slots = choose_rows(self, self._storage, batch_size, sample_method, self._rng)
        if slots.shape[0] == 0:
            return 0, None
        target = self.buffer_device if device is None else torch.device(device)
        values = collate(self._storage, slots, concatenate, target, sample_attrs, additional_concat_attrs)
        return int(slots.shape[0]), values

    @staticmethod
    def _check_method(method: SampleMethod) -> None:
        if isinstance(method, str) and method not in ("random_unique", "random", "all"):
            raise ValueError(
                f"sample_batch: sample_method must be one of ['random_unique', 'random', 'all'] "
                f"or a callable, got {method!r}"
            )

    # ------------------------------------------------------------------ saving / loading

    def save(self, path: str) -> None:
        """Saves every row, the ring position, the settings and the random state to one file, ``path``.

        Dense and ragged data are stored as raw arrays (no pickle). Custom attribute values
        can be any Python object, so they are stored with dill; :meth:`load` then asks for
        ``allow_pickle=True``. A buffer without custom attributes writes no pickled part.
        """
        from entmachin.buffer.io import save_buffer

        save_buffer(self, path)

    @classmethod
    def load(cls, path: str, buffer_device: Union[str, torch.device, None] = None, *, allow_pickle: bool = False) -> "Buffer":
        """Loads a buffer written by :meth:`save`, running no code from the file unless allowed.

        A file whose buffer holds custom attributes stores their values with dill, and
        unpickling runs whatever code the file's author put in it. Such a file is refused
        unless ``allow_pickle=True``: pass it only for files you trust (ones you wrote).
        Files without custom attributes load without it.

        Args:
            path: the file.
            buffer_device: override the saved ``buffer_device``.
            allow_pickle: unpickle the custom attribute values.

        Raises:
            ValueError: naming ``path``: the file has a pickled part and ``allow_pickle`` is
                False; or it is truncated, corrupt, edited (its header disagrees with its
                arrays: the message names the attribute, what was expected and what was
                found), not a buffer file, or of another buffer class.
            OSError: the file cannot be opened (e.g. ``FileNotFoundError``).
        """
        from entmachin.buffer.io import load_buffer

        return load_buffer(cls, path, buffer_device, allow_pickle)

    @classmethod
    def _from_header(cls, header: dict, device: Union[str, torch.device]) -> "Buffer":
        """An empty buffer with the settings a saved file's header records."""
        return cls(header["buffer_size"], device, allow_nonfinite=header.get("allow_nonfinite", False))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size()}, buffer_size={self.buffer_size}, buffer_device={self.buffer_device})"
