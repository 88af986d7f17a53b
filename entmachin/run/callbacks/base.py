"""The callbacks' base class, their dispatch and ``train.callbacks``' loading (see the package)."""
from __future__ import annotations

import logging
from typing import Any, Dict, Iterable, List, Sequence

from entmachin.frame.config import resolve
from entmachin.run.sections import parse_callback
from entmachin.run.logs import RunError

__all__ = ["Callback", "CallbackError", "Callbacks", "EVENTS", "load_callbacks"]

logger = logging.getLogger(__name__)

EVENTS = ("on_start", "after_rollout", "after_update", "on_evaluation", "on_checkpoint", "on_end")


class CallbackError(RunError):
    """A user's callback raised; the message names it, the event and the environment steps."""


class Callback:
    """Base class of callbacks: every event does nothing (override the ones you need; see the package)."""

    def on_start(self, run: Any) -> None:
        """Once, when the run is built (and resumed), before its first rollout; ``run`` is the ``Runner``."""

    def after_rollout(self, run: Any, stats: Any) -> None:
        """After each rollout of ``run`` is collected, before the update trains on it; ``stats`` is the
        rollout's ``RolloutStats``."""

    def after_update(self, run: Any, stats: Any) -> None:
        """After each update of ``run``; ``run.state`` counts the iteration, ``stats`` is the rollout's
        ``RolloutStats``."""

    def on_evaluation(self, run: Any, record: Dict[str, Any]) -> None:
        """After each evaluation of ``run``, the final one included; ``record`` is its ``eval.json`` entry."""

    def on_checkpoint(self, run: Any, env_steps: int) -> None:
        """After each checkpoint of ``run`` is published; ``env_steps`` is the run's environment steps at it."""

    def on_end(self, run: Any, result: Any) -> None:
        """Once, when ``run`` has ended with its final evaluation and checkpoint; ``result`` is the run's
        ``TrainResult``."""

    def close(self, run: Any) -> None:
        """Once, however ``run`` ends (errors included): let go of what :meth:`on_start` took."""


def _name(callback: Any) -> str:
    return type(callback).__qualname__


class Callbacks:
    """A run's callbacks: entmachin's own, then the user's; :meth:`emit` calls one event on each.

    Args:
        own: entmachin's callbacks (``Callback`` subclasses, every event defined), called first.
        users: the user's callbacks, any object with at least one of the events (or ``close``); an event it
            lacks is skipped, and one that raises stops the run with a ``CallbackError``.

    Raises:
        RunError: a user's callback has none of the events.
    """

    def __init__(self, own: Iterable[Any], users: Iterable[Any] = ()) -> None:
        self.own, self.users = list(own), list(users)
        for callback in self.users:
            if not any(callable(getattr(callback, event, None)) for event in (*EVENTS, "close")):
                raise RunError(f"callback {_name(callback)!r} has none of the events {list(EVENTS)}; subclass "
                               "entmachin.run.callbacks.Callback and override the ones it needs")

    def emit(self, event: str, run: Any, *args: Any) -> None:
        """Calls ``event`` (a name of ``EVENTS``) with ``run`` and ``args`` on every callback, entmachin's own
        first.

        Raises:
            CallbackError: a user's callback raised (chained to its exception); entmachin's own raise their own.
        """
        for callback in self.own:  # entmachin's own: Callback subclasses, every event defined
            getattr(callback, event)(run, *args)
        for callback in self.users:
            method = getattr(callback, event, None)
            if method is None:
                continue
            try:
                method(run, *args)
            except Exception as e:
                raise CallbackError(f"callback {_name(callback)}.{event} raised at {run.state.env_steps} environment "
                                    f"steps: {type(e).__name__}: {e}") from e

    def close(self, run: Any) -> None:
        """Calls every callback's ``close`` with ``run``, each whatever the others do (a failure is logged, not
        raised: it would hide why the run ended)."""
        for callback in [*self.own, *self.users]:
            try:
                getattr(callback, "close", _nothing)(run)
            except Exception as e:
                logger.warning("callback %s.close raised %s: %s", _name(callback), type(e).__name__, e)


def _nothing(*args: Any) -> None:
    pass


def load_callbacks(specs: Sequence[Any], field: str = "train.callbacks") -> List[Any]:
    """Instances of the callbacks ``specs`` name (imported and built now; errors name the entry).

    Args:
        specs: ``train.callbacks``' entries: ``pkg.mod:Class``, ``{class: pkg.mod:Class, kwargs: {...}}``, or
            the bare name of one of entmachin's (``StopWhen``).
        field: the entries' dotted path, for messages (``field[i]`` names entry ``i``).

    Raises:
        RunError: an entry is malformed, cannot be imported, or raised when built.
    """
    built = []
    for i, spec in enumerate(specs):
        where = f"{field}[{i}]"
        try:
            target, kwargs = parse_callback(spec, where)
        except ValueError as e:
            raise RunError(str(e)) from None
        try:
            obj = resolve(target, None, where)
        except ValueError as e:
            raise RunError(str(e)) from None
        try:
            built.append(obj(**kwargs))
        except Exception as e:
            raise RunError(f"{where}: {target}(**{kwargs!r}) raised {type(e).__name__}: {e}") from None
    return built
