"""Privacy-loss-distribution (PLD) bounds of Poisson-subsampled Gaussian histories, both ways.

The tightest accountant we have for compositions of Poisson-subsampled Gaussian steps
([Koskela2020]; [Doroshenko2022], "Connect the dots"), through Google's
``dp_accounting``. A history is a list of (noise_multiplier, sample_rate, steps) segments,
composed in order (heterogeneous composition is exact for PLDs: the privacy-loss random
variables add).

A segment may carry a fourth entry, ``choice_prob`` p ∈ (0, 1]: at each of its steps the
record's block is chosen with probability p (independently of the data), and only then read
at ``sample_rate`` ([Desai2021]'s CalGref picks one of t mini-memory blocks uniformly, p = 1/t).
Its PLD is the mixture "loss 0 with probability 1 − p, the subsampled Gaussian's loss with
probability p": the PLD of the mechanism that also *reveals* which block it chose. Revealing
more only adds information, so this is a valid upper bound; it is also the worst case over
data sets, approached when the other blocks' gradient sums lie far from this block's (the
choice is then readable from the output). It is NOT the subsampled Gaussian at rate p·q:
that pair (every other record's gradient zero) is realised too, so it bounds ε from below,
but it is smaller: for ε ≥ 0, H_{e^ε}(p·A_q + (1−p)B ‖ B) with A_q at rate q lies above
H_{e^ε}(A_{pq} ‖ B) (hockey-stick divergences: q·H_{1+(e^ε−1)/q} vs pq·H_{1+(e^ε−1)/(pq)}).

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

Segment = tuple  # (noise_multiplier, sample_rate, steps) or (…, choice_prob)


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
        if len(seg) not in (3, 4):
            raise ValueError(
                f"history[{i}] must be (noise_multiplier, sample_rate, steps[, choice_prob]), got {seg!r}"
            )
        s, q, n = seg[:3]
        p = seg[3] if len(seg) == 4 else 1.0
        for name, v in (("noise_multiplier", s), ("sample_rate", q), ("steps", n), ("choice_prob", p)):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"history[{i}]: {name} must be a number, got {v!r}")
        if not (math.isfinite(float(p)) and 0 < float(p) <= 1):
            raise ValueError(f"history[{i}]: choice_prob must lie in (0, 1], got {p!r}")
        if int(n) != n or n < 0:
            raise ValueError(f"history[{i}]: steps must be an integer >= 0, got {n!r}")
        if not (math.isfinite(float(q)) and 0 <= float(q) <= 1):
            raise ValueError(f"history[{i}]: sample_rate must lie in [0, 1], got {q!r}")
        if not (math.isfinite(float(s)) and float(s) > 0):
            raise ValueError(f"history[{i}]: noise_multiplier must be positive and finite, got {s!r}")
        if float(q) > 0 and int(n) > 0:  # a segment that never samples the record costs nothing
            out.append((float(s), float(q), int(n), float(p)))
    return out


@functools.lru_cache(maxsize=1024)
def _segment_pld(
    sigma: float, q: float, steps: int, pessimistic: bool, discretization: float, choice: float = 1.0
):
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_gaussian_mechanism(
        standard_deviation=sigma,
        sampling_prob=q,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=discretization,
        # connect-the-dots exists for the pessimistic estimate only; the optimistic one uses
        # privacy buckets (dp_accounting's own fallback, said here to keep its warning out of logs)
        use_connect_dots=pessimistic,
    )
    if choice < 1.0:  # the block is read only when chosen: "no loss" with probability 1 - p (docstring)
        one = one.compute_mixture(pld.identity(discretization, pessimistic), choice)
    return one.self_compose(steps) if steps > 1 else one


def _history_pld(history: tuple[Segment, ...], pessimistic: bool, discretization: float):
    out = None
    for s, q, n, p in history:
        seg = _segment_pld(s, q, n, pessimistic, discretization, p)
        out = seg if out is None else out.compose(seg)
    return out


@functools.lru_cache(maxsize=4096)
def _epsilon(history: tuple[Segment, ...], delta: float, pessimistic: bool, discretization: float) -> float:
    """ε(δ) of the composed history, kept in the accountant's disk cache (:mod:`dpcl.privacy.cache`):
    a pure function of public numbers that a learner, its verifier and the reports ask for alike."""
    from .cache import memo

    if not history:
        return 0.0

    def compute() -> float:
        eps = float(_history_pld(history, pessimistic, discretization).get_epsilon_for_delta(delta))
        return max(0.0, eps)

    return float(
        memo("pld_epsilon", ([list(seg) for seg in history], delta, pessimistic, discretization), compute)
    )


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
