"""mkdocs hooks: the generated pages (``pages.py``) join the site, and the navigation's generated
sections ("API", "Tutorials") list them."""
from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages  # noqa: E402

_GENERATED: dict = {}


def on_config(config):
    generated, sections = pages.generated()
    _GENERATED.clear()
    _GENERATED.update(generated)
    config["nav"] = _expand(config["nav"], sections)
    return config


def _expand(nav, sections):
    """Each navigation entry ``{title: "generated"}`` whose title names a generated section becomes its pages."""
    out = []
    for entry in nav:
        if isinstance(entry, dict):
            (title, value), = entry.items()
            if value == "generated":
                value = sections[title]
            elif isinstance(value, list):
                value = _expand(value, sections)
            out.append({title: value})
        else:
            out.append(entry)
    return out


def on_files(files, config):
    for path, text in _GENERATED.items():
        files.append(File.generated(config, path, content=text))
    return files
