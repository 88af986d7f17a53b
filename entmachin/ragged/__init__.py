"""Ragged values: entmachin's numpy ragged arrays and their helpers, ``RaggedTensor`` and ``arrdict``.

The numpy-side names are imported eagerly; ``RaggedTensor`` and the other torch-side names are
imported on first access, so ``import entmachin.ragged`` never imports torch (environment
worker processes stay light).
"""

from typing import Any, List

from entmachin.ragged.array import RaggedArray, RaggedArrayBool, RaggedArrayF32, RaggedArrayI64, cat
from entmachin.ragged.arrays import (
    RAGGED_ARRAY_TYPES,
    concat,
    empty_ragged,
    is_ragged,
    is_ragged_array,
    n_features,
    n_items,
    n_sequences,
    pad,
    ragged_dtype,
    ragged_equal,
    ragged_from_arrays,
    ragged_full,
    ragged_to_arrays,
    take,
)
from entmachin.ragged.arrdict import arrdict
from entmachin.ragged.interop import as_ragged_array, ragged_buffer_available, to_ragged_buffer

_TORCH_NAMES = ("RaggedTensor", "ragged_tensor_equal", "to_ragged_tensor")

__all__ = [
    "RAGGED_ARRAY_TYPES",
    "RaggedArray",
    "RaggedArrayBool",
    "RaggedArrayF32",
    "RaggedArrayI64",
    "arrdict",
    "as_ragged_array",
    "cat",
    "concat",
    "empty_ragged",
    "is_ragged",
    "is_ragged_array",
    "n_features",
    "n_items",
    "n_sequences",
    "pad",
    "ragged_dtype",
    "ragged_equal",
    "ragged_from_arrays",
    "ragged_full",
    "ragged_buffer_available",
    "ragged_to_arrays",
    "take",
    "to_ragged_buffer",
    *_TORCH_NAMES,
]


def __getattr__(name: str) -> Any:
    if name in _TORCH_NAMES:
        from entmachin.ragged import tensor

        return getattr(tensor, name)
    raise AttributeError(f"module 'entmachin.ragged' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_TORCH_NAMES))
