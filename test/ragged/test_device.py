"""check_device: device arguments checked against this torch build and machine."""
import re

import pytest
import torch

from entmachin.ragged.device import check_device

N_CUDA = torch.cuda.device_count() if torch.cuda.is_available() else 0
NO_CUDA = r"but this (torch build|machine) has no CUDA"


def test_cpu_meta_and_devices_pass():
    assert check_device("cpu", "X: d") == torch.device("cpu")
    assert check_device(torch.device("meta"), "X: d") == torch.device("meta")


@pytest.mark.parametrize("value", ["gpu", "gpu0", "cuda:x", None, 3.5])
def test_not_a_device(value):
    with pytest.raises(ValueError, match=rf"X: d is {re.escape(repr(value))}; expected a torch.device or a device "
                       r"string such as 'cpu' or 'cuda:0'"):
        check_device(value, "X: d")


@pytest.mark.parametrize("value", ["cuda", "cuda:0", torch.device("cuda", 0), 0])
def test_first_cuda_device(value):
    if N_CUDA:
        assert check_device(value, "X: d").type == "cuda"
    else:
        with pytest.raises(RuntimeError, match=rf"X: d is {re.escape(repr(value))}, {NO_CUDA}"):
            check_device(value, "X: d")


def test_cuda_index_past_the_last_device():
    value = f"cuda:{max(N_CUDA, 7)}"
    expected = rf"has {N_CUDA} CUDA device\(s\), cuda:0 to cuda:{N_CUDA - 1}; use an index below {N_CUDA}" \
        if N_CUDA else NO_CUDA
    with pytest.raises(RuntimeError, match=rf"X: d is '{value}', (but this machine )?{expected}"):
        check_device(value, "X: d")
