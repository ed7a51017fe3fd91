"""Privacy-loss-distribution (PLD) bounds of Poisson-subsampled Gaussian histories, both ways.

The tightest accountant we have for compositions of Poisson-subsampled Gaussian steps
(Koskela et al. 2020; Doroshenko et al. 2022, "Connect the dots"), through Google's
``dp_accounting``. A history is a list of (noise_multiplier, sample_rate, steps) segments,
composed in order (heterogeneous composition is exact for PLDs: the privacy-loss random
variables add).

Two discretisations of the same pair of distributions:

- the **pessimistic** PLD rounds every privacy loss up: its ε(δ) is a valid *upper bound* on
  the mechanism's ε, used to *certify* a claim;
- the **optimistic** PLD rounds down: its ε(δ) is a *lower bound* on the ε of the dominating
  pair. It bounds the mechanism's own ε from below whenever some pair of neighbouring data
  sets realises that dominating pair exactly — for a Poisson-subsampled Gaussian on clipped
  gradient sums, a record whose clipped gradient has norm C while every other record's
  gradient vanishes. A lower bound above a claim *violates* the claim.

Add/remove adjacency takes the worse of the add and the remove direction
(``NeighboringRelation.ADD_OR_REMOVE_ONE``), as the project's other accountants do.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

#: dp_accounting's discretisation of the privacy loss; finer is tighter and slower
VALUE_DISCRETIZATION = 1e-4

Segment = tuple[float, float, int]  # (noise_multiplier, sample_rate, steps)


@dataclass(frozen=True)
class Bounds:
    """An ε interval at one δ: ``lower`` (optimistic PLD) ≤ true ε of the pair ≤ ``upper`` (pessimistic)."""

    lower: float
    upper: float
    delta: float
    accountant: str = "pld"


def _check_history(history: Sequence[Segment]) -> list[Segment]:
    out = []
    for i, seg in enumerate(history):
        if len(seg) != 3:
            raise ValueError(f"history[{i}] must be (noise_multiplier, sample_rate, steps), got {seg!r}")
        s, q, n = seg
        if isinstance(n, bool) or int(n) != n or n < 0:
            raise ValueError(f"history[{i}]: steps must be an integer >= 0, got {n!r}")
        if not (math.isfinite(float(q)) and 0 <= float(q) <= 1):
            raise ValueError(f"history[{i}]: sample_rate must lie in [0, 1], got {q!r}")
        if not (math.isfinite(float(s)) and float(s) > 0):
            raise ValueError(f"history[{i}]: noise_multiplier must be positive and finite, got {s!r}")
        if float(q) > 0 and int(n) > 0:  # a segment that never samples the record costs nothing
            out.append((float(s), float(q), int(n)))
    return out


@functools.lru_cache(maxsize=1024)
def _segment_pld(sigma: float, q: float, steps: int, pessimistic: bool, discretization: float):
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_gaussian_mechanism(
        standard_deviation=sigma,
        sensitivity=1.0,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=discretization,
        sampling_prob=q,
        # connect-the-dots exists for the pessimistic estimate only; the optimistic one uses
        # privacy buckets (dp_accounting's own fallback, said here to keep its warning out of logs)
        use_connect_dots=pessimistic,
    )
    return one.self_compose(steps) if steps > 1 else one


def _history_pld(history: tuple[Segment, ...], pessimistic: bool, discretization: float):
    out = None
    for s, q, n in history:
        seg = _segment_pld(s, q, n, pessimistic, discretization)
        out = seg if out is None else out.compose(seg)
    return out


@functools.lru_cache(maxsize=4096)
def _epsilon(history: tuple[Segment, ...], delta: float, pessimistic: bool, discretization: float) -> float:
    if not history:
        return 0.0
    eps = float(_history_pld(history, pessimistic, discretization).get_epsilon_for_delta(delta))
    return max(0.0, eps)


def _check_delta(delta: float) -> float:
    if isinstance(delta, bool) or not (0 < float(delta) < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    return float(delta)


def epsilon_upper(
    history: Sequence[Segment], delta: float, discretization: float = VALUE_DISCRETIZATION
) -> float:
    """A valid upper bound on ε(δ) of the composed history (pessimistic PLD)."""
    return _epsilon(tuple(_check_history(history)), _check_delta(delta), True, float(discretization))


def epsilon_lower(
    history: Sequence[Segment], delta: float, discretization: float = VALUE_DISCRETIZATION
) -> float:
    """A lower bound on ε(δ) of the dominating pair of the composed history (optimistic PLD)."""
    return _epsilon(tuple(_check_history(history)), _check_delta(delta), False, float(discretization))


def epsilon_bounds(
    history: Sequence[Segment], delta: float, discretization: float = VALUE_DISCRETIZATION
) -> Bounds:
    """(lower, upper) bounds on ε(δ) of the composed history: optimistic and pessimistic PLD."""
    return Bounds(
        lower=epsilon_lower(history, delta, discretization),
        upper=epsilon_upper(history, delta, discretization),
        delta=float(delta),
    )
