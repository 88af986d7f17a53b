"""Buffer(buffer_device=...): a device this torch build or machine lacks is named at construction."""
import pytest
import torch

from entmachin.buffer import Buffer, PrioritizedBuffer

N_CUDA = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.parametrize("cls", [Buffer, PrioritizedBuffer])
@pytest.mark.parametrize("value", ["cuda", "cuda:0", "past"])
def test_cuda_buffer_device_this_machine_lacks_raises(cls, value):
    value = f"cuda:{max(N_CUDA, 7)}" if value == "past" else value
    if N_CUDA and torch.device(value).index in (None, 0):
        assert cls(4, value).buffer_device.type == "cuda"
        return
    expected = rf"has {N_CUDA} CUDA device" if N_CUDA else r"but this (torch build|machine) has no CUDA"
    with pytest.raises(RuntimeError, match=rf"^{cls.__name__}: buffer_device is '{value}', .*{expected}"):
        cls(4, value)


def test_buffer_device_that_is_not_a_device_raises():
    with pytest.raises(ValueError, match=r"^Buffer: buffer_device is 'gpu'; expected a torch.device or a device "
                       r"string such as 'cpu' or 'cuda:0'"):
        Buffer(4, "gpu")
