"""Growing a schema: keys of ragged subtrees that first appear after the first append.

Entity environments do not show every entity type or action at every step (a coin spawns
later, an action becomes available mid-episode). The rule of ``docs/architecture.md``: a new key inside a
*ragged subtree* (a dict of a major attribute that holds ragged values only, or nothing yet)
adds a column, earlier rows reading as zero-length sequences; its width and dtype are then
fixed like any other leaf's. A new key anywhere else, or a new key holding a dense value,
still raises naming the key.

New leaves are numbered after every existing one (``Schema.leaves`` grows at its end), so the
values a transition checked against the old schema stay valid for the new one once padded
with ``None`` (zero-length sequences) for the new leaves.
"""

from collections.abc import Mapping
from typing import Any, Dict, List, Set, Tuple

from entmachin.buffer.leaf import LeafSpec
from entmachin.buffer.schema import Schema, dict_nodes, get_node
from entmachin.buffer.values import is_ragged_value, numpy_dtype_of, value_spec
from entmachin.ragged.trees import describe, format_path

__all__ = ["grow_schema", "ragged_subtrees"]


def ragged_subtrees(schema: Schema) -> Set[Tuple[str, Tuple[str, ...]]]:
    """``(attr, path)`` of every dict of a major attribute with no dense leaf below it."""
    found: Set[Tuple[str, Tuple[str, ...]]] = set()

    def visit(attr: str, template: Dict[str, Any], path: Tuple[str, ...]) -> bool:
        ragged = True
        for key, value in template.items():
            if isinstance(value, dict):
                ragged &= visit(attr, value, path + (key,))
            else:
                ragged &= schema.leaves[value].kind == "ragged"
        if ragged:
            found.add((attr, path))
        return ragged

    for attr in schema.major_attr:
        visit(attr, schema.templates[attr], ())
    return found


def grow_schema(schema: Schema, data: Mapping[str, Any], where: str) -> Schema:
    """Returns ``schema`` with a column for every new key of ``data``'s ragged subtrees.

    Args:
        schema: the current schema.
        data: attribute name -> value, as ``Schema.extract`` takes it.
        where: prefix for error messages.

    Returns:
        A new schema (``schema`` itself is unchanged).

    Raises:
        ValueError: a new key outside a ragged subtree, or a new key holding a dense value.
        TypeError: a new key that is not a str.
    """
    growable = ragged_subtrees(schema)
    leaves: List[LeafSpec] = list(schema.leaves)
    templates = {attr: _copy(template) for attr, template in schema.templates.items()}
    for attr, path, keys in schema.nodes:
        node = get_node(data, attr, path)
        if not isinstance(node, Mapping):
            continue  # absent (zero-length sequences) or not a dict (extract reports it)
        extra = [key for key in node if key not in keys]
        if not extra:
            continue
        name = format_path(attr, path)
        if (attr, path) not in growable:
            raise ValueError(
                f"{where}: {name} has keys {sorted(map(str, extra))} that the buffer's schema (fixed by its "
                f"first append) lacks; expected keys {sorted(keys)} (new keys are accepted only in "
                "dicts that hold ragged values only, such as entity types or actions)"
            )
        target = templates[attr]
        for key in path:
            target = target[key]
        for key in extra:
            target[key] = _add(attr, path + (key,), node[key], leaves, where)
    nodes = tuple(node for attr in schema.major_attr for node in dict_nodes(attr, templates[attr], ()))
    return Schema(schema.major_attr, schema.sub_attr, schema.custom_attr, tuple(leaves), nodes, templates)


def _add(attr: str, path: Tuple[str, ...], value: Any, leaves: List[LeafSpec], where: str) -> Any:
    """Appends the leaves of a new key's value; returns its template (leaf index or dict)."""
    if not isinstance(path[-1], str):
        raise TypeError(f"{where}: {format_path(attr, path[:-1])} has a key {path[-1]!r}; keys must be str")
    if is_ragged_value(value):
        kind, dtype, shape = value_spec(value)
        leaves.append(LeafSpec(attr, path, kind, dtype, shape, numpy_dtype_of(dtype)))
        return len(leaves) - 1
    if isinstance(value, Mapping):
        return {key: _add(attr, path + (key,), item, leaves, where) for key, item in value.items()}
    raise ValueError(
        f"{where}: {format_path(attr, path)} is a new key holding a {describe(value)}; a key that first "
        "appears after the buffer's first append must hold ragged values (ragged array, RaggedTensor) "
        "or dicts of them, whose earlier rows then read as zero-length sequences"
    )


def _copy(template: Dict[str, Any]) -> Dict[str, Any]:
    return {key: _copy(value) if isinstance(value, dict) else value for key, value in template.items()}
