"""DP-AL per-group accounting with the PLD ([Schwethelm2025]): rate solves, schedules solved and stated with
the pessimistic PLD, catch-up targets that train every group, and the three-valued verdict on the
authors' schedule."""

from __future__ import annotations

import json
import logging
import math

import pytest

from dpcl.active.grid import parse_schedule_key, plan_for, schedule_keys
from dpcl.active.group_ledger import group_ledger, verify_group_ledger
from dpcl.active.schedules import ALPlan, Schedule, SegmentPlan, build_schedule, target_trajectory
from dpcl.config import load_config
from dpcl.privacy import pld
from dpcl.privacy.group_accounting import (
    PLD_DISCRETIZATION,
    PLDGroupAccountant,
    RDPGroupAccountant,
    group_epsilon,
    max_sample_rate,
)

TINY = ALPlan(8.0, 1e-5, 2.0, 120, (120, 60), 32, 3)


def _dp_accounting_pld(history, delta):
    """Training ε with dp_accounting's own PLDAccountant (event API, discretisation 1e-4): another
    code path than the segment compositions the schedules use."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    logging.getLogger("absl").setLevel(logging.ERROR)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    for sigma, q, n in history:
        acc.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), n
            )
        )
    return acc.get_epsilon(delta) if history else 0.0


@pytest.mark.parametrize("acc", [RDPGroupAccountant(), PLDGroupAccountant()], ids=["rdp", "pld"])
def test_max_sample_rate_is_the_largest_feasible_rate(acc):
    prefix = acc.state_of([(1.5, 0.2, 40)])
    floor = acc.epsilon(prefix, 1e-5)
    for target, hint in ((floor + 0.5, None), (floor + 2.0, 0.05), (floor + 2.0, 0.9)):
        q = max_sample_rate(prefix, 1.5, 60, target, 1e-5, acc=acc, hint=hint)
        rtol = 1e-3 if acc.name == "pld" else 1e-4
        assert 0 < q < 1
        assert acc.epsilon(acc.extend(prefix, 1.5, q, 60), 1e-5) <= target  # evaluated, not interpolated
        over = q * (1 + 2 * rtol)
        assert acc.epsilon(acc.extend(prefix, 1.5, over, 60), 1e-5) > target  # and the largest to rtol
    assert max_sample_rate(prefix, 1.5, 60, floor - 0.1, 1e-5, acc=acc) == 0.0
    assert max_sample_rate(prefix, 50.0, 1, floor + 1.0, 1e-5, acc=acc) == 1.0


def test_pld_state_equals_pld_epsilon_upper():
    acc = PLDGroupAccountant()
    hist = [(1.9, 0.25, 47), (1.9, 0.1, 160), (1.7, 0.12, 30)]
    assert acc.training_epsilon(hist, 1e-5) == pld.epsilon_upper(hist, 1e-5, PLD_DISCRETIZATION)
    # ledgers state the fine grid's bound, at most the coarse grid's the schedules were solved with
    fine = group_epsilon(hist, 1.5, 1e-5, "pld")
    assert fine == pytest.approx(1.5 + pld.epsilon_upper(hist, 1e-5), rel=1e-12)
    assert fine <= 1.5 + acc.training_epsilon(hist, 1e-5)
    with pytest.raises(ValueError, match="unknown group accountant"):
        group_epsilon(hist, 0.0, 1e-5, "prv")


@pytest.mark.parametrize("kind", ["step_amplification", "noise_reduction", "continual"])
def test_pld_schedules_within_target_by_dp_accountings_own_pld_accountant(kind):
    sched = build_schedule(kind, TINY)
    assert sched.accountant == "pld"
    stated = sched.check()
    for g in range(sched.groups):
        independent = TINY.paid(g) + _dp_accounting_pld(sched.history(g), TINY.delta)
        assert independent <= TINY.epsilon * (1 + 1e-9), (g, independent)
        assert independent <= stated[g] + 2e-3  # a finer discretisation is (about) as tight or tighter
    # and the schedule spends the budget it is given (what PLD certifies beyond RDP)
    assert max(stated) > TINY.epsilon - 0.05
    rdp = sched.group_epsilons("rdp")
    assert max(rdp) > TINY.epsilon  # RDP cannot certify what PLD does


def test_ledger_names_pld_and_verifies():
    sched = build_schedule("step_amplification", TINY)
    led = group_ledger(sched, {"mechanism": "random_poisson", "phases": 2}, "poisson")
    assert led["accountant"]["name"] == "pld" and led["accountant"]["solved_with"] == "pld"
    assert led["accountant"]["solve_discretization"] == PLD_DISCRETIZATION
    assert verify_group_ledger(led, nominal_size=10_000, n_classes=10)["guarantee_holds"] is True
    assert Schedule.from_dict(sched.to_dict()).accountant == "pld"
    old = sched.to_dict()
    del old["accountant"]
    assert Schedule.from_dict(old).accountant == "rdp"  # files from before the switch were solved with RDP


def _grid_plans():
    """Every (kind, ε, ε_Sel) schedule of the default config and config/dpal.yaml, with its active block."""
    out = {}
    for path in ("config/config.yaml", "config/dpal.yaml"):
        act = load_config(path)["active"]
        for key in schedule_keys(act):
            kind, e, s = parse_schedule_key(key)
            if kind != "single":
                out[(kind, e, s)] = plan_for(act, kind, e, s)
    return out


def test_every_group_trains_in_every_plan_of_the_grid():
    """No plan of Fig. 5's grid, Table II/V or the default leaves a group with rate 0 in every phase
    after it joins. RDP solves (the catch-up targets are accountant-independent; seconds each)."""
    plans = _grid_plans()
    assert ("step_amplification", 8.0, 6.0) in plans  # the high-ε_Sel end of Fig. 5
    for (kind, e, s), plan in sorted(plans.items()):
        sched = build_schedule(kind, plan, "rdp")  # check() refuses an untrained group
        for g in range(sched.groups):
            assert any(seg.rates[g] > 0 for seg in sched.segments), (kind, e, s, g)


@pytest.mark.parametrize(
    "plan",
    [
        ALPlan(8.0, 1e-5, 6.0, 1000, (1000, 300, 100, 100), 256, 12),
        ALPlan(1.0, 1e-5, 0.9, 1000, (1000, 300, 100, 100), 256, 12),
    ],
    ids=["eps8-sel6", "eps1-sel0.9"],
)
def test_catch_up_targets_grow_for_every_group_at_high_selection_budgets(plan):
    """R_p − paid_g < 0 for the late groups here (the naive σ is set by the last group): the
    target never falls below the group's own naive trajectory, so it grows after the group joins."""
    from dpcl.active.schedules import naive_sigma, naive_trajectory

    sigma = naive_sigma(plan, "pld")
    r = naive_trajectory(plan, sigma, "pld")
    assert r[-1] < plan.paid(plan.phases - 1)  # the paper's trajectory alone would starve the last group
    traj = target_trajectory(plan, sigma, "pld")
    for g in range(plan.phases):
        assert traj[g][g] > 0
        for p in range(g + 1, plan.phases):
            assert traj[p][g] > traj[p - 1][g]
        assert plan.paid(g) + traj[-1][g] <= plan.epsilon * (1 + 1e-9)
    for kind in ("step_amplification", "noise_reduction", "continual"):
        sched = build_schedule(kind, plan, "rdp")
        assert not sched.untrained_groups(), kind
        last = sched.segments[-1]
        assert last.rates[-1] > 0, kind  # the last group trains in the last phase


def test_a_schedule_with_an_untrained_group_is_refused():
    plan = ALPlan(8.0, 1e-5, 2.0, 120, (120,), 32, 3)
    sched = Schedule(
        "naive", plan, [SegmentPlan(0, 2.0, 10, (0.25, 0.0)), SegmentPlan(1, 2.0, 10, (0.1, 0.0))]
    )
    assert sched.untrained_groups() == [1]
    with pytest.raises(ValueError, match=r"group\(s\) \[1\] are sampled in no phase"):
        sched.check()


# ----------------------------------------------------------------------------- the authors' claim

VIOLATING = ALPlan(8.0, 1e-5, 2.0, 1000, (1000, 300), 256, 12)


@pytest.fixture(scope="module")
def violating_claim():
    from dpcl.active.paper_schedule import authors_step_amplification, published_claim

    return published_claim(authors_step_amplification(VIOLATING))


def test_authors_schedule_verdicts_at_the_violating_plan(violating_claim):
    c = violating_claim
    assert c["claimed_epsilon"] == 8.0 and c["delta"] == 1e-5
    groups = {r["group"]: r for r in c["groups"]}
    # RDP (the authors' accountant) beside PLD, per group
    assert [round(groups[g]["rdp_authors"], 2) for g in range(3)] == [8.36, 8.60, 9.09]
    assert [round(groups[g]["pld_upper"], 2) for g in range(3)] == [7.70, 8.00, 8.51]
    pool, *per_group = c["verdicts"]
    assert pool["adjacency"].startswith("add/remove one record of the pool")
    assert pool["verdict"] == "not_certified" and pool["lower_bound"] is None  # 8.51 > 8, no lower bound
    by = [v["verdict"] for v in per_group]
    # group 0: training within 8; group 1: 7.0023 > 7 ≥ lower 6.98; group 2: lower 6.50 > its 6
    assert by == ["certified", "not_certified", "violated"]
    assert per_group[2]["lower_bound"] > per_group[2]["claimed_epsilon"] + 0.4
    assert c["verdict"] == "violated"
    for v in c["verdicts"]:
        assert v["upper_bound"] is None or math.isfinite(v["upper_bound"])


def test_a_run_on_the_authors_schedule_carries_the_verdicts(violating_claim):
    from dpcl.active.paper_schedule import authors_step_amplification

    sched = authors_step_amplification(VIOLATING)
    led = group_ledger(sched, {"mechanism": "random_poisson", "phases": 2}, "poisson", claim=violating_claim)
    assert led["accountant"]["name"] == "pld" and led["accountant"]["solved_with"] == "opacus_rdp"
    assert led["published_claim"]["verdict"] == "violated"
    assert led["guarantee_holds"] is False  # group 2's PLD upper bound with its selection ε is 8.51
    assert verify_group_ledger(led, nominal_size=10_000, n_classes=10)["guarantee_holds"] is False


def test_a_solved_schedule_is_kept_in_the_accountant_cache(tmp_path, monkeypatch, capfd):
    """The schedule stage writes the same bytes whether it solves the schedule, reads it from the
    accountant's disk cache or solves it with the cache off; only the log says which."""
    from dpcl.stages.active import solve_schedule

    active = load_config("config/config.yaml")["active"]
    key = next(k for k in schedule_keys(active) if k.startswith("single-"))
    monkeypatch.setenv("DPCL_ACCOUNTING_CACHE", str(tmp_path / "cache"))
    written = []
    for name, cache in (("solved", None), ("cached", None), ("off", "off")):
        if cache:
            monkeypatch.setenv("DPCL_ACCOUNTING_CACHE", cache)
        capfd.readouterr()
        doc = solve_schedule(key, active, tmp_path / f"{name}.json")
        assert doc["group_epsilons"] and doc["kind"] == "single"
        err = capfd.readouterr().err  # the dpcl logger's line (stderr, whatever the logging setup)
        assert f"schedule {key}:" in err and ("from the accountant cache" in err) == (name == "cached"), err
        written.append((tmp_path / f"{name}.json").read_bytes())
    assert written[0] == written[1] == written[2]
    assert Schedule.from_dict(json.loads(written[1])).check() == doc["group_epsilons"]
