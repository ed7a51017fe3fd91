"""The output-label-space attack game ([LabelSpace] Fig. 1, Sec. 4.1, Prop. 4.1, App. C.1).

The challenger holds D (classes of given sizes) and D' = D ∪ {(x*, y*)} with a label
y* that does not occur in D. A fair coin picks which one is used; the attacker sees only
the released output label space O and guesses D' iff y* ∈ O. That is the optimal
attack here: under D, y* is never a candidate, and the rest of O has the same law under
D and D' (each label is decided by its own independent noise), so y* ∈ O is the
likelihood-ratio test.

- Label Oracle (O = labels present): y* ∈ O iff D' was used, accuracy 1 (Prop. 4.1).
- Base / Public labels (Sec. 4.3): O does not depend on the data, accuracy 1/2.
- Release Labels (Sec. 4.2, Eq. 7) with fraction f of (ε, δ): y* ∈ O only under D' and
  then with Pr[a class of size 1 is released] ≤ f·δ, so accuracy ½(1 + Pr[…]).

Any (ε, δ)-DP release caps the accuracy at (e^ε + δ)/(1 + e^ε) (:func:`dp_attack_bound`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..data.label_space import output_label_spaces, parse_label_method
from ..privacy.accounting import Budget, split_budget
from ..privacy.label_release import keep_probabilities, release_labels
from ..seeding import rng
from .audit import clopper_pearson

DEFAULT_METHODS = ("oracle", "base", "public-x10", "release-f0.1", "release-f0.5")
TABLE_COLUMNS = [
    "label_method",
    "epsilon",
    "delta",
    "trials",
    "attack_accuracy",
    "ci_low",
    "ci_high",
    "expected_accuracy",
    "dp_bound",
]


def dp_attack_bound(epsilon: float, delta: float) -> float:
    """Largest accuracy of any attack on an (ε, δ)-DP release with a fair prior: (e^ε + δ)/(1 + e^ε).

    Hypothesis-testing view of DP ([Kairouz2015]): for the attacker's rejection
    region S (guess D'), TPR = Pr[M(D') ∈ S] and FPR = Pr[M(D) ∈ S] obey
    TPR ≤ e^ε FPR + δ and, applied to the complement with D, D' swapped,
    1 − FPR ≤ e^ε (1 − TPR) + δ. Accuracy ½(1 + TPR − FPR) grows along the first line
    (slope e^ε > 1) and shrinks along the second (slope e^{−ε} < 1), so it is largest where
    they meet: FPR = (1 − δ)/(1 + e^ε), TPR = e^ε FPR + δ, TPR − FPR = (e^ε − 1 + 2δ)/(1 + e^ε),
    i.e. accuracy (e^ε + δ)/(1 + e^ε). A release that is not DP for any δ < 1 (Prop. 4.1)
    can reach 1.
    Written as (1 + δ e^{−ε})/(1 + e^{−ε}) so that large ε does not overflow; 1 for ε = ∞.
    """
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    if not 0 <= delta <= 1:
        raise ValueError(f"delta must lie in [0, 1], got {delta!r}")
    if math.isinf(epsilon):
        return 1.0
    em = math.exp(-epsilon)
    return (1.0 + delta * em) / (1.0 + em)


def _label_budget(fraction: float, epsilon: float, delta: float) -> Budget:
    """The label-release share of (ε, δ), exactly as :func:`output_label_spaces` splits it."""
    label_budget, _ = split_budget(Budget(float(epsilon), float(delta)), fraction)
    return label_budget


def expected_attack_accuracy(
    label_method: str, epsilon: float, delta: float, mechanism: str = "tsgd"
) -> float:
    """Exact accuracy of the optimal attack: 1 (oracle), 1/2 (data-independent), ½(1 + Pr[size-1 class kept])."""
    method = parse_label_method(label_method)
    if method.kind == "oracle":
        return 1.0
    if method.kind in ("base", "public"):
        return 0.5
    lb = _label_budget(method.fraction, epsilon, delta)
    if math.isinf(lb.epsilon):
        return 1.0
    return 0.5 * (1.0 + float(keep_probabilities(1, lb.epsilon, lb.delta, mechanism)))


def _check_sizes(class_sizes: Sequence[int]) -> np.ndarray:
    sizes = np.asarray(class_sizes)
    if sizes.ndim != 1 or (sizes.size and (not np.all(np.mod(sizes, 1) == 0) or sizes.min() < 1)):
        raise ValueError(f"class sizes of D must be positive integers, got {class_sizes!r}")
    return sizes.astype(np.int64)


def label_space_attack(
    label_method: str,
    class_sizes: Sequence[int] = (10, 10),
    epsilon: float = 1.0,
    delta: float = 1e-5,
    trials: int = 100_000,
    seed: int = 0,
    *,
    alpha: float = 0.05,
    mechanism: str = "tsgd",
) -> dict:
    """Play the Fig. 1 game ``trials`` times; empirical accuracy with its Clopper-Pearson (1 − α) CI.

    All games run as one batched release through the pipeline's own code
    (:func:`output_label_spaces`; :func:`release_labels` for ``mechanism="laplace"``):
    game i has its own new label y*_i, present (one example) iff its coin chose D'.
    Label noise is drawn independently per label, and the classes of D are shared by all
    games but do not affect whether any y*_i is released, so the games are independent.
    Data-independent methods (base, public-xN) compute O once (it cannot see the coin).
    ``epsilon``/``delta`` are the classifier release's budget; Release Labels uses the
    fraction f of both. ``dp_bound`` is :func:`dp_attack_bound` at (ε, δ).
    """
    method = parse_label_method(label_method)
    if mechanism not in ("tsgd", "laplace"):
        raise ValueError(f"unknown label-release mechanism {mechanism!r}; allowed: ['tsgd', 'laplace']")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    sizes = _check_sizes(class_sizes)
    m = len(sizes)
    gen = rng(seed, "attack", method.tag, mechanism, float(epsilon), float(delta))
    coin = gen.random(trials) < 0.5  # True: the challenger trains on D'
    y_star = m + np.arange(trials)
    base_labels = np.repeat(np.arange(m), sizes)
    labels = np.concatenate([base_labels, y_star[coin]])
    n_universe = m + trials
    budget = Budget(float(epsilon), float(delta))
    label_budget = _label_budget(method.fraction, epsilon, delta) if method.kind == "release" else None
    if not method.data_dependent:
        # O is fixed before the data is seen; check that on one game (D vs D', universe m + 1)
        # rather than materialise N × (m + trials) labels for public-xN.
        spaces = [
            output_label_spaces(method, [lab], m + 1, budget, seed)["tasks"][0]["labels"]
            for lab in (base_labels, np.append(base_labels, m))
        ]
        if spaces[0] != spaces[1]:  # pragma: no cover - would be a bug in label_space.py
            raise RuntimeError(f"label method {method.tag} is not data-independent")
        released = y_star if m in spaces[0] else []
    elif method.kind == "release" and mechanism == "laplace":
        counts = dict(zip(*np.unique(labels, return_counts=True), strict=True))
        released, _ = release_labels(
            counts, n_universe, label_budget.epsilon, label_budget.delta, gen, "laplace"
        )
    else:
        out = output_label_spaces(
            method,
            [labels],
            n_universe,
            budget,
            seed,
            run_key=("attack", mechanism, float(epsilon), float(delta)),
        )
        released = out["tasks"][0]["labels"]
    guess_dp = np.isin(y_star, np.asarray(released, dtype=np.int64))
    wins = int((guess_dp == coin).sum())
    low, high = clopper_pearson(wins, trials, alpha)
    res = {
        "label_method": method.tag,
        "mechanism": mechanism if method.kind == "release" else None,
        "class_sizes": sizes.tolist(),
        "epsilon": float(epsilon),
        "delta": float(delta),
        "trials": int(trials),
        "alpha": float(alpha),
        "wins": wins,
        "attack_accuracy": wins / trials,
        "ci_low": low,
        "ci_high": high,
        "expected_accuracy": expected_attack_accuracy(method.tag, epsilon, delta, mechanism),
        "dp_bound": dp_attack_bound(epsilon, delta),
    }
    if label_budget is not None:
        res.update(
            label_epsilon=label_budget.epsilon,
            label_delta=label_budget.delta,
            label_dp_bound=dp_attack_bound(label_budget.epsilon, label_budget.delta),
        )
    return res


def attack_table(
    epsilons: Sequence[float],
    delta: float,
    trials: int,
    seed: int,
    methods: Sequence[str] = DEFAULT_METHODS,
    class_sizes: Sequence[int] = (10, 10),
    *,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Fig. 1 numbers as a tidy table: one row per (label method, ε), columns ``TABLE_COLUMNS``."""
    rows = [
        label_space_attack(m, class_sizes, float(e), delta, trials, seed, alpha=alpha)
        for m in methods
        for e in epsilons
    ]
    df = pd.DataFrame.from_records(rows)[TABLE_COLUMNS]
    df.attrs["alpha"] = float(alpha)
    return df
