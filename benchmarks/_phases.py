"""Timing the phases of a training loop by wrapping the callables it uses."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict


def timed(fn: Callable[..., Any], phase: str, spent: Dict[str, float]) -> Callable[..., Any]:
    """``fn``, adding the seconds of each call to ``spent[phase]``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[phase] += time.perf_counter() - start

    return call


def time_collection(collector: Any, spent: Dict[str, float], state_phase: str) -> Callable[[], Any]:
    """Times what a ``RolloutCollector`` calls, on the instances only (instance attributes
    shadow the methods): ``env step`` (``VecEnv.act``), ``acting`` (``frame.act`` and the action
    conversion), ``state_phase`` (observations -> model inputs) and ``storing``
    (``store_rollout``). Returns the frame's ``update``, timed as ``update``."""
    frame, envs = collector.frame, collector.envs
    envs.act = timed(envs.act, "env step", spent)
    frame.act = timed(frame.act, "acting", spent)
    collector.action_fn = timed(collector.action_fn, "acting", spent)
    collector.state_fn = timed(collector.state_fn, state_phase, spent)
    frame.store_rollout = timed(frame.store_rollout, "storing", spent)
    return timed(frame.update, "update", spent)
