"""Settings declared once: a dataclass field carries its default and its one-line description.

Every settings record of entmachin (the frames' ``A2CConfig`` / ``PPOConfig`` / ``DQNConfig``,
RogueNet's config, the run config's sections) declares a field as ``name: type = setting(default,
"what it does")``. Everything that describes a field reads it from there: the frames' generated
signatures and ``Args`` sections, ``entmachin init``'s comments, the run config's messages.

A field may also say how it bears on what a run learns (read by ``entmachin.run.fingerprint``):
``execution=True`` for a field that changes how a run executes (where, how fast, what it logs) but
neither what it learns nor what its evaluations report; ``before=VALUE`` for a field added after
runs were recorded, VALUE being what those runs did without it.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Dict, List

__all__ = ["setting", "doc_of", "docs_of", "default_of", "field_lines", "documented", "marker_of", "NOT_DECLARED"]

_DOC = "doc"
NOT_DECLARED = object()  # what marker_of returns for a marker no declaration of the field gives


def setting(default: Any = dataclasses.MISSING, doc: str = "", *,
            default_factory: Callable[[], Any] = dataclasses.MISSING, execution: bool = False,
            before: Any = NOT_DECLARED, **rule: Any) -> Any:  # type: ignore[assignment]
    """A dataclass field with a default (or ``default_factory``), a one-line description and, for
    records that check their fields by it, its ``rule`` (e.g. ``kind="int", low=1``); ``execution``
    and ``before`` as the module says."""
    if not doc or "\n" in doc:
        raise ValueError(f"setting: give a one-line description, got {doc!r}")
    metadata: Dict[str, Any] = {_DOC: doc, "rule": rule} if rule else {_DOC: doc}
    if execution:
        metadata["execution"] = True
    if before is not NOT_DECLARED:
        metadata["before"] = before
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def doc_of(cls: type, name: str) -> str:
    """The description of field ``name`` of dataclass ``cls``; a subclass that only changes a
    field's default inherits its base's description ('' when none declares one)."""
    for klass in cls.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and field.metadata.get(_DOC):
            return field.metadata[_DOC]
    return ""


def marker_of(cls: type, name: str, marker: str) -> Any:
    """What the declaration of field ``name`` of dataclass ``cls`` says for ``marker`` (``"execution"``
    or ``"before"``), looked up like :func:`doc_of`; :data:`NOT_DECLARED` when none says."""
    for klass in cls.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and field.metadata.get(_DOC):
            return field.metadata.get(marker, NOT_DECLARED)
    return NOT_DECLARED


def docs_of(cls: type) -> Dict[str, str]:
    """``{field name: description}`` of every field of dataclass ``cls``, in declaration order."""
    return {f.name: doc_of(cls, f.name) for f in dataclasses.fields(cls)}


def default_of(f: dataclasses.Field) -> Any:
    """Field ``f``'s default (its ``default_factory()``'s value), or ``dataclasses.MISSING`` without one."""
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


def field_lines(cls: type, indent: str = "    ") -> List[str]:
    """One docstring line per field of dataclass ``cls``: ``name: description (default ...).``"""
    lines = []
    for f in dataclasses.fields(cls):
        default = default_of(f)
        tail = "" if default is dataclasses.MISSING else f" (default {default!r})"
        lines.append(f"{indent}{f.name}: {doc_of(cls, f.name)}{tail}.")
    return lines


def documented(cls: type) -> type:
    """Class decorator (after ``@dataclass``): appends the ``Attributes`` section of ``help(cls)``,
    generated from the fields' descriptions and defaults."""
    cls.__doc__ = inspect.cleandoc(cls.__doc__ or "") + "\n\nAttributes:\n" + "\n".join(field_lines(cls)) + "\n"
    return cls
