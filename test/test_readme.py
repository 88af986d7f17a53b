"""The README's Python example runs as written, and its minimal config loads.

The README is the front page: what entmachin is, the two commands, a short tour and links into the
site (``docs/``), whose pages carry the manual and whose Python blocks ``test/docs`` runs.
"""
import pathlib
import re

import pytest
import torch

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list:
    text = README.read_text()
    languages = set(re.findall(r"^```(\w*)\n", text, flags=re.M))
    # A block marked otherwise (```py, ```python3) would silently escape this test.
    assert languages <= {"python", "bash", ""}, f"README has code blocks marked {sorted(languages)}"
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def namespace(tmp_path_factory):
    """The namespace after every block ran (torch's thread count restored afterwards)."""
    blocks = python_blocks()
    assert blocks, "README has no python example"
    threads = torch.get_num_threads()
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.chdir(tmp_path_factory.mktemp("readme"))
    namespace: dict = {}
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"{README}, python block {i + 1}", "exec"), namespace)
    finally:
        monkeypatch.undo()
        torch.set_num_threads(threads)
    return namespace


def test_the_tour_collected_and_updated(namespace):
    ppo, stats = namespace["ppo"], namespace["stats"]
    assert ppo.n_updates == 3 and stats.n_env_steps == 32 * 8
    assert ppo.replay_buffer.size() == 0  # every stored row was trained on
    assert torch.isfinite(torch.tensor([namespace["objective"], namespace["value_loss"]])).all()


def test_the_minimal_run_config_loads():
    import yaml

    from entmachin.run.config import config_from_dict

    block = re.search(r"^A minimal config.*?^```\n(.*?)^```", README.read_text(), flags=re.S | re.M)
    assert block, "README shows no minimal run config"
    config = config_from_dict(yaml.safe_load(block.group(1)))
    assert config.env.name == "MineSweeper" and config.train.total_steps == 30000


def test_the_readme_stays_a_front_page_whose_links_reach_the_site():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    targets = re.findall(r"\]\((docs/[^)#]+)", text)
    assert len(targets) > 20, "the README links the site's pages"
    assert [t for t in targets if not (README.parent / t).exists()] == []
