"""A griffe extension for the API reference: each documented object shows the docstring Python gives
it at run time (the frames' docstrings are completed when their classes are built: the ``Args`` of
the arguments they inherit and the ``Keyword Args`` of their settings), and Sphinx roles
(``:class:`X```) read as inline code. What ``test/docs/test_docstrings.py`` checks is then what the
site shows."""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any, Optional

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pages import roles_as_code  # noqa: E402


def _live(path: str) -> Optional[Any]:
    """The object at dotted ``path`` (a module, then attributes), or None where it cannot be imported."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                value = inspect.getattr_static(value, name) if inspect.isclass(value) else getattr(value, name)
        except AttributeError:
            return None
        return value
    return None


class RuntimeDocstrings(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.is_alias or not obj.path.startswith("entmachin"):
            return
        if obj.is_class or obj.is_function:
            live = _live(obj.path)
            live = getattr(live, "__func__", live)
            doc = live.__dict__.get("__doc__") if inspect.isclass(live) else getattr(live, "__doc__", None)
            if isinstance(doc, str) and doc.strip():
                doc = inspect.cleandoc(doc)
                if obj.docstring is None:
                    obj.docstring = griffe.Docstring(doc, parent=obj)
                elif inspect.cleandoc(obj.docstring.value) != doc:
                    obj.docstring.value = doc
        if obj.docstring is not None:
            obj.docstring.value = roles_as_code(obj.docstring.value)
