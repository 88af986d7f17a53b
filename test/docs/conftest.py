"""``page(name)``: a page's namespace after its Python blocks ran, run once per test session."""
import os

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


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site built by ``mkdocs build --strict`` into a temporary directory: (directory, what the
    build printed, seconds it took). The docs extra is a test dependency: without mkdocs this fails."""
    import subprocess
    import sys
    import time

    from test.docs._pages import ROOT

    directory = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(directory)],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    seconds = time.perf_counter() - start
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return directory, done.stdout + done.stderr, seconds
