"""DP-SGD privacy accounting: Poisson-subsampled Gaussian under add/remove adjacency.
(One concept in one module: the accountants, their inverse search for σ and the composition of
phase histories.)

[LabelSpace] App. D.1: opacus with Poisson sampling and the PRV
accountant ([Gopi2021]), falling back to RDP ([Mironov2019]) where PRV
fails; App. D.4: a memory buffer is reread at its own rate and noise, so the
phases compose *sequentially* for the individuals they share (:func:`compose_epsilon`).

Each step of DP-SGD samples every example independently with probability q (the
sample rate), clips per-example gradients to norm C and adds N(0, σ²C²I) to their sum;
σ is the *noise multiplier*. One step is the Poisson-subsampled Gaussian mechanism and
training is its ``steps``-fold composition.

Safety: every ε returned is an accountant's *upper bound* (PRV: its error-corrected
bound, estimate + ``eps_error`` at δ − ``delta_error``; RDP: the optimal conversion
over :data:`RDP_ORDERS`), and every σ returned has been verified with that same bound:
ε(σ) ≤ target always holds, and σ is within :data:`SIGMA_RTOL` of the smallest such σ
(ε(σ) is decreasing; both accountants were found monotone at 1e-4 resolution in σ).
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ACCOUNTANTS = ("prv", "rdp")
# PRV's absolute ε error (opacus's default). The PRV bound is estimate + PRV_EPS_ERROR,
# so PRV cannot certify ε below about PRV_EPS_ERROR, and for ε ≲ 0.1 RDP may be tighter.
PRV_EPS_ERROR = 0.01
# PRV's δ error is opacus's default, δ/1000: the bound is taken at δ − δ/1000.
PRV_DELTA_ERROR_FRACTION = 1e-3
# RDP orders: Google dp_accounting's defaults. opacus's defaults stop at 63 (and skip 11),
# which is up to 10x loose for large σ (e.g. σ = 50, q = 0.004, 2500 steps: ε 0.103 vs 0.012).
RDP_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024]
)
SIGMA_RTOL = 1e-4  # returned σ ≤ (1 + SIGMA_RTOL) × a σ whose ε exceeds the target
MAX_SIGMA = 1e6  # as opacus.accountants.utils.MAX_SIGMA: larger means "budget too small"
MIN_SIGMA = 1e-3  # σ is never searched below this (ε would be astronomically large)
_INTEGER_RDP_ORDERS = [a for a in RDP_ORDERS if float(a).is_integer()]  # fast in opacus
MAX_PRV_GRID = 2**25  # PRV discretisation points (≈ 256 MiB per float64 array) before we give up

Phase = tuple[float, float, int]  # (noise_multiplier, sample_rate, steps)


def _rdp_accountant():
    """A fresh opacus ``RDPAccountant`` (opacus is imported on first use only: the learner registry,
    which the Snakefile imports, reaches this module, and opacus configures the root logger)."""
    from opacus.accountants import RDPAccountant

    return RDPAccountant()


@functools.cache
def _integer_default_alphas() -> list[float]:
    """The integer orders among opacus's default RDP orders."""
    from opacus.accountants import RDPAccountant

    return [a for a in RDPAccountant.DEFAULT_ALPHAS if float(a).is_integer()]


class _PRVFailure(RuntimeError):
    """The PRV accountant raised, returned a non-finite ε, or would need too large a grid."""


# ----------------------------------------------------------------------------- validation


def _check_epsilon(epsilon: float) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    return float(epsilon)


def _check_delta(delta: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 < delta < 1:
        raise ValueError(f"delta must lie in the open interval (0, 1), got {delta!r}")
    return float(delta)


def _check_sample_rate(sample_rate: float, where: str = "") -> float:
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, numbers.Real) or not 0 < sample_rate <= 1:
        raise ValueError(f"sample_rate{where} must lie in (0, 1], got {sample_rate!r}")
    return float(sample_rate)


def _check_steps(steps: int, where: str = "") -> int:
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise ValueError(f"steps{where} must be an integer >= 1, got {steps!r}")
    return int(steps)


def _check_noise_multiplier(noise_multiplier: float, where: str = "") -> float:
    if (
        isinstance(noise_multiplier, bool)
        or not isinstance(noise_multiplier, numbers.Real)
        or not (noise_multiplier > 0 and math.isfinite(noise_multiplier))
    ):
        raise ValueError(
            f"noise_multiplier{where} must be a positive finite number, got {noise_multiplier!r}"
        )
    return float(noise_multiplier)


def _check_accountant(accountant: str) -> str:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    return accountant


def _check_phases(phases: Sequence[Phase]) -> list[Phase]:
    if isinstance(phases, str | bytes) or not isinstance(phases, Sequence) or len(phases) == 0:
        raise ValueError(
            f"phases must be a non-empty list of (noise_multiplier, sample_rate, steps), got {phases!r}"
        )
    out = []
    for i, phase in enumerate(phases):
        if not isinstance(phase, Sequence) or len(phase) != 3:
            raise ValueError(f"phases[{i}] must be (noise_multiplier, sample_rate, steps), got {phase!r}")
        where = f" of phases[{i}]"
        out.append(
            (
                _check_noise_multiplier(phase[0], where),
                _check_sample_rate(phase[1], where),
                _check_steps(phase[2], where),
            )
        )
    return out


def _check_phase_shapes(phases_shape: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    if (
        isinstance(phases_shape, str | bytes)
        or not isinstance(phases_shape, Sequence)
        or len(phases_shape) == 0
    ):
        raise ValueError(
            f"phases_shape must be a non-empty list of (sample_rate, steps), got {phases_shape!r}"
        )
    out = []
    for i, shape in enumerate(phases_shape):
        if not isinstance(shape, Sequence) or len(shape) != 2:
            raise ValueError(f"phases_shape[{i}] must be (sample_rate, steps), got {shape!r}")
        where = f" of phases_shape[{i}]"
        out.append((_check_sample_rate(shape[0], where), _check_steps(shape[1], where)))
    return out


# ----------------------------------------------------------------------------- accountants


def _prv_half_width(history: Sequence[Phase], delta_error: float, eps_error: float = PRV_EPS_ERROR) -> float:
    """Half-width L of the PRV discretisation domain [-L, L]: opacus's rule
    (``compute_safe_domain_size``, [Gopi2021] Remark 5.6, ``max(L, eps_error) + 3``) with
    its RDP bounds taken over the integer orders among opacus's defaults only. An RDP bound
    over a subset of the orders is never smaller, so this domain contains the one opacus would
    size (the mass it truncates is never larger; the mesh does not depend on L), without
    opacus's fractional orders, which take most of a PRV evaluation's time.
    """
    total = sum(n for _, _, n in history)

    def rdp_eps(hist: list[Phase], delta: float) -> float:
        acc = _rdp_accountant()
        acc.history = hist
        return float(acc.get_epsilon(delta=delta, alphas=_integer_default_alphas()))

    half_width = rdp_eps([(s, q, n) for s, q, n in history], delta_error / 4)
    for s, q, _ in history:
        half_width = max(half_width, rdp_eps([(s, q, 1)], delta_error / (8 * total)))
    return max(half_width, eps_error) + 3


def _prv_mesh(history: Sequence[Phase], delta_error: float, eps_error: float = PRV_EPS_ERROR) -> float:
    """opacus's PRV mesh size (independent of the domain's width)."""
    total = sum(n for _, _, n in history)
    return eps_error / math.sqrt(total * math.log(12 / delta_error) / 2)


def _prv_grid_size(history: Sequence[Phase], delta_error: float) -> float:
    """Number of points the PRV accountant discretises on (:func:`_prv_half_width`)."""
    return 2 * _prv_half_width(history, delta_error) / _prv_mesh(history, delta_error)


@functools.cache
def _prv_accountant_class() -> type:
    """opacus's ``PRVAccountant`` with its discretisation domain sized by :func:`_prv_half_width`
    (a superset of opacus's own domain, computed without fractional RDP orders); everything
    else (truncation, discretisation, composition, the ε upper bound) is opacus's. Built on first
    use (opacus is imported lazily, see :func:`_rdp_accountant`)."""
    from opacus.accountants import PRVAccountant
    from opacus.accountants.analysis.prv import Domain

    class _PRVAccountant(PRVAccountant):
        def _get_domain(self, prvs, num_self_compositions, eps_error, delta_error):
            history = [
                (p.noise_multiplier, p.sample_rate, n)
                for p, n in zip(prvs, num_self_compositions, strict=True)
            ]
            half = _prv_half_width(history, delta_error, eps_error)
            return Domain.create_aligned(-half, half, _prv_mesh(history, delta_error, eps_error))

    return _PRVAccountant


def _prv_epsilon(history: Sequence[Phase], delta: float) -> float:
    """PRV upper bound on ε (opacus ``PRVAccountant``); raises :class:`_PRVFailure`."""
    delta_error = delta * PRV_DELTA_ERROR_FRACTION
    # opacus's internals warn on q = 1 (log 0) and on its RDP-based domain sizing; neither
    # concerns the bound, so silence them here rather than in every caller.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            grid = _prv_grid_size(history, delta_error)
            if not grid <= MAX_PRV_GRID:
                raise _PRVFailure(f"the PRV grid would need {grid:.3g} points (limit {MAX_PRV_GRID})")
            acc = _prv_accountant_class()()
            acc.history = [tuple(p) for p in history]
            eps = float(acc.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR, delta_error=delta_error))
        except _PRVFailure:
            raise
        except Exception as exc:  # opacus raises RuntimeError/ValueError/MemoryError here
            raise _PRVFailure(f"{type(exc).__name__}: {exc}") from exc
    if not math.isfinite(eps):
        raise _PRVFailure(f"PRV returned a non-finite epsilon ({eps})")
    return eps


def _rdp_epsilon(history: Sequence[Phase], delta: float, orders: Sequence[float] | None = None) -> float:
    """RDP upper bound on ε (opacus ``RDPAccountant`` over ``orders``, default :data:`RDP_ORDERS`).
    A subset of the orders gives a bound never below the full one (a minimum over fewer orders);
    the integer orders alone are cheap in opacus (its fractional orders take a slowly converging
    series)."""
    acc = _rdp_accountant()
    acc.history = [tuple(p) for p in history]
    with warnings.catch_warnings():
        # "optimal order is the largest/smallest alpha": the bound is valid regardless.
        warnings.simplefilter("ignore", UserWarning)
        return float(acc.get_epsilon(delta=delta, alphas=list(RDP_ORDERS if orders is None else orders)))


def _warn_fallback(reason: str, stacklevel: int) -> None:
    warnings.warn(
        f"PRV accountant failed ({reason}); used the RDP accountant instead, whose bound is usually looser (larger)",
        RuntimeWarning,
        stacklevel=stacklevel + 1,
    )


def _epsilon_of_history(history: Sequence[Phase], delta: float, accountant: str) -> tuple[float, str]:
    """ε of a sequential composition with the requested accountant, PRV falling back to RDP."""
    if accountant == "prv":
        try:
            return _prv_epsilon(history, delta), "prv"
        except _PRVFailure as exc:
            _warn_fallback(str(exc), stacklevel=3)  # the public caller's caller
    return _rdp_epsilon(history, delta), "rdp"


# ----------------------------------------------------------------------------- σ search


def _smallest_sigma(
    eps_of: Callable[[float], float],
    target: float,
    start: float,
    factor: float,
    rtol: float = SIGMA_RTOL,
    factor_down: float | None = None,
) -> tuple[float, float]:
    """Smallest σ (to ``rtol``) with ``eps_of(σ) ≤ target``, and its ε.

    ε(σ) decreases in σ. Bracket from ``start`` by multiplying by ``factor`` (dividing by
    ``factor_down``, default ``factor``), then shrink the bracket [lo, hi] (ε(lo) > target
    ≥ ε(hi)) in log σ with the Illinois variant of regula falsi, each trial kept at least
    tol/2 inside the bracket so that it closes, with a bisection step whenever the bracket
    stops halving. Only evaluated σ are returned, so the guarantee is the accountant's own,
    not an interpolation's.
    """
    hi, e_hi = start, eps_of(start)
    lo = e_lo = None
    while e_hi > target:  # expand upwards until valid
        lo, e_lo = hi, e_hi
        hi *= factor
        if hi > MAX_SIGMA:
            raise ValueError(
                f"no noise multiplier up to {MAX_SIGMA:g} reaches the target epsilon {target}: "
                "the privacy budget is too small for these steps and sample rate"
            )
        e_hi = eps_of(hi)
    while lo is None:  # expand downwards until invalid
        cand = hi / (factor_down or factor)
        if cand < MIN_SIGMA:
            return hi, e_hi
        e_cand = eps_of(cand)
        if e_cand > target:
            lo, e_lo = cand, e_cand
        else:
            hi, e_hi = cand, e_cand

    assert lo is not None and e_lo is not None  # the loops above leave a bracket
    tol = math.log1p(rtol)
    a, fa = math.log(lo), e_lo - target  # fa > 0
    b, fb = math.log(hi), e_hi - target  # fb <= 0
    s_hi, eps_hi = hi, e_hi
    ga, gb = fa, fb  # possibly down-weighted values (Illinois)
    last_side = 0
    widths = [b - a]
    while b - a > tol:
        if len(widths) >= 3 and widths[-1] > 0.5 * widths[-3]:
            x = 0.5 * (a + b)
        else:
            x = b - gb * (b - a) / (gb - ga) if gb != ga else 0.5 * (a + b)
        margin = 0.5 * tol
        x = min(max(x, a + margin), b - margin)
        sigma = math.exp(x)
        e = eps_of(sigma)
        f = e - target
        if f > 0:
            a, fa, ga = x, f, f
            if last_side == -1:
                gb *= 0.5
            last_side = -1
        else:
            b, fb, gb = x, f, f
            s_hi, eps_hi = sigma, e
            if last_side == 1:
                ga *= 0.5
            last_side = 1
        widths.append(b - a)
    return s_hi, eps_hi


COARSE_SIGMA_RTOL = 1e-2  # the coarse search's tolerance (:func:`coarse_noise_multiplier`)


def _coarse_sigma(history_of: Callable[[float], list[Phase]], epsilon: float, delta: float) -> float:
    """Smallest σ to :data:`COARSE_SIGMA_RTOL` with the integer-order RDP bound ≤ ``epsilon``."""
    sigma, _ = _smallest_sigma(
        lambda s: _rdp_epsilon(history_of(s), delta, _INTEGER_RDP_ORDERS),
        epsilon,
        1.0,
        2.0,
        rtol=COARSE_SIGMA_RTOL,
    )
    return sigma


def _solve(history_of: Callable[[float], list[Phase]], epsilon: float, delta: float, accountant: str) -> dict:
    """Smallest common σ for the composition ``history_of(σ)`` with the requested accountant.

    Both searches start from the coarse (1 %) RDP solution over the integer orders only
    (:func:`_coarse_sigma`): full-order RDP and (for ε ≳ 0.1) PRV need a few % less noise than
    that, so stepping down by 1.1 usually brackets the answer at once; steps up are 1.25.
    """
    seed = _coarse_sigma(history_of, epsilon, delta)

    if accountant == "prv":

        def eps_prv(s: float) -> float:
            # PRV's bound is ε̂ + PRV_EPS_ERROR: it cannot certify ε below about PRV_EPS_ERROR.
            if epsilon < PRV_EPS_ERROR or s > 64 * seed:
                raise _PRVFailure(
                    f"PRV cannot certify epsilon <= {epsilon} (its bound adds eps_error = {PRV_EPS_ERROR})"
                )
            return _prv_epsilon(history_of(s), delta)

        try:
            sigma, eps = _smallest_sigma(eps_prv, epsilon, seed, 1.25, factor_down=1.1)
            return {"noise_multiplier": sigma, "accountant": "prv", "epsilon_achieved": eps}
        except _PRVFailure as exc:
            _warn_fallback(str(exc), stacklevel=4)
    sigma, eps = _smallest_sigma(
        lambda s: _rdp_epsilon(history_of(s), delta), epsilon, seed, 1.25, factor_down=1.1
    )
    return {"noise_multiplier": sigma, "accountant": "rdp", "epsilon_achieved": eps}


# ----------------------------------------------------------------------------- public API


def noise_multiplier_info(
    epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str = "prv"
) -> dict[str, Any]:
    """Smallest DP-SGD noise multiplier for (ε, δ) with the accountant that certified it.

    Returns ``{"noise_multiplier", "accountant", "epsilon_achieved"}``; ``accountant`` is
    "rdp" when PRV was requested but failed (a RuntimeWarning says so).
    """
    from .cache import memo

    epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
    q, n = _check_sample_rate(sample_rate), _check_steps(steps)
    acc = _check_accountant(accountant)
    # a pure function of public parameters, cached on disk across processes (dpcl.privacy.cache)
    return memo(
        "noise_multiplier_info",
        (epsilon, delta, q, n, acc),
        lambda: _solve(lambda s: [(s, q, n)], epsilon, delta, acc),
    )


def noise_multiplier(
    epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str = "prv"
) -> float:
    """Smallest σ such that ``steps`` Poisson-subsampled Gaussian steps at rate q are (ε, δ)-DP."""
    return float(noise_multiplier_info(epsilon, delta, sample_rate, steps, accountant)["noise_multiplier"])


def coarse_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """A DP-SGD noise multiplier for (ε, δ) found fast, for searches that need the noise scale
    only approximately (hyperparameter tuning trials; never a run or a ledger).

    The returned σ is verified like :func:`noise_multiplier`'s, with the RDP bound over the integer
    orders of :data:`RDP_ORDERS`: that bound is never below the full RDP bound, so ``steps``
    Poisson-subsampled Gaussian steps at rate q with this σ are (ε, δ)-DP by the RDP accountant too.
    It is at most :data:`COARSE_SIGMA_RTOL` (1 %) above the smallest σ the integer-order bound
    certifies, and typically 0-2 % above :func:`noise_multiplier`'s ``accountant="rdp"`` answer,
    at a few percent of its cost (opacus's fractional RDP orders dominate that search).
    """
    from .cache import memo

    epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
    q, n = _check_sample_rate(sample_rate), _check_steps(steps)
    return float(
        memo(
            "coarse_noise_multiplier",
            (epsilon, delta, q, n),
            lambda: _coarse_sigma(lambda s: [(s, q, n)], epsilon, delta),
        )
    )


def epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str = "prv"
) -> float:
    """ε spent by ``steps`` DP-SGD steps with noise multiplier σ at sample rate q (upper bound;
    cached on disk like :func:`_single_phase_epsilon`, dpcl.privacy.cache)."""
    sigma, q, n = (
        _check_noise_multiplier(noise_multiplier),
        _check_sample_rate(sample_rate),
        _check_steps(steps),
    )
    from .cache import memo

    delta, acc = _check_delta(delta), _check_accountant(accountant)
    eps, _ = memo(
        "single_phase_epsilon",
        (sigma, q, n, delta, acc),
        lambda: list(_epsilon_of_history([(sigma, q, n)], delta, acc)),
    )
    return float(eps)


def compose_epsilon(phases: list[Phase], delta: float, accountant: str = "prv") -> float:
    """ε of running the phases (σ, q, steps) one after another on the same individual (App. D.4).

    Sequential composition: e.g. a task's training phase and its memory buffer's rereads.
    The accountant composes the exact privacy-loss distributions (PRV) or RDP curves of
    all phases, which is tighter than adding the per-phase ε.
    """
    history = _check_phases(phases)
    return _epsilon_of_history(history, _check_delta(delta), _check_accountant(accountant))[0]


def compose_noise_multiplier_info(
    epsilon: float, delta: float, phases_shape: list[tuple[float, int]], accountant: str = "prv"
) -> dict[str, Any]:
    """Like :func:`compose_noise_multiplier`, also returning the accountant used and ε achieved."""
    epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)
    shapes = _check_phase_shapes(phases_shape)
    return _solve(lambda s: [(s, q, n) for q, n in shapes], epsilon, delta, _check_accountant(accountant))


def compose_noise_multiplier(
    epsilon: float, delta: float, phases_shape: list[tuple[float, int]], accountant: str = "prv"
) -> float:
    """Smallest common σ so that phases (q, steps) composed sequentially are (ε, δ)-DP."""
    info = compose_noise_multiplier_info(epsilon, delta, phases_shape, accountant)
    return float(info["noise_multiplier"])


@functools.lru_cache(maxsize=1024)
def _single_phase_epsilon(sigma: float, q: float, n: int, delta: float, accountant: str) -> tuple[float, str]:
    """ε of one (σ, q, steps) phase (cached, also on disk: every run of a sweep writes the same
    ledger entries)."""
    from .cache import memo

    eps, used = memo(
        "single_phase_epsilon",
        (sigma, q, n, delta, accountant),
        lambda: list(_epsilon_of_history([(sigma, q, n)], delta, accountant)),
    )
    return float(eps), str(used)


def accountant_record(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str = "prv"
) -> dict[str, Any]:
    """JSON-serialisable ledger entry for one DP-SGD run; ``accountant`` is the one actually used."""
    sigma, q, n = (
        _check_noise_multiplier(noise_multiplier),
        _check_sample_rate(sample_rate),
        _check_steps(steps),
    )
    delta = _check_delta(delta)
    eps, used = _single_phase_epsilon(sigma, q, n, delta, _check_accountant(accountant))
    return {
        "mechanism": "dpsgd",
        "accountant": used,
        "noise_multiplier": sigma,
        "sample_rate": q,
        "steps": n,
        "epsilon": eps,
        "delta": delta,
    }
