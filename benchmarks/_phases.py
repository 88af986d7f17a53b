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
