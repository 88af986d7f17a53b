"""The top-level package: version, lazy exports, and the architecture document it points to."""
import pathlib
import re
import subprocess
import sys

import pytest

import entmachin

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_import_loads_no_layer_and_no_torch():
    code = ("import sys, entmachin; "
            "sys.exit(any(m == 'torch' or m.startswith('entmachin.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("name", [n for n in entmachin.__all__ if n != "__version__"])
def test_every_export_is_the_layers_object(name):
    layer = entmachin._EXPORTS[name]
    module = __import__(f"entmachin.{layer}", fromlist=[name])
    assert getattr(entmachin, name) is getattr(module, name)


@pytest.mark.parametrize("layer", entmachin._LAYERS)
def test_every_layer_resolves_as_an_attribute(layer):
    import importlib

    assert getattr(entmachin, layer) is importlib.import_module(f"entmachin.{layer}")
    assert layer in dir(entmachin)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match=r"module 'entmachin' has no attribute 'PPOO'"):
        entmachin.PPOO  # noqa: B018


def test_the_version_is_written_once():
    assert re.fullmatch(r"\d+\.\d+\.\d+", entmachin.__version__)
    setup = (ROOT / "setup.py").read_text()
    assert "version=VERSION" in setup and "__version__" in setup


def test_the_architecture_document_is_in_the_repository_and_its_files_exist():
    text = (ROOT / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"`((?:ragged|env|buffer|model|frame|run)/[a-z_]+\.py)`", text))
    assert len(paths) >= 15
    missing = [p for p in sorted(paths) if not (ROOT / "entmachin" / p).exists()]
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_no_module_points_outside_the_repository_for_its_architecture():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "entmachin").rglob("*.py")
                 if "ARCHITECTURE.md" in p.read_text()]
    assert not offenders, f"point to docs/architecture.md instead: {offenders}"


def test_what_the_readme_writes_into_the_checkout_is_ignored_by_git():
    """The directories the README's commands write (runs, datasets) stay out of `git status`."""
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()}
    readme = (ROOT / "README.md").read_text()
    written = set(re.findall(r"entmachin record .*?-o ([\w.-]+)/", readme))
    written |= set(re.findall(r"--run-dir ([\w.-]+)/", readme))
    assert written and written <= ignored, written - ignored
