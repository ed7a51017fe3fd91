"""DP active learning ([Schwethelm2025]): schedules, per-record rates, DP selection, the per-group ledger."""

import json
import logging
import math

import numpy as np
import pytest

from dpcl.active import selection as sel
from dpcl.active.acquisition import clip_bound, scores
from dpcl.active.grid import parse_method, run_cells, schedule_keys
from dpcl.active.group_ledger import verify_group_ledger
from dpcl.active.run import ActiveMethod, run_active
from dpcl.active.schedules import ALPlan, build_schedule
from dpcl.privacy.accounting import PrivacyBudgetExceeded
from dpcl.privacy.ledger import LedgerError
from dpcl.seeding import rng
from dpcl.training.heads import DPSGDConfig, LinearHead, train_head

PLAN = dict(
    epsilon=8.0, delta=1e-5, initial_size=1000, query_sizes=(1000, 300, 100, 100), batch_size=256, epochs=12
)
KINDS = ("naive", "step_amplification", "noise_reduction", "continual")


@pytest.fixture(scope="module")
def schedules():
    out = {}
    for sel_eps in (0.0, 2.0):
        for kind in KINDS:
            out[kind, sel_eps] = build_schedule(kind, ALPlan(selection_epsilon=sel_eps, **PLAN), "rdp")
    out["single", 0.0] = build_schedule("single", ALPlan(8.0, 1e-5, 0.0, 2500, (), 256, 40), "rdp")
    return out


def _dp_accounting_epsilon(history, delta):
    """A group's training ε with Google's dp-accounting RDP accountant (independent of opacus)."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    logging.getLogger("absl").setLevel(logging.ERROR)
    acc = rdp.RdpAccountant([float(a) for a in range(2, 64)] + [128, 256, 512, 1024])
    for sigma, q, n in history:
        acc.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), n
            )
        )
    return acc.get_epsilon(delta) if history else 0.0


@pytest.mark.parametrize("key", [(k, s) for s in (0.0, 2.0) for k in KINDS] + [("single", 0.0)])
def test_every_group_within_target_by_an_independent_accountant(schedules, key):
    sched = schedules[key]
    plan = sched.plan
    for g in range(sched.groups):
        eps = plan.paid(g) + _dp_accounting_epsilon(sched.history(g), plan.delta)
        assert eps <= plan.epsilon * (1 + 1e-9), (key, g, eps)
    assert plan.selection_epsilon <= plan.epsilon  # the never-selected records pay ε_Sel only


def test_step_amplification_spends_each_groups_budget_and_keeps_the_batch(schedules):
    sa, naive = schedules["step_amplification", 2.0], schedules["naive", 2.0]
    eps_sa, eps_naive = sa.group_epsilons(), naive.group_epsilons()
    assert min(eps_sa) > 7.9  # every group uses (almost) all of ε = 8 ...
    assert min(eps_naive) < 5.0  # ... where the naive schedule leaves late groups far below it
    for seg in sa.segments:  # expected batch ≈ b (integer steps: within 2 %) and never above it
        assert 0.98 * 256 <= sa.expected_batch(seg) <= 256 + 1e-9
    assert sum(s.steps for s in sa.segments) > sum(s.steps for s in naive.segments)
    # paid selection: group g has spent g·ε_Sel/T before training
    assert [sa.plan.paid(g) for g in range(5)] == pytest.approx([0, 0.5, 1.0, 1.5, 2.0])


def test_per_record_poisson_rates_and_mean_batch():
    n_per, rates, steps = 200, (0.05, 0.2, 0.6), 1500
    groups = np.repeat(np.arange(3), n_per)
    r = np.asarray(rates)[groups]
    x = np.random.default_rng(0).normal(size=(len(r), 4))
    y = np.zeros(len(r), dtype=int)
    cfg = DPSGDConfig(sample_rate=1.0, epochs=1.0, lr=0.01, clip=1.0, normaliser=float(r.sum()))
    rec = train_head(LinearHead(4, 2), x, y, cfg, 1.0, np.random.default_rng(1), record_rates=r, steps=steps)
    freq = np.asarray(rec["inclusions"]) / steps
    for g, q in enumerate(rates):
        f = freq[groups == g]
        sd = math.sqrt(q * (1 - q) / steps)
        assert abs(f.mean() - q) < 5 * sd / math.sqrt(n_per)  # group mean
        assert np.max(np.abs(f - q)) < 5 * sd  # every record (600 records: 5 sd)
    batch_sd = math.sqrt(float(np.sum(r * (1 - r))) / steps)
    assert abs(np.sum(rec["inclusions"]) / steps - r.sum()) < 5 * batch_sd


def test_laplace_selection_noise_has_the_right_scale():
    c, eps_sel, t = clip_bound("entropy", 10), 2.0, 4
    scale = sel.laplace_scale(c, eps_sel, t)
    assert scale == pytest.approx(0.8 * 4 / 2.0)  # C_Sel / (ε_Sel / T)
    n = 200_000
    noise = sel.noisy(np.zeros(n), scale, np.random.default_rng(3), rows=np.zeros((n, 1)), sensitivity=1.0)
    # E|Lap(b)| = b, Var|Lap(b)| = b²; Var Lap(b) = 2b²
    assert abs(np.mean(np.abs(noise)) - scale) < 5 * scale / math.sqrt(n)
    assert np.var(noise) == pytest.approx(2 * scale**2, rel=0.03)
    with pytest.raises(ValueError, match="selection_epsilon"):
        sel.laplace_scale(c, 0.0, t)  # ε_Sel = 0 never means "no noise"
    assert clip_bound("confidence", 10) == pytest.approx(0.9) and clip_bound("bald", 10) == 0.5


def test_scores_lie_in_their_clip_range():
    g = np.random.default_rng(0)
    w, b, x = g.normal(size=(10, 8)), g.normal(size=10), g.normal(size=(500, 8)) * 3
    for name in ("confidence", "margin", "entropy", "bald"):
        s = scores(name, w, b, x, np.random.default_rng(1), mc_passes=5)
        assert s.min() >= 0 and s.max() <= clip_bound(name, 10) + 1e-12
    flat = scores("entropy", np.zeros((10, 8)), np.zeros(10), x)
    assert np.allclose(flat, 0.8)  # uniform prediction: entropy 1, clipped to 0.8


def test_topk_selection_couples_records_and_threshold_selection_does_not():
    g = np.random.default_rng(5)
    base, noise = g.random(50), g.laplace(0, 0.2, 50)
    r = np.random.default_rng(0)
    swaps = 0
    for _ in range(200):
        x_score, x_noise = g.random() + 0.5, g.laplace(0, 0.2)
        vals = base + noise
        vals_plus = np.append(vals, x_score + x_noise)  # D' = D + x (x is the last record)
        before = set(sel.top_k(vals, 10, r).tolist())
        after = set(sel.top_k(vals_plus, 10, r).tolist()) - {50}
        swaps += before != after  # someone else lost (or gained) a label because x joined
        tau = 0.9
        assert set(sel.above(vals_plus, tau).tolist()) - {50} == set(sel.above(vals, tau).tolist())
    assert swaps > 100  # top-k: x displaces another record in most trials (the swap of Sec. "Known problems")


def _pool(n=1200, k=5, d=16, seed=0):
    """n unit-norm records of k Gaussian classes; the class means are shared by every seed
    (pool, test and public shadow pool are draws from one distribution)."""
    mu = np.random.default_rng(1234).normal(size=(k, d)) * 2
    g = np.random.default_rng(seed)
    y = g.integers(0, k, n)
    x = mu[y] + g.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True), y


SMALL = ALPlan(8.0, 1e-5, 2.0, 120, (120, 60), 32, 3)


@pytest.fixture(scope="module")
def small_schedules():
    return {
        s: build_schedule("step_amplification", ALPlan(8.0, 1e-5, s, 120, (120, 60), 32, 3))
        for s in (0.0, 2.0)
    }


@pytest.mark.parametrize(
    "acq,selection,mode",
    [
        ("entropy", "dp", "sound"),
        ("entropy", "dp", "paper"),
        ("random", "random", "sound"),
        ("margin", "nondp", "paper"),
    ],
)
def test_privacy_json_is_neighbour_invariant_and_verifies(small_schedules, acq, selection, mode):
    x, y = _pool()
    test = _pool(300, seed=1)
    pub = _pool(400, seed=2)[0]
    sched = small_schedules[2.0 if selection == "dp" else 0.0]
    method = ActiveMethod(acq, selection, mode)
    outs = []
    for xs, ys in ((x, y), (x[:-1], y[:-1])):  # D and D minus one record, same seed
        m, p, d, _ = run_active(
            (xs, ys),
            test,
            pub,
            5,
            1200,
            method,
            schedule=sched,
            lr=0.05,
            clip=1.0,
            stream=lambda *k: rng(0, "t", *k),
            mc_passes=4,
        )
        outs.append(json.dumps(p, sort_keys=True))
        assert d["labelled"] > 0 and 0 <= m["final_accuracy"] <= 1
    assert outs[0] == outs[1]
    privacy = json.loads(outs[0])
    summary = verify_group_ledger(privacy)
    assert summary["guarantee_holds"] == (mode == "sound")
    assert privacy["guarantee_holds"] == (mode == "sound")
    if mode == "paper":
        assert any("swap" in why for why in privacy["why_not"])
    if selection == "dp":
        assert privacy["selection"]["laplace_scale"] == pytest.approx(clip_bound(acq, 5) * 2 / 2.0)
        assert [g["selection_epsilon"] for g in privacy["groups"]] == pytest.approx([0, 1.0, 2.0, 2.0])
    for g in privacy["groups"]:
        if selection == "nondp" and g["group"] != 0:  # exact scores read: every scored record spends ∞
            assert g["epsilon"] == g["selection_epsilon"] == math.inf
        else:
            assert g["epsilon"] <= 8.0 + 1e-9
        assert set(g) == {"group", "selection_epsilon", "phases", "training_epsilon", "epsilon", "delta"}


def test_group_ledger_verifier_rejects_tampering(small_schedules):
    x, y = _pool()
    _, p, _, _ = run_active(
        (x, y),
        _pool(300, seed=1),
        _pool(400, seed=2)[0],
        5,
        1200,
        ActiveMethod("entropy", "dp", "sound"),
        schedule=small_schedules[2.0],
        lr=0.05,
        clip=1.0,
        stream=lambda *k: rng(0, "t", *k),
    )
    verify_group_ledger(p)
    bad = json.loads(json.dumps(p))
    bad["selection"]["laplace_scale"] /= 2  # half the noise: twice the ε per selection
    with pytest.raises(PrivacyBudgetExceeded, match="Laplace"):
        verify_group_ledger(bad)
    bad = json.loads(json.dumps(p))
    bad["groups"][1]["phases"][0]["sample_rate"] = min(1.0, 3 * bad["groups"][1]["phases"][0]["sample_rate"])
    with pytest.raises(LedgerError, match=r"groups\[1\]\.phases\[0\]\.sample_rate"):
        verify_group_ledger(bad)
    bad = json.loads(json.dumps(p))
    bad["groups"][2]["selection_epsilon"] = 0.0  # joined at selection 2: paid 2·ε_Sel/T
    with pytest.raises(PrivacyBudgetExceeded, match="selection"):
        verify_group_ledger(bad)
    bad = json.loads(json.dumps(p))
    bad["initial"]["sampling"] = "fixed_size"
    with pytest.raises(LedgerError, match="guarantee_holds"):
        verify_group_ledger(bad)


def test_dp_selection_refuses_a_zero_selection_budget(small_schedules):
    x, y = _pool()
    with pytest.raises(ValueError, match="selection_epsilon > 0"):
        run_active(
            (x, y),
            _pool(300, seed=1),
            _pool(400, seed=2)[0],
            5,
            1200,
            ActiveMethod("entropy", "dp", "sound"),
            schedule=small_schedules[0.0],
            lr=0.05,
            clip=1.0,
            stream=lambda *k: rng(0, "t", *k),
        )
    with pytest.raises(ValueError, match="paper mode only"):
        ActiveMethod("entropy", "nondp", "sound")


def test_sound_selection_hits_the_planned_sizes_in_expectation(small_schedules):
    x, y = _pool(3000)
    sizes = []
    for seed in range(6):
        _, _, d, _ = run_active(
            (x, y),
            _pool(300, seed=1),
            _pool(1500, seed=2)[0],
            5,
            3000,
            ActiveMethod("entropy", "dp", "sound"),
            schedule=small_schedules[2.0],
            lr=0.05,
            clip=1.0,
            stream=lambda *k, _s=seed: rng(_s, "t", *k),
        )
        sizes.append(d["group_sizes"])
    mean = np.mean(sizes, axis=0)
    # Poisson initial set (sd √120 ≈ 11 per run) and threshold selections calibrated on a public
    # shadow pool from the same distribution: within 25 % of the plan on average over 6 runs
    assert mean == pytest.approx([120, 120, 60], rel=0.25)


def test_grid_parses_methods_and_dedupes_cells():
    assert parse_method("random-nal").schedule == "single"
    assert parse_method("bald-nondp-cl").schedule == "continual"
    with pytest.raises(ValueError, match="unknown active-learning method"):
        parse_method("entropy-sa")
    active = {
        "epsilon": 8,
        "selection_epsilon": 2,
        "methods": ["random-nal", "entropy-dp-sa", "entropy-nondp-sa"],
        "modes": ["paper", "sound"],
        "table2_settings": [[8, 2], [16, 4]],
        "fig5_selection_epsilons": [1],
        "table5": True,
    }
    cells = run_cells(active)
    keys = [c["key"] for c in cells]
    assert len(keys) == len(set(keys))
    assert "sound/entropy-nondp-sa/eps8-sel0" not in keys  # non-DP selection: paper mode only
    assert "paper/entropy-dp-sa/eps16-sel4" in keys and "sound/entropy-dp-cl/eps8-sel2" in keys
    assert "step_amplification-eps8-sel0" in schedule_keys(active)  # non-DP selection charges nothing


def test_ledger_verify_command_reads_an_active_ledger(small_schedules, tmp_path, capsys):
    from dpcl.cli import main

    x, y = _pool()
    paths = []
    for mode in ("sound", "paper"):
        _, p, _, _ = run_active(
            (x, y),
            _pool(300, seed=1),
            _pool(400, seed=2)[0],
            5,
            1200,
            ActiveMethod("entropy", "dp", mode),
            schedule=small_schedules[2.0],
            lr=0.05,
            clip=1.0,
            stream=lambda *k: rng(0, "t", *k),
        )
        paths.append(tmp_path / f"{mode}.json")
        paths[-1].write_text(json.dumps(p))
    main(["ledger", "verify", str(paths[0]), str(paths[1])])
    out = capsys.readouterr().out
    assert "sound.json: verified" in out and "guarantee holds" in out
    assert "paper.json: verified" in out and "does NOT hold: fixed-size selection couples records" in out
    tampered = json.loads(paths[0].read_text())
    tampered["groups"][0]["phases"][0]["noise_multiplier"] /= 3
    paths[0].write_text(json.dumps(tampered))
    with pytest.raises(SystemExit):
        main(["ledger", "verify", str(paths[0])])
    assert "REJECTED" in capsys.readouterr().err


def test_a_run_on_a_schedule_not_certified_fails_unless_it_states_the_published_claim():
    from dpcl.active.group_ledger import group_ledger
    from dpcl.active.paper_schedule import authors_step_amplification

    # a plan at which the PLD upper bound of the authors' group 2 (selection ε included) is 8.51 > 8
    authors = authors_step_amplification(ALPlan(8.0, 1e-5, 2.0, 1000, (1000, 300), 256, 12))
    record = {"mechanism": "random_poisson", "phases": 2}
    with pytest.raises(PrivacyBudgetExceeded, match="own histories"):
        group_ledger(authors, record, "poisson")
    p = group_ledger(authors, record, "poisson", claim={"epsilon": 8.0, "source": "[Schwethelm2025], Alg. 3"})
    assert p["guarantee_holds"] is False and max(g["epsilon"] for g in p["groups"]) > 8.5


def test_the_grid_module_the_snakefile_imports_loads_no_opacus():
    """opacus configures the root logger on import: in the Snakefile that doubles every log line."""
    import subprocess
    import sys

    code = (
        "import sys, logging, dpcl.config, dpcl.active.grid; "
        "print('opacus' in sys.modules, len(logging.getLogger().handlers))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "0"]


def test_a_run_on_the_authors_schedule_carries_the_verdicts_on_their_claim():
    from dpcl.active.paper_schedule import authors_step_amplification

    assert parse_method("entropy-dp-psa").schedule == "paper_step_amplification"
    authors = authors_step_amplification(SMALL)
    x, y = _pool()
    m, p, _, _ = run_active(
        (x, y),
        _pool(300, seed=1),
        _pool(400, seed=2)[0],
        5,
        1200,
        ActiveMethod("entropy", "dp", "sound"),
        schedule=authors,
        lr=0.05,
        clip=1.0,
        stream=lambda *k: rng(0, "t", *k),
        mc_passes=4,
    )
    claim = p["published_claim"]
    assert claim["verdict"] in ("certified", "violated", "not_certified")
    assert claim["verdicts"][0]["adjacency"].startswith("add/remove one record of the pool")
    assert [v["claimed_epsilon"] for v in claim["verdicts"][1:]] == pytest.approx([8.0, 7.0, 6.0])
    assert all({"rdp_authors", "pld_upper", "pld_training_lower"} <= set(g) for g in claim["groups"])
    assert p["accountant"]["name"] == "pld" and p["accountant"]["solved_with"] == "opacus_rdp"
    assert verify_group_ledger(p)["published_claim"] is True
