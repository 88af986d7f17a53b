"""``check_device``: a device argument read once, with an error that says what is missing.

Torch accepts ``torch.device("cuda:7")`` anywhere and fails only when a tensor first goes
there, with ``AssertionError: Torch not compiled with CUDA enabled`` or ``invalid device
ordinal``, far from the argument that asked for it. Buffers, frames and ``safe_call`` pass
every device they are given through :func:`check_device` instead, so the error names the
object and attribute it came from. This is the lowest layer both buffers and frames import;
it imports torch, so ``entmachin.ragged`` loads it only when asked (environment workers stay
light).
"""
from typing import Any, Union

import torch

__all__ = ["check_device"]

_EXAMPLES = "such as 'cpu' or 'cuda:0'"


def check_device(value: Union[str, int, torch.device], where: str) -> torch.device:
    """Returns ``torch.device(value)`` after checking that this process can use it.

    Only CUDA devices are checked against the machine (``cpu``, ``meta`` and other types are
    returned as given). An int is a CUDA index, as for torch.

    Args:
        value: a ``torch.device``, a device string, or a CUDA index.
        where: the object and attribute the value belongs to, for messages, such as
            ``"Buffer: buffer_device"`` or ``"safe_call: Actor.input_device"``.

    Returns:
        The device.

    Raises:
        ValueError: ``value`` is not a device (``"gpu"``, ``None``, ``3.5``).
        RuntimeError: a CUDA device, but this torch build has no CUDA support, this machine
            has no CUDA device torch can use, or the index is past the last device.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        _check_cuda(value, value, where)  # before torch.device(int), which needs an accelerator
    try:
        device = torch.device(value)
    except (TypeError, RuntimeError) as e:
        raise ValueError(f"{where} is {value!r}; expected a torch.device or a device string {_EXAMPLES}") from e
    if device.type == "cuda":
        _check_cuda(device.index, value, where)
    return device


def _check_cuda(index: Any, value: Any, where: str) -> None:
    if not torch.backends.cuda.is_built():
        raise RuntimeError(
            f"{where} is {value!r}, but this torch build has no CUDA support (torch {torch.__version__}); "
            "use 'cpu', or install a CUDA build of torch"
        )
    n_devices = torch.cuda.device_count()
    if n_devices == 0:
        raise RuntimeError(
            f"{where} is {value!r}, but this machine has no CUDA device that torch can use "
            "(torch.cuda.device_count() is 0: check the driver and CUDA_VISIBLE_DEVICES); use 'cpu'"
        )
    if index is not None and index >= n_devices:
        raise RuntimeError(
            f"{where} is {value!r}, but this machine has {n_devices} CUDA device(s), cuda:0 to "
            f"cuda:{n_devices - 1}; use an index below {n_devices}"
        )
