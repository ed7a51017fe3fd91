"""White-box audit of DP-A-GEM (dpcl.audits.agem_whitebox) on its own run_agem_head: a correct learner
stays at or below its claim (ε at δ and μ) in both parts, and the buffer-reread audit reaches 70 % of its
claimed μ; noise at σ/2 on the buffer, a buffer branch that escapes clipping and one buffer reread more
than the ledger accounts are caught at ε = 1 (a lower bound above the claim).

The broken variants live here only: a copy of train_agem_task's loop whose correct form is first checked
to release exactly what train_agem_task releases, then the bug, swapped in for the real function while
the audit runs. Each bound holds with confidence 95 % (fixed seeds); the μ margins below are several
standard errors wide (about 0.012 per world at 30,000 bound trials).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
from helpers import broken_copy, noisy_head_sum

from dpcl.audits.agem_whitebox import AUDIT_AGEM, AUDIT_DPSGD, audit_whitebox
from dpcl.learners import agem as agem_mod
from dpcl.learners.agem import agem_noise
from dpcl.privacy import releases
from dpcl.training.adam import Adam
from dpcl.training.heads import LinearHead
from dpcl.training.projection import project_parts_

DELTA = 1e-5
AUDIT = {"whitebox_runs": 40, "whitebox_canaries": 4000}


def _task(*, ref_noise: float = 1.0, clip_ref: bool = True, rereads: int = 1, leak: bool = False):
    """train_agem_task's loop (same draws in the same order), with an optional bug in the buffer branch:
    its noise scaled by ``ref_noise``, its clipping skipped, or ``rereads`` reads of the buffer a step; or
    (``leak``) the head moved by g plus the train part's un-noised mean feature row, beside the correct
    releases."""

    def train(head, x, y, buf_x, buf_y, cfg, *, sigma, q_ref, sigma_ref, gen, gen_ref, active):
        adam = Adam.for_head(head, cfg)  # the learners' own optimiser (not under test here)
        for _ in range(cfg.steps):
            g_w, g_b = noisy_head_sum(head, x, y, cfg.sample_rate, cfg.clip, sigma, gen, active)
            if buf_x is not None:
                for _ in range(rereads):
                    r_w, r_b = noisy_head_sum(
                        head,
                        buf_x,
                        buf_y,
                        q_ref,
                        cfg.clip,
                        ref_noise * sigma_ref,
                        gen_ref,
                        active,
                        clipped=clip_ref,
                    )
                project_parts_([g_w, g_b], [r_w, r_b])
            if leak:
                g_w[0] += x.mean(axis=0)
            adam.step([g_w, g_b])
        return {"mean_clipped_fraction": 0.0, "projected_fraction": 0.0}

    return train


def _releases(train) -> list:
    """Every release ``train`` makes on a small two-part task, as the mechanism primitive reports it:
    (value, the head it was computed at)."""
    gen = np.random.default_rng(0)
    x, y = gen.normal(size=(12, 5)) * 3, gen.integers(0, 2, 12)
    bx, by = gen.normal(size=(6, 5)) * 3, gen.integers(0, 2, 6)
    cfg = AUDIT_DPSGD.__class__(sample_rate=0.5, epochs=2.0, lr=0.1, clip=0.1, normaliser=1.0)
    with releases.recording(keep_values=True, keep_rows=False) as rec:
        train(
            LinearHead(5, 2), x, y, bx, by, cfg, sigma=1.5, q_ref=0.5, sigma_ref=2.0,
            gen=np.random.default_rng(1), gen_ref=np.random.default_rng(2), active=np.ones(2, dtype=bool),
        )  # fmt: skip
    return [(r.value, r.state) for r in rec.releases]


def test_the_copy_releases_exactly_what_train_agem_task_releases_and_recording_changes_nothing():
    real, copy = _releases(agem_mod.train_agem_task), _releases(_task())
    assert len(real) == len(copy) == 8  # 4 steps, g and g_ref each
    for (v1, s1), (v2, s2) in zip(real, copy, strict=True):
        np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(s1, s2, rtol=1e-12, atol=1e-15)
    heads = []
    noise, noise_ref = agem_noise(2.0, DELTA, AUDIT_DPSGD, AUDIT_AGEM, 2)
    for listen in (False, True):
        gen = np.random.default_rng(3)
        x, y, ids = gen.normal(size=(30, 4)), gen.integers(0, 4, 30), np.arange(30)
        out: dict = {}
        with releases.recording(keep_values=True) if listen else contextlib.nullcontext():
            agem_mod.run_agem_head(
                [(x[:15], y[:15] % 2, ids[:15]), (x[15:], 2 + y[15:] % 2, ids[15:])], [], [[0, 1], [2, 3]], 4,
                AUDIT_DPSGD, AUDIT_AGEM, noise=noise, noise_ref=noise_ref,
                rng_for=lambda t, p: np.random.default_rng([t, len(p)]), split_seed=0, out=out,
            )  # fmt: skip
        heads.append(out["head"])
    assert np.array_equal(heads[0].w, heads[1].w) and np.array_equal(heads[0].b, heads[1].b)


def test_a_correct_learner_stays_at_or_below_its_claim_in_both_parts():
    train, buffer = audit_whitebox(1.0, DELTA, audit=AUDIT, seed=0)
    for row in (train, buffer):
        assert row["epsilon_lower_bound"] <= 1.0 and row["mu_lower_bound"] <= row["claimed_mu"]
        assert min(row["trials_per_world"]) > 29_000
    assert buffer["mu_lower_bound"] >= 0.7 * buffer["claimed_mu"]  # about 0.83 (0.045 of bound width)
    assert train["mu_lower_bound"] >= 0.7 * train["claimed_mu"]
    assert AUDIT_AGEM.ref_rate(AUDIT_DPSGD) == 1.0 and AUDIT_DPSGD.steps == 1


@pytest.mark.parametrize(
    ("bug", "variant", "min_mu_ratio"),
    [
        ("buffer noise at sigma/2", _task(ref_noise=0.5), 1.5),  # true μ: twice the claim
        ("buffer branch escaping clipping", _task(clip_ref=False), 10.0),  # the canary's norm is 100 C
    ],
)
def test_a_bug_in_the_buffer_branch_is_caught(monkeypatch, bug, variant, min_mu_ratio):
    monkeypatch.setattr(agem_mod, "train_agem_task", variant)
    _, buffer = audit_whitebox(1.0, DELTA, audit=AUDIT, seed=1)
    assert buffer["mu_lower_bound"] > min_mu_ratio * buffer["claimed_mu"], bug
    assert math.isfinite(buffer["epsilon_lower_bound"])


def test_one_buffer_reread_more_than_accounted_breaks_the_public_schedule(monkeypatch):
    """Two buffer releases a step: the update-integrity replay (one g and one g_ref a step from task 1 on)
    finds a release outside the public schedule before any statistic (the exposure check counts it too)."""
    from dpcl.audits.whitebox import UpdateIntegrityError

    monkeypatch.setattr(agem_mod, "train_agem_task", _task(rereads=2))
    with pytest.raises(UpdateIntegrityError, match="releases where the public schedule has"):
        audit_whitebox(1.0, DELTA, audit={"whitebox_runs": 2, "whitebox_canaries": 80}, seed=1)


def test_the_whole_task_in_the_buffer_is_refuted_on_the_train_part(monkeypatch):
    """DP-A-GEM's buffer filled from the whole task (x[keep] for x[keep & ref], a copy of run_agem_head
    with that one change): every train-part canary is also reread by task 1's buffer release. The
    statistic attributes a canary in every release that read canaries of its part, so the train part's
    true μ is √2 times what its claim allows (about 0.38 against 0.268 at ε = 1); its μ bound (0.32 at
    this seed) exceeds the claim, about seven standard errors of the bound above it."""
    import dpcl.audits.agem_whitebox as whitebox_mod
    from dpcl.audits.gdp import claim_mu

    changes = [(old, old.replace(" & ref", "")) for old in ("x[keep & ref]", "y[keep & ref]")]
    monkeypatch.setattr(whitebox_mod, "run_agem_head", broken_copy(agem_mod, "run_agem_head", *changes))
    train, _ = audit_whitebox(1.0, DELTA, audit=AUDIT, seed=1)
    assert train["mu_lower_bound"] > claim_mu(1.0, DELTA)


#: the strong audits' Poisson row: 160 trainings of 1,250 canaries in task 0's reference part
POISSON = {"whitebox_poisson_runs": 80, "whitebox_canaries": 5000}


def test_the_buffer_under_poisson_sampling_over_three_tasks(monkeypatch):
    """DP-A-GEM's buffer at q_ref = 1/2 over T = 3 tasks (4 steps each: 8 rereads of a reference-part
    record, each with probability 1/2): the correct learner stays at or below the ε its ledger states for
    that record (1 at δ = 1e-5) and reaches 40 % of it (0.54 at this seed, 75,000 trials per world); the
    buffer's noise at σ_ref/2 is refuted (its true ε is 2.29; bound 1.26 at this seed)."""
    from dpcl.audits import agem_whitebox

    (row,) = agem_whitebox.buffer_poisson_rows(1.0, DELTA, audit=POISSON, seed=0, alpha=0.05)
    assert row["claimed_epsilon"] == pytest.approx(1.0, abs=1e-3) and row["mu_lower_bound"] is None
    assert 0.4 * row["claimed_epsilon"] <= row["epsilon_lower_bound"] <= row["claimed_epsilon"]
    assert "T = 3, q = q_ref = 0.5" in row["setting"] and min(row["trials_per_world"]) > 70_000

    real = agem_mod.run_agem_head

    def half_buffer_noise(*a, noise_ref, **k):
        return real(*a, noise_ref={**noise_ref, "noise_multiplier": noise_ref["noise_multiplier"] / 2}, **k)

    monkeypatch.setattr(agem_whitebox, "run_agem_head", half_buffer_noise)
    (row,) = agem_whitebox.buffer_poisson_rows(1.0, DELTA, audit=POISSON, seed=1, alpha=0.05)
    assert row["epsilon_lower_bound"] > 1.1 * row["claimed_epsilon"]


def test_a_head_moved_by_anything_but_its_releases_fails_update_integrity(monkeypatch):
    """Every release correctly noised and reported, the head moved by g plus an un-noised statistic of the
    train part: the replay of Adam over the reports (per task, g projected on g_ref) does not reach the
    trained head, so the audit raises before any statistic; the correct loop passes the replay, under
    rate 1 and under Poisson sampling over three tasks."""
    from helpers import check_memory_update_integrity

    from dpcl.audits import agem_whitebox

    check_memory_update_integrity(monkeypatch, agem_mod, "train_agem_task", _task, agem_whitebox, delta=DELTA)
