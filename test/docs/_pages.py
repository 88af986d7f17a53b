"""The site's pages as tests see them: their fenced code blocks, and their Python blocks run.

Every ```python block of a page runs, in order, in one namespace of the page's own, with a fresh
temporary directory as the working directory: a page tells one story, so a block may use what an
earlier block of the same page defined, never what another page did. A block that only shows
what something prints is fenced ```text; a shell command is ```bash; a config is ```yaml. Other
languages are refused (a ```py block would silently escape the run).
"""
from __future__ import annotations

import logging
import pathlib
import re
from typing import Dict, List

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LANGUAGES = {"python", "bash", "text", "yaml", ""}
_FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.S | re.M)


def pages() -> List[pathlib.Path]:
    """Every Markdown source of the site (the generated pages are not sources)."""
    return sorted(p for p in DOCS.rglob("*.md") if "_site" not in p.parts)


def blocks(path: pathlib.Path, language: str = "python") -> List[str]:
    """The page's fenced blocks of ``language``, dedented to their fence's indentation."""
    out = []
    for match in _FENCE.finditer(path.read_text(encoding="utf-8")):
        if match.group("lang") == language:
            indent = len(match.group("indent"))
            out.append("".join(line[indent:] for line in match.group("body").splitlines(keepends=True)))
    return out


def languages(path: pathlib.Path) -> set:
    return {m.group("lang") for m in _FENCE.finditer(path.read_text(encoding="utf-8"))}


def _logger_levels() -> Dict[str, int]:
    return {name: logger.level for name, logger in logging.Logger.manager.loggerDict.items()
            if isinstance(logger, logging.Logger)}


def run_page(path: pathlib.Path, directory: pathlib.Path) -> Dict[str, object]:
    """The namespace after every Python block of ``path`` ran in ``directory`` (torch's thread count
    and the loggers' levels restored afterwards); ``__directory__`` names the directory."""
    monkeypatch = pytest.MonkeyPatch()
    threads, levels = torch.get_num_threads(), _logger_levels()
    monkeypatch.chdir(directory)
    namespace: Dict[str, object] = {"__name__": "docs_page"}
    try:
        for i, block in enumerate(blocks(path)):
            exec(compile(block, f"{path.relative_to(ROOT)}, python block {i + 1}", "exec"), namespace)
    finally:
        monkeypatch.undo()
        torch.set_num_threads(threads)
        for name, logger in logging.Logger.manager.loggerDict.items():  # a page may quiet a logger for itself
            if isinstance(logger, logging.Logger):
                logger.setLevel(levels.get(name, logging.NOTSET))
    namespace["__directory__"] = directory
    return namespace


def episodes_ended_under_validation(environment, steps: int = 120) -> int:
    """How many episodes of ``environment`` (a class a page defined) ended in ``steps`` random steps of 4
    copies, each checked by ``ValidatingEnv``: a mistake in its observations raises."""
    import numpy as np

    from entmachin.env import EnvList, ValidatingEnv, random_actions

    envs = EnvList(lambda: ValidatingEnv(environment()), 4, seed=0)
    obs, rng, ended = envs.reset(), np.random.default_rng(0), 0
    for _ in range(steps):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        ended += int(obs.done.sum())
    return ended
