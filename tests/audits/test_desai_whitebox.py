"""White-box audit of Desai et al. as published (dpcl.audits.desai_whitebox) on its own run_desai_head:
a correct implementation stays at or below what its ledger states for each part (ε at δ and μ = 1/σ of
Lemma 2's one σ) and reaches 70 % of that μ; noise at σ/2 on g_ref and a train branch that escapes
clipping are caught at the published claim ε = 1 (a μ bound above the ledger's μ); g_ref read twice a
step, and a head moved by anything but its releases, fail the update-integrity replay.

The broken variants live here only: a copy of train_desai_task's loop whose correct form is first checked
to release exactly what train_desai_task releases, then the bug, swapped in for the real function while
the audit runs. Each bound holds with confidence 95 % (fixed seeds); at 30,000 bound trials per world the
μ bound's standard error is about 0.012, so the margins below are several standard errors wide.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
from helpers import noisy_head_sum

from dpcl.audits.agem_whitebox import AUDIT_AGEM, AUDIT_DPSGD
from dpcl.audits.desai_whitebox import audit_whitebox
from dpcl.learners import desai as desai_mod
from dpcl.learners.desai import lemma2_noise
from dpcl.privacy import releases
from dpcl.training.adam import Adam
from dpcl.training.heads import LinearHead
from dpcl.training.projection import project_parts_

DELTA = 1e-5
AUDIT = {"whitebox_runs": 40, "whitebox_canaries": 4000}


def _task(*, ref_noise: float = 1.0, clip_train: bool = True, rereads: int = 1, leak: bool = False):
    """train_desai_task's loop (same draws in the same order), with an optional bug: g_ref's noise scaled
    by ``ref_noise``, the train branch's clipping skipped, or ``rereads`` draws of g_ref a step; or
    (``leak``) the head moved by g plus the train part's un-noised mean feature row, beside the correct
    releases."""

    def train(head, x, y, blocks, cfg, *, sigma, q_ref, gen, gen_ref, gen_choice, active):
        adam = Adam.for_head(head, cfg)  # the learners' own optimiser (not under test here)
        for _ in range(cfg.steps):
            g_w, g_b = noisy_head_sum(
                head, x, y, cfg.sample_rate, cfg.clip, sigma, gen, active, clipped=clip_train
            )
            if blocks:
                s = int(gen_choice.integers(len(blocks)))
                for _ in range(rereads):
                    r_w, r_b = noisy_head_sum(
                        head, blocks[s][0], blocks[s][1], q_ref, cfg.clip, ref_noise * sigma, gen_ref, active
                    )
                project_parts_([g_w, g_b], [r_w, r_b])
            if leak:
                g_w[0] += x.mean(axis=0)
            adam.step([g_w, g_b])
        return {"mean_clipped_fraction": 0.0, "projected_fraction": 0.0, "block_counts": [0] * len(blocks)}

    return train


def _releases(train) -> list:
    """Every release ``train`` makes on a small task with two blocks, as the mechanism primitive reports
    it: (value, the head it was computed at)."""
    gen = np.random.default_rng(0)
    x, y = gen.normal(size=(12, 5)) * 3, gen.integers(0, 2, 12)
    blocks = [
        (gen.normal(size=(6, 5)) * 3, gen.integers(0, 2, 6)),
        (gen.normal(size=(4, 5)), np.ones(4, int)),
    ]
    cfg = AUDIT_DPSGD.__class__(sample_rate=0.5, epochs=2.0, lr=0.1, clip=0.1, normaliser=1.0)
    with releases.recording(keep_values=True, keep_rows=False) as rec:
        train(
            LinearHead(5, 2), x, y, blocks, cfg, sigma=1.5, q_ref=0.5,
            gen=np.random.default_rng(1), gen_ref=np.random.default_rng(2), gen_choice=np.random.default_rng(4),
            active=np.ones(2, dtype=bool),
        )  # fmt: skip
    return [(r.value, r.state) for r in rec.releases]


def test_the_copy_releases_exactly_what_train_desai_task_releases_and_recording_changes_nothing():
    real, copy = _releases(desai_mod.train_desai_task), _releases(_task())
    assert len(real) == len(copy) == 8  # 4 steps, g and g_ref each
    for (v1, s1), (v2, s2) in zip(real, copy, strict=True):
        np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(s1, s2, rtol=1e-12, atol=1e-15)
    heads = []
    noise = lemma2_noise(2.0, DELTA, AUDIT_DPSGD, 1.0)
    for listen in (False, True):
        gen = np.random.default_rng(3)
        x, y, ids = gen.normal(size=(30, 4)), gen.integers(0, 4, 30), np.arange(30)
        out: dict = {}
        with releases.recording(keep_values=True) if listen else contextlib.nullcontext():
            desai_mod.run_desai_head(
                [(x[:15], y[:15] % 2, ids[:15]), (x[15:], 2 + y[15:] % 2, ids[15:])], [], [[0, 1], [2, 3]], 4,
                AUDIT_DPSGD, AUDIT_AGEM, noise=noise, rng_for=lambda t, p: np.random.default_rng([t, len(p)]),
                split_seed=0, out=out,
            )  # fmt: skip
        heads.append(out["head"])
    assert np.array_equal(heads[0].w, heads[1].w) and np.array_equal(heads[0].b, heads[1].b)


def test_a_correct_implementation_stays_at_or_below_its_ledger_in_both_parts():
    rows = audit_whitebox(1.0, DELTA, audit=AUDIT, seed=0)
    sigma = lemma2_noise(1.0, DELTA, AUDIT_DPSGD, 1.0)["noise_multiplier"]
    assert [r["part"] for r in rows] == ["train part", "buffer rereads"]
    for row in rows:
        # the ledger's claim for one individual: one Gaussian read with Lemma 2's σ (about 0.47 at ε = 1)
        assert math.isclose(row["claimed_mu"], 1.0 / sigma) and row["claimed_epsilon"] < 0.5
        assert row["published_epsilon"] == 1.0
        assert (
            row["epsilon_lower_bound"] <= row["claimed_epsilon"]
            and row["mu_lower_bound"] <= row["claimed_mu"]
        )
        # power: with ~30,000 trials per world and error rates near 0.47, each Clopper-Pearson bound (at
        # α/4: the row's μ test has α/2) costs about 0.017 of μ and the estimate's sd is about 0.011, so
        # the bound is expected near 0.75 of μ = 0.134 and falls below half of it with probability < 1e-3
        assert row["mu_lower_bound"] >= 0.5 * row["claimed_mu"]
        assert min(row["trials_per_world"]) > 29_000


@pytest.mark.parametrize(
    ("bug", "variant", "part", "min_mu_ratio"),
    [
        ("g_ref noise at sigma/2", _task(ref_noise=0.5), 1, 1.5),  # true μ: twice the ledger's
        ("train branch escaping clipping", _task(clip_train=False), 0, 10.0),  # the canary's norm is 100 C
    ],
)
def test_a_bug_is_caught_at_the_published_claim_eps_1(monkeypatch, bug, variant, part, min_mu_ratio):
    monkeypatch.setattr(desai_mod, "train_desai_task", variant)
    row = audit_whitebox(1.0, DELTA, audit=AUDIT, seed=1)[part]
    assert row["mu_lower_bound"] > min_mu_ratio * row["claimed_mu"], bug
    assert math.isfinite(row["epsilon_lower_bound"])


def test_g_ref_drawn_twice_a_step_breaks_the_public_schedule(monkeypatch):
    """Two g_ref releases a step: the update-integrity replay finds a release outside the public schedule
    before any statistic (the exposure check counts it too)."""
    from dpcl.audits.whitebox import UpdateIntegrityError

    monkeypatch.setattr(desai_mod, "train_desai_task", _task(rereads=2))
    with pytest.raises(UpdateIntegrityError, match="releases where the public schedule has"):
        audit_whitebox(1.0, DELTA, audit={"whitebox_runs": 2, "whitebox_canaries": 80}, seed=1)


def test_the_mini_memory_under_poisson_sampling_and_the_block_choice(monkeypatch):
    """Desai et al. at q = q_ref = 1/2 over T = 3 tasks, block M_0 drawn with probability 1/t at task t
    (the strong audits' row): the correct code stays at or below the ε our ledger states for a
    reference-part record (0.60 at the published ε = 1: the mixture over the hidden choice) and reaches a
    quarter of it (0.27 at this seed); g_ref's noise at σ/2 (true ε 1.34) is refuted."""
    from helpers import broken_copy

    from dpcl.audits import desai_whitebox

    audit = {"whitebox_poisson_runs": 80, "whitebox_canaries": 5000}
    (row,) = desai_whitebox.buffer_poisson_rows(1.0, DELTA, audit=audit, seed=0, alpha=0.05)
    assert 0.5 < row["claimed_epsilon"] < 0.7 and row["mu_lower_bound"] is None
    assert 0.25 * row["claimed_epsilon"] <= row["epsilon_lower_bound"] <= row["claimed_epsilon"]
    monkeypatch.setattr(
        desai_mod,
        "train_desai_task",
        broken_copy(
            desai_mod, "train_desai_task", ("cfg.clip, sigma, gen_ref", "cfg.clip, sigma / 2, gen_ref")
        ),
    )
    (row,) = desai_whitebox.buffer_poisson_rows(1.0, DELTA, audit=audit, seed=1, alpha=0.05)
    assert row["epsilon_lower_bound"] > row["claimed_epsilon"]


def test_a_head_moved_by_anything_but_its_releases_fails_update_integrity(monkeypatch):
    """Every release correctly noised and reported, the head moved by g plus an un-noised statistic of the
    train part: the replay of Adam over the reports (per task, g projected on g_ref) does not reach the
    trained head, so the audit raises before any statistic; the correct loop passes the replay, under
    rate 1 and under Poisson sampling over three tasks."""
    from helpers import check_memory_update_integrity

    from dpcl.audits import desai_whitebox

    check_memory_update_integrity(
        monkeypatch, desai_mod, "train_desai_task", _task, desai_whitebox, delta=DELTA
    )
