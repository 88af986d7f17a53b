"""Rows of an entity dataset in memory, and their Arrow form.

One row per (step, seat) of an episode: the observation the seat saw (canonical state: ragged
entities, visibility and action masks), the actions it took, the acting policy's probabilities
when known, the reward that followed, whether the episode then ended, and each seat's result at
the end. Every episode ends with a *final* row: the observation after the last step, without
actions (so that the next observation of every acting row is in the dataset).

The Arrow columns (one Parquet column each; pandas, DuckDB or polars read them as they are):

* ``episode`` int64, ``step`` int64, ``seat`` string (null with one player), ``final`` bool;
* ``features/<type>`` list of rows of float32 (a fixed-size list of the type's features),
  ``visible/<type>`` list of bool, ``ids/<type>`` list of int64 or of string (null where the
  environment gave no ids); ``global_features`` fixed-size list of float32 (when the space has
  global features);
* per action: ``actors/<a>`` list of int64 (each actor's index in the step's entity list),
  ``mask/<a>`` list of fixed-size lists of bool (categorical and global actions), ``actees/<a>``
  list of int64 and ``actee_mask/<a>`` list of bool (select-entity: actor x actee, row-major),
  ``action/<a>`` list of int64 (a choice, or a position in the actee list), ``probs/<a>`` list
  of lists of float32 (each actor's probabilities; null where unknown);
* per continuous action (``ContinuousActionSpace``, ``GlobalContinuousActionSpace``, ``n_values``
  wide): ``actors/<a>`` list of int64, ``low/<a>`` and ``high/<a>`` lists of fixed-size lists
  of float32 (each actor's bounds, ``n_values`` wide), ``action/<a>`` list of fixed-size lists of
  float32 (each actor's values); no ``probs/<a>``: probabilities exist only for discrete actions
  (a continuous action has densities, not a table of choices);
* ``reward`` float32, ``terminal`` bool, ``truncated`` bool, ``result`` string (``"win"``,
  ``"draw"``, ``"loss"`` on a seat's final row of a game of several players, else null).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from entmachin.env.action import CONTINUOUS_SPACES, ActionSpace, SelectEntityActionSpace
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.ragged.array import RaggedArray
from entmachin.ragged.arrays import concat, ragged_from_arrays, take, take_nested

__all__ = ["Rows", "schema", "to_record_batch", "from_record_batch", "ID_KINDS", "mask_keys", "action_width",
           "action_dtype"]

ID_KINDS = ("int", "str")


def mask_keys(space: ActionSpace) -> Tuple[str, ...]:
    """The canonical mask entries (and ``<key>/<a>`` columns) a dataset keeps for an action of ``space``."""
    if isinstance(space, SelectEntityActionSpace):
        return ("actors", "actees", "actee_mask")
    if isinstance(space, CONTINUOUS_SPACES):
        return ("actors", "low", "high")
    return ("actors", "mask")


def action_width(space: ActionSpace) -> int:
    """Values per actor of an action: ``len(space)`` for a continuous one, else 1 (the choice)."""
    return len(space) if isinstance(space, CONTINUOUS_SPACES) else 1


def action_dtype(space: ActionSpace) -> Any:
    """An action's values: float32 for a continuous one, int64 (the choice) for the others."""
    return np.float32 if isinstance(space, CONTINUOUS_SPACES) else np.int64


@dataclass
class Rows:
    """Dataset rows, columnar (``n`` rows).

    Attributes:
        episode: int64 ``[n]``: the episode each row belongs to.
        step: int64 ``[n]``: the row's step within its episode.
        seat: the seat of each row (``None``: a game of one player).
        final: bool ``[n]``: the row holds an episode's last observation and no actions.
        entities: entity type -> float32 ragged ``[n_entities, n_features]`` (``__global__``: the
            global features, one item per row, when the space has any).
        visible: entity type -> bool ragged ``[n_entities, 1]`` (every type).
        masks: action name -> ``{"actors", "mask"}``, ``{"actors", "actees", "actee_mask"}`` or
            (continuous) ``{"actors", "low", "high"}``, ragged as in the canonical state.
        action: action name -> int64 ragged ``[n_actors, 1]`` (a choice), or float32 ragged
            ``[n_actors, n_values]`` for a continuous action (final rows: no actors' actions).
        probs: discrete action name -> (float32 ragged ``[n_choices, 1]``, one sequence per actor
            of ``action``; bool ``[n]``: the rows that have them), or absent (always absent for
            a continuous action).
        ids: entity type -> one list of ids per row, or ``None`` where not given.
        reward: float32 ``[n]``.
        terminal: bool ``[n]``: the episode ended at this row.
        truncated: bool ``[n]``: the episode was cut short at this row.
        result: ``"win"`` / ``"draw"`` / ``"loss"`` or ``None`` per row.
    """

    episode: np.ndarray
    step: np.ndarray
    final: np.ndarray
    entities: Dict[str, RaggedArray]
    visible: Dict[str, RaggedArray]
    masks: Dict[str, Dict[str, RaggedArray]]
    action: Dict[str, RaggedArray]
    reward: np.ndarray
    terminal: np.ndarray
    truncated: np.ndarray
    seat: Optional[List[Optional[str]]] = None  # None: every row's is None
    result: Optional[List[Optional[str]]] = None  # None: every row's is None
    ids: Dict[str, List[Optional[list]]] = field(default_factory=dict)
    probs: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.episode)
        self.seat = list(self.seat) if self.seat is not None else [None] * n
        self.result = list(self.result) if self.result is not None else [None] * n

    def __len__(self) -> int:
        return len(self.episode)

    def state(self) -> Dict[str, Any]:
        """The canonical state of the rows (what ``RogueNet`` and the frames take)."""
        return {"entities": dict(self.entities), "visible": dict(self.visible),
                "action_masks": {name: dict(m) for name, m in self.masks.items()}}

    def take(self, index: np.ndarray) -> "Rows":
        """The rows at ``index`` (int64), in that order."""
        index = np.asarray(index, dtype=np.int64)
        probs = {name: (take_nested(values, self.action[name], index), has[index])
                 for name, (values, has) in self.probs.items()}
        pick = (lambda xs: None if xs is None else [xs[i] for i in index])
        return Rows(self.episode[index], self.step[index], self.final[index],
                    {t: take(r, index) for t, r in self.entities.items()},
                    {t: take(r, index) for t, r in self.visible.items()},
                    {a: {k: take(v, index) for k, v in m.items()} for a, m in self.masks.items()},
                    {a: take(r, index) for a, r in self.action.items()},
                    self.reward[index], self.terminal[index], self.truncated[index],
                    pick(self.seat), pick(self.result), {t: pick(v) for t, v in self.ids.items()}, probs)


def concat_rows(parts: Sequence[Rows]) -> Rows:
    """The rows of ``parts``, one after the other (every part of the same dataset)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    cat = (lambda xs: [v for x in xs for v in x])
    probs = {}
    for name in first.probs:
        probs[name] = (concat([p.probs[name][0] for p in parts]), np.concatenate([p.probs[name][1] for p in parts]))
    return Rows(np.concatenate([p.episode for p in parts]), np.concatenate([p.step for p in parts]),
                np.concatenate([p.final for p in parts]),
                {t: concat([p.entities[t] for p in parts]) for t in first.entities},
                {t: concat([p.visible[t] for p in parts]) for t in first.visible},
                {a: {k: concat([p.masks[a][k] for p in parts]) for k in first.masks[a]} for a in first.masks},
                {a: concat([p.action[a] for p in parts]) for a in first.action},
                np.concatenate([p.reward for p in parts]), np.concatenate([p.terminal for p in parts]),
                np.concatenate([p.truncated for p in parts]),
                cat([p.seat for p in parts]), cat([p.result for p in parts]),
                {t: cat([p.ids.get(t, [None] * len(p)) for p in parts]) for t in {t for p in parts for t in p.ids}},
                probs)


# ---------------------------------------------------------------------------- Arrow

def _pa() -> Any:
    import pyarrow as pa  # only where datasets are written or read

    return pa


def _rows_of(value_type: Any, width: int) -> Any:
    """The Arrow type of one item of ``width`` values: a fixed-size list (a plain, empty list where
    ``width`` is 0, as entity types without features have always been written)."""
    pa = _pa()
    return pa.list_(value_type, width) if width else pa.list_(value_type)


def schema(obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], id_kinds: Mapping[str, str],
           probs: bool) -> Any:
    """The Arrow schema of a dataset of these spaces (``id_kinds``: entity type -> ``"int"`` or
    ``"str"`` for the types whose ids are recorded)."""
    pa = _pa()
    fields = [pa.field("episode", pa.int64(), False), pa.field("step", pa.int64(), False),
              pa.field("seat", pa.string()), pa.field("final", pa.bool_(), False)]
    for t, entity in obs_space.entities.items():
        row = _rows_of(pa.float32(), len(entity.features))
        fields += [pa.field(f"features/{t}", pa.list_(row), False), pa.field(f"visible/{t}", pa.list_(pa.bool_()),
                                                                                 False)]
        if t in id_kinds:
            fields.append(pa.field(f"ids/{t}", pa.list_(pa.int64() if id_kinds[t] == "int" else pa.string())))
    if obs_space.global_features:
        fields.append(pa.field("global_features", pa.list_(pa.float32(), len(obs_space.global_features)), False))
    for a, space in action_space.items():
        fields.append(pa.field(f"actors/{a}", pa.list_(pa.int64()), False))
        if isinstance(space, CONTINUOUS_SPACES):
            values = _rows_of(pa.float32(), len(space))
            fields += [pa.field(f"low/{a}", pa.list_(values), False), pa.field(f"high/{a}", pa.list_(values), False),
                       pa.field(f"action/{a}", pa.list_(values), False)]
            continue  # no probabilities: a continuous action has no table of choices
        if isinstance(space, SelectEntityActionSpace):
            fields += [pa.field(f"actees/{a}", pa.list_(pa.int64()), False),
                       pa.field(f"actee_mask/{a}", pa.list_(pa.bool_()), False)]
        else:
            fields.append(pa.field(f"mask/{a}", pa.list_(pa.list_(pa.bool_(), len(space.index_to_label))), False))
        fields.append(pa.field(f"action/{a}", pa.list_(pa.int64()), False))
        if probs:
            fields.append(pa.field(f"probs/{a}", pa.list_(pa.list_(pa.float32()))))
    fields += [pa.field("reward", pa.float32(), False), pa.field("terminal", pa.bool_(), False),
               pa.field("truncated", pa.bool_(), False), pa.field("result", pa.string())]
    return pa.schema(fields)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=out[1:])
    return out


def _list(values: Any, lengths: np.ndarray, typ: Any, valid: Optional[np.ndarray] = None) -> Any:
    pa = _pa()
    mask = None if valid is None else pa.array(~valid)
    return pa.ListArray.from_arrays(pa.array(_offsets(lengths)), values, type=typ, mask=mask)


def _ragged_column(ragged: RaggedArray, typ: Any) -> Any:
    """A ragged array as a list column: ``[n, 1]`` items as plain values, wider ones as rows."""
    pa = _pa()
    flat = ragged.as_array()
    value_type = typ.value_type
    if pa.types.is_fixed_size_list(value_type):
        values = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1), value_type.value_type),
                                                   value_type.list_size)
    elif pa.types.is_list(value_type):  # rows of zero features
        values = pa.ListArray.from_arrays(pa.array(np.zeros(flat.shape[0] + 1, np.int32)),
                                          pa.array([], value_type.value_type))
    else:
        values = pa.array(flat.reshape(-1), value_type)
    return _list(values, ragged.size1(), typ)


def to_record_batch(rows: Rows, arrow_schema: Any) -> Any:
    """The rows as one Arrow record batch of ``arrow_schema`` (:func:`schema`)."""
    pa = _pa()
    columns: Dict[str, Any] = {
        "episode": pa.array(rows.episode, pa.int64()), "step": pa.array(rows.step, pa.int64()),
        "seat": pa.array(rows.seat, pa.string()),
        "final": pa.array(rows.final, pa.bool_()),
        "reward": pa.array(rows.reward, pa.float32()), "terminal": pa.array(rows.terminal, pa.bool_()),
        "truncated": pa.array(rows.truncated, pa.bool_()),
        "result": pa.array(rows.result, pa.string()),
    }
    for f in arrow_schema:
        name = f.name
        if name in columns:
            continue
        kind, _, key = name.partition("/")
        if kind == "features":
            columns[name] = _ragged_column(rows.entities[key], f.type)
        elif kind == "visible":
            columns[name] = _ragged_column(rows.visible[key], f.type)
        elif kind == "ids":
            columns[name] = pa.array(rows.ids.get(key, [None] * len(rows)), f.type)
        elif name == "global_features":
            columns[name] = pa.FixedSizeListArray.from_arrays(
                pa.array(rows.entities[GLOBAL_ENTITY].as_array().reshape(-1), pa.float32()), f.type.list_size)
        elif kind in ("actors", "mask", "actees", "actee_mask", "low", "high"):
            columns[name] = _ragged_column(rows.masks[key][kind], f.type)
        elif kind == "action":
            columns[name] = _ragged_column(rows.action[key], f.type)
        elif kind == "probs":
            values, has = rows.probs[key]
            per_actor = _list(pa.array(values.as_array().reshape(-1), pa.float32()), values.size1(), f.type.value_type)
            columns[name] = _list(per_actor, rows.action[key].size1(), f.type, valid=has)
    return pa.record_batch([columns[f.name] for f in arrow_schema], schema=arrow_schema)


def _flat(column: Any) -> Any:
    """``(values, lengths)`` of a list column (nulls read as empty lists)."""
    column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    offsets = column.offsets.to_numpy().astype(np.int64)
    values = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return values, np.diff(offsets)


def _ragged_from(column: Any, width: Optional[int], dtype: Any) -> RaggedArray:
    values, lengths = _flat(column)
    pa = _pa()
    if pa.types.is_fixed_size_list(values.type):
        flat = values.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
        flat = flat.reshape(-1, values.type.list_size)
    elif pa.types.is_list(values.type):  # rows of zero features
        flat = np.zeros((len(values), 0), dtype)
    else:
        flat = values.to_numpy(zero_copy_only=False).astype(dtype, copy=False).reshape(-1, 1)
    return ragged_from_arrays(flat, lengths, dtype)


_MASK_DTYPES = {"actors": np.int64, "actees": np.int64, "mask": np.bool_, "actee_mask": np.bool_,
                "low": np.float32, "high": np.float32}


def from_record_batch(batch: Any, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace]) -> Rows:
    """The rows of an Arrow table or record batch of :func:`schema`."""
    names = set(batch.schema.names)
    col = batch.column

    def numpy(name: str, dtype: Any) -> np.ndarray:
        return np.asarray(col(name).to_numpy(zero_copy_only=False), dtype=dtype)

    entities = {t: _ragged_from(col(f"features/{t}"), len(e.features), np.float32)
                for t, e in obs_space.entities.items()}
    if obs_space.global_features:
        glob = col("global_features")
        glob = glob.combine_chunks() if hasattr(glob, "combine_chunks") else glob
        flat = glob.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(len(glob), -1)
        entities[GLOBAL_ENTITY] = ragged_from_arrays(flat, np.ones(len(glob), np.int64), np.float32)
    visible = {t: _ragged_from(col(f"visible/{t}"), 1, np.bool_) for t in obs_space.entities}
    masks: Dict[str, Dict[str, RaggedArray]] = {}
    action, probs = {}, {}
    for a, space in action_space.items():
        masks[a] = {k: _ragged_from(col(f"{k}/{a}"), None, _MASK_DTYPES[k]) for k in mask_keys(space)}
        action[a] = _ragged_from(col(f"action/{a}"), None, action_dtype(space))
        if f"probs/{a}" in names and not isinstance(space, CONTINUOUS_SPACES):
            column = col(f"probs/{a}")
            column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
            has = ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            per_actor, _ = _flat(column)
            values, widths = _flat(per_actor)
            flat = values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, 1)
            probs[a] = (ragged_from_arrays(flat, widths, np.float32), has)
    ids = {name.partition("/")[2]: col(name).to_pylist() for name in batch.schema.names if name.startswith("ids/")}
    seat = col("seat").to_pylist()
    return Rows(numpy("episode", np.int64), numpy("step", np.int64), numpy("final", np.bool_), entities, visible,
                masks, action, numpy("reward", np.float32), numpy("terminal", np.bool_), numpy("truncated", np.bool_),
                seat, col("result").to_pylist(), ids, probs)
