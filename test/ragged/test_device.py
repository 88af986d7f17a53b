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


@pytest.mark.parametrize("n_devices, value, match", [
    (1, "cuda:7", r"X: d is 'cuda:7', but this machine has 1 CUDA device\(s\), cuda:0 to cuda:0; use an index below 1"),
    (2, 2, r"X: d is 2, but this machine has 2 CUDA device\(s\), cuda:0 to cuda:1; use an index below 2"),
    (0, "cuda", r"X: d is 'cuda', but this machine has no CUDA device that torch can use \(torch.cuda.device_count\(\) "
                r"is 0: check the driver and CUDA_VISIBLE_DEVICES\); use 'cpu'"),
])
def test_messages_of_a_cuda_build(monkeypatch, n_devices, value, match):
    """The other branches, on any machine: a CUDA build of torch with ``n_devices`` GPUs."""
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n_devices)
    with pytest.raises(RuntimeError, match=match):
        check_device(value, "X: d")


def test_a_cuda_build_accepts_the_devices_it_has(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda:1", "X: d") == torch.device("cuda", 1)
    assert check_device("cuda", "X: d") == torch.device("cuda")
