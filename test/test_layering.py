"""The import rules of docs/architecture.md: ragged <- env <- {buffer, model} <- frame <- run.

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
LAYERS = {"ragged", "env", "buffer", "model", "frame", "run"}
ALLOWED = {
    "ragged": {"ragged"},
    "env": {"ragged", "env"},
    "buffer": {"ragged", "env", "buffer"},
    "model": {"ragged", "env", "model"},
    "frame": {"ragged", "env", "buffer", "model", "frame"},
    "run": LAYERS,
    "__main__": LAYERS,  # `python -m entmachin` is the command line
    "__init__": set(),  # `import entmachin` loads no layer: its exports resolve on first use
}
# (layer, module-path prefix inside entmachin) -> third-party packages it must not import
FORBIDDEN_PACKAGES = {
    "env": {"torch"}, "ragged/arrays.py": {"torch"}, "ragged/arrdict.py": {"torch"}, "ragged/trees.py": {"torch"},
    "ragged/array.py": {"torch"}, "ragged/interop.py": {"torch"}, "ragged/shim.py": {"torch"},
}
# The optional ragged-buffer package has one import site: every other module must not import it.
RAGGED_BUFFER_SITE = "ragged/interop.py"


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
        banned = set() if rel == RAGGED_BUFFER_SITE else {"ragged_buffer"}
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


@pytest.mark.parametrize("module", ["entmachin.env", "entmachin.env.examples", "entmachin.ragged"])
def test_env_side_never_loads_torch(module):
    code = f"import sys, {module}; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0, f"importing {module} loads torch"


def test_training_code_never_loads_ragged_buffer():
    code = ("import sys, entmachin.env, entmachin.frame, entmachin.run.runner, entmachin.env.examples; "
            "sys.exit('ragged_buffer' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0, "importing entmachin loads ragged_buffer"
