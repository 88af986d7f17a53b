"""A dataset on disk: ``dataset.json`` and Parquet parts, each published whole by a rename.

``DatasetWriter`` writes the description first (format, spaces, seats, how it was recorded),
then parts of whole episodes: each is written under a temporary name that ``*.parquet`` does not
match (``.part-00003.parquet.tmp``) and renamed into place, so a writer killed at any moment
leaves every earlier part readable and never a half part. Nothing is pickled. ``Dataset`` reads
the description and streams the parts one at a time, checking each against the description.
"""
from __future__ import annotations

import glob
import json
import os
import tempfile
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from entmachin.data.rows import Rows, concat_rows, from_record_batch, schema, to_record_batch
from entmachin.env.action import CONTINUOUS_SPACES, ActionSpace
from entmachin.env.environment import ObsSpace
from entmachin.env.spaces import space_differences, spaces_from_record, spaces_record

__all__ = ["FORMAT", "DESCRIPTION", "DatasetError", "DatasetWriter", "Dataset", "plain_ids"]

FORMAT = "entmachin-dataset/1"
DESCRIPTION = "dataset.json"


class DatasetError(ValueError):
    """A dataset that cannot be read or written as asked; the message names the file and column."""


def _write_atomically(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def plain_ids(per_row: Sequence[Mapping[str, Sequence[Any]]]) -> bool:
    """Whether every id of some observations' ``ids`` (entity type -> ids) is an int or a string:
    the ids a dataset records (a recorder leaves other kinds out rather than refuse them)."""
    return all(isinstance(i, (int, np.integer, str)) and not isinstance(i, bool)
               for ids in per_row for values in ids.values() for i in values)


def _id_kind(ids: Any, where: str) -> Optional[str]:
    kinds = {type(i) for i in ids}
    if not kinds:
        return None
    if kinds <= {int, np.int64, np.int32}:
        return "int"
    if kinds <= {str}:
        return "str"
    raise DatasetError(f"{where}: entity ids must all be ints or all strings, got {sorted(k.__name__ for k in kinds)}")


class DatasetWriter:
    """Writes rows (whole episodes) to a new dataset directory.

    Args:
        directory: created if missing; it must not hold a dataset already.
        obs_space / action_space: the environment's spaces (rows must fit them).
        seats: the seats of a game of several players (None: one player).
        recorded: how the data came to be (environment, policy, seeds, ...): JSON-ready values,
            kept in the description.
        probs: whether rows carry the acting policy's probabilities (of the discrete actions: a
            continuous action has none, so a dataset of continuous actions only never has them).
        id_kinds: entity type -> ``"int"`` or ``"str"``: the types whose ids are recorded and
            their kind. By default the first part decides: the types whose rows carry ids, of
            the kind their ids are (``"int"`` where it has none to look at).
        rows_per_part: a part is written once this many rows are pending (whole episodes:
            a part may hold more).

    Raises:
        DatasetError: the directory already holds a dataset.
    """

    def __init__(self, directory: str, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], *,
                 seats: Optional[Sequence[str]] = None, recorded: Optional[Mapping[str, Any]] = None,
                 probs: bool = False, rows_per_part: int = 8192, id_kinds: Optional[Mapping[str, str]] = None) -> None:
        if os.path.exists(os.path.join(directory, DESCRIPTION)) or glob.glob(os.path.join(directory, "*.parquet")):
            raise DatasetError(f"{directory}: already holds a dataset; write to a new directory")
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.obs_space, self.action_space = obs_space, dict(action_space)
        self.probs = probs and any(not isinstance(space, CONTINUOUS_SPACES) for space in self.action_space.values())
        self.rows_per_part = rows_per_part
        self._pending: List[Rows] = []
        self._n_pending = 0
        self._schema: Any = None
        for t, kind in (id_kinds or {}).items():
            if t not in obs_space.entities or kind not in ("int", "str"):
                raise DatasetError(f"{directory}: id_kinds[{t!r}] = {kind!r}; expected an entity type of "
                                   f"{list(obs_space.entities)} and 'int' or 'str'")
        self._id_kinds: Dict[str, str] = dict(id_kinds or {})
        self._declared = id_kinds is not None
        self.parts = 0
        self.rows = 0
        description = {"format": FORMAT, "spaces": spaces_record(obs_space, action_space),
                       "seats": list(seats) if seats is not None else None, "probs": self.probs,
                       "recorded": dict(recorded or {})}
        _write_atomically(os.path.join(directory, DESCRIPTION), json.dumps(description, indent=1).encode())

    def write(self, rows: Rows) -> None:
        """Adds whole episodes' rows; a part is written when enough are pending."""
        if len(rows):
            self._pending.append(rows)
            self._n_pending += len(rows)
        if self._n_pending >= self.rows_per_part:
            self.flush()

    def flush(self) -> None:
        """Writes the pending rows as one part (nothing when none are pending)."""
        if not self._pending:
            return
        import pyarrow.parquet as pq

        rows = concat_rows(self._pending)
        name = f"part-{self.parts:05d}.parquet"
        for t, per_row in rows.ids.items():
            given = [ids for ids in per_row if ids is not None]
            kind = _id_kind([i for ids in given for i in ids], f"{self.directory}/{name}: ids of '{t}'")
            known = self._id_kinds.get(t)
            if known is None and given and self._schema is None and not self._declared:
                known = self._id_kinds[t] = kind or "int"
            if kind is not None and known is None:
                raise DatasetError(f"{self.directory}/{name}: rows carry ids of '{t}', which the dataset does not "
                                   "record (the first part had none); declare id_kinds when writing")
            if kind is not None and kind != known:
                raise DatasetError(f"{self.directory}/{name}: ids of '{t}' are {kind}s; the dataset records {known}s "
                                   "(declare id_kinds when writing)")
        if self._schema is None:
            self._schema = schema(self.obs_space, self.action_space, self._id_kinds, self.probs)
        rows.ids = {t: v for t, v in rows.ids.items() if t in self._id_kinds}
        batch = to_record_batch(rows, self._schema)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.directory)
        os.close(fd)
        try:
            pq.write_table(_table(batch), tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(self.directory, name))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self.parts += 1
        self.rows += len(rows)
        self._pending, self._n_pending = [], 0

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _table(batch: Any) -> Any:
    import pyarrow as pa

    return pa.Table.from_batches([batch])


class Dataset:
    """A dataset directory: its description, and its parts read one at a time.

    Attributes:
        obs_space / action_space: the spaces the data was recorded in.
        seats: the seats (None: one player); probs: whether rows carry probabilities (the discrete
        actions' ``probs/<a>`` columns);
        recorded: how it was recorded; paths: the parts, in order.

    Raises:
        DatasetError: no description, an unknown format, or a description that is not one.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        path = os.path.join(directory, DESCRIPTION)
        try:
            with open(path, "rb") as f:
                description = json.loads(f.read().decode())
        except FileNotFoundError:
            raise DatasetError(f"{path}: no dataset description; is {directory!r} a dataset "
                               "(written by entmachin record)?") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise DatasetError(f"{path}: not JSON ({e})") from None
        if not isinstance(description, dict) or description.get("format") != FORMAT:
            found = description.get("format") if isinstance(description, dict) else None
            raise DatasetError(f"{path}: format {found!r} is not one this version reads ({FORMAT!r})")
        try:
            self.obs_space, self.action_space = spaces_from_record(description["spaces"], f"{path}: spaces")
        except KeyError:
            raise DatasetError(f"{path}: no 'spaces'") from None
        self.seats: Optional[List[str]] = description.get("seats")
        self.probs = bool(description.get("probs"))
        self.recorded: Dict[str, Any] = description.get("recorded") or {}
        self.description = description
        self.paths = sorted(glob.glob(os.path.join(directory, "part-*.parquet")))

    def __repr__(self) -> str:
        return f"Dataset({self.directory!r}, {len(self.paths)} parts)"

    def id_kinds(self) -> Dict[str, str]:
        """Entity type -> ``"int"`` or ``"str"``: the types whose ids the dataset records."""
        if not self.paths:
            return {}
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            found = pq.read_schema(self.paths[0])
        except (pa.ArrowException, OSError) as e:
            raise DatasetError(f"{self.paths[0]}: damaged part ({type(e).__name__}: {e})") from None
        return {f.name[4:]: "int" if pa.types.is_integer(f.type.value_type) else "str"
                for f in found if f.name.startswith("ids/")}

    def check_spaces(self, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], what: str) -> None:
        """Refuses spaces other than the dataset's, naming each difference.

        Raises:
            DatasetError: the spaces differ.
        """
        differences = space_differences(spaces_record(self.obs_space, self.action_space),
                                        spaces_record(obs_space, action_space))
        if differences:
            raise DatasetError(f"{self.directory}: recorded in other spaces than {what}'s: "
                               + "; ".join(d.replace("checkpoint", "dataset") for d in differences))

    def read_part(self, path: str) -> Rows:
        """One part's rows, checked against the description.

        Raises:
            DatasetError: the part is damaged (not Parquet, truncated) or its columns are not
                the dataset's (named).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as e:
            raise DatasetError(f"{path}: damaged part ({type(e).__name__}: {e})") from None
        id_kinds = {}
        for name in table.schema.names:
            if name.startswith("ids/"):
                value = table.schema.field(name).type.value_type
                id_kinds[name[4:]] = "int" if pa.types.is_integer(value) else "str"
        expected = schema(self.obs_space, self.action_space, id_kinds, self.probs)
        for f in expected:
            if f.name not in table.schema.names:
                raise DatasetError(f"{path}: no column '{f.name}'")
            found = table.schema.field(f.name).type
            if not found.equals(f.type):
                raise DatasetError(f"{path}: column '{f.name}' is {found}; the dataset's spaces make it {f.type}")
        extra = sorted(set(table.schema.names) - set(expected.names))
        if extra:
            raise DatasetError(f"{path}: unexpected column '{extra[0]}'")
        try:
            return from_record_batch(table.select(expected.names), self.obs_space, self.action_space)
        except (ValueError, TypeError, pa.ArrowException) as e:
            raise DatasetError(f"{path}: rows that do not fit the dataset's spaces ({e})") from None

    def __iter__(self) -> Iterator[Rows]:
        """The parts' rows, one part at a time (memory bounded by a part)."""
        for path in self.paths:
            yield self.read_part(path)

    def read(self) -> Rows:
        """Every row of the dataset at once."""
        parts = list(self)
        if not parts:
            raise DatasetError(f"{self.directory}: no parts")
        return concat_rows(parts)

