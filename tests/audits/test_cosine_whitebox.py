"""White-box audit of the DP cosine classifier's release (dpcl.audits.cosine_whitebox.audit_prototypes, on its own
CosineClassifier.update): a correct classifier stays at or below its claim (ε at δ and μ) and its μ bound
reaches 90 % of the claim; noise at σ/2 and summands that escape normalisation are caught at ε = 1.

The broken variants live here only: the class-sum mechanism swapped, while the audit runs, for one that
halves σ or skips the normalisation. 100,000 classes per world (fixed seeds): the μ bound sits about
0.02 below the true μ; the margins are several of its standard errors (0.01) wide.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcl.audits import cosine_whitebox
from dpcl.learners import cosine as cosine_mod
from dpcl.privacy import class_sums

DELTA = 1e-5
AUDIT = {"whitebox_runs": 40, "whitebox_canaries": 5000}


def test_a_correct_classifier_stays_at_or_below_its_claim():
    (row,) = cosine_whitebox.audit_prototypes(1.0, DELTA, audit=AUDIT, seed=0)
    assert row["epsilon_lower_bound"] <= 1.0 and row["epsilon_lower_bound"] >= 0.5
    assert 0.9 * row["claimed_mu"] <= row["mu_lower_bound"] <= row["claimed_mu"]
    assert min(row["trials_per_world"]) > 74_000


def _half_sigma(features, labels, label_space, sigma, rng, *, dim):
    return class_sums.noisy_class_sums(features, labels, label_space, sigma / 2, rng, dim=dim)


def _unnormalised(features, labels, label_space, sigma, rng, *, dim):
    o_t, sums = class_sums.noisy_class_sums(np.zeros((0, dim)), labels[:0], label_space, sigma, rng, dim=dim)
    np.add.at(sums, np.searchsorted(o_t, labels), np.asarray(features, dtype=np.float32))
    return o_t, sums


@pytest.mark.parametrize(
    ("bug", "variant", "ratio"), [("sigma/2", _half_sigma, 1.5), ("no normalisation", _unnormalised, 5.0)]
)
def test_a_bug_in_the_class_sums_is_caught(monkeypatch, bug, variant, ratio):
    monkeypatch.setattr(cosine_mod, "noisy_class_sums", variant)
    (row,) = cosine_whitebox.audit_prototypes(1.0, DELTA, audit=AUDIT, seed=1)
    assert row["mu_lower_bound"] > ratio * row["claimed_mu"] and row["epsilon_lower_bound"] > 1.0, bug
