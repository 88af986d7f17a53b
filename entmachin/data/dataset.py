"""A dataset on disk: ``dataset.json`` and Parquet parts, each published whole by a rename.

``DatasetWriter`` writes the description first (format, spaces, seats, how it was recorded),
then parts of whole episodes: each is written under a temporary name that ``*.parquet`` does not
match and renamed into place, and only then listed in the description (rewritten atomically) with
its size, row count and SHA-256. A writer killed at any moment leaves every listed part readable
and never a half part. Nothing is pickled.

``Dataset`` reads the description and streams the listed parts one at a time: each part's bytes
are read once, checked against its size and SHA-256, and decoded from memory with Parquet's own
page checksums verified (the writer writes them), then checked against the description's spaces
and row count. A part on disk that the description does not list (a writer stopped between the
rename and the description, or a file put there) is never read. A dataset written before the
description listed its parts is read by the parts' names, with a warning that it cannot be checked.

One writer per directory: a writer holds an exclusive lock on ``.writer.lock`` until it closes (the
file is removed then), and a second writer (another process recording into the same directory) is
refused, naming the lock; a writer that finds a dataset there is refused too.
"""
from __future__ import annotations

import glob
import json
import logging
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from entmachin.files import atomic_write, sha256_of
from entmachin.data.rows import Rows, concat_rows, from_record_batch, schema, to_record_batch
from entmachin.env.action import CONTINUOUS_SPACES, ActionSpace
from entmachin.env.environment import ObsSpace
from entmachin.env.spaces import space_differences, spaces_from_record, spaces_record

__all__ = ["FORMAT", "DESCRIPTION", "LOCK", "DatasetError", "DatasetWriter", "Dataset", "plain_ids"]

FORMAT = "entmachin-dataset/1"
DESCRIPTION = "dataset.json"
LOCK = ".writer.lock"

logger = logging.getLogger(__name__)


class DatasetError(ValueError):
    """A dataset that cannot be read or written as asked; the message names the file and column."""


def _lock(directory: str) -> Any:
    """An open file holding an exclusive lock on ``directory``'s ``LOCK`` (released when closed or
    when the process ends, however it ends)."""
    path = os.path.join(directory, LOCK)
    f = open(path, "a+b")
    try:
        if os.name == "nt":
            import msvcrt

            msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise DatasetError(f"{directory}: another writer holds {path}; two processes recording into one directory "
                           "would interleave their parts: write to a directory of its own") from None
    return f


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
        obs_space: the environment's observation space (rows must fit it).
        action_space: the environment's action space, action name -> space (rows must fit it).
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
        os.makedirs(directory, exist_ok=True)
        self._lock = _lock(directory)  # before the check: two writers cannot both find the directory empty
        if os.path.exists(os.path.join(directory, DESCRIPTION)) or glob.glob(os.path.join(directory, "*.parquet")):
            self._lock.close()
            raise DatasetError(f"{directory}: already holds a dataset; write to a new directory")
        self.directory = directory
        self.obs_space, self.action_space = obs_space, dict(action_space)
        self.probs = probs and any(not isinstance(space, CONTINUOUS_SPACES) for space in self.action_space.values())
        self.rows_per_part = rows_per_part
        self._pending: List[Rows] = []
        self._n_pending = 0
        self._schema: Any = None
        for t, kind in (id_kinds or {}).items():
            if t not in obs_space.entities or kind not in ("int", "str"):
                self._lock.close()
                raise DatasetError(f"{directory}: id_kinds[{t!r}] = {kind!r}; expected an entity type of "
                                   f"{list(obs_space.entities)} and 'int' or 'str'")
        self._id_kinds: Dict[str, str] = dict(id_kinds or {})
        self._declared = id_kinds is not None
        self.parts = 0
        self.rows = 0
        self._description = {"format": FORMAT, "spaces": spaces_record(obs_space, action_space),
                             "seats": list(seats) if seats is not None else None, "probs": self.probs,
                             "recorded": dict(recorded or {}), "parts": []}
        self._publish()

    def _publish(self) -> None:
        atomic_write(os.path.join(self.directory, DESCRIPTION), json.dumps(self._description, indent=1).encode())

    def write(self, rows: Rows) -> None:
        """Adds ``rows``, whole episodes' rows; a part is written when ``rows_per_part`` or more are pending."""
        if len(rows):
            self._pending.append(rows)
            self._n_pending += len(rows)
        if self._n_pending >= self.rows_per_part:
            self.flush()

    def flush(self) -> None:
        """Writes the pending rows as one part (nothing when none are pending)."""
        if not self._pending:
            return
        import pyarrow as pa
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
        sink = pa.BufferOutputStream()
        pq.write_table(_table(to_record_batch(rows, self._schema)), sink, write_page_checksum=True)
        data = sink.getvalue().to_pybytes()
        atomic_write(os.path.join(self.directory, name), data)
        self._description["parts"].append({"file": name, "rows": len(rows), "bytes": len(data),
                                           "sha256": sha256_of(data)})
        self._publish()  # the part is readable from here on
        self.parts += 1
        self.rows += len(rows)
        self._pending, self._n_pending = [], 0

    def close(self) -> None:
        """Writes the pending rows and releases the directory (the writer cannot write after this)."""
        try:
            self.flush()
        finally:
            if not self._lock.closed:  # removed while held: a writer that opened it meanwhile finds the dataset
                os.remove(self._lock.name)
                self._lock.close()

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _listed_parts(description: Dict[str, Any], path: str) -> Optional[Dict[str, Dict[str, Any]]]:
    """Part name -> its entry (file, rows, bytes, sha256), in order; None for a dataset written
    before descriptions listed their parts."""
    if "parts" not in description:
        return None
    parts = description["parts"]
    good = isinstance(parts, list) and all(
        isinstance(e, dict) and isinstance(e.get("file"), str) and os.path.basename(e["file"]) == e["file"]
        and e["file"].endswith(".parquet") and isinstance(e.get("sha256"), str)
        and all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) and e[k] >= 0 for k in ("rows", "bytes"))
        for e in parts)
    if not good:
        raise DatasetError(f"{path}: 'parts' is damaged: expected a list of entries with file, rows, bytes and "
                           f"sha256, found {parts!r:.200}")
    return {e["file"]: e for e in parts}


def _table(batch: Any) -> Any:
    import pyarrow as pa

    return pa.Table.from_batches([batch])


class Dataset:
    """A dataset directory: its description, and its parts read one at a time.

    Args:
        directory: the dataset's directory (``entmachin record`` writes one; :class:`DatasetWriter` does).

    Attributes:
        obs_space: the observation space the data was recorded in.
        action_space: the action space the data was recorded in.
        seats: the seats (None: one player).
        probs: whether rows carry probabilities (the discrete actions' ``probs/<a>`` columns).
        recorded: how it was recorded.
        paths: the parts, in order (those the description lists).
        checked: whether the description records each part's size, rows and SHA-256 (False for a
            dataset written before it did: its parts are read without those checks).

    Raises:
        DatasetError: no description, an unknown format, a description that is not one, or a part
            it lists that is missing.
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
        self._parts = _listed_parts(description, path)
        self.checked = self._parts is not None
        if self._parts is None:
            logger.warning("%s: written before datasets recorded their parts' checksums; its parts are read "
                           "without checking them for damage", directory)
            self.paths = sorted(glob.glob(os.path.join(directory, "part-*.parquet")))
        else:
            self.paths = [os.path.join(directory, name) for name in self._parts]
            if missing := [p for p in self.paths if not os.path.isfile(p)]:
                raise DatasetError(f"{missing[0]}: missing; {path} lists {len(self.paths)} parts "
                                   f"({len(missing)} missing)")

    def __repr__(self) -> str:
        return f"Dataset({self.directory!r}, {len(self.paths)} parts)"

    def id_kinds(self) -> Dict[str, str]:
        """Entity type -> ``"int"`` or ``"str"``: the types whose ids the dataset records."""
        if not self.paths:
            return {}
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            found = pq.read_schema(self.paths[0])  # the footer alone: read_part checks the part's bytes
        except (pa.ArrowException, OSError) as e:
            raise DatasetError(f"{self.paths[0]}: damaged part ({type(e).__name__}: {e})") from None
        return {f.name[4:]: "int" if pa.types.is_integer(f.type.value_type) else "str"
                for f in found if f.name.startswith("ids/")}

    def check_spaces(self, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], what: str) -> None:
        """Refuses spaces other than the dataset's, naming each difference.

        Args:
            obs_space: the observation space the data is to be used in.
            action_space: the action space the data is to be used in.
            what: what the spaces belong to, for the message (e.g. the run's environment name).

        Raises:
            DatasetError: the spaces differ.
        """
        differences = space_differences(spaces_record(self.obs_space, self.action_space),
                                        spaces_record(obs_space, action_space))
        if differences:
            raise DatasetError(f"{self.directory}: recorded in other spaces than {what}'s: "
                               + "; ".join(d.replace("checkpoint", "dataset") for d in differences))

    def read_part(self, path: str) -> Rows:
        """The rows of the part at ``path`` (one of :attr:`paths`), checked against the description: its size,
        SHA-256 and row count where the description records them, its columns, and its rows against the spaces.

        Raises:
            DatasetError: the part cannot be read, is damaged (not Parquet, truncated, another SHA-256), holds
                another number of rows, its columns are not the dataset's (named), or its rows do not fit the
                spaces.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        data = self._read_bytes(path)
        try:
            table = pq.read_table(pa.BufferReader(data), page_checksum_verification=True)
        except (pa.ArrowException, OSError) as e:
            raise DatasetError(f"{path}: damaged part ({type(e).__name__}: {e})") from None
        entry = self._entry(path)
        if entry is not None and table.num_rows != entry["rows"]:
            raise DatasetError(f"{path}: holds {table.num_rows} rows; {DESCRIPTION} records {entry['rows']}")
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

    def _entry(self, path: str) -> Optional[Dict[str, Any]]:
        """What the description records of the part at ``path`` (None: a dataset from before it did)."""
        return (self._parts or {}).get(os.path.basename(path))

    def _read_bytes(self, path: str) -> bytes:
        """A part's bytes, checked against the size and SHA-256 the description records for it."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise DatasetError(f"{path}: cannot be read ({e})") from None
        entry = self._entry(path)
        if entry is not None:
            if len(data) != entry["bytes"]:
                raise DatasetError(f"{path}: truncated or damaged: {DESCRIPTION} records {entry['bytes']} bytes, "
                                   f"found {len(data)}")
            if sha256_of(data) != entry["sha256"]:
                raise DatasetError(f"{path}: damaged: its SHA-256 differs from the one {DESCRIPTION} records")
        return data

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

