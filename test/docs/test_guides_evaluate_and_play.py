"""docs/guides/evaluate-and-play.md: the commands it runs and the output it shows are entmachin's."""
import io
import re

from entmachin.run.cli import main as entmachin
from test.docs._pages import DOCS, blocks

PAGE = "guides/evaluate-and-play.md"


def _shown(start):
    """The lines of the page's text block that starts with ``start``."""
    return next(b for b in blocks(DOCS / PAGE, "text") if b.startswith(start)).splitlines()


def test_the_in_process_evaluations_ran_and_the_missing_best_was_refused(page):
    ns = page(PAGE)
    assert (ns["latest"], ns["earlier"], ns["no_best"]) == (0, 0, 2)


def test_eval_prints_what_it_used_as_the_page_shows(page, capsys, monkeypatch):
    monkeypatch.chdir(page(PAGE)["__directory__"])
    capsys.readouterr()
    assert entmachin(["eval", "runs/count", "--episodes", "20"]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = _shown("$ entmachin eval runs/minesweeper")
    labels = lambda line: re.sub(r"\d+(\.\d+)?", "N", line)
    assert labels(printed[0]) == labels(shown[1])  # episodes N  return mean N  min N ...
    assert printed[1].startswith("checkpoint 1024 (the latest); sampled actions; seed 1000003 (the run's: "
                                 "train.seed + 1,000,003; --seed to change), 20 environments, step limit ")
    assert printed[1].endswith("(log.eval_max_steps)") and shown[2].endswith("(log.eval_max_steps)")


def test_a_run_without_a_best_checkpoint_says_so(page, capsys, monkeypatch):
    monkeypatch.chdir(page(PAGE)["__directory__"])
    capsys.readouterr()
    assert entmachin(["eval", "runs/count", "--checkpoint", "best"]) == 2
    shown = _shown("entmachin: error: 'runs/ms' has no best checkpoint")[0]
    assert capsys.readouterr().err.strip() == shown.replace("runs/ms", "runs/count")


def test_a_game_of_play_can_be_scripted(page, capsys, monkeypatch):
    monkeypatch.chdir(page(PAGE)["__directory__"])
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nq\n"))  # the agent's choice, then quit
    capsys.readouterr()
    assert entmachin(["play", "--checkpoint", "runs/count", "--seed", "0"]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = _shown("$ printf")
    assert printed[0] == "playing Count (seed 0) with the agent of runs/count"
    assert printed[1] == shown[2]  # the help line
    assert any(line.startswith("count for Player> agent: ") for line in printed)


def test_envs_lists_the_examples_as_shown(capsys):
    capsys.readouterr()
    assert entmachin(["envs"]) == 0
    shown = _shown("$ entmachin envs")[1:-1]  # between the command and the "..."
    assert capsys.readouterr().out.splitlines()[:len(shown)] == shown
