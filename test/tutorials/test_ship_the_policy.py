"""Tutorial 8 (ship the policy): train, export, one step by hand, and games in a process without torch."""
import os
import re

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from test.tutorials._load import load_tutorial  # noqa: E402


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("08_ship_the_policy.py")


def test_smoke_run_exports_and_plays_the_same_games_without_torch(tutorial, tmp_path, capsys):
    from entmachin.deploy import OnnxPolicy
    from entmachin.env.examples import MineSweeper
    from entmachin.run.evaluation import evaluate_checkpoint

    threads = torch.get_num_threads()
    run_dir = tmp_path / "runs" / "minesweeper_ship"
    figures = tutorial["main"](["--smoke", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert torch.get_num_threads() == threads

    # 1. the command trained on the tiny budget
    assert re.search(r"mean evaluation return \d\.\d{3} over 8 episodes after 256 environment steps "
                     r"\(a random policy: \d\.\d{3}\)", out), out
    # 2. the command wrote the file; it loads, and says what it is
    path = run_dir / "policy.onnx"
    assert f"$ entmachin export {run_dir} -o {path}\nwrote {path} (rogue-net policy, " in out
    policy = OnnxPolicy(str(path))
    assert policy.kind == "rogue-net policy" and policy.metadata["env"] == "MineSweeper"
    assert policy.metadata["env_steps"] == 256 and policy.metadata["frame"] == "PPO"
    assert "from MineSweeper, frame PPO, after 256 environment steps" in out
    assert "action 'Move' (categorical): ['Up', 'Down', 'Left', 'Right', 'Defuse Mines']" in out
    assert re.search(r"  features/Mine +\['n_entities/Mine', 2\] +tensor\(float\)\n", out), out
    assert re.search(r"  mask/Move +\['n_actors/Move', 5\] +tensor\(bool\)\n", out), out
    assert re.search(r"  sample/Move +\['n_actors/Move'\] +tensor\(int64\)\n", out), out
    # 3. one observation by hand: actions, sampled twice alike; the feeds; sample/Move is the inverse CDF
    assert "robots [[1, 3], [1, 4]] (the orbital cannon is off: no actor fires)" in out
    sampled = re.search(r"rng=np.random.default_rng\(0\)\): Move (\[.*?\]); the same rng again: (\[.*?\])\n", out)
    assert sampled and sampled.group(1) == sampled.group(2), out
    assert re.search(r"one game played with .*: return [01]\.0 after \d+ steps", out), out
    assert re.search(r"  actors/Move +int64\[6\]  \[5, 6, 5, 6, 5, 6\]\n", out), out
    assert re.search(r"  mask/Move +bool\[6, 5\] ", out), out
    assert "sample/Move agrees: True" in out

    # 4. the child process: torch could not be imported, and nothing of torch was loaded
    script = run_dir / "play_without_torch.py"
    assert script.exists() and 'sys.modules["torch"] = None' in script.read_text()
    assert figures["torch_import"].startswith("ImportError") and figures["torch_loaded"] == []
    assert "`import torch` -> ImportError" in out and "torch modules loaded: []" in out
    # ... it played the episodes `entmachin eval --deterministic` plays, and took the same actions
    assert figures["episodes"] == 20
    assert figures["returns_differ"] <= 2 and figures["lengths_differ"] <= 2, figures  # near-ties may flip one
    assert f"$ entmachin eval {run_dir} --episodes 20 --deterministic\nepisodes 20  return mean " in out
    expected = evaluate_checkpoint(str(run_dir), 20, True, None)
    assert figures["torch_mean"] == pytest.approx(expected.mean)
    assert abs(figures["onnx_mean"] - expected.mean) <= 0.1
    assert re.search(r"episode by episode, ONNX without torch against PyTorch: \d+ of 20 returns differ, "
                     r"\d+ lengths differ", out), out
    assert re.search(r"time for the 20 games: onnxruntime \d+\.\d\d s, PyTorch \d+\.\d\d s", out), out
    assert 0.0 <= figures["random_mean"] <= 1.0
    assert figures["onnx_seconds"] > 0 and figures["torch_seconds"] > 0

    # the same file plays a game here too, with the actions MineSweeper takes
    env = MineSweeper()
    env.seed(3)
    obs = env.reset()
    actions = policy.act(obs)
    assert list(actions["Move"].actors) == obs.ids["Robot"] and len(actions["Move"].indices) == 2
    env.act(actions)
    assert np.isfinite(actions["Move"].probs).all()
    assert os.path.getsize(path) > 10_000


def test_bad_arguments_exit_with_a_message(tutorial, capsys):
    with pytest.raises(SystemExit):
        tutorial["main"](["--episodes", "0"])
    assert "--episodes must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_full_budget_plays_as_well_without_torch(tutorial, tmp_path, capsys):
    """Seed 0, 102,400 steps: mean return 1.00 exported and in PyTorch (a random policy: 0.07)."""
    figures = tutorial["main"](["--run-dir", str(tmp_path / "minesweeper_ship")])
    summary = capsys.readouterr().out[-600:]
    assert figures["episodes"] == 100 and figures["returns_differ"] <= 2, summary
    assert figures["onnx_mean"] > 0.8 and figures["onnx_mean"] > figures["random_mean"] + 0.5, summary
