"""``InterruptGuard``: Ctrl-C (SIGINT) never lands in the middle of an optimizer step.

A ``KeyboardInterrupt`` raised between two bytecodes of ``optimizer.step()`` (non-fused
optimizers update parameter after parameter in Python) or between the actor's and the
critic's step would leave a frame half-stepped. ``update()`` therefore installs the guard once
per update and marks each minibatch's steps as one critical section::

    with InterruptGuard() as guard:      # installs the SIGINT handler, restores the previous one
        for minibatch in schedule:
            loss.backward()              # Ctrl-C here raises at once, as usual
            with guard.step:             # Ctrl-C here is held ...
                actor_optim.step()
                critic_optim.step()
            # ... and raised here, right after the steps

The handler is installed only in the main thread and only when the current SIGINT handler
is a Python callable (Python's default ``signal.default_int_handler`` or a user's own);
deferred or not, that handler is what finally runs. With ``SIG_IGN``, ``SIG_DFL`` or a handler
installed outside Python, nothing is installed and interrupts behave as they would without
entmachin. Other threads cannot install handlers and are left alone.
"""
from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Callable, Optional, Tuple

__all__ = ["InterruptGuard"]


class _CriticalSection:
    """``with guard.step:``: a SIGINT arriving inside is delivered when the block ends."""

    __slots__ = ("_guard",)

    def __init__(self, guard: "InterruptGuard") -> None:
        self._guard = guard

    def __enter__(self) -> None:
        self._guard._depth += 1

    def __exit__(self, *exc: Any) -> None:
        guard = self._guard
        guard._depth -= 1
        if guard._depth == 0 and guard._pending is not None:
            pending, guard._pending = guard._pending, None
            guard._previous(*pending)  # Python's default handler raises KeyboardInterrupt here


class InterruptGuard:
    """Defers SIGINT across critical sections for the duration of a ``with`` block.

    Attributes:
        step: the critical-section context manager (reusable, nestable, cheap to enter).
        installed: whether the handler was installed by the current ``with`` block.
    """

    def __init__(self) -> None:
        self.step = _CriticalSection(self)
        self.installed = False
        self._depth = 0
        self._pending: Optional[Tuple[int, Optional[FrameType]]] = None
        self._previous: Callable[[int, Optional[FrameType]], Any] = signal.default_int_handler

    def __enter__(self) -> "InterruptGuard":
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):  # SIG_IGN, SIG_DFL, or a handler set outside Python (None)
            return self
        self._previous = previous
        signal.signal(signal.SIGINT, self._handle)
        self.installed = True
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self.installed:
            signal.signal(signal.SIGINT, self._previous)
            self.installed = False
        pending, self._pending = self._pending, None
        if pending is not None and exc_type is None:
            self._previous(*pending)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self._depth:
            self._pending = (signum, frame)
            return
        self._previous(signum, frame)
