"""guides/export-and-deploy.md: both exports were written, the exported policy played MoveToOrigin, and the run's
export plays the episodes the run's deterministic evaluation plays, with the returns the PyTorch actor gives."""
import numpy as np

PAGE = "guides/export-and-deploy.md"


def test_both_exports_were_written(page):
    directory = page(PAGE)["__directory__"]
    assert (directory / "runs" / "mto" / "policy.onnx").is_file() and (directory / "policy.onnx").is_file()


def test_the_exported_policy_played_the_environment(page):
    ns = page(PAGE)
    shipped = ns["shipped"]
    assert len(shipped.returns) == 16 and np.isfinite(shipped.mean)
    assert set(ns["sampled"]) == set(ns["onnx_policy"].action_space)


def test_only_the_runs_export_carries_how_the_run_evaluates(page):
    ns = page(PAGE)
    assert "evaluation" not in ns["onnx_policy"].metadata
    assert ns["run_policy"].metadata["evaluation"]["seed"] == 1_000_003  # train.seed 0 + 1,000,003


def test_the_shipped_returns_are_the_pytorch_actors(page):
    from entmachin.env import TimeLimit
    from entmachin.env.examples import MoveToOrigin
    from entmachin.frame import evaluate

    ns = page(PAGE)
    run = ns["run_policy"].metadata["evaluation"]
    limit = run["max_episode_steps"]
    make = MoveToOrigin if limit is None else (lambda: TimeLimit(MoveToOrigin(), limit))
    torch_side = evaluate(ns["frame"], make, 16, deterministic=True, seed=run["seed"], num_envs=16)
    assert np.allclose(sorted(torch_side.returns), sorted(ns["shipped"].returns), atol=1e-5)
