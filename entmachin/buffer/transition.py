"""Transitions: one environment step (or B vectorised steps) with major, sub and custom data.

Three kinds of attribute, as in Machin:

* **major** (``state``, ``action``, ``next_state``): a dict, possibly nested, whose leaves are
  dense tensors/arrays with a leading row dimension or ragged values with one sequence per
  row. Sampling concatenates each leaf over the sampled rows.
* **sub** (``reward``, ``terminal``): a scalar (one row) or a dense tensor/array with a
  leading row dimension.
* **custom**: any value without tensors inside, shared by every row of the transition;
  sampling returns it as a list unless asked to concatenate it.

A transition holds ``n_rows >= 1`` rows: every dense leaf has leading dim ``n_rows`` and every
ragged leaf ``n_rows`` sequences, so one transition may hold a whole vectorised step.

Example:
    >>> t = Transition(
    ...     state={"entities": {"Robot": ragged_from_arrays(np.zeros((3, 2), np.float32), [2, 1])}},
    ...     action={"action": {"move": ragged_from_arrays(np.zeros((2, 1), np.int64), [1, 1])}},
    ...     next_state={"entities": {"Robot": ragged_from_arrays(np.ones((3, 2), np.float32), [1, 2])}},
    ...     reward=np.array([1.0, 0.0], np.float32),
    ...     terminal=np.array([False, True]),
    ... )
    >>> t.n_rows
    2
    >>> t.reward = np.array([0.5, 0.5], np.float32)  # really assigns (validated and copied)
"""

from collections.abc import Mapping
from typing import Any, Dict, Iterable, Iterator, List, Sequence, Tuple, Union

import numpy as np
import torch

from entmachin.buffer.values import find_tensor, is_dense, is_ragged_value, is_scalar, own_custom, own_major, own_value
from entmachin.ragged import is_ragged_array, trees
from entmachin.ragged.tensor import to_ragged_tensor
from entmachin.ragged.trees import describe, format_path

__all__ = ["TransitionBase", "Transition", "as_transition", "check_terminal"]


class TransitionBase:
    """A transition with named major, sub and custom attributes (see the module docstring).

    Values are checked and copied on construction and on assignment: later writes to the
    caller's tensors, arrays or objects never reach the transition.

    Args:
        major_attr: names of the major attributes.
        sub_attr: names of the sub attributes.
        custom_attr: names of the custom attributes.
        major_data: one dict per major attribute.
        sub_data: one scalar or dense value per sub attribute.
        custom_data: one value per custom attribute.

    Raises:
        ValueError: names are repeated or clash with methods, the counts of names and values
            differ, or values disagree on the number of rows.
        TypeError: a value of the wrong kind (e.g. a ragged sub attribute, a tensor inside a
            custom attribute).
    """

    _RESERVED = frozenset(
        {"keys", "items", "values", "has_keys", "to", "major_attr", "sub_attr", "custom_attr", "n_rows"}
    )

    def __init__(
        self,
        major_attr: Iterable[str],
        sub_attr: Iterable[str],
        custom_attr: Iterable[str],
        major_data: Iterable[Any],
        sub_data: Iterable[Any],
        custom_data: Iterable[Any],
    ) -> None:
        names = (list(major_attr), list(sub_attr), list(custom_attr))
        datas = (list(major_data), list(sub_data), list(custom_data))
        for kind, attrs, data in zip(("major", "sub", "custom"), names, datas):
            if len(attrs) != len(data):
                raise ValueError(
                    f"TransitionBase: {len(attrs)} {kind} attribute names but {len(data)} values"
                )
        seen = set()
        for attr in (a for attrs in names for a in attrs):
            if not isinstance(attr, str) or not attr.isidentifier() or attr.startswith("_"):
                raise ValueError(
                    f"TransitionBase: attribute names must be identifiers not starting with '_', got {attr!r}"
                )
            if attr in self._RESERVED or attr in seen:
                reason = "is a method name" if attr in self._RESERVED else "is given twice"
                raise ValueError(f"TransitionBase: attribute name {attr!r} {reason}")
            seen.add(attr)
        object.__setattr__(self, "_major_attr", tuple(names[0]))
        object.__setattr__(self, "_sub_attr", tuple(names[1]))
        object.__setattr__(self, "_custom_attr", tuple(names[2]))
        object.__setattr__(self, "_keys", names[0] + names[1] + names[2])
        data = {}
        for attr, value in zip(names[0], datas[0]):
            data[attr] = own_major(attr, value)
        for attr, value in zip(names[1], datas[1]):
            data[attr] = self._own_sub(attr, value)
        for attr, value in zip(names[2], datas[2]):
            data[attr] = self._own_custom(attr, value)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_n_rows", self._count_rows(data))

    # ----------------------------------------------------------------- checks and copies

    @staticmethod
    def _own_sub(attr: str, value: Any) -> Any:
        if is_ragged_value(value):
            raise TypeError(
                f"sub attribute {attr!r}: ragged values belong in a major attribute, got {describe(value)}"
            )
        if is_scalar(value):
            return value.item() if isinstance(value, np.generic) else value
        if not is_dense(value):
            raise TypeError(
                f"sub attribute {attr!r}: expected a scalar, or a tensor or array with a leading "
                f"row dimension, got {describe(value)}"
            )
        return own_value(value)

    @staticmethod
    def _own_custom(attr: str, value: Any) -> Any:
        found = find_tensor(value)
        if found is not None:
            raise TypeError(
                f"custom attribute {attr!r} holds a {found}; custom attributes must not hold tensors "
                "or ragged values (store them in a major or sub attribute)"
            )
        return own_custom(value)

    def _count_rows(self, data: Dict[str, Any]) -> int:
        """Returns the common number of rows of all values, raising where they disagree."""
        n_rows, first = None, None
        for attr in self._major_attr:
            for path, leaf in trees.leaves(data[attr]):
                where = format_path(attr, path)
                rows = trees.n_rows(leaf, f"major attribute {where}")
                if n_rows is None:
                    n_rows, first = rows, where
                elif rows != n_rows:
                    raise ValueError(
                        f"major attribute {where} holds {rows} rows, but {first} holds "
                        f"{n_rows}; every value of a transition needs the same number of rows"
                    )
        for attr in self._sub_attr:
            value = data[attr]
            rows = 1 if is_scalar(value) else trees.n_rows(value, f"sub attribute {attr!r}")
            if n_rows is None:
                n_rows, first = rows, attr
            elif rows != n_rows:
                shown = "is a scalar (one row)" if is_scalar(value) else f"holds {rows} rows"
                raise ValueError(
                    f"sub attribute {attr!r} {shown}, but {first} holds {n_rows} rows; every value "
                    "of a transition needs the same number of rows"
                )
        n_rows = 1 if n_rows is None else n_rows
        if n_rows < 1:
            raise ValueError(f"transition: {first} holds 0 rows; a transition holds at least one row")
        return n_rows

    # --------------------------------------------------------------------------- access

    @property
    def major_attr(self) -> List[str]:
        """Names of the major attributes."""
        return list(self._major_attr)

    @property
    def sub_attr(self) -> List[str]:
        """Names of the sub attributes."""
        return list(self._sub_attr)

    @property
    def custom_attr(self) -> List[str]:
        """Names of the custom attributes."""
        return list(self._custom_attr)

    @property
    def n_rows(self) -> int:
        """Rows held: the leading dim of dense values, the sequences of ragged values."""
        return self._n_rows

    def keys(self) -> List[str]:
        """All attribute names: major, then sub, then custom."""
        return list(self._keys)

    def values(self) -> List[Any]:
        """Every attribute's value, in :meth:`keys`' order."""
        return [self._data[k] for k in self._keys]

    def items(self) -> Iterator[Tuple[str, Any]]:
        """``(name, value)`` of every attribute, in :meth:`keys`' order."""
        for key in self._keys:
            yield key, self._data[key]

    @staticmethod
    def from_data(data: Mapping[str, Any], major_attr: Sequence[str]) -> "TransitionBase":
        """A transition of ``data``'s attributes: those named in ``major_attr`` major (dicts of
        values), every other one sub, in ``data``'s order; none custom."""
        sub_attr = [attr for attr in data if attr not in major_attr]
        return TransitionBase(major_attr, sub_attr, (), [data[a] for a in major_attr], [data[a] for a in sub_attr], ())

    def has_keys(self, keys: Iterable[str]) -> bool:
        """Returns whether every name in ``keys`` is an attribute."""
        return all(k in self._data for k in keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("_data")
        if data is not None and name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __getitem__(self, key: str) -> Any:
        if key not in self._data:
            raise KeyError(f"{key!r} is not an attribute of this transition; attributes are {self._keys}")
        return self._data[key]

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._data:
            raise AttributeError(
                f"{type(self).__name__}: cannot set {name!r}; attributes are fixed at construction: "
                f"{self._keys}"
            )
        self._assign(name, value)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._data:
            raise KeyError(
                f"{type(self).__name__}: cannot set {key!r}; attributes are fixed at construction: "
                f"{self._keys}"
            )
        self._assign(key, value)

    def _assign(self, name: str, value: Any) -> None:
        if name in self._major_attr:
            owned = own_major(name, value)
        elif name in self._sub_attr:
            owned = self._own_sub(name, value)
        else:
            owned = self._own_custom(name, value)
        data = dict(self._data)
        data[name] = owned
        n_rows = self._count_rows(data)
        self._data[name] = owned
        object.__setattr__(self, "_n_rows", n_rows)

    def to(self, device: Union[str, torch.device]) -> "TransitionBase":
        """Moves every tensor to ``device`` in place and returns ``self``.

        Numpy arrays become tensors and ragged arrays become ``RaggedTensor``s on ``device``.
        """

        def move(value: Any) -> Any:
            if isinstance(value, np.ndarray):
                return torch.from_numpy(value).to(device)
            if is_ragged_array(value):
                return to_ragged_tensor(value, device, f"{type(self).__name__}.to")
            return value.to(device)

        for attr in self._major_attr:
            self._data[attr] = self._data[attr].map(move)
        for attr in self._sub_attr:
            if not is_scalar(self._data[attr]):
                self._data[attr] = move(self._data[attr])
        return self

    def __repr__(self) -> str:
        parts = [f"{k}={describe(v) if not isinstance(v, dict) else dict(v)!r}" for k, v in self.items()]
        return f"{type(self).__name__}(n_rows={self._n_rows}, " + ", ".join(parts) + ")"


class Transition(TransitionBase):
    """The default transition: ``state``, ``action``, ``next_state``; ``reward``, ``terminal``.

    Args:
        state: major attribute, e.g. ``{"state": tensor [B, d]}`` or a canonical entity state.
        action: major attribute.
        next_state: major attribute.
        reward: a number (one row) or a dense value ``[B]`` / ``[B, 1]``.
        terminal: a bool (one row) or a dense bool value ``[B]`` / ``[B, 1]``.
        **custom: custom attributes, ordered by name.

    Raises:
        TypeError: ``terminal`` is not boolean, or a value of the wrong kind.
        ValueError: values disagree on the number of rows.
    """

    def __init__(
        self,
        state: Mapping[str, Any],
        action: Mapping[str, Any],
        next_state: Mapping[str, Any],
        reward: Any,
        terminal: Any,
        **custom: Any,
    ) -> None:
        check_terminal(terminal)
        names = sorted(custom)
        super().__init__(
            ("state", "action", "next_state"),
            ("reward", "terminal"),
            names,
            (state, action, next_state),
            (reward, terminal),
            [custom[k] for k in names],
        )

    def _assign(self, name: str, value: Any) -> None:
        if name == "terminal":
            check_terminal(value)
        super()._assign(name, value)


def check_terminal(terminal: Any) -> None:
    """Raises ``TypeError`` unless ``terminal`` is a bool or a bool tensor/array."""
    dtype = getattr(terminal, "dtype", None)
    if isinstance(terminal, (bool, np.bool_)) or dtype in (torch.bool, np.dtype(np.bool_)):
        return
    raise TypeError(f"Transition: terminal must be a bool or a bool tensor/array, got {describe(terminal)}")


def as_transition(value: Union[TransitionBase, Mapping[str, Any]], where: str) -> TransitionBase:
    """Returns ``value`` if it is a transition, else builds a default ``Transition`` from a dict."""
    if isinstance(value, TransitionBase):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: expected a Transition or a dict, got {describe(value)}")
    missing = [k for k in ("state", "action", "next_state", "reward", "terminal") if k not in value]
    if missing:
        raise ValueError(
            f"{where}: a dict transition needs the keys state, action, next_state, reward and "
            f"terminal; missing {missing}"
        )
    return Transition(**value)

