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
