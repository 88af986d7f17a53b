"""Names shared across the environment layer."""
from typing import Any, Sequence, Union

import numpy as np
import numpy.typing as npt

Features = Union[npt.NDArray[np.float32], Sequence[Sequence[float]]]
EntityID = Any
EntityName = str
ActionName = str

GLOBAL_ENTITY = "__global__"
"""Pseudo-entity that carries global features and takes global actions; its index in a step
comes after every real entity."""


def mark_environment(error: BaseException, index: int, env: Any) -> None:
    """Marks an error raised by (or about) environment ``index`` of a list: ``error.env_index``,
    and the note ``in environment INDEX (Class)`` (PEP 678). Python 3.10 has no ``add_note``: the
    note then goes into ``__notes__`` itself, where pytest and the exceptiongroup backport read it."""
    error.env_index = index  # type: ignore[attr-defined]
    note = f"in environment {index} ({type(env).__name__})"
    if hasattr(error, "add_note"):
        error.add_note(note)
    else:
        error.__notes__ = [*getattr(error, "__notes__", []), note]  # type: ignore[attr-defined]
