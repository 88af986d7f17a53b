"""Shared fixtures: one local Ray instance for every test that needs it (started on first use), one
torch thread for the learning tests, and a signing key of the test session's own."""
import os

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def signing_key(tmp_path_factory):
    """The key checkpoints are signed with lives in the session's temporary directory, not in the
    user's configuration directory; subprocesses (entmachin train, torchrun ranks) inherit it."""
    path = str(tmp_path_factory.mktemp("key") / "checkpoint.key")
    before = os.environ.get("ENTMACHIN_KEY_FILE")
    os.environ["ENTMACHIN_KEY_FILE"] = path
    yield path
    if before is None:
        os.environ.pop("ENTMACHIN_KEY_FILE", None)
    else:
        os.environ["ENTMACHIN_KEY_FILE"] = before


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
