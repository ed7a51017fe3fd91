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


@pytest.fixture(autouse=True, scope="session")
def _accounting_cache(tmp_path_factory):
    """One accountant cache per test session (dpcl.privacy.cache), shared with the workflow runs
    the tests start, never the user's."""
    old = os.environ.get("DPCL_ACCOUNTING_CACHE")
    os.environ["DPCL_ACCOUNTING_CACHE"] = str(tmp_path_factory.mktemp("accounting_cache"))
    yield
    if old is None:
        os.environ.pop("DPCL_ACCOUNTING_CACHE", None)
    else:
        os.environ["DPCL_ACCOUNTING_CACHE"] = old
