"""The PLD bounds dpcl writes into ledgers and verdicts come from dp_accounting's public API
(``from_gaussian_mechanism``, ``compute_mixture``, ``compose``, ``get_epsilon_for_delta``), pinned to
0.6.x in pyproject.toml. These golden values were computed by dp_accounting 0.6.0 for histories the
embedded default asks for: a release of dp_accounting that changes any of them beyond the FFT's
rounding (:data:`RTOL`) fails here, before it changes a ledger."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from dpcl.privacy import pld

ROOT = Path(__file__).resolve().parents[2]

# (history of (noise multiplier, sample rate, steps, choice probability), δ, discretisation, pessimistic): ε
GOLDEN = [
    (((3.920350109802374, 1.0, 1, 1.0),), 1e-05, 1e-4, True, 0.9470080414219829),
    (((5.544277936208978, 1.0, 2, 1.0),), 1e-05, 1e-4, True, 0.9469957502037162),
    (((1.4363716444192516, 0.1024, 391, 1.0),), 1e-05, 1e-4, True, 7.998393213740667),
    (
        (
            (1.0703698923380125, 0.13333333333333333, 23, 1.0),
            (1.0703698923380125, 0.10666666666666667, 29, 1.0),
        ),
        1e-05,
        3e-3,
        True,
        5.481900577571464,
    ),
    (
        (
            (4.419489105161014, 0.18266570491496473, 884, 0.5),
            (4.419489105161014, 0.18266570491496473, 884, 0.3333333333333333),
            (4.419489105161014, 0.18266570491496473, 884, 0.25),
        ),
        9e-06,
        1e-4,
        True,
        6.020282812484645,
    ),
]


@pytest.fixture
def uncached(monkeypatch):
    """Compute afresh: no disk cache, no in-process memo."""
    monkeypatch.setenv("DPCL_ACCOUNTING_CACHE", "off")
    pld._epsilon.cache_clear()
    pld._segment_pld.cache_clear()
    yield
    pld._epsilon.cache_clear()
    pld._segment_pld.cache_clear()


#: how far a golden value may move without a change of dp_accounting: its composition is FFT-based, and
#: numpy's and scipy's FFT rounding moves with their releases and the CPU (measured: up to 3.2e-10
#: relative with numpy 2.4.6 and scipy 1.17.1 on an AMD EPYC against the values above); a change of the
#: library's discretisation or accounting moves them by far more
RTOL = 1e-8


@pytest.mark.parametrize(("history", "delta", "discretization", "pessimistic", "epsilon"), GOLDEN)
def test_pld_bounds_are_the_pinned_librarys(uncached, history, delta, discretization, pessimistic, epsilon):
    assert pld._epsilon(history, delta, pessimistic, discretization) == pytest.approx(
        epsilon, rel=RTOL, abs=0
    )


def test_dp_accounting_is_pinned_in_every_dependency_file():
    for path in ("pyproject.toml", "environment.yml", "workflow/envs/dpcl.yaml"):
        assert "dp-accounting>=0.6,<0.7" in (ROOT / path).read_text(), path
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "dp-accounting>=0.6,<0.7" in deps
