"""How ``ParallelEnvList`` moves actions and ``VecObs`` between processes.

Pickling a numpy array costs several microseconds, and a step would pickle a dozen on each side
of every pipe. Instead arrays travel as raw bytes beside their shape, inside nested tuples of
names and numbers that one pickle frame carries: ``pack`` / ``unpack`` for a ``VecObs``
(``unpack_many`` joins several workers' messages into one, each field copied once),
``pack_actions`` / ``unpack_actions`` for each worker's slice of the actions.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from entmachin.env.common import ActionName
from entmachin.env.vec_env import (
    Metric,
    VecActionMask,
    VecCategoricalActionMask,
    VecContinuousActionMask,
    VecObs,
    VecSelectEntityActionMask,
    merge_vec_obs,
)
from entmachin.ragged.array import RaggedArray, RaggedArrayBool, RaggedArrayF32, RaggedArrayI64

__all__ = ["pack", "unpack", "unpack_many", "pack_actions", "unpack_actions"]


_Wire = Tuple[bytes, Tuple[int, ...], bytes]  # a ragged array: items, their shape, lengths
_DTYPES = {cls: cls.dtype for cls in (RaggedArrayF32, RaggedArrayI64, RaggedArrayBool)}


def _put(flat: npt.NDArray[Any], lengths: npt.NDArray[np.int64]) -> _Wire:
    return flat.tobytes(), flat.shape, lengths.tobytes()


def _put_ragged(buf: Optional[RaggedArray]) -> Optional[_Wire]:
    return None if buf is None else _put(buf.as_array(), buf.size1())


def _get_ragged(cls: Any, wire: Optional[_Wire]) -> Any:
    if wire is None:
        return None
    values, shape, lengths = wire
    flat = np.frombuffer(values, _DTYPES[cls]).reshape(shape)  # [n_items, n_features]
    # Views of the message, no copy: ragged arrays never write into their items.
    return cls._wrap(flat, np.frombuffer(lengths, np.int64))


def _join_ragged(cls: Any, wires: Sequence[Optional[_Wire]]) -> Any:
    """One ragged array of several messages' arrays of one field, rows after rows: one copy."""
    if wires[0] is None:
        return None
    n_items = sum(wire[1][0] for wire in wires)
    flat = np.frombuffer(b"".join([wire[0] for wire in wires]), _DTYPES[cls])  # [n_items * n_features]
    return cls._wrap(flat.reshape(n_items, *wires[0][1][1:]), np.frombuffer(b"".join([w[2] for w in wires]), np.int64))


def _put_array(arr: npt.NDArray[Any], dtype: Any) -> bytes:
    return np.asarray(arr, dtype).tobytes()


def _get_array(data: bytes, dtype: Any) -> npt.NDArray[Any]:
    return np.frombuffer(data, dtype).copy()  # writable, unlike a view of the message


def pack_actions(
    actions: Mapping[ActionName, RaggedArray], bounds: Sequence[Tuple[int, int]]
) -> List[Dict[ActionName, Tuple[bool, _Wire]]]:
    """One message per ``(start, stop)`` slice of rows: ``{name: (continuous, _Wire)}`` of those rows."""
    messages: List[Dict[ActionName, Tuple[bool, _Wire]]] = [{} for _ in bounds]
    for name, a in actions.items():
        flat, lengths = a.as_array(), a.size1()  # [n_actors_total, 1 or n_values], [num_envs]
        offsets = [0] + lengths.cumsum().tolist()  # [num_envs + 1]
        continuous = isinstance(a, RaggedArrayF32)
        for message, (start, stop) in zip(messages, bounds):
            message[name] = (continuous, _put(flat[offsets[start] : offsets[stop]], lengths[start:stop]))
    return messages


def unpack_actions(message: Mapping[ActionName, Tuple[bool, _Wire]]) -> Dict[ActionName, RaggedArray]:
    return {name: _get_ragged(RaggedArrayF32 if continuous else RaggedArrayI64, wire)
            for name, (continuous, wire) in message.items()}


_CATEGORICAL, _SELECT, _CONTINUOUS = 0, 1, 2


def _pack_mask(name: ActionName, m: VecActionMask) -> Tuple[Any, ...]:
    """``(name, kind, actors, a, b)``: ``a, b`` are ``None, mask`` (categorical), ``actees, mask``
    (select-entity) or ``low, high`` (continuous)."""
    if isinstance(m, VecContinuousActionMask):
        return name, _CONTINUOUS, _put_ragged(m.actors), _put_ragged(m.low), _put_ragged(m.high)
    if isinstance(m, VecSelectEntityActionMask):
        return name, _SELECT, _put_ragged(m.actors), _put_ragged(m.actees), _put_ragged(m.mask)
    return name, _CATEGORICAL, _put_ragged(m.actors), None, _put_ragged(m.mask)


def _unpack_mask(kind: int, actors: Any, a: Any, b: Any, get: Any) -> VecActionMask:
    """The mask :func:`_pack_mask` packed; ``get(cls, wire or wires)`` reads one field."""
    actors = get(RaggedArrayI64, actors)
    if kind == _CONTINUOUS:
        return VecContinuousActionMask(actors, get(RaggedArrayF32, a), get(RaggedArrayF32, b))
    if kind == _SELECT:
        return VecSelectEntityActionMask(actors, get(RaggedArrayI64, a), get(RaggedArrayBool, b))
    return VecCategoricalActionMask(actors, get(RaggedArrayBool, b))


def pack(vec: VecObs) -> Tuple[Any, ...]:
    """``vec`` as nested tuples of names, numbers and raw bytes, which ``unpack`` reads."""
    masks = [_pack_mask(name, m) for name, m in vec.action_masks.items()]
    dense = [_put_array(vec.reward, np.float32), _put_array(vec.done, np.bool_), _put_array(vec.truncated, np.bool_),
             _put_array(vec.result, np.float32)]
    final = None if vec.final_obs is None else (_put_array(vec.final_index, np.int64), pack(vec.final_obs))
    return (
        [(etype, _put_ragged(buf)) for etype, buf in vec.features.items()],
        [(etype, _put_ragged(buf)) for etype, buf in vec.visible.items()],
        masks,
        dense,
        [(name, m.count, m.sum, m.min, m.max) for name, m in vec.metrics.items()],
        final,
    )


def _layout(packed: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """What several messages must share to be joined field by field: names, widths, which masks."""
    features, visible, masks = packed[:3]
    return (
        [(etype, wire[1][1:]) for etype, wire in features],
        [etype for etype, _ in visible],
        [(name, kind, None if b is None else b[1][1:]) for name, kind, _, _, b in masks],
    )


def unpack_many(packs: Sequence[Tuple[Any, ...]]) -> VecObs:
    """One ``VecObs`` of several workers' messages, rows after rows: what ``merge_vec_obs`` of
    their ``unpack``s gives, with each field built once from the joined bytes of all messages."""
    if len(packs) == 1:
        return unpack(packs[0])
    if any(_layout(p) != _layout(packs[0]) for p in packs[1:]):
        return merge_vec_obs([unpack(p) for p in packs])  # entity types or masks differ: filled in
    features, visible, masks, dense, metrics, finals = zip(*packs)  # each: one entry per message
    action_masks: Dict[ActionName, VecActionMask] = {}
    for i, (name, kind, *_) in enumerate(packs[0][2]):
        parts = [m[i] for m in masks]
        action_masks[name] = _unpack_mask(kind, *([p[j] for p in parts] for j in (2, 3, 4)), get=_join_ragged)
    merged: Dict[str, Metric] = {}
    for stats in metrics:
        for name, *values in stats:
            metric = Metric(*values)
            merged[name] = merged[name] + metric if name in merged else metric
    reward, done, truncated, result = (b"".join(d[j] for d in dense) for j in range(4))
    vec = VecObs(
        features={etype: _join_ragged(RaggedArrayF32, [f[i][1] for f in features]) for i, (etype, _) in enumerate(packs[0][0])},
        visible={etype: _join_ragged(RaggedArrayBool, [v[i][1] for v in visible]) for i, (etype, _) in enumerate(packs[0][1])},
        action_masks=action_masks,
        reward=_get_array(reward, np.float32),
        done=_get_array(done, np.bool_),
        metrics=merged,
        truncated=_get_array(truncated, np.bool_),
        result=_get_array(result, np.float32),
    )
    starts = np.cumsum([0] + [len(d[0]) // 4 for d in dense[:-1]])  # first row of each message (float32 rewards)
    ended = [(final, start) for final, start in zip(finals, starts) if final is not None]
    if ended:
        vec.final_index = np.concatenate([np.frombuffer(final[0], np.int64) + start for final, start in ended])
        vec.final_obs = unpack_many([final[1] for final, _ in ended])
    return vec


def unpack(packed: Tuple[Any, ...]) -> VecObs:
    """The ``VecObs`` that ``pack`` packed, with arrays and buffers of its own."""
    features, visible, masks, (reward, done, truncated, result), metrics, final = packed
    action_masks: Dict[ActionName, VecActionMask] = {}
    for name, kind, actors, a, b in masks:
        action_masks[name] = _unpack_mask(kind, actors, a, b, get=_get_ragged)
    vec = VecObs(
        features={etype: _get_ragged(RaggedArrayF32, wire) for etype, wire in features},
        visible={etype: _get_ragged(RaggedArrayBool, wire) for etype, wire in visible},
        action_masks=action_masks,
        reward=_get_array(reward, np.float32),
        done=_get_array(done, np.bool_),
        metrics={name: Metric(*stats) for name, *stats in metrics},
        truncated=_get_array(truncated, np.bool_),
        result=_get_array(result, np.float32),
    )
    if final is not None:
        vec.final_index, vec.final_obs = _get_array(final[0], np.int64), unpack(final[1])
    return vec
