"""The schema a buffer's first append fixes, and the cached per-append check against it.

A schema lists the attributes (major / sub / custom) and every leaf of the major attributes
with its kind (dense, ragged or scalar), dtype and per-row (dense) or per-item (ragged) shape.
``Schema.extract`` checks one later transition or dict against it and returns the values as
host arrays ready to be copied into the buffer's columns; it is the hot path of ``append``.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from entmachin.buffer.leaf import LeafSpec, dense_array, owned_custom, ragged_arrays, scalar_column_array, scalar_ok
from entmachin.buffer.transition import TransitionBase
from entmachin.buffer.values import numpy_dtype_of, value_spec
from entmachin.ragged import trees
from entmachin.ragged.trees import describe

__all__ = ["LeafSpec", "NewKeysError", "Schema"]


class NewKeysError(ValueError):
    """A dict of a major attribute holds keys the schema lacks (``growth.grow_schema`` may add them)."""


@dataclass(frozen=True)
class Schema:
    """Attribute names and leaf specs fixed by a buffer's first append.

    Attributes:
        major_attr: the major attributes (dicts of values), in the transition's order.
        sub_attr: the sub attributes (one tensor or scalar per row).
        custom_attr: the custom attributes (any Python value, stored as it is).
        leaves: one spec per stored column: every leaf of the major attributes, then the sub attributes.
        nodes: ``(attr, path, keys)`` of every dict node of the major attributes.
        templates: major attribute -> its tree with each leaf replaced by the leaf's index in ``leaves``.
    """

    major_attr: Tuple[str, ...]
    sub_attr: Tuple[str, ...]
    custom_attr: Tuple[str, ...]
    leaves: Tuple[LeafSpec, ...]
    # (attr, path) of every dict node of the major attributes -> its keys
    nodes: Tuple[Tuple[str, Tuple[str, ...], frozenset], ...]
    # major attribute -> its tree with each leaf replaced by the leaf's index in ``leaves``
    templates: Dict[str, Any]

    @cached_property
    def keys(self) -> Tuple[str, ...]:
        """All attribute names: major, then sub, then custom."""
        return self.major_attr + self.sub_attr + self.custom_attr

    @cached_property
    def key_set(self) -> frozenset:
        """All attribute names, as a set."""
        return frozenset(self.keys)

    @cached_property
    def n_attrs(self) -> int:
        """How many attributes there are, of all kinds."""
        return len(self.keys)

    @classmethod
    def of(cls, transition: TransitionBase) -> "Schema":
        """The schema of ``transition``, a validated transition."""
        return cls._of(transition.major_attr, transition.sub_attr, transition.custom_attr, transition)

    @classmethod
    def of_data(cls, data: Mapping[str, Any], major_attr: Sequence[str]) -> "Schema":
        """The schema of rows given as attribute -> value (``Buffer.append_trusted``'s input):
        ``data`` maps each attribute to its value; ``major_attr`` name the dicts of values, every other
        attribute is a sub attribute."""
        return cls._of(tuple(major_attr), tuple(a for a in data if a not in major_attr), (), data)

    @classmethod
    def _of(cls, major_attr: Sequence[str], sub_attr: Sequence[str], custom_attr: Sequence[str],
            transition: Any) -> "Schema":
        leaves: List[LeafSpec] = []
        nodes: List[Tuple[str, Tuple[str, ...], frozenset]] = []
        templates: Dict[str, Any] = {}
        for attr in major_attr:
            tree = transition[attr]
            nodes.extend(dict_nodes(attr, tree, ()))
            templates[attr] = _template(tree, len(leaves))
            for path, leaf in trees.leaves(tree):
                kind, dtype, shape = value_spec(leaf)
                leaves.append(LeafSpec(attr, path, kind, dtype, shape, numpy_dtype_of(dtype)))
        for attr in sub_attr:
            kind, dtype, shape = value_spec(transition[attr])
            shape = shape or (1,)  # a [B] sub attribute is stored as [B, 1], like a number (Machin's shape)
            leaves.append(LeafSpec(attr, (), kind, dtype, shape, numpy_dtype_of(dtype)))
        return cls(
            tuple(major_attr),
            tuple(sub_attr),
            tuple(custom_attr),
            tuple(leaves),
            tuple(nodes),
            templates,
        )

    @cached_property
    def sub_leaf(self) -> Dict[str, int]:
        """Sub attribute -> index of its leaf in ``leaves``."""
        return {spec.attr: i for i, spec in enumerate(self.leaves) if not spec.path}

    @cached_property
    def custom_index(self) -> Dict[str, int]:
        """Custom attribute -> its position in ``custom_attr``."""
        return {attr: i for i, attr in enumerate(self.custom_attr)}

    def kind_of(self, attr: str) -> Optional[str]:
        """The kind of attribute ``attr``: ``"major"``, ``"sub"``, ``"custom"``, or None for an unknown name."""
        if attr in self.major_attr:
            return "major"
        if attr in self.sub_attr:
            return "sub"
        return "custom" if attr in self.custom_attr else None

    def check_kinds(self, transition: TransitionBase, where: str) -> None:
        """Raises ``ValueError`` (its message prefixed with ``where``) unless ``transition`` has this
        schema's attribute names and kinds."""
        theirs = (transition._major_attr, transition._sub_attr, transition._custom_attr)
        if theirs != (self.major_attr, self.sub_attr, self.custom_attr):
            raise ValueError(
                f"{where}: the transition has major/sub/custom attributes {theirs}, but the buffer's "
                f"schema (fixed by its first append) has {(self.major_attr, self.sub_attr, self.custom_attr)}"
            )

    def extract(self, data: Mapping[str, Any], where: str) -> Tuple[int, List[Any], List[Any]]:
        """Checks one transition's values against the schema.

        Args:
            data: attribute name -> value (a dict transition, or a transition's own values).
            where: prefix for error messages.

        Returns:
            ``(n_rows, values, customs)``: one entry per leaf (a numpy array or torch tensor
            ``[n_rows, *shape]`` for dense, a Python scalar, or ``(flat, lengths)`` for ragged),
            and the owned custom values in ``custom_attr`` order. The arrays may be views of the
            caller's data: copy them before the caller can write again.

        Raises:
            NewKeysError: a dict of a major attribute holds keys the schema lacks.
            ValueError: a missing or extra attribute, a missing dense leaf, or a value whose
                rows, shape or dtype differ.
            TypeError: a value of another kind than the schema's.
        """
        if len(data) != self.n_attrs or not all(attr in data for attr in self.keys):
            self._check_attr_names(data, where)
        for attr, path, keys in self.nodes:
            node = get_node(data, attr, path)
            if node is not None and (not isinstance(node, Mapping) or not keys.issuperset(node)):
                self._check_node(node, attr, path, keys, where)
        n_rows = -1
        values: List[Any] = []
        for spec in self.leaves:
            value = get_node(data, spec.attr, spec.path) if spec.path else data[spec.attr]
            if spec.kind == "ragged":
                if value is None:
                    values.append(None)  # an absent entity type: zero-length sequences
                    continue
                flat, lengths = ragged_arrays(spec, value, where)
                rows = lengths.shape[0]
                values.append((flat, lengths))
            elif spec.kind == "dense" and (spec.path or spec.shape != (1,)):
                arr = dense_array(spec, value, where)
                rows = arr.shape[0]
                values.append(arr)
            elif scalar_ok(spec, value):  # a number is one row of a one-column sub attribute
                rows = 1
                values.append(value if spec.kind == "scalar" else np.full((1, 1), value, dtype=spec.np_dtype))
            else:  # a [n_rows] or [n_rows, 1] value of a one-column sub attribute
                arr = scalar_column_array(spec, value, where)
                rows = arr.shape[0]
                values.append(arr)
            if n_rows != rows:
                if n_rows == -1:
                    n_rows = rows
                else:
                    raise ValueError(
                        f"{where}: {spec.name} holds {rows} rows, but earlier values hold {n_rows}; "
                        "every value of a transition needs the same number of rows"
                    )
        if n_rows == -1:
            n_rows = 1
        if n_rows < 1:
            raise ValueError(f"{where}: the transition holds 0 rows; a transition holds at least one row")
        customs = [owned_custom(data[attr], attr, where) for attr in self.custom_attr]
        return n_rows, values, customs

    def _check_attr_names(self, data: Mapping[str, Any], where: str) -> None:
        missing = [k for k in self.keys if k not in data]
        extra = [k for k in data if k not in self.keys]
        raise ValueError(
            f"{where}: attributes differ from the buffer's schema (fixed by its first append): "
            f"missing {missing}, unexpected {extra}"
        )

    def _check_node(self, node: Any, attr: str, path: Tuple[str, ...], keys: frozenset, where: str) -> None:
        name = attr + "".join(f"[{k!r}]" for k in path)
        if not isinstance(node, Mapping):
            raise TypeError(f"{where}: {name} should be a dict, got {describe(node)}")
        extra = sorted(k for k in node if k not in keys)
        if extra:
            raise NewKeysError(
                f"{where}: {name} has keys {extra} that the buffer's schema (fixed by its first "
                f"append) lacks; expected keys {sorted(keys)}"
            )
        # Fewer keys than the schema: each missing leaf is checked (ragged ones may be absent).


def dict_nodes(attr: str, tree: Mapping[str, Any], path: Tuple[str, ...]) -> Iterator[Tuple[str, Tuple[str, ...], frozenset]]:
    """``(attr, path, keys)`` of every dict of a major attribute's tree, the root first."""
    yield attr, path, frozenset(tree.keys())
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from dict_nodes(attr, value, path + (key,))


def _template(tree: Mapping[str, Any], first: int) -> Dict[str, Any]:
    """The tree with leaves numbered from ``first`` in ``trees.leaves`` order."""
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out[key] = _template(value, first)
            first += len(list(trees.leaves(value)))
        else:
            out[key] = first
            first += 1
    return out


def get_node(data: Mapping[str, Any], attr: str, path: Tuple[str, ...]) -> Any:
    """Follows ``path`` from ``data[attr]``; None where a key is missing (nodes were checked)."""
    node = data[attr]
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
        if node is None:
            return None
    return node
