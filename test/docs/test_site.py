"""The site builds under ``mkdocs build --strict`` (a warning, a broken link or reference, a page left
out of the navigation fails it), and its generated pages hold every public name, every config field,
every command and every tutorial."""
import html
import importlib
import re

from test.docs._pages import DOCS

import sys
sys.path.insert(0, str(DOCS / "_site"))
import pages  # noqa: E402


def _text(path):
    """A built page's text: tags (the highlighter's spans among them) dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def test_the_site_builds_without_a_warning(built_site):
    directory, printed, seconds = built_site
    assert not [line for line in printed.splitlines() if "WARNING" in line or "ERROR" in line], printed
    assert (directory / "index.html").exists() and (directory / "search" / "search_index.json").exists()
    print(f"mkdocs build --strict: {seconds:.1f} s")


def test_every_public_name_has_an_entry_in_the_api_reference(built_site):
    directory = built_site[0]
    for package in pages.PACKAGES:
        text = (directory / "reference" / "api" / package / "index.html").read_text(encoding="utf-8")
        ids = set(re.findall(r'id="([^"]+)"', text))
        module = importlib.import_module(package)
        missing = [name for name in module.__all__ if not isinstance(getattr(module, name), type(module))
                   and f"{package}.{name}" not in ids]
        assert not missing, f"{package}: no entry for {missing}"


def test_the_config_reference_lists_every_field(built_site):
    from entmachin.run.describe import field_docs
    from entmachin.run.sections import _DERIVED, FRAMES

    text = html.unescape((built_site[0] / "reference" / "config" / "index.html").read_text(encoding="utf-8"))
    missing = set()
    for frame, settings in FRAMES.items():
        internal = {*_DERIVED, *getattr(settings, "unused", ())}  # set by the loader, not by a config
        for key, doc in field_docs(frame).items():
            section, _, name = key.partition(".")
            if name and name not in internal and not doc.startswith("set by the loader") \
                    and f"<code>{key}</code>" not in text:
                missing.add(key)
    assert not missing, f"the config reference leaves out {sorted(missing)}"
    init = _text(built_site[0] / "reference" / "config" / "index.html")  # with the commented file entmachin init writes
    assert "d_model: 32  # width of the entity embeddings" in init


def test_the_command_reference_shows_every_command(built_site):
    from entmachin.run.cli import _parser

    text = _text(built_site[0] / "reference" / "cli" / "index.html")
    sub = next(a for a in _parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    for name in sub.choices:
        assert f"entmachin {name}" in text and f"usage: entmachin {name}" in text, name


def test_every_tutorial_is_a_page_with_its_code_and_what_it_printed(built_site):
    for path in pages.tutorials():
        assert (pages.OUTPUTS / f"{path.stem}.txt").exists(), f"no recorded output for {path.name}"
        text = _text(built_site[0] / "tutorials" / path.stem / "index.html")
        assert "What it prints" in text and "def main" in text, path.name
        printed = (pages.OUTPUTS / f"{path.stem}.txt").read_text(encoding="utf-8").splitlines()[1:]
        first = next(line for line in printed if line.strip())
        assert first.strip()[:40] in text, f"{path.name}: the page does not show what the run printed"
