"""A workload of ragged batches on disk, readable by an interpreter that has no entmachin.

``bench_rogue_net.py`` builds its workloads once (entmachin's environments and helpers) and
both sides of the comparison read them back from these files, so that entmachin and
rogue-net see the very same observations. Only numpy is needed here: each side passes its own
ragged classes to :func:`load_workload` (entmachin's ``RaggedArray{F32,I64,Bool}`` on entmachin's
side, ragged-buffer's ``RaggedBuffer{F32,I64,Bool}`` on rogue-net's, as rogue-net expects).

A workload is ``<stem>.json`` (the spaces, the mode and where each ragged value sits) beside
``<stem>.npz`` (for each value its flat items ``[n_items, n_features]`` and its lengths
``[n_rows]``). A batch is a tree of dicts whose leaves are ragged arrays (float32, int64, bool)::

    {"entities": {entity_type: f32 [n_entities, n_features]},
     "action_masks": {action_name: {"actors": i64 [n_actors, 1], "mask": bool [...], ...}},
     "action": {action_name: i64 [n_actors, 1]}}        # "train" workloads only

The spaces are plain JSON::

    {"entities": {entity_type: [feature names]},
     "actions": {action_name: {"kind": "categorical", "choices": [labels]} or {"kind": "select"}}}
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

_DTYPES = ("float32", "int64", "bool")  # the order of load_workload's ``classes``


def _leaves(tree: Dict[str, Any], path: Tuple[str, ...] = ()) -> List[Tuple[Tuple[str, ...], Any]]:
    out = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out.extend(_leaves(value, path + (key,)))
        else:
            out.append((path + (key,), value))
    return out


def save_workload(stem: str, spaces: Dict[str, Any], mode: str, batches: List[Dict[str, Any]]) -> None:
    """Writes ``batches`` (trees of ragged arrays, either side's) to ``stem.json`` + ``stem.npz``.

    Args:
        stem: path without suffix.
        spaces: the observation and action spaces, as in the module docstring.
        mode: ``"train"`` (batches hold ``"action"``) or ``"infer"``.
        batches: the batches one timed step goes through, in order.
    """
    index, arrays = [], {}
    for b, batch in enumerate(batches):
        for path, buf in _leaves(batch):
            k = len(index)
            flat = buf.as_array()  # [n_items, n_features]
            arrays[f"flat{k}"] = flat
            arrays[f"lengths{k}"] = np.asarray(buf.size1(), dtype=np.int64)  # [n_rows]
            index.append({"batch": b, "path": list(path), "dtype": str(flat.dtype)})
    np.savez(stem + ".npz", **arrays)
    with open(stem + ".json", "w") as f:
        json.dump({"spaces": spaces, "mode": mode, "n_batches": len(batches), "index": index}, f)


def load_workload(stem: str, classes: Sequence[Any]) -> Tuple[Dict[str, Any], str, List[Dict[str, Any]]]:
    """Reads what :func:`save_workload` wrote: ``(spaces, mode, batches)``.

    Args:
        stem: path without suffix.
        classes: the reading side's ragged classes for float32, int64 and bool, in this order
            (each with ``from_flattened(flat, lengths)``).
    """
    by_dtype = dict(zip(_DTYPES, classes))
    with open(stem + ".json") as f:
        meta = json.load(f)
    batches: List[Dict[str, Any]] = [{} for _ in range(meta["n_batches"])]
    with np.load(stem + ".npz") as arrays:
        for k, entry in enumerate(meta["index"]):
            node = batches[entry["batch"]]
            for key in entry["path"][:-1]:
                node = node.setdefault(key, {})
            flat = np.ascontiguousarray(arrays[f"flat{k}"])  # [n_items, n_features]
            node[entry["path"][-1]] = by_dtype[entry["dtype"]].from_flattened(flat, arrays[f"lengths{k}"])
    return meta["spaces"], meta["mode"], batches


def build_spaces(spaces: Dict[str, Any], env_api: Any) -> Tuple[Any, Dict[str, Any]]:
    """``(obs_space, action_space)`` of the JSON ``spaces``, built with the classes of ``env_api``:
    ``entity_gym.env`` on rogue-net's side, ``entmachin.env`` on entmachin's (same names)."""
    obs_space = env_api.ObsSpace(entities={name: env_api.Entity(list(f)) for name, f in spaces["entities"].items()})
    action_space = {
        name: env_api.CategoricalActionSpace(list(a["choices"])) if a["kind"] == "categorical"
        else env_api.SelectEntityActionSpace()
        for name, a in spaces["actions"].items()
    }
    return obs_space, action_space


def n_items(buffers: Dict[str, Any]) -> int:
    """Total items of a dict of ragged arrays (e.g. the entities of a batch)."""
    return sum(int(buf.items()) for buf in buffers.values())
