"""L2DP-ML as published ([Lai2022]): the algorithm as written, its claim, and why the claim fails."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcl.audits.agem_canary import audit_canary as audit_agem_head
from dpcl.audits.fm_agem_audits import audit_canary as audit_fm_agem
from dpcl.audits.l2dpml_canary import audit_canary as audit_l2dpml
from dpcl.audits.learners import trials_to_refute
from dpcl.learners.l2dpml import (
    WHY_NOT_DP,
    L2DPMLConfig,
    agem_projection_always,
    claimed_epsilon,
    draw_noise,
    perturb,
    run_l2dpml,
    to_unit_box,
)
from dpcl.privacy.accounting import Budget
from dpcl.privacy.ledger import Ledger, split_public
from dpcl.privacy.verify import verify_privacy
from dpcl.seeding import rng

CFG = L2DPMLConfig(input_dim=16, hidden=8, batch_size=8, epochs=10, lr=0.01)


def _tasks(seed=0, per=40, dim=16):
    gen = np.random.default_rng(seed)
    centres = gen.normal(size=(4, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = []
    for t in range(2):
        y = np.repeat([2 * t, 2 * t + 1], per)
        z = 0.9 * centres[y] + gen.normal(0, 0.05, (len(y), dim))
        z /= np.maximum(1.0, np.linalg.norm(z, axis=1, keepdims=True))
        out.append((to_unit_box(z), y))
    return out


def test_the_same_noise_shifts_every_example_so_differences_are_released_exactly():
    (x, _), _ = _tasks()
    noise = draw_noise(1.0, CFG, np.random.default_rng(0))
    assert np.abs(noise.chi1).max() > 10  # Laplace(Δ_R/ε₁) with Δ_R = 16·10: large noise ...
    x_bar = perturb(x, noise, CFG)
    # ... that cancels in differences (exactly, up to float rounding of the large shift)
    assert np.allclose(x_bar[3] - x_bar[7], x[3] - x[7], rtol=0, atol=1e-12 * np.abs(noise.chi1).max())
    # whoever knows one record recovers χ₁/λ and then every other record, bit for bit
    shift = x_bar[0] - x[0]
    assert np.allclose(x_bar - shift, x, rtol=0, atol=1e-12 * np.abs(noise.chi1).max())


def test_noise_is_drawn_once_for_the_run_and_reused_by_every_task(monkeypatch):
    import dpcl.learners.l2dpml as mod

    calls = []
    real = mod.draw_noise
    monkeypatch.setattr(mod, "draw_noise", lambda *a, **k: calls.append(1) or real(*a, **k))
    tasks = _tasks()
    run_l2dpml(tasks, [], [[0, 1], [2, 3]], 4, CFG, 1.0, rng_for=lambda t, p: rng(0, "t", t, p))
    assert len(calls) == 1  # Alg. 1 line 1: one draw before the task loop


def test_projection_of_eq_2_is_applied_at_every_step():
    gen = np.random.default_rng(1)
    g, g_ref = gen.normal(size=50), gen.normal(size=50)
    if g @ g_ref < 0:
        g_ref = -g_ref  # a positive dot product: A-GEM would leave g alone, Eq. 2 as printed does not
    out = agem_projection_always(g, g_ref)
    assert abs(out @ g_ref) < 1e-9 and not np.allclose(out, g)
    assert np.array_equal(agem_projection_always(g, np.zeros(50)), g)


def test_non_private_run_learns_each_task_and_runs_are_reproducible():
    tasks = _tasks()
    kw = {"label_spaces": [[0, 1], [2, 3]], "n_universe": 4, "cfg": CFG, "epsilon": math.inf}
    preds, records, stats, _ = run_l2dpml(tasks, tasks, rng_for=lambda t, p: rng(0, "t", t, p), **kw)
    assert (
        np.mean(preds[0][0] == tasks[0][1]) >= 0.8
    )  # the current task is learnt (forgetting is the paper's issue)
    again, *_ = run_l2dpml(tasks, tasks, rng_for=lambda t, p: rng(0, "t", t, p), **kw)
    assert all(
        np.array_equal(a, b) for ra, rb in zip(preds, again, strict=True) for a, b in zip(ra, rb, strict=True)
    )
    assert (
        records[0]["mechanism"] == "nonprivate" and stats[0]["steps"] == CFG.epochs * 10
    )  # 80 records / λ = 8


def test_theorem_2_claim_as_written():
    eps = 2.0
    e1, e2 = 0.5 * eps, 0.5 * eps
    d_r = 16 * (8 + 2)
    assert CFG.sensitivities() == (d_r, 2 * 8)
    assert claimed_epsilon(eps, CFG, None) == pytest.approx(e1 + e1 * 8 / d_r + e2)
    assert claimed_epsilon(eps, CFG, 3.0) == pytest.approx(e1 + e1 * 8 / d_r + e1 * 8 * 3.0 / (2 * d_r) + e2)
    assert math.isinf(claimed_epsilon(math.inf, CFG, 1.0))


def test_ledger_says_the_guarantee_does_not_hold_and_counts_stay_out_of_it():
    tasks = _tasks()
    _, records, _, _ = run_l2dpml(
        tasks, [], [[0, 1], [2, 3]], 4, CFG, 1.0, rng_for=lambda t, p: rng(0, "t", t, p)
    )
    ledger = Ledger(
        Budget(1.0, 1e-5), 2, claim={"source": "[Lai2022] Theorem 2", "holds": False, "reasons": WHY_NOT_DP}
    )
    for t, rec in enumerate(records):
        ledger.add(t, {"mechanism": "data_independent", "epsilon": 0.0, "delta": 0.0})
        public, private = split_public(rec)
        assert {"samples", "steps", "claimed_epsilon_full"} <= set(private)  # data-dependent: diagnostics
        ledger.add(t, public)
    p = ledger.to_dict()
    assert (
        p["guarantee_holds"] is False and p["leaky_baseline"] is True and math.isinf(p["overall"]["epsilon"])
    )
    assert p["published_claim"]["holds"] is False
    p["hyperparameters"] = {"chosen_by": "fixed in the test", "private_data_used": False}
    assert verify_privacy(p)["guarantee_holds"] is False
    # an L2DP-ML entry cannot claim a finite ε
    bad = split_public(records[0])[0] | {"epsilon": 1.0}
    with pytest.raises(ValueError, match="must say ε = inf"):
        Ledger(Budget(1.0, 1e-5), 2).add(0, bad)


def test_audit_refutes_the_claim_by_a_clear_margin():
    res = audit_l2dpml(1.0, 1e-5, 200, seed=0, cfg=CFG)
    assert res["trials"] >= 2 * trials_to_refute(res["claimed_epsilon"] + 1.0, 1e-5)
    assert res["epsilon_lower_bound"] > res["claimed_epsilon"] + 1.0


def test_the_same_audit_finds_dp_a_gem_and_the_sound_variant_within_their_claims():
    for eps in (1.0, 4.0):
        for res in (audit_agem_head(eps, 1e-5, 200, seed=0), audit_fm_agem(eps, 1e-5, 400, seed=0)):
            assert res["epsilon_lower_bound"] <= res["claimed_epsilon"], res["learner"]
    # the audit has power: with far less noise than fm_agem's claim needs, it refutes that claim
    from dpcl.audits import fm_agem_audits

    orig = fm_agem_audits.fm_sigma
    try:
        fm_agem_audits.fm_sigma = lambda e, d: orig(e, d) / 20  # a broken σ, 20x too small
        broken = audit_fm_agem(1.0, 1e-5, 400, seed=0)
    finally:
        fm_agem_audits.fm_sigma = orig
    assert broken["epsilon_lower_bound"] > 1.0


def test_published_claim_verdicts_are_three_valued_with_their_adjacency():
    """Add/remove: violated by the run's own canary audit (Clopper-Pearson bound above the claim) where a
    refutation is affordable, else not certified; substitution: not certified (no upper bound exists,
    no audit under substitution)."""
    from dpcl.audits.l2dpml_canary import claim_audit
    from dpcl.learners.l2dpml import theorem2_claim

    c = theorem2_claim(1.0, CFG, 1e-5, claim_audit(1.0, 1e-5, CFG, {}))
    ar, sub = c["verdicts"]
    assert ar["adjacency"].startswith("add/remove") and ar["verdict"] == "violated" == c["verdict"]
    assert ar["upper_bound"] is None and ar["lower_bound"] > ar["claimed_epsilon"] + 1.0
    assert "Clopper-Pearson" in ar["lower_method"] and "canary" in ar["note"]
    assert c["claimed_epsilon"] == claimed_epsilon(1.0, CFG, None)
    assert sub["adjacency"].startswith("substitution") and sub["verdict"] == "not_certified"
    assert sub["upper_bound"] is None and sub["lower_bound"] is None
    c8 = theorem2_claim(8.0, CFG, 1e-5, claim_audit(8.0, 1e-5, CFG, {}))  # too many trainings to refute
    assert [v["verdict"] for v in c8["verdicts"]] == ["not_certified", "not_certified"]
    assert c8["verdict"] == "not_certified"
