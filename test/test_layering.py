"""The import rules of docs/architecture.md: ragged <- env <- {buffer, model} <- frame <- distributed <- run,
and no import cycles between entmachin's modules.

Every import is reported by its full name (`from entmachin.frame import ppo` is
`entmachin.frame.ppo`), so a message points at the module that was imported.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "entmachin"

# layer -> entmachin layers it may import; top-level modules are layers of their own
LAYERS = {"ragged", "env", "buffer", "model", "frame", "distributed", "run"}
ALLOWED = {
    "ragged": {"ragged"},
    "env": {"ragged", "env"},
    "buffer": {"ragged", "env", "buffer"},
    "model": {"ragged", "env", "model"},
    "frame": {"ragged", "env", "buffer", "model", "frame"},
    "distributed": {"ragged", "env", "buffer", "model", "frame", "distributed"},
    "run": LAYERS,
    "__main__": LAYERS,  # `python -m entmachin` is the command line
    "__init__": set(),  # `import entmachin` loads no layer: its exports resolve on first use
    "settings": set(),  # declares the fields of every layer's settings records: any layer imports it
    "deploy": {"ragged", "env"},  # runs exported policies: numpy, onnxruntime and the environment layer only
    "deploy_checks": {"ragged", "env"},  # deploy's checks of a batch: the same
    "deploy_memory": {"ragged", "env"},  # the states deploy keeps between calls: the same
    "data": {"ragged", "env", "data"},  # datasets on disk: pyarrow and numpy, so a recorder's process stays light
    "files": set(),  # atomic writes: the standard library only, for every layer
    "export_checksum": set(),  # an export's checksum: the standard library only, for the exporter and deploy
}
# (layer, module-path prefix inside entmachin) -> third-party packages it must not import
FORBIDDEN_PACKAGES = {
    "env": {"torch"}, "ragged/arrays.py": {"torch"}, "ragged/arrdict.py": {"torch"}, "ragged/trees.py": {"torch"},
    "ragged/array.py": {"torch"}, "deploy.py": {"torch"}, "deploy_checks.py": {"torch"}, "deploy_memory.py": {"torch"},
    "data": {"torch"}, "ragged/interop.py": {"torch"}, "ragged/shim.py": {"torch"},
    "files.py": {"torch", "numpy"}, "export_checksum.py": {"torch", "numpy", "onnx"},
    "ragged/layout.py": {"torch"}, "ragged/storage.py": {"torch"}, "ragged/arithmetic.py": {"torch"},
}
# The optional ragged-buffer package has one import site: every other module must not import it.
RAGGED_BUFFER_SITE = "ragged/interop.py"
# The tune extra's optuna is imported by `entmachin tune`'s own modules only.
OPTUNA_SITE = "run/tune/"


def _layer(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the module's package
                base = list(path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level])
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:  # `from entmachin import frame` is `entmachin.frame`, a layer
                yield node.lineno, module if alias.name == "*" else f"{module}.{alias.name}"


def _violations():
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = _layer(path)
        rel = path.relative_to(PACKAGE).as_posix()
        banned = (set() if rel == RAGGED_BUFFER_SITE else {"ragged_buffer"}) | \
            (set() if rel.startswith(OPTUNA_SITE) else {"optuna"})
        for prefix, pkgs in FORBIDDEN_PACKAGES.items():
            if rel == prefix or rel.startswith(prefix + "/"):
                banned |= pkgs
        for lineno, name in _imports(path):
            top, *rest = name.split(".")
            if top == "entmachin" and rest and layer in ALLOWED and rest[0] in LAYERS and rest[0] not in ALLOWED[layer]:
                yield f"{rel}:{lineno} imports {name}: layer '{layer}' may import only {sorted(ALLOWED[layer])}"
            if top in banned:
                yield f"{rel}:{lineno} imports {name}: {rel} must not import {top}"


def test_no_upward_or_forbidden_imports():
    violations = list(_violations())
    assert not violations, "\n".join(violations)


def test_detects_a_violation(tmp_path, monkeypatch):
    fake = tmp_path / "entmachin"
    (fake / "env").mkdir(parents=True)
    (fake / "env" / "bad.py").write_text("import torch\nfrom entmachin.frame import ppo\n")
    (fake / "env" / "sly.py").write_text("from entmachin import frame\nfrom .. import model\n")
    (fake / "frame").mkdir()
    (fake / "frame" / "up.py").write_text("from entmachin.run import cli\n")
    (fake / "__init__.py").write_text("from entmachin import run\n")
    (fake / "buffer").mkdir()
    (fake / "buffer" / "rb.py").write_text("from ragged_buffer import RaggedBufferF32\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    found = list(_violations())
    assert any("must not import torch" in v for v in found)
    assert any("env/bad.py:2 imports entmachin.frame.ppo: layer 'env' may import only" in v for v in found)
    assert any("env/sly.py:1 imports entmachin.frame: layer 'env'" in v for v in found)
    assert any("env/sly.py:2 imports entmachin.model: layer 'env'" in v for v in found)
    assert any("frame/up.py:1 imports entmachin.run.cli: layer 'frame'" in v for v in found)
    assert any("__init__.py:1 imports entmachin.run: layer '__init__' may import only []" in v for v in found)
    assert any("buffer/rb.py:1 imports ragged_buffer.RaggedBufferF32: buffer/rb.py must not import ragged_buffer" in v
               for v in found)


# ------------------------------------------------------------------------------- import cycles


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(node: ast.AST):
    """Every import statement under ``node``, at any depth (in functions and methods too), except
    those under ``if TYPE_CHECKING:`` (its ``else:`` branch runs, so it counts)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    runs = node.orelse if isinstance(node, ast.If) and _is_type_checking(node.test) else ast.iter_child_nodes(node)
    for child in runs:
        yield from _runtime_imports(child)


def _import_graph():
    """``{module: {imported module: {line, ...}}}`` over entmachin's modules (a package is its
    ``__init__``), with every import that can run, function-level ones included.

    ``import entmachin.a.b`` and ``from entmachin.a import b`` where ``entmachin/a/b.py`` (or the
    package ``entmachin/a/b/``) exists are edges to ``entmachin.a.b``; any other
    ``from entmachin.a import name`` is an edge to ``entmachin.a``. Relative imports are resolved
    against the importing module's package. Imports under ``if TYPE_CHECKING:`` are left out:
    they never run, so they cannot take part in a cycle.
    """
    paths = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}

    def known(name: str) -> str:  # the module itself, or the innermost package that holds the name
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = graph.setdefault(module, {})
        for node in _runtime_imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = node.module or ""
                if node.level:  # `from . import x` is the package itself, each further dot one package up
                    parts = package.split(".")
                    source = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in paths else source
                           for alias in node.names]
            for target in targets:
                target = known(target) if target.split(".")[0] == PACKAGE.name else ""
                if target and target != module:
                    edges.setdefault(target, set()).add(node.lineno)
    return graph


def _strongly_connected(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _cycles():
    graph = _import_graph()
    for component in _strongly_connected(graph):
        edges = [f"    {a} -> {b} (line {', '.join(map(str, sorted(lines)))})"
                 for a in component for b, lines in sorted(graph[a].items()) if b in component]
        yield "import cycle between " + ", ".join(component) + ":\n" + "\n".join(edges)


def test_no_import_cycles():
    """No module imports, even inside a function, a module that imports it back (directly or not):
    shared code goes down to a module both import. Imports under ``if TYPE_CHECKING:`` are not
    counted: they never run (see ``_import_graph``)."""
    cycles = list(_cycles())
    assert not cycles, "\n".join(cycles)


def test_detects_an_import_cycle(tmp_path, monkeypatch):
    fake = tmp_path / "entmachin"
    (fake / "a").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "a" / "__init__.py").write_text("from entmachin.a.one import f\n")
    (fake / "a" / "one.py").write_text("def f():\n    from . import two\n")  # a function-level import
    (fake / "a" / "two.py").write_text("from entmachin.a import three\n")  # the module, not the package
    (fake / "a" / "three.py").write_text("import entmachin.a.one\n")
    (fake / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from entmachin import c\n"
                               "else:\n    from entmachin.a import f\n")
    (fake / "c.py").write_text("from .b import x\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    graph = _import_graph()
    assert graph["entmachin.b"] == {"entmachin.a": {5}}  # not entmachin.c: a TYPE_CHECKING import never runs
    assert graph["entmachin.c"] == {"entmachin.b": {1}}
    assert graph["entmachin.a"] == {"entmachin.a.one": {1}}
    assert _strongly_connected(graph) == [["entmachin.a.one", "entmachin.a.three", "entmachin.a.two"]]
    (message,) = _cycles()
    assert message.splitlines() == [
        "import cycle between entmachin.a.one, entmachin.a.three, entmachin.a.two:",
        "    entmachin.a.one -> entmachin.a.two (line 2)",
        "    entmachin.a.three -> entmachin.a.one (line 1)",
        "    entmachin.a.two -> entmachin.a.three (line 1)",
    ]


@pytest.mark.parametrize("module", ["entmachin.env", "entmachin.env.examples", "entmachin.ragged"])
def test_env_side_never_loads_torch(module):
    code = f"import sys, {module}; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0, f"importing {module} loads torch"


def test_training_code_never_loads_ragged_buffer():
    code = ("import sys, entmachin.env, entmachin.frame, entmachin.run.runner, entmachin.env.examples; "
            "sys.exit('ragged_buffer' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0, "importing entmachin loads ragged_buffer"
