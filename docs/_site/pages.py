"""The site's generated pages: the API reference, the run config's reference, the command line's
reference and the tutorials, each read from the code at build time so that none can drift.

``hooks.py`` hands them to mkdocs; a test builds them too. Nothing here is a page source: the
folder is excluded from the site (``exclude_docs`` in ``mkdocs.yml``).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pathlib
import re
from typing import Any, Dict, List, Tuple

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "tutorials"
OUTPUTS = TUTORIALS / "outputs"

# The packages of the API reference, in the order of the layers (lowest first), and what each holds.
PACKAGES: Dict[str, str] = {
    "entmachin.ragged": "ragged arrays on numpy and torch, arrdict",
    "entmachin.env": "the environment API, vectorised environments, validation, adapters",
    "entmachin.env.examples": "the example environments and games",
    "entmachin.buffer": "transitions and replay buffers over ragged data",
    "entmachin.model": "RogueNet and the MLPs",
    "entmachin.frame": "the algorithm frames, safe_call, GAE, evaluation",
    "entmachin.distributed": "data-parallel updates across torchrun ranks",
    "entmachin.data": "datasets of recorded episodes",
    "entmachin.deploy": "exported policies run with numpy and onnxruntime",
    "entmachin.run": "training from Python, callbacks",
    "entmachin.run.callbacks": "the runner's callbacks",
}


def api_pages() -> Dict[str, str]:
    """``{path: markdown}``: an index, and one page per package with an entry for every name its
    ``__all__`` exports (mkdocstrings renders each from its docstring)."""
    pages = {}
    index = ["# API reference", "",
             "Every public name of entmachin, generated from the docstrings: what each package's "
             "`__init__` exports. The layers import downwards only (see [the architecture](../../architecture.md)).",
             "", "| package | holds |", "|---|---|"]
    for package, holds in PACKAGES.items():
        index.append(f"| [`{package}`]({package}.md) | {holds} |")
    top = importlib.import_module("entmachin")
    index += ["", "## `import entmachin`", "",
              "`import entmachin` loads no layer: each of its names resolves, on first use, to the layer that "
              "defines it.", "", "| name | is |", "|---|---|"]
    for name in top.__all__:
        if name == "__version__":
            index.append(f"| `entmachin.__version__` | the version, `{top.__version__}` |")
            continue
        layer = top._EXPORTS[name]
        index.append(f"| `entmachin.{name}` | [`entmachin.{layer}.{name}`][entmachin.{layer}.{name}] |")
    pages["reference/api/index.md"] = "\n".join(index) + "\n"
    for package in PACKAGES:
        module = importlib.import_module(package)
        lines = [f"# `{package}`", "", _module_text(module), ""]
        options = "    options:\n      show_root_heading: true\n      heading_level: 2"
        if package == "entmachin.env.examples":  # environments: their methods are Environment's
            options += "\n      members: false"
        static = _static_names(module)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.ismodule(value):
                continue
            fields = _settings_fields(value)
            if fields:  # a settings record: its fields' declarations, as a table
                lines += [f"::: {package}.{name}", options + "\n      members: false", "", *fields, ""]
            elif name in static:
                lines += [f"::: {package}.{name}", options, ""]
            else:  # resolved on first use (``__getattr__``): rendered from its module, found by its package's name
                lines += [f"[](){{#{package}.{name}}}", "", f"::: {value.__module__}.{value.__qualname__}", options, ""]
        pages[f"reference/api/{package}.md"] = "\n".join(lines)
    return pages


def _settings_fields(value: Any) -> List[str]:
    """A table of a settings record's fields (``entmachin.settings.setting``): name, type, default and
    the description the declaration carries; ``[]`` for anything else."""
    import dataclasses

    from entmachin.settings import default_of, docs_of

    if not (inspect.isclass(value) and dataclasses.is_dataclass(value)):
        return []
    docs = docs_of(value)
    if not docs or not all(docs.get(f.name) for f in dataclasses.fields(value)):
        return []
    lines = ["| field | type | default | what it does |", "|---|---|---|---|"]
    for f in dataclasses.fields(value):
        default = "required" if default_of(f) is dataclasses.MISSING else f"`{default_of(f)!r}`"
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        lines.append(f"| `{f.name}` | `{_cell(str(kind))}` | {_cell(default)} | {_cell(docs[f.name])} |")
    return ["**Fields**", "", *lines]


def _static_names(module: Any) -> set:
    """The names a module's source binds at its top level (what griffe sees without running it)."""
    tree = ast.parse(pathlib.Path(module.__file__).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _module_text(module: Any) -> str:
    return _markdown(inspect.getdoc(module) or "")


_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj):`~?([^`]+)`")


def roles_as_code(text: str) -> str:
    """``text`` with its Sphinx roles (``:class:`X```) as Markdown's inline code (```X```)."""
    return _ROLE.sub(r"`\1`", text)


def _markdown(doc: str) -> str:
    """A docstring as Markdown: its reST literal blocks (``::``, indented blocks) fenced, its roles dropped."""
    doc = roles_as_code(doc)
    out: List[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        literal = line.rstrip().endswith("::") and not line.strip().startswith(">>>")
        example = line.strip() in ("Example:", "Examples:")
        if literal or example:
            out.append("**Example**" if example else line.rstrip()[:-3 if line.rstrip().endswith(" ::") else -1])
            block, i = _indented(lines, i + 1)
            out += ["", "```text", *block, "```", ""]
        elif line.startswith("    ") and (not out or not out[-1].strip()):  # an indented block: shown as it is
            block, i = _indented(lines, i)
            out += ["```text", *block, "```", ""]
        else:
            out.append(line)
            i += 1
    return "\n".join(out)


def _indented(lines: List[str], i: int) -> Tuple[List[str], int]:
    """The block of lines indented by four spaces from line ``i`` on (dedented, without blank lines at
    either end), and the index of the line after it."""
    block = []
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
        block.append(lines[i][4:])
        i += 1
    while block and not block[-1].strip():
        block.pop()
    while block and not block[0].strip():
        block.pop(0)
    return block, i


# --- the run config ---------------------------------------------------------------------------

def _type_text(schema: Dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(dict.fromkeys(_type_text(s) for s in schema["anyOf"]))
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema and len(schema["enum"]) == 1:
        return f"`{schema['enum'][0]}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(_type_text(s) for s in schema["prefixItems"]) + "]"
        return f"list of {_type_text(schema.get('items', {}))}"
    if kind == "object":
        if schema.get("properties"):
            return "{" + ", ".join(schema["properties"]) + "}"
        return "mapping"
    return {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "null": "null"}.get(kind, "any")


def _limits(schema: Dict[str, Any]) -> str:
    parts = []
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in schema:
            parts.append(f"{sign} {schema[key]}")
    return f" ({', '.join(parts)})" if parts else ""


def _default_text(schema: Dict[str, Any]) -> str:
    if "default" not in schema:
        return "—"
    text = yaml.safe_dump(schema["default"], default_flow_style=True, width=10_000).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return f"`{text}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(properties: Dict[str, Any], prefix: str) -> List[str]:
    lines = ["| key | type | default | what it does |", "|---|---|---|---|"]
    for key, schema in properties.items():
        lines.append(f"| `{prefix}.{key}` | {_cell(_type_text(schema) + _limits(schema))} | "
                     f"{_cell(_default_text(schema))} | {_cell(schema.get('description', ''))} |")
    return lines


def config_reference() -> str:
    """Every section and field of a run config, with its type, default and description, from the
    run config's JSON Schema (which reads the fields' declarations), and the commented file
    ``entmachin init`` writes."""
    from entmachin.run.describe import FIELD_DOCS
    from entmachin.run.schema import json_schema

    schema = json_schema()
    lines = ["# Run config reference", "",
             "Every field of a run config, generated from the fields' declarations: the same descriptions "
             "`entmachin init` writes as comments and `entmachin schema` gives editors. A field left out takes "
             "the default shown (for the frame section, the run layer's defaults for that frame: "
             "[where they come from](../guides/train-from-yaml.md)). `--set section.key=value` overrides any of "
             "them on the command line.", "",
             "Sections: " + ", ".join(f"[`{name}`](#{name})" for name in schema["properties"]) + ".", ""]
    for name, section in schema["properties"].items():
        about = FIELD_DOCS[name].rstrip(".")
        lines += [f"## `{name}`", "", about[:1].upper() + about[1:] + ".", ""]
        if name == "frame":
            branches = {b["then"]["properties"]["name"]["const"]: b["then"]["properties"] for b in section["allOf"]}
            lines += ["`frame.name` chooses the algorithm, and with it the frame's fields:", ""]
            for frame, properties in branches.items():
                lines += [f"### `frame.name: {frame}`", "", *_table(properties, "frame"), ""]
        else:
            lines += [*_table(section["properties"], name), ""]
    lines += ["## A complete file", "",
              "`entmachin init MineSweeper` writes every field of a run config, each with its description; "
              "fields that only the other kind of network reads are written commented out:", "",
              "```yaml", _init_text("MineSweeper").rstrip(), "```", ""]
    return "\n".join(lines)


def _init_text(env: str) -> str:
    import contextlib
    import io

    from entmachin.run.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["init", env])
    return out.getvalue()


# --- the command line -------------------------------------------------------------------------

def cli_reference() -> str:
    """Every command's ``--help``, from the parser ``entmachin`` runs."""
    from entmachin.run.cli import _parser

    parser = _parser()
    lines = ["# Command line reference", "",
             "Every command of `entmachin` (`python -m entmachin` is the same) with its `--help`, generated from "
             "the parser the command runs. Bad input ends with a one-line error naming the field or file and exit "
             "status 2; `entmachin --debug COMMAND ...` shows the traceback.", "",
             "```text", _help(parser).rstrip(), "```", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        lines += [f"## `entmachin {name}`", "", "```text", _help(command).rstrip(), "```", ""]
    return "\n".join(lines)


def _help(parser: argparse.ArgumentParser) -> str:
    import os
    from unittest import mock

    with mock.patch.dict(os.environ, {"COLUMNS": "100"}):
        return parser.format_help()


# --- the tutorials ----------------------------------------------------------------------------

def tutorials() -> List[pathlib.Path]:
    return sorted(TUTORIALS.glob("[0-9][0-9]_*.py"))


def tutorial_title(path: pathlib.Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or path.stem
    return _plain(doc.split("\n")[0]).rstrip(".")


def _plain(text: str) -> str:
    """reST's inline literals (````x````) as Markdown's (```x```)."""
    return text.replace("``", "`")


def tutorial_page(path: pathlib.Path) -> str:
    """The tutorial's docstring as the page's text, how to run it, its code, and what a whole run printed."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    first, _, rest = doc.partition("\n")
    body = source.splitlines()[tree.body[0].end_lineno:] if doc else source.splitlines()
    code = "\n".join(body).strip("\n")
    output = OUTPUTS / f"{path.stem}.txt"
    lines = [f"# {_plain(first).rstrip('.')}", "", _markdown(rest.strip("\n")), "",
             f"The whole script, `tutorials/{path.name}`, is below; run it from the repository's root "
             f"(`--smoke` runs it on fewer steps in seconds).", "",
             "## The code", "", "```python", code, "```", "", "## What it prints", ""]
    if output.exists():
        header, _, printed = output.read_text(encoding="utf-8").partition("\n")
        lines += [header.removeprefix("# ").strip() + ":", "", "```text", printed.rstrip(), "```", ""]
    else:
        lines += ["Not recorded yet (`python docs/_site/tutorial_outputs.py` records it).", ""]
    return "\n".join(lines)


def tutorial_pages() -> Dict[str, str]:
    pages = {"tutorials/index.md": "\n".join(
        ["# Tutorials", "",
         "Runnable walk-throughs that print real values at each step. Each is one script in `tutorials/`; "
         "`--smoke` runs it on fewer steps in seconds, which the test suite does. Each page shows the code and "
         "what a whole run printed.", "", "| tutorial | what it shows |", "|---|---|",
         *[f"| [{tutorial_title(p)}]({p.stem}.md) | {_first_paragraph(p)} |" for p in tutorials()], ""])}
    for path in tutorials():
        pages[f"tutorials/{path.stem}.md"] = tutorial_page(path)
    return pages


def _first_paragraph(path: pathlib.Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraphs = [p for p in doc.split("\n\n")[1:] if p.strip() and not p.startswith("    ")]
    text = paragraphs[0] if paragraphs else ""
    return _cell(" ".join(text.split()))


def nav_of(pages: Dict[str, str], prefix: str) -> List[Dict[str, str]]:
    """Navigation entries ``{title: path}`` for the generated pages under ``prefix``."""
    out = []
    for path, text in pages.items():
        if path.startswith(prefix):
            title = text.split("\n", 1)[0].lstrip("# ").strip().replace("`", "")
            out.append({title: path})
    return out


def generated() -> Tuple[Dict[str, str], Dict[str, List[Dict[str, str]]]]:
    """Every generated page, and the navigation sections that list them."""
    api, tut = api_pages(), tutorial_pages()
    pages = {**api, **tut, "reference/config.md": config_reference(), "reference/cli.md": cli_reference()}
    return pages, {"API": nav_of(api, "reference/api/"), "Tutorials": nav_of(tut, "tutorials/")}
