"""Shared fixtures: one local Ray instance for every test that needs it (started on first use), and
one torch thread for the learning tests."""
import os

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray (2 CPUs, no dashboard) whose workers import this checkout of entmachin.

    Ray is a test dependency (``pip install -e .[test,ray]``, as CI does): a missing Ray fails
    the tests that use it rather than skipping them.
    """
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def one_thread():
    """Runs the test on one torch thread (the learning tests' budgets assume it), then restores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
