"""One leaf of a transition against its ``LeafSpec``: the per-value checks of ``append``.

Each function takes a value a transition holds for one stored column and returns it as the
host arrays the column copies (``[n_rows, *shape]`` dense rows, or ``(flat, lengths)`` for a
ragged leaf), or raises naming the leaf, what the schema expects and what arrived.
"""

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np
import torch

from entmachin.buffer.values import find_tensor, own_custom
from entmachin.ragged import RaggedTensor, is_ragged_array
from entmachin.ragged.trees import describe

__all__ = ["LeafSpec", "dense_array", "scalar_ok", "scalar_column_array", "ragged_arrays", "owned_custom"]

_FLOAT_KINDS, _INT_KINDS = frozenset("fiu"), frozenset("iu")


class LeafSpec(NamedTuple):
    """One stored column: a leaf of a major attribute, or a sub attribute (``path == ()``).

    Attributes:
        attr: the attribute the leaf belongs to (``"state"``, ``"reward"``, ...).
        path: the keys from the attribute down to the leaf; ``()`` for a sub attribute.
        kind: ``"dense"``, ``"ragged"`` or ``"scalar"``.
        dtype: the leaf's torch dtype.
        shape: the per-row shape (dense, scalar) or the per-item shape (ragged).
        np_dtype: the matching numpy dtype; None where numpy has no such dtype.
    """

    attr: str
    path: Tuple[str, ...]
    kind: str  # "dense" | "ragged" | "scalar"
    dtype: torch.dtype
    shape: Tuple[int, ...]  # per-row shape (dense, scalar) or per-item shape (ragged)
    np_dtype: Optional[np.dtype]  # None where numpy has no such dtype

    @property
    def name(self) -> str:
        """Where the leaf lives, e.g. ``state['entities']['Robot']``."""
        return self.attr + "".join(f"[{key!r}]" for key in self.path)




def dense_array(spec: LeafSpec, value: Any, where: str) -> Any:
    if type(value) is torch.Tensor or isinstance(value, torch.Tensor):
        if value.dtype != spec.dtype or value.dim() < 1 or value.shape[1:] != spec.shape:
            _raise_dense(spec, value, where)
        if spec.np_dtype is None:
            return value.detach()
        try:
            return value.numpy()
        except (TypeError, RuntimeError):  # on another device, or needs grad: copy to the host
            return value.detach().resolve_conj().resolve_neg().cpu().numpy()
    if isinstance(value, np.ndarray):
        if value.dtype != spec.np_dtype or value.ndim < 1 or value.shape[1:] != spec.shape:
            _raise_dense(spec, value, where)
        return value
    _raise_dense(spec, value, where)


def _raise_dense(spec: LeafSpec, value: Any, where: str) -> None:
    expected = f"a tensor or array [n_rows, {', '.join(map(str, spec.shape))}] of dtype {spec.dtype}"
    if value is None:
        raise ValueError(f"{where}: {spec.name} is missing; the buffer's schema expects {expected}")
    error = TypeError if not isinstance(value, (torch.Tensor, np.ndarray)) else ValueError
    raise error(
        f"{where}: {spec.name} is a {describe(value)}; the buffer's schema (fixed by its first "
        f"append) expects {expected}"
    )


def scalar_ok(spec: LeafSpec, value: Any) -> bool:
    """Whether ``value`` is a Python/numpy scalar that fits the column's dtype."""
    kind = type(value)
    if kind is float or kind is int or kind is bool:
        dkind = "b" if kind is bool else ("i" if kind is int else "f")
    elif isinstance(value, (np.bool_, np.integer, np.floating)):
        dkind = value.dtype.kind
    else:
        return False
    if spec.dtype is torch.bool:
        return dkind == "b"
    if spec.dtype is torch.int64:
        return dkind in _INT_KINDS
    return dkind in _FLOAT_KINDS and spec.dtype.is_floating_point


def scalar_column_array(spec: LeafSpec, value: Any, where: str) -> Any:
    """A dense ``[n_rows]`` or ``[n_rows, 1]`` value of the column's dtype, as ``[n_rows, 1]``."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim in (1, 2) and value.shape[1:] in ((), (1,)):
        try:
            arr = dense_array(spec._replace(shape=tuple(value.shape[1:])), value, where)
        except ValueError:
            _raise_scalar(spec, value, where)
        return arr.reshape(arr.shape[0], 1)
    _raise_scalar(spec, value, where)


def _raise_scalar(spec: LeafSpec, value: Any, where: str) -> None:
    raise TypeError(
        f"{where}: sub attribute {spec.attr!r} is a {describe(value)}; the buffer's schema (fixed by "
        f"its first append) expects a scalar of dtype {spec.dtype} (or a [n_rows, 1] tensor or array of it)"
    )


def ragged_arrays(spec: LeafSpec, value: Any, where: str) -> Tuple[Any, np.ndarray]:
    if is_ragged_array(value):
        flat = value.as_array()
        if flat.dtype != spec.np_dtype or flat.shape[1:] != spec.shape:
            _raise_ragged(spec, value, where)
        return flat, value.size1()
    if isinstance(value, RaggedTensor):
        if value.dtype != spec.dtype or value.trailing_shape != spec.shape:
            _raise_ragged(spec, value, where)
        lengths = value.lengths.cpu().numpy()
        if spec.np_dtype is None:
            return value.data.detach(), lengths
        data = value.data
        return (data.numpy() if data.device.type == "cpu" and not data.requires_grad
                else data.detach().cpu().numpy()), lengths
    _raise_ragged(spec, value, where)


def _raise_ragged(spec: LeafSpec, value: Any, where: str) -> None:
    expected = f"a ragged value of {spec.dtype} items of shape {spec.shape}"
    error = ValueError if (is_ragged_array(value) or isinstance(value, RaggedTensor)) else TypeError
    raise error(
        f"{where}: {spec.name} is a {describe(value)}; the buffer's schema (fixed by its first "
        f"append) expects {expected}"
    )


def owned_custom(value: Any, attr: str, where: str) -> Any:
    found = find_tensor(value)
    if found is not None:
        raise TypeError(
            f"{where}: custom attribute {attr!r} holds a {found}; custom attributes must not hold "
            "tensors or ragged values"
        )
    return own_custom(value)

