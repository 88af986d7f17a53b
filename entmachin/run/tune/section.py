"""The run config's ``tune:`` section: what ``entmachin tune`` searches and how it scores a trial.

A study's trials are ordinary runs of the config with the searched keys set to the values the sampler
chose; the section itself is not part of what a run learns (the fingerprint leaves it out).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Literal, Optional, Tuple

from entmachin.settings import documented, setting

__all__ = ["TuneSection", "SPACE_KINDS", "PRUNERS"]

#: How a searched key's values are drawn: ``{log_uniform: [low, high]}`` (floats, log scale), ``{uniform: [low,
#: high]}`` (floats), ``{int: [low, high]}`` (integers, both ends included) or ``{choice: [a, b, ...]}``.
SPACE_KINDS: Tuple[str, ...] = ("log_uniform", "uniform", "int", "choice")
PRUNERS: Tuple[str, ...] = ("median", "halving", "none")


@documented
@dataclass(frozen=True, kw_only=True)
class TuneSection:
    metric: str = setting(
        "return", "what a trial scores: return (the final evaluation's mean return) or an opponent of "
                  "log.eval_opponents (the final evaluation's win rate against it)")
    direction: Literal["maximize", "minimize"] = setting("maximize", "maximize or minimize the metric")
    score: Literal["final", "mean"] = setting(
        "final", "a seed's figure: final (its last evaluation) or mean (the mean of its evaluations along the way, "
                 "the area under its learning curve: it favours a config that gets there in fewer steps)")
    steps: Optional[int] = setting(None, "environment steps per trial (per seed); null: train.total_steps")
    seeds: int = setting(1, "seeds per trial (train.seed, train.seed + 1, ...); a trial's value is their median")
    trials: int = setting(20, "trials in the study, counted over every process working on it (--trials)")
    pruner: Literal["median", "halving", "none"] = setting(
        "median", "stop a trial whose evaluations fall behind (median: below the median of earlier trials at the "
                  "same step; halving: successive halving); none: every trial runs its steps")
    space: Dict[str, Any] = setting(
        default_factory=dict,
        doc="config key -> values to search, e.g. {frame.actor_learning_rate: {log_uniform: [0.0001, 0.003]}, "
            "frame.batch_size: {choice: [64, 128, 256]}}; kinds: log_uniform, uniform, int, choice. With "
            "model.critic: shared, frame.actor_learning_rate is the one optimizer's (the critic's follows it)")

    def __post_init__(self) -> None:
        for name in ("seeds", "trials"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
        if self.steps is not None and (isinstance(self.steps, bool) or self.steps < 1):
            raise ValueError(f"steps: expected an int >= 1 or null, got {self.steps!r}")
