"""Every public name has a docstring of its own that documents each of its arguments.

The public names are what the packages' ``__init__`` export (``__all__``) and ``entmachin.deploy``'s;
for a class, its public methods and properties defined in it count too (the API reference shows
them); a method that overrides a documented one of a base class takes its docstring, as the site
shows it (griffe-inherited-docstrings). An argument is documented when its docstring (for a class:
the class's and its ``__init__``'s together) names it in an ``Args:`` entry (``name:`` or
``name (type):``) or as inline code (`` `name` `` or ``` ``name`` ```); a settings record's fields
are documented by their declarations (``entmachin.settings.setting``). ``self``, ``cls``, ``*args``
and ``**kwargs`` need no entry. An ``Args:`` entry must name an argument of the signature at run
time (the frames' constructors are generated from their settings), which the site shows
(``docs/_site/griffe_runtime_docs.py``).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Callable, Iterator, List, Optional, Tuple

from entmachin.settings import docs_of

PACKAGES = ("entmachin", "entmachin.ragged", "entmachin.env", "entmachin.env.examples", "entmachin.buffer",
            "entmachin.model", "entmachin.frame", "entmachin.data", "entmachin.distributed", "entmachin.run",
            "entmachin.run.callbacks", "entmachin.deploy")


def public_names() -> Iterator[Tuple[str, object]]:
    """(dotted name, object) of every public class and function, each object once (where a package
    re-exports a lower one's name, the lower package's name)."""
    seen = {}
    for package in reversed(PACKAGES):
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if (inspect.isclass(value) or inspect.isfunction(value)) and id(value) not in seen:
                seen[id(value)] = f"{package}.{name}"
                yield seen[id(value)], value


def own_doc(value: object) -> Optional[str]:
    """``value``'s own docstring: not inherited, and not the one dataclasses or NamedTuple write."""
    doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
    if not doc or not doc.strip():
        return None
    if inspect.isclass(value) and re.fullmatch(rf"{re.escape(value.__name__)}\(.*\)", doc.strip(), flags=re.S):
        return None  # the signature dataclasses / namedtuple put in a class without a docstring
    return inspect.cleandoc(doc)


def inherited_doc(cls: type, attribute: str) -> Optional[str]:
    """The docstring of the nearest base class's ``attribute``, where one has it."""
    for base in cls.__mro__[1:]:
        member = vars(base).get(attribute)
        if member is not None:
            function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if getattr(function, "__doc__", None):
                return inspect.cleandoc(function.__doc__)
    return None


def documents(doc: str, argument: str) -> bool:
    name = re.escape(argument)
    return bool(re.search(rf"^\s*{name}(\s*\([^)]*\))?:", doc, flags=re.M)
                or re.search(rf"`{{1,2}}{name}`{{1,2}}", doc))


_SECTION = re.compile(r"^(?P<indent>\s*)(Args|Arguments|Keyword Args|Keyword Arguments|Parameters):\s*$")


def args_entries(doc: str) -> List[str]:
    """The names the docstring's ``Args:`` sections (Google style) give entries for."""
    names, lines = [], doc.splitlines()
    for i, line in enumerate(lines):
        header = _SECTION.match(line)
        if not header:
            continue
        entry_indent = None
        for body in lines[i + 1:]:
            if not body.strip():
                continue
            indent = len(body) - len(body.lstrip())
            if indent <= len(header.group("indent")):
                break
            entry_indent = indent if entry_indent is None else entry_indent
            if indent == entry_indent:
                match = re.match(r"\s*\**(\w+)(\s*\([^)]*\))?:", body)
                if match:
                    names.append(match.group(1))
    return names


def unknown_entries(doc: str, function: Callable) -> List[str]:
    """``Args:`` entries that name no parameter of ``function`` (its signature at run time: the frames'
    constructors are generated from their settings, which static tools cannot see)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return []
    return [name for name in args_entries(doc) if name not in parameters]


def arguments(function: Callable) -> List[str]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [name for name, p in signature.parameters.items() if name not in ("self", "cls")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def undocumented(name: str, value: object) -> List[str]:
    """What ``value`` (and, for a class, each of its own public methods) lacks."""
    problems = []
    doc = own_doc(value)
    if doc is None:
        return [f"{name}: no docstring"]
    if inspect.isclass(value):
        init = value.__dict__.get("__init__")
        fields = docs_of(value) if dataclasses.is_dataclass(value) else {}
        if init is not None or dataclasses.is_dataclass(value) or hasattr(value, "_fields"):
            text = doc + "\n" + (inspect.getdoc(init) or "" if init is not None else "")
            missing = [a for a in arguments(value) if not fields.get(a) and not documents(text, a)]
            if missing:
                problems.append(f"{name}: arguments not documented: {missing}")
            if unknown_entries(text, value):
                problems.append(f"{name}: Args entries for no argument: {unknown_entries(text, value)}")
        for attribute, member in vars(value).items():
            if attribute.startswith("_"):
                continue
            function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if not inspect.isfunction(function):
                continue
            method_doc = own_doc(function) or inherited_doc(value, attribute)
            if method_doc is None:
                problems.append(f"{name}.{attribute}: no docstring")
                continue
            missing = [a for a in arguments(function) if not documents(method_doc, a)]
            if missing:
                problems.append(f"{name}.{attribute}: arguments not documented: {missing}")
            if own_doc(function) and unknown_entries(method_doc, function):
                problems.append(f"{name}.{attribute}: Args entries for no argument: "
                                f"{unknown_entries(method_doc, function)}")
    else:
        missing = [a for a in arguments(value) if not documents(doc, a)]
        if missing:
            problems.append(f"{name}: arguments not documented: {missing}")
        if unknown_entries(doc, value):
            problems.append(f"{name}: Args entries for no argument: {unknown_entries(doc, value)}")
    return problems


def test_the_check_sees_every_package():
    names = dict(public_names())
    assert len(names) > 150
    assert {"entmachin.frame.PPO", "entmachin.env.EnvList", "entmachin.deploy.OnnxPolicy"} <= set(names)


def test_the_check_finds_what_is_missing():
    def bare(x, y):
        return x

    def documented(x, y):
        """Adds.

        Args:
            x: one.
        """

    def inline(x, y):
        """``x`` plus `y`."""

    def stale(x):
        """Doubles.

        Args:
            x: a number.
            y: gone from the signature.
                More about y:
                  z: not an entry.
        """

    class Record:
        """A record of ``a``."""

        def __init__(self, a, b=1):
            pass

        def method(self, c):
            pass

    assert undocumented("bare", bare) == ["bare: no docstring"]
    assert undocumented("documented", documented) == ["documented: arguments not documented: ['y']"]
    assert undocumented("inline", inline) == []
    assert undocumented("stale", stale) == ["stale: Args entries for no argument: ['y']"]
    assert undocumented("Record", Record) == ["Record: arguments not documented: ['b']", "Record.method: no docstring"]


def test_every_public_name_documents_its_arguments():
    problems = [p for name, value in public_names() for p in undocumented(name, value)]
    assert not problems, f"{len(problems)} public names lack documentation:\n" + "\n".join(problems)
