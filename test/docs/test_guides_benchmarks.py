"""guides/benchmarks.md and guides/gpus.md name only scripts that exist, and the benchmarks page lists every
benchmark."""
import re

from test.docs._pages import DOCS, ROOT


def named_scripts(page):
    return set(re.findall(r"benchmarks/([\w.]+\.(?:py|sh))", (DOCS / page).read_text(encoding="utf-8")))


def test_every_script_the_pages_name_exists():
    for page in ("guides/benchmarks.md", "guides/gpus.md"):
        missing = [s for s in named_scripts(page) if not (ROOT / "benchmarks" / s).is_file()]
        assert not missing, f"{page}: {missing}"


def test_the_benchmarks_page_lists_every_benchmark():
    on_disk = {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert not on_disk - named_scripts("guides/benchmarks.md"), sorted(on_disk - named_scripts("guides/benchmarks.md"))
