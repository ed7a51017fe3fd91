"""Poisson samples of the records a release reads: drawn, and reported to an audit that listens, by one
sampling primitive (:mod:`dpcl.privacy.releases`).

Who is read at which step is part of the mechanism: the subsampled Gaussian's accounting assumes that
every record of the population joins each sample independently with the stated rate q. Every DP-SGD
sample of the library is drawn here: the linear heads' (:func:`dpcl.training.clipped_sum.noisy_clipped_sum`:
a task's records, a memory buffer or one of its blocks, records with a rate each) and the adapted
networks' (:func:`dpcl.training.film.noisy_grad_sum`). Each
report states the population (its rows, as the release will read them) and the rate the primitive used,
so that an audit can compare the rate with the ledger's and every record's reads with the samples that
could have drawn it (:mod:`dpcl.audits.exposure`), whatever the caller believes it asked for.

Two ways to draw the same law, each with its own random stream (a run's bits depend on which):

* :func:`by_gaps`: the gaps between successive members of a Poisson sample are independent Geometric(q)
  variables, so the sample takes about q·n geometric draws instead of n uniform ones (the heads).
* :func:`by_coins`: one uniform per record, record i joining iff u_i < q_i (a rate per record, as step
  amplification [Schwethelm2025] gives; the adapted networks' samples).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from . import releases

#: a population: its rows, or a function that gathers them (called only when an audit listens)
Population = np.ndarray | Callable[[], np.ndarray]


def _report(drawn: np.ndarray, population: Population, rate) -> None:
    if releases.keeps_samples():
        rows = population() if callable(population) else population
        releases.sampled("poisson", drawn, population=rows, rate=rate)


def by_gaps(
    gen: np.random.Generator, n: int, rate: float, *, population: Population, chunk: int | None = None
) -> np.ndarray:
    """Sorted positions of a Poisson sample of ``range(n)`` (each independently with probability ``rate``),
    drawn by geometric gaps (the positions of a Bernoulli(rate) process's successes), ``chunk`` gaps at a
    time (default: the expected sample size plus four standard deviations, so one chunk nearly always);
    reported with its ``population`` (n rows)."""
    drawn = _gaps(gen, n, rate, chunk)
    _report(drawn, population, float(rate))
    return drawn


def by_coins(
    gen: np.random.Generator, n: int, rate: float | np.ndarray, *, population: Population
) -> np.ndarray:
    """Sorted positions of a Poisson sample of ``range(n)``: one uniform draw per record, record i drawn
    iff it is below ``rate`` (one rate, or one per record); reported with its ``population`` (n rows)."""
    if np.ndim(rate) and np.shape(rate) != (n,):
        raise ValueError(f"a rate per record needs {n} rates, got shape {np.shape(rate)}")
    drawn = np.flatnonzero(gen.random(n) < rate) if n else np.zeros(0, dtype=np.int64)
    _report(drawn, population, rate)
    return drawn


def _gaps(gen: np.random.Generator, n: int, rate: float, chunk: int | None) -> np.ndarray:
    if n <= 0 or rate <= 0:
        return np.zeros(0, dtype=np.int64)
    if rate >= 1:
        return np.arange(n, dtype=np.int64)
    chunk = chunk or int(n * rate + 4.0 * math.sqrt(n * rate) + 16)
    pos = np.cumsum(gen.geometric(rate, chunk)) - 1
    while pos[-1] < n:  # the sample ran past the chunk (rare): continue from its last position
        pos = np.concatenate([pos, pos[-1] + np.cumsum(gen.geometric(rate, chunk))])
    return pos[: np.searchsorted(pos, n)]
