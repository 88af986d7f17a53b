"""Every Python block of every page runs as written; blocks are fenced with known languages."""
import pytest

from test.docs._pages import DOCS, LANGUAGES, blocks, languages, pages


@pytest.mark.parametrize("path", pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_the_page_fences_its_blocks_with_known_languages(path):
    assert languages(path) <= LANGUAGES, f"{path.name}: blocks marked {sorted(languages(path) - LANGUAGES)}"


@pytest.mark.parametrize("path", [p for p in pages() if blocks(p)], ids=lambda p: str(p.relative_to(DOCS)))
def test_every_python_block_of_the_page_runs(path, page):
    namespace = page(str(path.relative_to(DOCS)))
    assert namespace["__directory__"].is_dir()
