"""Runs as PNGs: a run's learning curve (training return and evaluations vs environment steps) and a
league's ratings (Elo vs environment steps)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence, Tuple

__all__ = ["plot_curve", "plot_league"]


def _figure() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)  # no display needed
    from matplotlib.figure import Figure  # a Figure not tied to pyplot's global state

    return Figure(figsize=(7, 4), dpi=100)


def plot_curve(path: str, curve: Sequence[Sequence[float]], evals: Sequence[Mapping[str, Any]]) -> None:
    """Writes ``path``: the running mean training return and each evaluation's mean (min-max band)."""
    figure = _figure()
    axes = figure.add_subplot()
    if curve:
        steps, returns = zip(*curve)
        axes.plot(steps, returns, label="training (mean of the last 100 episodes)", color="tab:blue")
    if evals:
        steps = [e["env_steps"] for e in evals]
        axes.plot(steps, [e["mean"] for e in evals], "o-", label="evaluation (mean, min-max)", color="tab:orange")
        axes.fill_between(steps, [e["min"] for e in evals], [e["max"] for e in evals], color="tab:orange",
                          alpha=0.2)
    axes.set_xlabel("environment steps")
    axes.set_ylabel("episodic return")
    axes.grid(alpha=0.3)
    if curve or evals:
        axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    figure.savefig(path)


def plot_league(path: str, runs: Mapping[str, Sequence[Tuple[int, float]]], random_elo: float) -> None:
    """Writes ``path``: each run's ``(env steps, Elo)`` points as a line, ``random``'s Elo as a horizontal one."""
    figure = _figure()
    axes = figure.add_subplot()
    for name, points in runs.items():
        steps, elos = zip(*points)
        axes.plot(steps, elos, "o-", label=name)
    axes.axhline(random_elo, color="grey", linestyle="--", label="random")
    axes.set_xlabel("environment steps")
    axes.set_ylabel("Elo")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
