"""White-box audits (dpcl.audits.whitebox) of the DP-SGD heads on the pipeline's own train_head and of
FM-A-GEM's release on its own release_coefficients: a correct implementation stays at or below its claim
(ε at δ and μ) and the weight audit reaches at least half of its ε and 90 % of its μ; noise at σ/2 and a
gradient branch that escapes clipping are caught at ε = 1 (lower bound above the claim).

The broken variants live here only: a one-step copy of train_head's step whose correct form is checked
to release exactly what train_head releases, then the bug. Every audit uses a fixed seed; each bound
holds with confidence 95 %, and the margins below are several standard errors of the counts wide.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcl.audits.whitebox import (
    AUDIT_DPSGD,
    MAX_DIRAC_COLUMNS,
    UpdateIntegrityError,
    audit_head_bias,
    audit_head_poisson,
    audit_head_weights,
    dirac_trainings,
)
from dpcl.privacy import releases, sampling
from dpcl.training.adam import Adam
from dpcl.training.clipped_sum import HeadData, clip_factors, head_attribution, logit_grads32
from dpcl.training.heads import LinearHead, train_head

DELTA = 1e-5


def _step(*, clip_weights: bool = True, clip_bias: bool = True, noise_scale: float = 1.0, apply_noise=True):
    """DP-SGD on the linear head as train_head runs it (same random draws in the same order, each step's
    release reported as the primitive reports it, then Adam's step), with an optional bug: a branch
    that escapes clipping, noise scaled by ``noise_scale``, or (``apply_noise`` False) the noised sum
    reported but the head moved by the un-noised one."""

    def train(head, x, y, cfg, sigma, gen):
        data = HeadData(x, y)
        adam = Adam.for_head(head, cfg)
        for _ in range(cfg.steps):
            batch = sampling.by_gaps(gen, len(data), cfg.sample_rate, population=data.x)
            s_w, s_b = np.zeros(head.w.shape, dtype=np.float32), np.zeros_like(head.b)
            if batch.size:
                xb = data.x[batch]
                d = logit_grads32(head.w, head.b, xb, data.y[batch], None)
                c = clip_factors(data.sq1[batch], d, cfg.clip).astype(np.float32)[:, None]
                s_w = (d * c if clip_weights else d).T @ xb
                s_b = (d * c if clip_bias else d).sum(axis=0, dtype=np.float64)
            std = noise_scale * sigma * cfg.clip
            g_w = std * gen.standard_normal(head.w.shape) + s_w
            g_b = std * gen.standard_normal(head.b.shape) + s_b
            releases.publish(
                "clipped_gradient_sum",
                np.r_[g_w.ravel(), g_b],
                rows=data.x[batch],
                sensitivity=cfg.clip,
                noise_scale=sigma * cfg.clip,
                attribution=head_attribution(head.w, head.b, clip=cfg.clip, active=None),
                state=(head.w, head.b),
            )
            adam.step(
                [np.r_[g_w.ravel(), g_b] if apply_noise else np.r_[s_w.ravel().astype(np.float64), s_b]]
            )
        return {}

    return train


def _released(train) -> list:
    gen = np.random.default_rng(0)
    x, y = gen.normal(size=(12, 5)) * 3, gen.integers(0, 3, 12)
    head = LinearHead(5, 3)
    with releases.recording(keep_values=True) as rec:
        train(head, x, y, AUDIT_DPSGD, 2.0, np.random.default_rng(7))
    return [(r.value, r.state) for r in rec.releases] + [(head.params, None)]


@pytest.mark.parametrize("canaries, columns", [(5000, 1), (2500, 2), (1250, 1), (7, 1), (1001, 3)])
def test_a_run_of_dirac_canaries_splits_into_trainings_of_few_columns_with_its_trials(canaries, columns):
    per, trainings = dirac_trainings(canaries, 40, columns_per_canary=columns)
    split = trainings // 40
    assert trainings == 40 * split and per * columns <= max(MAX_DIRAC_COLUMNS, columns)
    assert canaries - split < per * split <= canaries  # every trial kept, up to the division's remainder
    assert canaries * columns > MAX_DIRAC_COLUMNS * (split - 1)  # the fewest trainings that hold them


def test_the_correct_step_releases_exactly_what_train_head_releases():
    real, copy = _released(train_head), _released(_step())
    assert len(real) == len(copy) == 2  # one release, then the trained head
    for (v1, s1), (v2, s2) in zip(real, copy, strict=True):
        np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=1e-15)
        assert (s1 is None and s2 is None) or np.array_equal(s1, s2)


def test_recording_changes_nothing():
    gen = np.random.default_rng(1)
    x, y = gen.normal(size=(20, 4)), gen.integers(0, 3, 20)
    heads = [LinearHead(4, 3), LinearHead(4, 3)]
    train_head(heads[0], x, y, AUDIT_DPSGD, 1.5, np.random.default_rng(3))
    with releases.recording(keep_values=True):
        train_head(heads[1], x, y, AUDIT_DPSGD, 1.5, np.random.default_rng(3))
    assert np.array_equal(heads[0].w, heads[1].w) and np.array_equal(heads[0].b, heads[1].b)


def test_a_head_moved_by_anything_but_its_reported_release_fails_update_integrity():
    """The release reported correctly noised, the head moved by the un-noised sum: every statistic on the
    reports would pass, the replay of Adam over them does not reach the trained head."""
    for audit in (
        lambda train: audit_head_weights(1.0, DELTA, canaries=50, runs=4, seed=0, train=train),
        lambda train: audit_head_bias(1.0, DELTA, trials=2, seed=0, train=train),
        lambda train: audit_head_poisson(1.0, DELTA, canaries=20, runs=1, seed=0, train=train),
    ):
        audit(train_head)  # the pipeline's own step passes
        with pytest.raises(UpdateIntegrityError, match="not the optimiser"):
            audit(_step(apply_noise=False))


def test_a_correct_head_stays_at_or_below_its_claim_and_reaches_half_of_it():
    row = audit_head_weights(1.0, DELTA, canaries=5000, runs=40, seed=0)  # 75,000 bound trials per world
    assert 0.5 <= row["epsilon_lower_bound"] <= 1.0
    # the μ route: the true μ is 0.995 of the claim (the canary's gradient has 1 % of its norm in the
    # shared bias); with 75,000 trials per world the bound sits about 0.02 below it
    assert 0.9 * row["claimed_mu"] <= row["mu_lower_bound"] <= row["claimed_mu"]
    assert min(row["trials_per_world"]) > 74_000 and row["steps"] == 1 and row["sample_rate"] == 1.0
    assert audit_head_bias(1.0, DELTA, trials=2000, seed=0)["epsilon_lower_bound"] <= 1.0


def test_noise_at_half_sigma_is_caught():
    row = audit_head_weights(1.0, DELTA, canaries=5000, runs=20, seed=1, train=_step(noise_scale=0.5))
    assert row["epsilon_lower_bound"] > 1.0
    assert row["mu_lower_bound"] > 1.5 * row["claimed_mu"]  # the true μ is twice the claim


def test_a_calibration_two_thirds_of_sigma_is_refuted_by_the_claim_not_the_code(monkeypatch):
    """The accountant's σ at ⅔ of what ε = 1 needs (true ε 1.55): the ledger would state that σ, so an
    audit comparing with the code's own μ (1/σ) passes it; the μ the claim (ε, δ) allows refutes it."""
    import dpcl.privacy.sgd_accounting as accounting
    from dpcl.learners import registry
    from dpcl.stages.privacy import _whitebox_rows

    calibrated = accounting.noise_multiplier
    monkeypatch.setattr(accounting, "noise_multiplier", lambda *a, **k: calibrated(*a, **k) * 2 / 3)
    audit, function, learners = next(a for a in registry.whitebox_audits() if a[0].name == "DP-SGD heads")
    cfg = {"whitebox_runs": 40, "whitebox_canaries": 5000, "whitebox_bias_trials": 100, "seed": 0}
    row = next(
        r for r in _whitebox_rows(audit, function, learners, 1.0, DELTA, cfg) if "weights" in r["mechanism"]
    )
    assert row["claimed_mu"] == pytest.approx(0.268, abs=1e-3)  # from (1, 1e-5) alone
    # the code's own σ: the accountant's (a little above the analytic Gaussian's at q = 1) times ⅔
    assert row["noise_mu"] == pytest.approx(1.5 * row["claimed_mu"], rel=0.02)
    # the bound sits a few hundredths under the true μ 0.40: below the code's μ, far above the claim's
    assert row["claimed_mu"] < row["mu_lower_bound"] < row["noise_mu"]
    assert row["verdict"].startswith("refuted") and "μ bound" in row["verdict"]


@pytest.mark.parametrize("branch", ["weights", "bias"])
def test_a_branch_escaping_clipping_is_caught(branch):
    if branch == "weights":
        row = audit_head_weights(1.0, DELTA, canaries=2000, runs=2, seed=2, train=_step(clip_weights=False))
    else:
        row = audit_head_bias(1.0, DELTA, trials=1000, seed=2, train=_step(clip_bias=False))
    assert row["epsilon_lower_bound"] > 1.0


def test_the_audit_refuses_a_function_that_releases_another_number_of_steps():
    def two_steps(head, x, y, cfg, sigma, gen):
        for _ in range(2):
            releases.publish(
                "clipped_gradient_sum", head.params, rows=x, sensitivity=cfg.clip,
                noise_scale=sigma * cfg.clip, state=(head.params,),
            )  # fmt: skip

    with pytest.raises(RuntimeError, match="released 2 steps"):
        audit_head_bias(1.0, DELTA, trials=2, seed=0, train=two_steps)


def test_the_audit_table_has_the_white_box_rows(tmp_path):
    from dpcl.stages.privacy import privacy_audit

    cfg = {
        "epsilons": [1.0],
        "trials": 1000,
        "learner_trials": 0,
        "whitebox_runs": 4,
        "whitebox_canaries": 500,
        "whitebox_bias_trials": 100,
        "seed": 0,
        "exposure": False,  # the exposure and canary rows name every learner (tests/audits/test_exposure_audit.py)
        "canary_runs": 0,
    }
    figs = [tmp_path / "a.png", tmp_path / "a.pdf"]
    privacy_audit(cfg, DELTA, tmp_path / "a.csv", tmp_path / "a.md", out_figures=figs)
    assert all(f.stat().st_size > 1000 for f in figs)  # claims against lower bounds
    md = (tmp_path / "a.md").read_text()
    heads = "(PEFT Ensemble (head-only), Naive (head-only), Non-CL (head-only)) | 1 |"
    for branch in ("weights", "bias"):
        line = next(line for line in md.splitlines() if f"DP-SGD heads, {branch} (white-box)" in line)
        assert heads in line and "not refuted (add/remove)" in line
        assert "q = 1, 1 step, C = 0.1" in line
    line = next(line for line in md.splitlines() if "FM-A-GEM, coefficient release (white-box)" in line)
    assert "(FM-A-GEM (sound variant)) | 1 |" in line and "not refuted (add/remove)" in line
    names = (
        "DP cosine classifier, class sums",
        "DP-A-GEM, train part",
        "DP-A-GEM, buffer rereads",
        "Desai et al. (as published), train part",
        "Desai et al. (as published), buffer rereads",
    )
    for name in names:
        assert f"| {name} (white-box) (" in md  # every learner with a white-box audit has its rows
    assert "| threat model |" in md and "| white-box: every privatized gradient sum (g and g_ref);" in md
    assert "FiLM" not in md and "Poisson q" not in md  # the strong audits' rows are off by default
    assert "μ: lower bound / claim" in md and "do not test Poisson sampling" in md
    assert md.count("DP-SGD heads, weights") == 1  # three learners share the audit: it runs once


def test_fm_release_stays_at_or_below_its_claim_and_noise_at_half_sigma_is_caught():
    from dpcl.audits.fm_agem_audits import audit_release
    from dpcl.learners.fm_agem import release_coefficients

    def half_noise(z, rows, k, sigma, gen):
        return release_coefficients(z, rows, k, sigma / 2, gen)

    audit = {"whitebox_runs": 40}  # 160 releases of 500 canaries: 30,000 bound trials per world
    (correct,) = audit_release(1.0, DELTA, audit=audit, seed=0)
    assert 0.25 <= correct["epsilon_lower_bound"] <= 1.0  # about 0.5
    # the true μ is √1.98/σ, 0.995 of the claimed √2/σ; the bound sits about 0.03 below it
    assert 0.85 * correct["claimed_mu"] <= correct["mu_lower_bound"] <= correct["claimed_mu"]
    (broken,) = audit_release(1.0, DELTA, audit=audit, seed=1, release=half_noise)
    assert broken["epsilon_lower_bound"] > 1.0 and broken["mu_lower_bound"] > 1.5 * broken["claimed_mu"]


def test_the_poisson_audit_stays_at_or_below_its_claim_and_catches_half_sigma_at_eps_1():
    """q = 1/4 over 16 steps (σ from the accountant for them): the pipeline's train_head stays at or below
    its claim and reaches 40 % of it with 37,500 bound trials per world (about 0.46 at twice that); with
    σ/2 (true ε 2.42 by the accountant) the bound (1.18) exceeds the claim."""
    from dpcl.audits.whitebox import POISSON_DPSGD, audit_head_poisson

    assert (POISSON_DPSGD.sample_rate, POISSON_DPSGD.steps) == (0.25, 16)
    row = audit_head_poisson(1.0, DELTA, canaries=5000, runs=20, seed=0)
    assert 0.4 <= row["epsilon_lower_bound"] <= 1.0 and row["mu_lower_bound"] is None
    assert row["steps"] == 16 and min(row["trials_per_world"]) > 37_000

    def half_sigma(head, x, y, cfg, sigma, gen):
        return train_head(head, x, y, cfg, sigma / 2, gen)

    broken = audit_head_poisson(1.0, DELTA, canaries=5000, runs=20, seed=1, train=half_sigma)
    assert broken["epsilon_lower_bound"] > 1.0


def test_the_audit_table_from_its_parts_equals_the_table_computed_in_one_process(tmp_path):
    """The workflow computes the table's parts in parallel jobs (rule privacy_audit_part) and merges
    them: the same table, byte for byte, as one process computing every part in turn, whatever order
    the parts ran in (two claimed ε, so the merge must restore the table's ε-major order)."""
    from dpcl.stages.privacy import audit_part, audit_parts, privacy_audit

    cfg = {
        "epsilons": [2.0, 1.0],
        "trials": 1000,
        "learner_trials": 8,
        "whitebox_runs": 4,
        "whitebox_canaries": 200,
        "whitebox_bias_trials": 50,
        "seed": 3,
        "exposure": False,  # its parts merge like the others (tests/audits/test_exposure_audit.py has its rows)
        "canary_runs": 0,
    }
    names = audit_parts(cfg)
    assert names[:2] == ["mechanisms", "learners"] and {"dp-sgd-heads", "dp-a-gem", "fm-a-gem"} <= set(names)
    assert len(set(names)) == len(names)
    # a white-box audit with a size key of its own runs no job while that key is 0 (FiLM's canaries)
    assert "film-efficientnet-lite0" not in names
    assert "film-efficientnet-lite0" in audit_parts(cfg | {"film_canaries": 100})
    privacy_audit(cfg, DELTA, tmp_path / "one.csv", tmp_path / "one.md")
    parts = {name: tmp_path / f"{name}.json" for name in names}
    for name in reversed(names):
        audit_part(cfg, DELTA, name, parts[name])
    privacy_audit(cfg, DELTA, tmp_path / "merged.csv", tmp_path / "merged.md", parts=parts)
    for ext in ("csv", "md"):
        assert (tmp_path / f"merged.{ext}").read_bytes() == (tmp_path / f"one.{ext}").read_bytes()
    table = pd.read_csv(tmp_path / "merged.csv")
    white = table[table["mechanism"].str.contains("(white-box)", regex=False)]
    half = len(white) // 2  # every white-box audit at ε = 2, then every one at ε = 1
    assert list(white["mechanism"][:half]) == list(white["mechanism"][half:])
    heads = white[white["mechanism"].str.startswith("DP-SGD heads")]["claimed_epsilon"]
    assert list(heads) == [2.0, 2.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="expected"):
        privacy_audit(
            cfg, DELTA, tmp_path / "x.csv", tmp_path / "x.md", parts={"mechanisms": parts["mechanisms"]}
        )
    with pytest.raises(ValueError, match="unknown audit part 'nope'"):
        audit_part(cfg, DELTA, "nope", tmp_path / "nope.json")
    assert audit_parts(cfg | {"learner_trials": 0, "whitebox_runs": 0}) == ["mechanisms"]
    assert audit_parts(cfg | {"learner_trials": 0, "whitebox_runs": 0, "exposure": True}) == [
        "mechanisms",
        "exposure",
        "exposure-active",
    ]
