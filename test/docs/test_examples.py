"""docs/reference/examples.md names every example environment, each with its bundled config."""
import re

from entmachin.env.examples import ENV_REGISTRY
from entmachin.run.paths import bundled_config_path
from test.docs._pages import DOCS

PAGE = (DOCS / "reference" / "examples.md").read_text(encoding="utf-8")


def _rows(heading: str) -> list:
    """The first column of the first table after ``heading``."""
    section = PAGE.split(heading, 1)[1]
    table = re.search(r"^\|.*?(?=^[^|])", section, flags=re.S | re.M).group(0)
    cells = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
    return [re.sub(r"^\[(\w+)\].*", r"\1", cell) for cell in cells]


def test_examples_the_table_lists_every_environment_in_registry_order():
    assert _rows("## The environments") == list(ENV_REGISTRY)


def test_examples_every_environment_has_a_row_of_the_learning_table_and_a_bundled_config():
    assert sorted(_rows("## What the bundled configs reach")) == sorted(ENV_REGISTRY)
    assert all(bundled_config_path(name) for name in ENV_REGISTRY)


def test_examples_the_page_runs(page):
    ns = page("reference/examples.md")
    assert len(ns["ENV_REGISTRY"]) == 19
