"""``StopWhen``: ends a run early once its evaluations reach a figure (early stopping on a threshold)."""
from __future__ import annotations

import math
from typing import Any, Dict

from entmachin.run.callbacks.base import Callback
from entmachin.run.logs import RunError

__all__ = ["StopWhen"]


class StopWhen(Callback):
    """Stops the run when ``evaluations`` evaluations in a row reach ``at_least``; the run then ends as a
    finished one does (its final evaluation and checkpoint), with ``TrainResult.reason`` saying why.

    Args:
        figure: ``return`` (the evaluations' mean return) or an opponent of ``log.eval_opponents`` (the win
            rate against it).
        at_least: the threshold (reached when the figure is >= it).
        evaluations: how many evaluations in a row must reach it (>= 1; more than one guards against a
            lucky evaluation).

    In YAML::

        train:
          callbacks:
            - {class: StopWhen, kwargs: {figure: scripted, at_least: 0.9}}
    """

    def __init__(self, figure: str = "return", at_least: float = math.inf, evaluations: int = 1) -> None:
        if not isinstance(figure, str):
            raise ValueError(f"figure: expected 'return' or an opponent's name, got {figure!r}")
        if not isinstance(at_least, (int, float)) or isinstance(at_least, bool) or math.isnan(at_least):
            raise ValueError(f"at_least: expected a number, got {at_least!r}")
        if not isinstance(evaluations, int) or isinstance(evaluations, bool) or evaluations < 1:
            raise ValueError(f"evaluations: expected an int >= 1, got {evaluations!r}")
        self.figure, self.at_least, self.evaluations = figure, float(at_least), evaluations
        self._in_a_row = 0

    def on_start(self, run: Any) -> None:
        """Checks that ``run``'s evaluations measure ``figure``.

        Raises:
            RunError: ``figure`` is neither ``return`` nor one of ``log.eval_opponents``.
        """
        opponents = list(run.config.log.eval_opponents)
        if self.figure != "return" and self.figure not in opponents:
            raise RunError(f"StopWhen: figure {self.figure!r} is not measured by this run's evaluations; expected "
                           f"return or one of log.eval_opponents {opponents}")

    def on_evaluation(self, run: Any, record: Dict[str, Any]) -> None:
        """Counts ``record`` (an evaluation's ``eval.json`` entry) towards the evaluations in a row that reach
        ``at_least``, and stops ``run`` (``run.stop``) when there are enough; the final evaluation stops nothing."""
        value = record["mean"] if self.figure == "return" else record.get("win_rate", {}).get(self.figure, math.nan)
        self._in_a_row = self._in_a_row + 1 if value >= self.at_least else 0
        if self._in_a_row >= self.evaluations and not record.get("final"):
            what = "mean return" if self.figure == "return" else f"win rate against {self.figure}"
            run.stop(f"StopWhen: {what} {value:.3f} >= {self.at_least:g} at {record['env_steps']} environment steps"
                     + (f" ({self.evaluations} evaluations in a row)" if self.evaluations > 1 else ""))
