"""docs/guides/resume.md: the resumed run went on exactly, the refusal is the one shown, init_from started a run."""
import json
import pathlib

import torch

from entmachin.run import train
from test.docs._pages import DOCS, blocks

PAGE = "guides/resume.md"


def _actor(run_dir: pathlib.Path, steps: int) -> dict:
    (path,) = run_dir.glob(f"checkpoints/actor_{steps}.*.pt")
    return torch.load(path, weights_only=True)


def test_the_page_shows_the_refusal_of_a_frozen_field(page):
    assert page(PAGE)["refused"] == blocks(DOCS / PAGE, "text")[0].strip()


def test_the_resumed_run_ends_where_a_run_straight_through_ends(page, tmp_path, monkeypatch):
    ns = page(PAGE)
    resumed = pathlib.Path(ns["__directory__"]) / "runs" / "count"
    assert [e["env_steps"] for e in json.loads((resumed / "eval.json").read_text())] == [512, 1024]
    monkeypatch.chdir(tmp_path)
    train("Count", run_dir="straight", progress=False, overrides=["train.total_steps=1024", "log.eval_episodes=10"])
    a, b = _actor(resumed, 1024), _actor(tmp_path / "straight", 1024)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a if torch.is_tensor(a[k]))


def test_init_from_started_a_new_run_from_the_first_ones_networks(page):
    ns = page(PAGE)
    again = pathlib.Path(ns["__directory__"]) / "runs" / "count-again"
    assert (again / "checkpoints" / "checkpoint_512.json").exists()
    assert ns["start"].n_updates > 0
