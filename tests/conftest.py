"""Shared fixtures: small datasets written by the tests in the real on-disk formats
(the writers live in dpcl.fixtures, which the miniature paper run uses as well)."""

from __future__ import annotations

import os

import pytest

from dpcl.fixtures import make_fake_fashion_mnist


@pytest.fixture
def fake_fmnist(tmp_path):
    root = tmp_path / "raw"
    root.mkdir()
    files = make_fake_fashion_mnist(root)
    return root, files


def pytest_configure(config):
    """Under ``pytest -n`` (pytest-xdist) the workers share the cores: one BLAS/OpenMP thread each, in
    the worker and in every process it starts (a workflow run's jobs set their own per rule)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = "1"
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)


@pytest.fixture(autouse=True, scope="session")
def _accounting_cache(tmp_path_factory):
    """One accountant cache per test session (dpcl.privacy.cache), shared with the workflow runs
    the tests start and, under ``pytest -n``, by the workers (its writes are atomic), never the user's."""
    old = os.environ.get("DPCL_ACCOUNTING_CACHE")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    (shared / "accounting_cache").mkdir(exist_ok=True)
    os.environ["DPCL_ACCOUNTING_CACHE"] = str(shared / "accounting_cache")
    yield
    if old is None:
        os.environ.pop("DPCL_ACCOUNTING_CACHE", None)
    else:
        os.environ["DPCL_ACCOUNTING_CACHE"] = old


def pytest_collection_modifyitems(config, items):
    """The files with a test marked slow run first (a stable sort: each file's tests, and the files
    among themselves, keep their order). Under ``pytest -n`` (``--dist loadfile``) each file goes whole
    to the next free worker; collected alphabetically, the long test_workflow.py started last and ran
    alone while the other worker idled (replaying CI's test times: 598 s of work on the busier of two
    workers in alphabetical order, 531 s slow files first, 529 s a perfect split)."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture
def user_learners():
    """``load_modules`` of the learner registry, for registering users' learner files in one test; the
    registry is restored afterwards (its registered modules are module state)."""
    from dpcl.learners import registry

    before = dict(registry._EXTERNAL)
    yield registry.load_modules
    registry._EXTERNAL.clear()
    registry._EXTERNAL.update(before)
    registry._REGISTRY = None


@pytest.fixture(scope="module")
def vit():
    """The FiLM tests' tiny random-init ViT (tests/film_helpers.py; timm imported only where used)."""
    from film_helpers import make_vit

    return make_vit()
