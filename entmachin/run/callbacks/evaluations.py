"""``Evaluations``: the policy evaluated every ``log.eval_interval`` steps and at the end.

Each evaluation plays ``log.eval_episodes`` episodes (and as many games against each opponent of
``log.eval_opponents``), writes ``eval/*`` to tensorboard, ``eval.json`` and ``curve.png``, then tells every
callback (``on_evaluation``). Evaluations sample from a fork of torch's generator, seeded alike each time,
so a run learns the same whether or when they run.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional


from entmachin.env.multi_agent import is_multi_agent
from entmachin.frame import evaluate
from entmachin.run import logs
from entmachin.run.envs import EnvFactory
from entmachin.run.callbacks.base import Callback
from entmachin.run.config import RunConfig
from entmachin.run.evaluation import eval_options, seeded_sampling
from entmachin.run.logs import RunError
from entmachin.run.matches import load_opponent, match

__all__ = ["Evaluations", "check_evaluations"]

logger = logging.getLogger(__name__)


class Evaluations(Callback):
    """Evaluates when ``run.state.next_eval`` is due (the run's last step excepted: :meth:`evaluate` with
    ``final=True`` ends it); only the process that writes the run directory evaluates."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def after_update(self, run: Any, stats: Any) -> None:
        state, config = run.state, run.config
        if state.env_steps >= state.next_eval and state.env_steps < config.train.total_steps:
            self.evaluate(run, final=False)
            state.next_eval = logs.next_due(state.next_eval, state.env_steps, config.log.eval_interval)

    def evaluate(self, run: Any, final: bool) -> Optional[Dict[str, Any]]:
        """One evaluation (None on the other ranks): its record, appended to ``run.state.evals``."""
        if not run.lead:
            return None
        config, step = run.config, run.state.env_steps
        last = run.state.evals[-1] if run.state.evals else None
        if final and last is not None and last["env_steps"] == step and not last["final"]:
            # a run stopped right after an evaluation (StopWhen): the same policy, seed and games, so the same figures
            return self._record(run, {**last, "final": True})
        episodes, deterministic = config.log.eval_episodes, config.log.eval_deterministic
        with seeded_sampling(self.seed):
            result = evaluate(run.frame, EnvFactory(config.env), episodes, deterministic=deterministic,
                              seed=self.seed, **eval_options(config, episodes))
            win_rates = {}
            for opponent in config.log.eval_opponents:  # games of several players
                matched = match(run.frame, EnvFactory(config.env), opponent, episodes, deterministic, self.seed)
                win_rates[opponent] = matched.win_rate
                run.writer.add_scalar(f"eval/win_rate/{opponent}", matched.win_rate, step)
                logger.info("evaluation at %d steps against %s over %d games: %d wins, %d draws, %d losses, %s",
                            step, opponent, matched.games, matched.wins, matched.draws, matched.losses,
                            matched.line())
        record: Dict[str, Any] = {"env_steps": step, "mean": result.mean, "min": result.min, "max": result.max,
                                  "episodes": len(result.returns), "final": final}
        if win_rates:
            record["win_rate"] = win_rates
        run.writer.add_scalar("eval/mean_return", result.mean, step)
        logger.info("evaluation at %d steps over %d episodes: mean %.3f, min %.3f, max %.3f", step,
                    len(result.returns), result.mean, result.min, result.max)
        return self._record(run, record)

    def _record(self, run: Any, record: Dict[str, Any]) -> Dict[str, Any]:
        run.state.evals.append(record)
        logs.write_evals(run.run_dir, run.state)
        run.callbacks.emit("on_evaluation", run, record)
        return record


def check_evaluations(config: RunConfig) -> None:
    """Refuses an opponent of ``log.eval_opponents`` the environment does not have, and ``log.best: return``
    for a game of several players (its seats' returns cancel out), naming the field."""
    factory = EnvFactory(config.env)
    for opponent in config.log.eval_opponents:
        try:
            load_opponent(opponent, factory, 0)
        except RunError as e:
            fields = "log.eval_opponents" + (" and log.best" if opponent == config.log.best else "")
            raise RunError(f"{fields}: {e}") from None
    if config.log.best == "return" and _is_game(factory):
        raise RunError(f"log.best: return is a one-player figure; {factory.name} is a game of several players, whose "
                       f"seats' returns cancel out: name an opponent of log.eval_opponents "
                       f"{list(config.log.eval_opponents)}")


def _is_game(factory: EnvFactory) -> bool:
    env = factory()
    try:
        return is_multi_agent(env)
    finally:
        env.close()
