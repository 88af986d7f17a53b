"""Data-parallel training across ranks: the frames' update over every rank's rows, on ``torch.distributed``.

:class:`Collectives` wraps a process group's operations with a timeout and word of a failed rank;
:class:`DataParallel` is what a frame's ``data_parallel`` extension point takes (``entmachin train``
under ``torchrun`` attaches it, ``entmachin.run.distributed``). Nothing here is imported by the frames.
"""
from entmachin.distributed.collectives import Collectives, RankFailureError, report_failure
from entmachin.distributed.data_parallel import DataParallel

__all__ = ["Collectives", "DataParallel", "RankFailureError", "report_failure"]
