"""``page(name)``: a page's namespace after its Python blocks ran, run once per test session."""
import pytest

from test.docs._pages import DOCS, run_page

_RUN: dict = {}


@pytest.fixture(scope="session")
def page(tmp_path_factory):
    def run(name: str):
        if name not in _RUN:
            directory = tmp_path_factory.mktemp(name.replace("/", "-").removesuffix(".md"))
            _RUN[name] = run_page(DOCS / name, directory)
        return _RUN[name]
    return run
