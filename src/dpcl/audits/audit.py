"""Empirical privacy audits: Monte-Carlo lower bounds on ε.

An (ε, δ)-DP mechanism M satisfies, for neighbouring D, D' and every event S::

    Pr[M(D) ∈ S] ≤ e^ε Pr[M(D') ∈ S] + δ   (and with D, D' swapped),

so any pair of probabilities (p, p') of one event gives ε ≥ ln((p − δ)/p').
An audit runs the *real* mechanism many times on D and on D', counts how often S
happens, replaces p by a Clopper-Pearson lower bound and p' by an upper bound, and
reports the resulting ε that holds with confidence 1 − α. If this lower bound exceeds
the claimed ε, the implementation does not meet its claim (up to probability α).

Audited here (neighbouring datasets differ in one individual, add/remove adjacency):

- label release ([LabelSpace] Sec. 4.2, Eq. 7; App. C.3, Thm C.3): a class of size n vs
  n + 1, and a new label (0 vs 1 example); S = "the label is released";
- the cosine classifier's noisy class sums (Alg. 1, Eq. 9): one unit-norm feature more
  in one class sum; S = "the sum's projection on that feature exceeds a threshold".

Broken variants (the Label Oracle, Prop. 4.1; under-noised sums) show the audit bites.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import ndtr
from scipy.stats import beta, binom

from ..data.label_space import output_label_spaces, parse_label_method
from ..privacy.accounting import Budget
from ..privacy.class_sums import noisy_class_sums
from ..privacy.gaussian import gaussian_delta
from ..privacy.label_release import keep_probabilities, laplace_threshold, release_labels, tsgd_threshold
from ..seeding import rng

AUDIT_MECHANISMS = ("tsgd", "laplace", "oracle")


def clopper_pearson(
    k: int | np.ndarray, n: int | np.ndarray, alpha: float = 0.05, two_sided: bool = True
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Exact binomial confidence bounds ([Clopper1934]) for k successes in n trials.

    ``two_sided=True``: the interval covers p with probability ≥ 1 − α (α/2 per tail).
    ``two_sided=False``: each end alone is a one-sided 1 − α bound, e.g. for k = 0 the
    upper bound is 1 − α^(1/n). k = 0 gives low = 0, k = n gives high = 1, n = 0 gives (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    k_arr, n_arr = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    if np.any(n_arr < 0) or np.any(k_arr < 0) or np.any(k_arr > n_arr):
        raise ValueError(f"need 0 <= k <= n, got k={k!r}, n={n!r}")
    a = alpha / 2 if two_sided else alpha
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k_arr > 0, beta.ppf(a, np.maximum(k_arr, 1), n_arr - k_arr + 1), 0.0)
        high = np.where(k_arr < n_arr, beta.ppf(1 - a, k_arr + 1, np.maximum(n_arr - k_arr, 1)), 1.0)
    if np.ndim(k) == 0 and np.ndim(n) == 0:
        return float(low), float(high)
    return low, high


def _direction_bound(low_num: float, high_den: float, delta: float) -> float:
    """ln((p_low − δ)/p_high), or 0 if the numerator is ≤ 0 (nothing can be concluded)."""
    num = low_num - delta
    if num <= 0:
        return 0.0
    if high_den <= 0:  # only if the denominator side had infinitely many trials
        return math.inf
    return max(0.0, math.log(num / high_den))


def epsilon_lower_bound(k_D: int, n_D: int, k_Dp: int, n_Dp: int, delta: float, alpha: float = 0.05) -> float:
    """Lower bound on ε, valid with confidence 1 − α, from event counts on D and D'.

    ε ≥ max(ln((p_low(D) − δ)/p_high(D')), ln((p_low(D') − δ)/p_high(D))), clipped at 0.
    Four one-sided Clopper-Pearson bounds enter the maximum, so α is split over them
    (Bonferroni, α/4 each), i.e. a two-sided 1 − α/2 interval per dataset: the bound is
    wrong only if one of the four bounds fails, which has probability ≤ α in total.
    """
    if not 0 <= delta < 1:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    lo_d, hi_d = clopper_pearson(k_D, n_D, alpha / 2, two_sided=True)
    lo_dp, hi_dp = clopper_pearson(k_Dp, n_Dp, alpha / 2, two_sided=True)
    return max(_direction_bound(lo_d, hi_dp, delta), _direction_bound(lo_dp, hi_d, delta))


def attainable_lower_bound(
    p_D: float, p_Dp: float, trials: int, delta: float, alpha: float = 0.05, quantile: float = 0.5
) -> float:
    """The :func:`epsilon_lower_bound` obtained when counts sit at binomial quantiles.

    Each direction is evaluated with its numerator count at the lower ``quantile`` and
    its denominator count at the upper one (the bound is increasing in the numerator
    count and decreasing in the denominator count). ``quantile=0.5`` is the typical
    bound (used to plan an audit); with a small ``quantile`` q an audit of a mechanism
    with these exact probabilities reaches at least this value with probability ≥ 1 − 2q.
    """
    return attainable_lower_bounds([p_D], [p_Dp], trials, delta, alpha, quantile)[0]


def attainable_lower_bounds(p_D, p_Dp, trials: int, delta: float, alpha: float = 0.05, quantile: float = 0.5):
    """:func:`attainable_lower_bound` of each pair (``p_D[i]``, ``p_Dp[i]``), the quantiles and
    Clopper-Pearson bounds computed for all pairs at once (a threshold search evaluates hundreds)."""
    if not 0 < quantile <= 0.5:
        raise ValueError(f"quantile must lie in (0, 0.5], got {quantile!r}")
    p_D, p_Dp = np.asarray(p_D, dtype=float), np.asarray(p_Dp, dtype=float)
    out = np.zeros(len(p_D))
    for p_num, p_den in ((p_D, p_Dp), (p_Dp, p_D)):
        k_num = binom.ppf(quantile, trials, p_num).astype(int)
        k_den = binom.isf(quantile, trials, p_den).astype(int)
        lo, _ = clopper_pearson(k_num, np.full(len(k_num), trials), alpha / 2)
        _, hi = clopper_pearson(k_den, np.full(len(k_den), trials), alpha / 2)
        for i in range(len(out)):
            out[i] = max(out[i], _direction_bound(float(lo[i]), float(hi[i]), delta))
    return [float(b) for b in out]


# --------------------------------------------------------------------------- label release


def _keep_probs(mechanism: str, sizes: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    if mechanism == "oracle":
        return (sizes > 0).astype(float)
    return np.asarray(keep_probabilities(sizes, epsilon, delta, mechanism), dtype=float)


def _max_size(mechanism: str, epsilon: float, delta: float) -> int:
    """Largest n worth trying: beyond it both n and n + 1 are (almost) surely released."""
    if mechanism == "tsgd":
        return 2 * tsgd_threshold(epsilon, delta) + 1
    if mechanism == "laplace":
        return int(math.ceil(2 * laplace_threshold(epsilon, delta))) + 1
    return 1


def choose_class_size(
    mechanism: str, epsilon: float, delta: float, trials: int, alpha: float = 0.05
) -> tuple[int, float]:
    """Class size n maximising the typical audit bound for n vs n + 1 from the exact keep probabilities.

    In the tail the ratio of keep probabilities tends to e^ε (Eq. 7, Thm C.3), but small
    probabilities are estimated poorly from ``trials`` runs; the attainable bound
    (median counts, :func:`attainable_lower_bound`) weighs both. Returns (n, that bound).
    """
    sizes = np.arange(1, _max_size(mechanism, epsilon, delta) + 2)
    q = _keep_probs(mechanism, sizes, epsilon, delta)
    bounds = attainable_lower_bounds(q[:-1], q[1:], trials, delta, alpha)
    i = int(np.argmax(bounds))  # the first of the best
    return int(sizes[i]), bounds[i]


def _event_epsilon(p_d: float, p_dp: float, delta: float) -> float:
    """The ε that the event's exact probabilities force (direction D' over D), at least 0."""
    if p_dp <= delta:
        return 0.0
    return math.inf if p_d == 0 else max(0.0, math.log((p_dp - delta) / p_d))


def _count_released(
    mechanism: str, class_size: int, epsilon: float, delta: float, trials: int, gen: np.random.Generator
) -> int:
    """Run the real release code on ``trials`` independent classes of size ``class_size``.

    The label release draws i.i.d. noise per label (``release_labels``) and the Label
    Oracle treats labels separately, so ``trials`` classes in one call are ``trials``
    independent runs of the per-label event "released".
    """
    if mechanism == "oracle":
        labels = np.repeat(np.arange(trials), class_size)
        seed = int(gen.integers(2**31))
        out = output_label_spaces(
            parse_label_method("oracle"), [labels], trials, Budget(epsilon, delta), seed
        )
        return int(out["tasks"][0]["n_labels"])
    counts = dict.fromkeys(range(trials), int(class_size))
    released, _ = release_labels(counts, trials, epsilon, delta, gen, mechanism)
    return len(released)


def audit_label_release(
    mechanism: str,
    epsilon: float,
    delta: float,
    trials: int,
    seed: int,
    class_size: int | None = None,
    *,
    alpha: float = 0.05,
) -> dict:
    """Audit a label-release mechanism ("tsgd", "laplace", or the leaky "oracle") at claimed (ε, δ).

    Two neighbouring pairs, each run ``trials`` times per side, S = "label released":
    (a) a class of size n vs n + 1 (n chosen by :func:`choose_class_size` if not given);
    (b) a new label, 0 vs 1 example (Prop. 4.1: the oracle releases it iff present).
    α is split equally over the two cases, so the reported maximum holds with 1 − α.
    """
    if mechanism not in AUDIT_MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}; allowed: {list(AUDIT_MECHANISMS)}")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    a_case = alpha / 2
    if class_size is None:
        n, planned = choose_class_size(mechanism, epsilon, delta, trials, a_case)
    else:
        if class_size < 1:
            raise ValueError(f"class_size must be >= 1, got {class_size}")
        n = int(class_size)
        q = _keep_probs(mechanism, np.array([n, n + 1]), epsilon, delta)
        planned = attainable_lower_bound(float(q[0]), float(q[1]), trials, delta, a_case)
    cases = []
    for name, (s_d, s_dp) in (("n vs n+1", (n, n + 1)), ("new label", (0, 1))):
        k_d = _count_released(
            mechanism,
            s_d,
            epsilon,
            delta,
            trials,
            rng(seed, "audit", "labels", mechanism, epsilon, delta, name, "D"),
        )
        k_dp = _count_released(
            mechanism,
            s_dp,
            epsilon,
            delta,
            trials,
            rng(seed, "audit", "labels", mechanism, epsilon, delta, name, "D'"),
        )
        p = _keep_probs(mechanism, np.array([s_d, s_dp]), epsilon, delta)
        event_eps = _event_epsilon(float(p[0]), float(p[1]), delta)
        cases.append(
            {
                "case": name,
                "class_sizes": [s_d, s_dp],
                "released": [k_d, k_dp],
                "keep_probabilities": [float(p[0]), float(p[1])],
                "event_epsilon": event_eps,
                "epsilon_lower_bound": epsilon_lower_bound(k_d, trials, k_dp, trials, delta, a_case),
            }
        )
    return {
        "mechanism": mechanism,
        "claimed_epsilon": float(epsilon),
        "delta": float(delta),
        "trials": int(trials),
        "alpha": float(alpha),
        "class_size": n,
        "planned_lower_bound": planned,
        "epsilon_lower_bound": max(c["epsilon_lower_bound"] for c in cases),
        "cases": cases,
    }


#: the Release Labels methods whose budget split the mechanisms part audits (the default's label method)
SPLIT_METHODS = ("release-f0.1",)


def audit_split_release(
    tag: str, epsilon: float, delta: float, trials: int, seed: int, *, alpha: float = 0.05
) -> dict:
    """Audit label release as the pipeline makes it: :func:`output_label_spaces` for Release Labels
    method ``tag`` (fraction f, its mechanism) at the run's (ε, δ). The claim tested is the plan's: the
    label release spends the fraction f of both ε and δ ([LabelSpace] Sec. 4.2, basic composition), so
    a release that spent more than its share (the split bypassed) is refuted whatever its ledger entry
    says. The cases are :func:`audit_label_release`'s (n vs n + 1 at the n chosen for the claim; a new
    label, 0 vs 1) at several n (below), each ``trials`` labels of one call per world (labels are
    released independently)."""
    method = parse_label_method(tag)
    if method.kind != "release":
        raise ValueError(f"{tag!r} is not a Release Labels method")
    claim_eps, claim_delta = method.fraction * epsilon, method.fraction * delta
    # the class sizes most telling at the claim, at the whole run's budget (the split bypassed) and
    # between them: a size chosen for the claim alone is released surely at a larger ε, so it would
    # have no power against an overspend; α is split over these cases and the new label
    shares = (method.fraction, math.sqrt(method.fraction), 1.0)
    a_case = alpha / (len(shares) + 1)
    sizes = sorted(
        {choose_class_size(method.mechanism, s * epsilon, s * delta, trials, a_case)[0] for s in shares}
    )

    def released(size: int, world: str, case: str) -> int:
        labels = np.repeat(np.arange(trials), size)
        key = int(rng(seed, "audit", "labels", "split", tag, epsilon, delta, case, world).integers(2**31))
        out = output_label_spaces(method, [labels], trials, Budget(epsilon, delta), key)
        return int(out["tasks"][0]["n_labels"])

    cases = []
    for name, (s_d, s_dp) in [(f"n={n} vs n+1", (n, n + 1)) for n in sizes] + [("new label", (0, 1))]:
        k_d, k_dp = released(s_d, "D", name), released(s_dp, "D'", name)
        cases.append(
            {
                "case": name,
                "class_sizes": [s_d, s_dp],
                "released": [k_d, k_dp],
                "epsilon_lower_bound": epsilon_lower_bound(k_d, trials, k_dp, trials, claim_delta, a_case),
            }
        )
    return {
        "mechanism": tag,
        "run_epsilon": float(epsilon),
        "claimed_epsilon": claim_eps,
        "delta": claim_delta,
        "trials": int(trials),
        "alpha": float(alpha),
        "class_sizes": sizes,
        "epsilon_lower_bound": max(c["epsilon_lower_bound"] for c in cases),
        "cases": cases,
    }


# --------------------------------------------------------------------------- Gaussian sums


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """The ε the Gaussian mechanism with noise σ really achieves at δ (inverse of the analytic δ(ε))."""
    if gaussian_delta(sigma, 0.0, sensitivity) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(sigma, hi, sensitivity) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gaussian_delta(sigma, e, sensitivity) - delta, 0.0, hi, xtol=1e-12))


def _projections(
    sigma: float, dim: int, trials: int, with_extra: bool, gen: np.random.Generator
) -> np.ndarray:
    """Released class sums of the real mechanism (:func:`dpcl.privacy.class_sums.noisy_class_sums`, what the
    DP cosine classifier adds to its prototypes), projected on the extra feature.

    Every class holds one example with feature u = e_1 (D); D' adds one example with
    feature v = e_0 to every class. Each of the ``trials`` labels gets its own noise
    (Eq. 9), so the labels are independent runs. Returns ⟨s_o − s_o(D), v⟩.
    """
    u, v = np.eye(dim)[1], np.eye(dim)[0]
    labels = np.arange(trials)
    feats = np.tile(u, (trials, 1))
    if with_extra:
        labels = np.concatenate([labels, labels])
        feats = np.concatenate([feats, np.tile(v, (trials, 1))])
    _, sums = noisy_class_sums(feats, labels, labels[:trials], sigma, gen, dim=dim)
    return sums.astype(np.float64) @ v - float(u @ v)


def _best_threshold(x_d: np.ndarray, x_dp: np.ndarray, delta: float, alpha: float) -> float:
    """Threshold maximising the empirical bound on calibration samples (candidates: their quantiles)."""
    pooled = np.sort(np.concatenate([x_d, x_dp]))
    n = len(pooled)
    qs = 1.0 - np.geomspace(0.5, min(0.5, 3.0 / n), 80)
    cands = np.unique(np.quantile(pooled, qs))
    s_d, s_dp = np.sort(x_d), np.sort(x_dp)
    best_t, best = float(cands[0]), -1.0
    for t in cands:
        k_d = len(s_d) - np.searchsorted(s_d, t, side="right")
        k_dp = len(s_dp) - np.searchsorted(s_dp, t, side="right")
        b = epsilon_lower_bound(int(k_d), len(s_d), int(k_dp), len(s_dp), delta, alpha)
        if b > best:
            best_t, best = float(t), b
    return best_t


def planned_gaussian_threshold(
    sigma: float, delta: float, trials: int, alpha: float = 0.05
) -> tuple[float, float]:
    """Data-independent threshold on the projection from σ: maximises :func:`attainable_lower_bound`.

    Under D the projection is N(0, σ²), under D' N(1, σ²) (unit sensitivity, Eq. 9), so
    Pr[> t] = Φ(−t/σ) and Φ(−(t − 1)/σ). Returns (threshold, attainable bound).
    """
    ts = 0.5 + sigma * np.linspace(0.0, 8.0, 161)
    bounds = attainable_lower_bounds(ndtr(-ts / sigma), ndtr(-(ts - 1) / sigma), trials, delta, alpha)
    i = int(np.argmax(bounds))  # the first of the best
    return float(ts[i]), bounds[i]


def audit_gaussian_sums(
    sigma: float,
    claimed_epsilon: float,
    delta: float,
    dim: int,
    trials: int,
    seed: int,
    *,
    alpha: float = 0.05,
    threshold: str | float = "split",
) -> dict:
    """Audit the cosine classifier's noisy class sums with noise σ against a claimed (ε, δ).

    D and D' differ by one unit-norm feature v in one class sum (Eq. 9, Δ = 1). The
    distinguisher thresholds the released sum's projection on v: S = {⟨s, v⟩ > t}.
    The threshold never sees the samples it is evaluated on: ``"split"`` picks it on the
    first half of the ``trials`` runs per side and bounds on the second half; ``"fixed"``
    derives it from σ (:func:`planned_gaussian_threshold`) and uses all runs; a number is
    used as given.
    """
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be positive and finite, got {sigma!r}")
    if dim < 2:
        raise ValueError(f"dim must be >= 2, got {dim}")
    if trials < 2:
        raise ValueError(f"trials must be >= 2, got {trials}")
    x_d = _projections(sigma, dim, trials, False, rng(seed, "audit", "gaussian", sigma, dim, "D"))
    x_dp = _projections(sigma, dim, trials, True, rng(seed, "audit", "gaussian", sigma, dim, "D'"))
    if threshold == "split":
        half = trials // 2
        t = _best_threshold(x_d[:half], x_dp[:half], delta, alpha)
        x_d, x_dp = x_d[half:], x_dp[half:]
    elif threshold == "fixed":
        t, _ = planned_gaussian_threshold(sigma, delta, trials, alpha)
    elif isinstance(threshold, (int, float)) and math.isfinite(threshold):
        t = float(threshold)
    else:
        raise ValueError(f"threshold must be 'split', 'fixed' or a finite number, got {threshold!r}")
    k_d, k_dp = int((x_d > t).sum()), int((x_dp > t).sum())
    n = len(x_d)
    return {
        "mechanism": "gaussian_sums",
        "sigma": float(sigma),
        "claimed_epsilon": float(claimed_epsilon),
        "delta": float(delta),
        "actual_epsilon": gaussian_epsilon(sigma, delta),
        "dim": int(dim),
        "trials": int(trials),
        "bound_trials": n,
        "alpha": float(alpha),
        "threshold_rule": threshold if isinstance(threshold, str) else "given",
        "threshold": t,
        "counts": [k_d, k_dp],
        "exact_probabilities": [float(ndtr(-t / sigma)), float(ndtr(-(t - 1) / sigma))],
        "epsilon_lower_bound": epsilon_lower_bound(k_d, n, k_dp, n, delta, alpha),
    }


def audit_table(
    epsilons: list[float], delta: float, trials: int, seed: int, dim: int = 64, alpha: float = 0.05
) -> pd.DataFrame:
    """Claimed ε against the empirical lower bound for every audited mechanism, plus the
    deliberately broken variants (Label Oracle; class sums with σ/4) that must fail. Each correct row
    names the primitive it audits (``primitive``: "mechanism/noise" as :mod:`dpcl.privacy.releases`
    reports it), so that the table can name the learners whose runs use it."""
    from ..privacy.gaussian import gaussian_sigma

    rows = []
    for eps in epsilons:
        for mech in ("tsgd", "laplace", "oracle"):
            r = audit_label_release(mech, eps, delta, trials, seed, alpha=alpha)
            rows.append(
                {
                    "mechanism": f"label release ({mech})",
                    "broken": mech == "oracle",
                    "primitive": None if mech == "oracle" else f"label_release/{mech}",
                    "claimed_epsilon": eps,
                    "epsilon_lower_bound": r["epsilon_lower_bound"],
                    "trials": trials,
                    "setting": f"class size n={r['class_size']} vs n+1; 0 vs 1",
                }
            )
        for tag in SPLIT_METHODS:
            r = audit_split_release(tag, eps, delta, trials, seed, alpha=alpha)
            rows.append(
                {
                    "mechanism": f"label release through the budget split ({tag})",
                    "broken": False,
                    "primitive": f"label_release/{parse_label_method(tag).mechanism}",
                    "claimed_epsilon": r["claimed_epsilon"],
                    "epsilon_lower_bound": r["epsilon_lower_bound"],
                    "trials": trials,
                    "setting": f"output_label_spaces at the run's eps = {eps:g}; the claim: its share f of eps "
                    f"and delta; class sizes n={', '.join(map(str, r['class_sizes']))} vs n+1; 0 vs 1",
                }
            )
        sigma = gaussian_sigma(eps, delta)
        for name, s, broken in (
            ("gaussian class sums", sigma, False),
            ("gaussian class sums, sigma/4", sigma / 4, True),
        ):
            r = audit_gaussian_sums(s, eps, delta, dim, trials, seed, alpha=alpha)
            rows.append(
                {
                    "mechanism": name,
                    "broken": broken,
                    "primitive": None if broken else "class_sums/gaussian",
                    "claimed_epsilon": eps,
                    "epsilon_lower_bound": r["epsilon_lower_bound"],
                    "trials": trials,
                    "setting": f"sigma={s:.4g}, threshold on a held-out half",
                }
            )
    df = pd.DataFrame(rows)
    df["delta"] = delta
    df["alpha"] = alpha
    df["verdict"] = [
        audit_verdict(c, lb) for c, lb in zip(df["claimed_epsilon"], df["epsilon_lower_bound"], strict=True)
    ]
    return df


AUDIT_ADJACENCY = "add/remove"
#: an audit row's two verdicts: it can refute a claim, never certify one (certifying is the accountant's)
REFUTED, NOT_REFUTED = "refuted", "not refuted"


def audit_verdict(
    claimed: float,
    lower: float,
    *,
    claimed_mu: float | None = None,
    mu_lower: float | None = None,
) -> str:
    """An audit row's verdict, with its adjacency: ``refuted`` where its lower bound on ε exceeds the
    claimed ε, or (a white-box row whose claim is Gaussian in its setting, :mod:`dpcl.audits.gdp`) its
    lower bound on μ exceeds the μ that the claimed (ε, δ) allows; else ``not refuted``. A row with both
    tests runs each at half its α (:func:`dpcl.audits.whitebox.bound_trials`)."""
    from ..privacy.verdict import REL_TOL

    if (
        claimed_mu is not None
        and mu_lower is not None
        and float(mu_lower) > float(claimed_mu) * (1 + REL_TOL)
    ):
        return f"{REFUTED} ({AUDIT_ADJACENCY}; the μ bound exceeds what the claim allows)"
    if math.isfinite(float(claimed)) and float(lower) > float(claimed) * (1 + REL_TOL):
        return f"{REFUTED} ({AUDIT_ADJACENCY}; the ε bound exceeds the claim)"
    return f"{NOT_REFUTED} ({AUDIT_ADJACENCY})"
