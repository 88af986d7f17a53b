"""The module wrappers that entmachin looks through, defined once for every layer above ``model``.

A frame may be given a network wrapped in ``nn.DataParallel`` or
``nn.parallel.DistributedDataParallel``; calls go through the wrapper (its hooks, its replicas),
while questions about the network itself (its ``forward`` signature, its devices, its spaces,
its trusted entry) are asked of the wrapped module.
"""
from __future__ import annotations

from typing import Any

from torch import nn

__all__ = ["WRAPPERS", "unwrap"]

#: The wrapper types whose ``.module`` is the network they run.
WRAPPERS = (nn.DataParallel, nn.parallel.DistributedDataParallel)


def unwrap(model: Any) -> Any:
    """``model.module`` for a ``DataParallel`` / ``DistributedDataParallel``; else ``model``."""
    return model.module if isinstance(model, WRAPPERS) else model
