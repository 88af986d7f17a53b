"""The ``entmachin`` command: YAML-configured runs, tensorboard, checkpoints of a run, evaluation; and
:func:`train`, the same runs from Python with the user's :class:`Callback` objects.

The top layer: it may import every other layer and nothing imports it.
"""
from typing import Any

__all__ = ["train", "Callback", "CallbackError", "StopWhen"]

_EXPORTS = {"train": "entmachin.run.api", "Callback": "entmachin.run.callbacks",
            "CallbackError": "entmachin.run.callbacks", "StopWhen": "entmachin.run.callbacks"}


def __getattr__(name: str) -> Any:  # imported when first used: the command starts without them
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
