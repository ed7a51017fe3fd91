"""The authors' step amplification ([Schwethelm2025], released code) re-accounted per group.

The released schedule solves the rate of *all* old records against the history of the initial
group D₁ only; records selected in a middle phase have another history and end above ε.
These tests state that defect at a small plan, with its amounts, and check that our own
``step_amplification`` keeps every group within ε at the same plan.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpcl.active.opacus_rdp import ORDER_SLACK_ABS, ORDER_SLACK_REL, OpacusRDP, _step_rdp, default_orders
from dpcl.active.paper_schedule import (
    KIND,
    authors_naive,
    authors_run,
    authors_sample_rate,
    authors_trajectory,
    reaccount,
)
from dpcl.active.schedules import ALPlan, build_schedule

SMALL = ALPlan(8.0, 1e-5, 2.0, 1000, (1000, 300, 100, 100), 256, 12)
#: integer orders of opacus's defaults: same control flow, ~15x cheaper curves (mechanics tests only)
INT_ORDERS = [a for a in default_orders() if float(a).is_integer()]


@pytest.fixture(scope="module")
def small_run():
    return authors_run(SMALL)  # opacus default orders, noise correction on (as released)


def test_accountant_is_opacus_rdp_accountant():
    from opacus.accountants import RDPAccountant

    hist = [(2.0, 0.3, 10), (1.5, 0.1, 20), (2.0, 0.3, 5), (3.0, 1.0, 2)]
    ref = RDPAccountant()
    ref.history.extend([list(h) for h in hist])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = ref.get_epsilon(delta=1e-5)
    assert OpacusRDP().epsilon(hist, 1e-5) == pytest.approx(expected, rel=1e-12)
    assert OpacusRDP().orders == tuple(float(a) for a in RDPAccountant.DEFAULT_ALPHAS)


def _sigma_q_grid(n: int, seed: int) -> list[tuple[float, float]]:
    """(σ, q) pairs: σ log-uniform on [0.2, 100], q log-uniform on [1e-9, 1] (one in ten on [0.5, 1])."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sigma = float(np.exp(rng.uniform(math.log(0.2), math.log(100.0))))
        q = (
            float(rng.uniform(0.5, 1.0))
            if rng.random() < 0.1
            else float(np.exp(rng.uniform(math.log(1e-9), 0.0)))
        )
        out.append((sigma, q))
    return out


def test_one_order_at_a_time_is_compute_rdp_of_the_list_bit_for_bit():
    from opacus.accountants.analysis.rdp import compute_rdp

    orders = default_orders()
    for sigma, q in [*_sigma_q_grid(4, 1), (1.0, 0.0), (0.0, 0.5), (2.0, 1.0)]:
        whole = np.asarray(
            compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=list(orders)), dtype=float
        )
        assert np.array_equal(OpacusRDP().curve(sigma, q), whole)
        assert [_step_rdp(sigma, q, a) for a in orders] == whole.tolist()


def test_opacus_fractional_orders_stay_above_the_integer_order_beneath_within_the_slack():
    """What the order pruning of OpacusRDP rests on: RDP is non-decreasing in the order, and opacus's
    series at a fractional order is never more than ORDER_SLACK below its closed form at the integer
    order beneath it (at orders in (1, 2): never below −ORDER_SLACK_ABS) over σ ∈ [0.2, 100], q ∈ [1e-9, 1]."""
    orders = default_orders()
    worst = 0.0
    for sigma, q in _sigma_q_grid(120, 2):
        v = {a: _step_rdp(sigma, q, a) for a in orders}
        for a in orders:
            if a.is_integer():
                continue
            floor = float(math.floor(a))
            beneath = v[floor] if floor in v else 0.0
            bound = beneath - ORDER_SLACK_ABS - ORDER_SLACK_REL * abs(beneath)
            assert v[a] >= bound, (sigma, q, a, v[a], beneath)
            worst = max(worst, beneath - v[a])
    assert worst < ORDER_SLACK_ABS / 1000  # the slack is three orders of magnitude above what we see


@pytest.mark.parametrize("orders", [None, (1.5, 2.0, 2.5, 3.0, 4.5, 8.0, 20.5, 32.0)])
def test_epsilon_and_below_give_what_the_whole_curve_gives_bit_for_bit(orders):
    """The pruned search (integer orders first, a fractional order only where its bound could decide)
    returns the whole curve's ε exactly, and decides ε < target exactly at targets on and around ε."""
    acc = OpacusRDP(orders)
    rng = np.random.default_rng(3)
    pairs = _sigma_q_grid(40, 4)
    checked = 0
    for k in range(60):
        hist = [
            (*pairs[int(rng.integers(len(pairs)))], int(rng.integers(1, 3000)))
            for _ in range(int(rng.integers(1, 4)))
        ]
        delta = (1e-5, 1e-6, 0.1)[k % 3]
        whole = acc.epsilon_of_rdp(acc.rdp(hist), delta)
        assert acc.epsilon(hist, delta) == whole
        if not math.isfinite(whole):
            continue
        for target in (whole, np.nextafter(whole, math.inf), np.nextafter(whole, -math.inf), whole + 1e-3,
                       whole - 1e-3, 2 * whole, whole / 2):  # fmt: skip
            assert acc.below(hist, delta, float(target)) == (whole < target), (hist, delta, target)
            checked += 1
    assert checked > 300


def test_naive_steps_and_rates_follow_the_drop_last_loader():
    # CIFAR-10 settings of the released scripts: ⌊|D_i| / 4096⌋ steps per epoch, 30 epochs per phase
    cifar = ALPlan(8.0, 1e-5, 2.0, 10_000, (10_000, 3_000, 1_000, 1_000), 4096, 30)
    steps, rates = authors_naive(cifar)
    assert steps == [60, 120, 150, 150, 180]
    assert rates == [1 / 2, 1 / 4, 1 / 5, 1 / 5, 1 / 6]
    assert authors_naive(SMALL) == ([36, 84, 96, 108, 108], [1 / 3, 1 / 7, 1 / 8, 1 / 9, 1 / 9])


def test_schedule_shape(small_run):
    sched = small_run.schedule
    assert sched.kind == KIND and len(sched.segments) == SMALL.phases
    n, _ = authors_naive(SMALL)
    for p, seg in enumerate(sched.segments):
        assert seg.phase == p
        if p == 0:
            assert seg.rates == (1 / 3, 0.0, 0.0, 0.0, 0.0) and seg.steps == n[0]
            continue
        assert all(seg.rates[g] == seg.rates[0] for g in range(p))  # one q_old for every old group
        assert seg.rates[p] > seg.rates[0] and all(q == 0.0 for q in seg.rates[p + 1 :])
        assert n[p] <= seg.steps <= 3 * n[p]
        assert abs(sched.expected_batch(seg) - SMALL.batch_size) <= 2.0
    # Alg. 4: the naive schedule at σ̂ spends ε within [ε − 0.01, ε]
    naive = [(small_run.sigma, q, k) for q, k in zip(small_run.naive_rates, n, strict=True)]
    naive_eps = OpacusRDP().epsilon(naive, SMALL.delta)
    assert SMALL.epsilon - 0.01 <= naive_eps <= SMALL.epsilon


def test_authors_schedule_exceeds_epsilon_under_rdp_for_middle_groups(small_run):
    """Under RDP (their accountant): D₁ follows the believed trajectory; groups 1-3 end well above ε
    (not a violation: PLD bounds them lower, see tests/active/test_active_accounting.py)."""
    groups = reaccount(small_run.schedule)
    believed = groups[0]["believed_epsilon"]
    own = [g["own_history_epsilon"] for g in groups]
    assert believed == pytest.approx(8.0321, abs=2e-3)
    assert believed == pytest.approx(authors_trajectory(small_run.schedule)[-1])
    assert own == pytest.approx([8.0498, 8.1695, 8.1754, 8.2670, 8.1269], abs=2e-3)
    # D₁, the group every rate was solved against, stays at the believed trajectory up to the
    # solver's rounding (q_high of the rate bisection, one step more than the rates were solved for)
    assert own[0] - believed < 0.02 and own[0] - SMALL.epsilon < 0.05
    # the records selected at selections 1-3 have another history (q_new then q_old) and overshoot
    for g in (1, 2, 3):
        assert own[g] - SMALL.epsilon > 0.16
        assert own[g] - own[0] > 0.11
        assert groups[g]["project_epsilon"] > SMALL.epsilon + 0.16  # the project's accountant agrees
    assert max(own) == pytest.approx(8.267, abs=2e-3)  # group 3: 0.27 over the target
    # the middle group's own history is not D₁'s: it entered at q_new, the rate D₁ never had
    assert groups[2]["history"][0][1] == small_run.schedule.segments[2].rates[2]
    assert groups[2]["history"][0][1] > small_run.schedule.segments[2].rates[0]


def test_our_step_amplification_keeps_every_group_within_target():
    sched = build_schedule("step_amplification", SMALL, "rdp")  # RDP: the authors' accountant's family
    eps = sched.check()  # raises if any group exceeds ε
    assert len(eps) == SMALL.phases and max(eps) <= SMALL.epsilon * (1 + 1e-9)
    assert min(eps) > SMALL.epsilon - 0.1  # and it uses the budget: every group within 0.1 of ε


def test_step_search_trains_more_steps_than_its_rates_were_solved_for():
    """Second flaw of the released search: it ends on the upper step count with the rates of the
    last midpoint. At this plan phase 2 trains 192 steps at rates solved for 144 (D₁ ends ≈ 8.4)."""
    plan = ALPlan(8.0, 1e-5, 2.0, 1000, (1000, 300), 256, 12)
    run = authors_run(plan, orders=INT_ORDERS)
    seg = run.schedule.segments[2]
    assert seg.steps == 192
    prefix = run.schedule.history(0)[:2]
    acc = OpacusRDP(INT_ORDERS)
    assert (
        authors_sample_rate(acc, run.targets[2], plan.delta, prefix, seg.noise_multiplier, 144)
        == seg.rates[0]
    )
    assert (
        authors_sample_rate(acc, run.targets[2], plan.delta, prefix, seg.noise_multiplier, 192) < seg.rates[0]
    )
    own = [g["own_history_epsilon"] for g in reaccount(run.schedule, orders=INT_ORDERS)]
    assert own[0] > 8.3 and own[2] > 9.0


def test_noise_correction_branch():
    # the step search stalls at this plan: step_ampl_prob_noise re-solves with a bisected σ
    plan = ALPlan(8.0, 1e-5, 1.0, 4096, (4096,), 1024, 2)
    corr = authors_run(plan, orders=INT_ORDERS, sigma_corr=True).schedule.segments[1]
    plain = authors_run(plan, orders=INT_ORDERS, sigma_corr=False).schedule.segments[1]
    assert corr.steps == plain.steps
    assert corr.rates != plain.rates
    sigma = plain.noise_multiplier
    assert 0.6 * sigma <= corr.noise_multiplier <= sigma


def test_released_code_cannot_run_tiny_plans():
    plan = ALPlan(8.0, 1e-5, 0.0, 100, (100,), 256, 1)  # 200 labelled records < 2 × batch
    with pytest.raises(ValueError, match="cannot run"):
        authors_run(plan, orders=INT_ORDERS)


def test_no_selection_phase_is_the_naive_schedule():
    plan = ALPlan(8.0, 1e-5, 0.0, 1000, (), 256, 12)
    run = authors_run(plan, orders=INT_ORDERS)
    (seg,) = run.schedule.segments
    assert (seg.steps, seg.rates) == (36, (1 / 3,))
    (g,) = reaccount(run.schedule, orders=INT_ORDERS)
    assert g["own_history_epsilon"] <= plan.epsilon and not math.isnan(g["project_epsilon"])
