"""Timing the phases of a training loop by wrapping the callables it uses.

``clock`` is ``time.perf_counter`` unless given (``_device.clock``: synchronised wall time on CUDA).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict


def timed(fn: Callable[..., Any], phase: str, spent: Dict[str, float],
          clock: Callable[[], float] = time.perf_counter) -> Callable[..., Any]:
    """``fn``, adding the seconds of each call to ``spent[phase]``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[phase] += clock() - start

    return call


def time_collection(collector: Any, spent: Dict[str, float], state_phase: str,
                    clock: Callable[[], float] = time.perf_counter) -> Callable[[], Any]:
    """Times what a ``RolloutCollector`` calls, on the instances only (instance attributes
    shadow the methods): ``env step`` (``VecEnv.act``), ``acting`` (``frame.act`` and the action
    conversion), ``state_phase`` (observations -> model inputs) and ``storing``
    (``store_rollout``). Returns the frame's ``update``, timed as ``update``."""
    frame, envs = collector.frame, collector.envs
    envs.act = timed(envs.act, "env step", spent, clock)
    frame.act = timed(frame.act, "acting", spent, clock)
    collector.action_fn = timed(collector.action_fn, "acting", spent, clock)
    collector.state_fn = timed(collector.state_fn, state_phase, spent, clock)
    frame.store_rollout = timed(frame.store_rollout, "storing", spent, clock)
    return timed(frame.update, "update", spent, clock)
