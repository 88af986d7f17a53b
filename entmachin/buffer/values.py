"""Classifying, checking and copying the values that transitions hold.

A value is *ragged* only if it is a ragged array or a ``RaggedTensor``; a ``torch.Tensor``
or ``np.ndarray`` of at least one dimension is *dense* with a leading row dimension; a Python
or numpy number is a *scalar* (allowed for sub attributes only, as one row). Custom attribute
values may be anything that holds no tensor and no ragged value.
"""

import copy
from collections.abc import Mapping
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from entmachin.ragged import RaggedTensor, arrdict, is_ragged_array, n_features, ragged_dtype
from entmachin.ragged import ragged_from_arrays, ragged_to_arrays
from entmachin.ragged.trees import describe, format_path

# Values that cannot change after creation are stored by reference; everything else is copied.
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, np.generic)

_TORCH_BY_NUMPY: Dict[np.dtype, torch.dtype] = {}


def torch_dtype_of(np_dtype: np.dtype) -> torch.dtype:
    """Returns the torch dtype matching a numpy dtype (cached)."""
    found = _TORCH_BY_NUMPY.get(np_dtype)
    if found is None:
        found = torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype
        _TORCH_BY_NUMPY[np_dtype] = found
    return found


def numpy_dtype_of(dtype: torch.dtype) -> Optional[np.dtype]:
    """Returns the numpy dtype matching a torch dtype, or None when numpy has none (bfloat16)."""
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        return None


def is_dense(value: Any) -> bool:
    """Returns whether ``value`` is a tensor or array with a leading row dimension."""
    return isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim >= 1


def is_scalar(value: Any) -> bool:
    """Returns whether ``value`` is a Python or numpy bool, integer or real number."""
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def is_ragged_value(value: Any) -> bool:
    """Returns whether ``value`` is ragged (a ragged array or a ``RaggedTensor``)."""
    return isinstance(value, RaggedTensor) or is_ragged_array(value)


def scalar_dtype(value: Any) -> torch.dtype:
    """The column dtype of a scalar: bool, int64 or float32 (what ``torch.tensor`` picks)."""
    if isinstance(value, (bool, np.bool_)):
        return torch.bool
    if isinstance(value, (int, np.integer)):
        return torch.int64
    return torch.float32


def value_spec(value: Any) -> Tuple[str, torch.dtype, Tuple[int, ...]]:
    """Returns ``(kind, dtype, shape)`` of a leaf: the schema a buffer fixes for it.

    ``shape`` is the per-row shape of dense values, ``(1,)`` for scalars and the per-item
    shape of ragged values.
    """
    if isinstance(value, RaggedTensor):
        return "ragged", value.dtype, value.trailing_shape
    if is_ragged_array(value):
        return "ragged", torch_dtype_of(ragged_dtype(value)), (n_features(value),)
    if isinstance(value, torch.Tensor):
        return "dense", value.dtype, tuple(value.shape[1:])
    if isinstance(value, np.ndarray):
        return "dense", torch_dtype_of(value.dtype), tuple(value.shape[1:])
    return "scalar", scalar_dtype(value), (1,)


def own_value(value: Any) -> Any:
    """Returns a copy of a dense, ragged or scalar value that shares no memory with it."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, RaggedTensor):
        return RaggedTensor(
            value.data.detach().clone(),
            value.lengths.clone(),
            value.offsets.clone(),
            value.batch_index.clone(),
        )
    if is_ragged_array(value):
        flat, lengths = ragged_to_arrays(value)
        return ragged_from_arrays(flat.copy(), lengths)
    return value


def find_tensor(value: Any, depth: int = 0) -> Optional[str]:
    """Returns a description of the first tensor or ragged value inside ``value``, if any.

    Looks through lists, tuples, sets and dicts (values and keys), a few levels deep.
    """
    if isinstance(value, _IMMUTABLE):
        return None
    if isinstance(value, torch.Tensor) or is_ragged_value(value):
        return describe(value)
    if depth >= 8:
        return None
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        return None
    for item in items:
        found = find_tensor(item, depth + 1)
        if found is not None:
            return found
    return None


def own_custom(value: Any) -> Any:
    """Returns a value the caller can no longer change: immutables as they are, else a copy."""
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple) and all(isinstance(v, _IMMUTABLE) for v in value):
        return value
    return copy.deepcopy(value)


def own_major(attr: str, tree: Any, path: Tuple[str, ...] = ()) -> arrdict:
    """Checks a major attribute's tree (dicts of dense or ragged leaves) and returns an owned copy."""
    if not isinstance(tree, Mapping):
        raise TypeError(
            f"major attribute {format_path(attr, path)}: expected a dict of tensors, arrays or ragged "
            f"values, got {describe(tree)}"
        )
    out = arrdict()
    for key, value in tree.items():
        if not isinstance(key, str):
            raise TypeError(f"major attribute {format_path(attr, path)}: keys must be str, got {key!r}")
        if isinstance(value, Mapping):
            out[key] = own_major(attr, value, path + (key,))
        elif is_dense(value) or is_ragged_value(value):
            out[key] = own_value(value)
        else:
            raise TypeError(
                f"major attribute {format_path(attr, path + (key,))}: expected a tensor or array with a "
                f"leading row dimension, or a ragged value, got {describe(value)}"
            )
    return out
