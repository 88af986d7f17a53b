"""The learning curve of a run as a PNG: training return and evaluations vs environment steps."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = ["plot_curve"]


def plot_curve(path: str, curve: Sequence[Sequence[float]], evals: Sequence[Mapping[str, Any]]) -> None:
    """Writes ``path``: the running mean training return and each evaluation's mean (min-max band)."""
    import matplotlib

    matplotlib.use("Agg", force=False)  # no display needed
    from matplotlib.figure import Figure  # a Figure not tied to pyplot's global state

    figure = Figure(figsize=(7, 4), dpi=100)
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
