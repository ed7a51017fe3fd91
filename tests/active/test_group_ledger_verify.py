"""The DP active-learning group-ledger verifier against an adversary ([Schwethelm2025]'s per-group accounting).

Genuine ledgers come from the writer's own path (the schedule builders, ``selection_record`` and
``group_ledger``) at a tiny public plan; every forgery an independent review fed to
``dpcl ledger verify`` is rejected naming the field, and a mutation test checks every accepted
mutant against an independent recomputation with dp_accounting's pessimistic PLD.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
import re

import pytest

from dpcl.active.acquisition import ACQUISITIONS, clip_bound
from dpcl.active.group_ledger import group_ledger, verify_group_ledger
from dpcl.active.paper_schedule import KIND as PAPER_KIND
from dpcl.active.paper_schedule import authors_step_amplification
from dpcl.active.run import ActiveMethod, selection_record
from dpcl.active.schedules import ALPlan, build_schedule
from dpcl.privacy.accounting import PrivacyBudgetExceeded
from dpcl.privacy.ledger import LedgerError

PLAN = dict(epsilon=8.0, delta=1e-5, initial_size=120, query_sizes=(120, 60), batch_size=32, epochs=3)
N_POOL = 1200  # the pool's planned size (public)
K = 5  # classes of the (imaginary) data set
REJECT = (LedgerError, PrivacyBudgetExceeded)
CLAIM = {"source": "[Schwethelm2025], Alg. 3", "claimed_epsilon": 8.0, "delta": 1e-5}


def _make(kind: str, sel_eps: float, acq: str, selection: str, mode: str, claim=None, **plan) -> dict:
    p = ALPlan(selection_epsilon=sel_eps, **(PLAN | plan))
    sched = authors_step_amplification(p) if kind == PAPER_KIND else build_schedule(kind, p)
    record = selection_record(ActiveMethod(acq, selection, mode), sched, K)
    initial = "fixed_size" if mode == "paper" else "poisson"
    return group_ledger(sched, record, initial, claim, pool_size=N_POOL, n_classes=K)


def _restated_with_pld(led: dict) -> dict:
    """The same run stated with the PLD accountant (pessimistic upper bound of dpcl.privacy.pld)."""
    from dpcl.privacy.pld import epsilon_upper

    out = copy.deepcopy(led)
    out["accountant"] = dict(led["accountant"], name="pld")  # solved as before, stated with PLD
    for g in out["groups"]:
        hist = [(p["noise_multiplier"], p["sample_rate"], p["steps"]) for p in g["phases"]]
        g["training_epsilon"] = epsilon_upper(hist, led["target"]["delta"]) if hist else 0.0
        g["epsilon"] = g["selection_epsilon"] + g["training_epsilon"]
    out["overall"]["epsilon"] = max(g["epsilon"] for g in out["groups"])
    return out


@pytest.fixture(scope="module")
def genuine() -> dict[str, dict]:
    """Genuine ledgers of both DP-AL modes: our sound schedules and the published schedule."""
    out = {
        "naive/entropy/threshold": _make("naive", 2.0, "entropy", "dp", "sound"),
        "sa/margin/threshold": _make("step_amplification", 2.0, "margin", "dp", "sound"),
        "nr/bald/threshold": _make("noise_reduction", 2.0, "bald", "dp", "sound"),
        "cl/confidence/threshold": _make("continual", 2.0, "confidence", "dp", "sound"),
        "naive/random/poisson": _make("naive", 0.0, "random", "random", "sound"),
        "sa/entropy/topk": _make("step_amplification", 2.0, "entropy", "dp", "paper"),
        "naive/entropy/nondp": _make("naive", 0.0, "entropy", "nondp", "paper"),
        "single/none": _make("single", 0.0, "random", "random", "sound", initial_size=300, query_sizes=()),
        "published/entropy/topk": _make(PAPER_KIND, 2.0, "entropy", "dp", "paper", claim=CLAIM),
    }
    out["naive/entropy/threshold/pld"] = _restated_with_pld(out["naive/entropy/threshold"])
    return out


def _fresh(genuine: dict, key: str = "naive/entropy/threshold") -> dict:
    return json.loads(json.dumps(genuine[key]))  # as read back from privacy.json (inf kept as Infinity)


def test_genuine_ledgers_verify(genuine):
    for key, led in genuine.items():
        s = verify_group_ledger(json.loads(json.dumps(led)), nominal_size=N_POOL, n_classes=K)
        assert s["guarantee_holds"] == led["guarantee_holds"], key
        assert s["guarantee_holds"] == (key.endswith(("threshold", "poisson", "none", "pld"))), key
    # the authors' schedule is stated with PLD (it overshoots by their RDP, not by PLD at this plan)
    assert genuine["published/entropy/topk"]["accountant"]["name"] == "pld"
    nondp = genuine["naive/entropy/nondp"]
    assert [g["epsilon"] for g in nondp["groups"]][1:] == [math.inf] * 3  # scored records: ε = ∞


@pytest.mark.parametrize("key", ["cl/confidence/threshold", "sa/margin/threshold"])
def test_a_ledger_written_on_another_cpu_verifies(genuine, key, monkeypatch):
    """The verifier on a CPU whose accountant re-derives every ε 3e-9 higher (the PRV/PLD accountants'
    last bits differ between AVX-512 and AVX2 machines by up to ~3e-9): the schedule it rebuilds differs
    from the one the file lists (secant steps move; the continual schedule's naive-rate group lies on its
    boundary and is solved one bracket lower), and the genuine ledger still verifies; a listed rate off by
    more than the solvers' resolution is still refused."""
    import dpcl.privacy.group_accounting as ga
    import dpcl.privacy.pld as pld
    from dpcl.active.group_ledger import _plan, _rebuilt
    from dpcl.privacy.group_accounting import SOLVE_RESOLUTION

    led = _fresh(genuine, key)
    for cls in (ga.PLDGroupAccountant, ga.RDPGroupAccountant):
        monkeypatch.setattr(cls, "epsilon", lambda self, st, d, e=cls.epsilon: e(self, st, d) * (1 + 3e-9))
    up = pld.epsilon_upper
    monkeypatch.setattr(pld, "epsilon_upper", lambda *a, **k: up(*a, **k) * (1 + 3e-9))
    _rebuilt.cache_clear()
    try:
        rebuilt = _rebuilt(*_plan(led), led["accountant"].get("solved_with", "rdp"))
        listed = [
            tuple((p["noise_multiplier"], p["sample_rate"], p["steps"]) for p in g["phases"])
            for g in led["groups"]
        ]
        gaps = [
            abs(a[1] - b[1]) / b[1]
            for got, want in zip(listed[: len(rebuilt)], rebuilt, strict=True)  # the unselected: none
            for a, b in zip(got, want, strict=True)
        ]
        assert 1e-9 < max(gaps) <= 2 * SOLVE_RESOLUTION  # not the same schedule to the last bit, one bracket
        s = verify_group_ledger(copy.deepcopy(led), nominal_size=N_POOL, n_classes=K)
        assert s["guarantee_holds"] is True
        off = copy.deepcopy(led)
        off["groups"][1]["phases"][0]["sample_rate"] *= 1 + 3 * SOLVE_RESOLUTION
        with pytest.raises(LedgerError, match=r"groups\[1\]\.phases\[0\]\.sample_rate: states"):
            verify_group_ledger(off, nominal_size=N_POOL, n_classes=K)
    finally:
        _rebuilt.cache_clear()  # the other tests rebuild with this CPU's accountant


# ----------------------------------------------------------------------------- the review's forgeries


def test_forgery_nan_figures_are_rejected(genuine):
    bad = _fresh(genuine)
    for g in bad["groups"]:
        g["epsilon"] = "nan"
    bad["overall"]["epsilon"] = "nan"
    with pytest.raises(LedgerError, match=r"groups\[0\]\.epsilon: must be a finite number"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["overall"]["epsilon"] = float("nan")
    with pytest.raises(LedgerError, match=r"overall\.epsilon"):
        verify_group_ledger(bad)


def test_forgery_nan_with_lowered_noise_is_rejected(genuine):
    """The review's ledger: every ε "nan", σ = 0.3 everywhere (the phases really spend ε in the hundreds)."""
    bad = _fresh(genuine)
    for g in bad["groups"]:
        g["epsilon"] = "nan"
        for p in g["phases"]:
            p["noise_multiplier"] = 0.3
    bad["overall"]["epsilon"] = "nan"
    with pytest.raises(REJECT):
        verify_group_ledger(bad)
    bad = _fresh(genuine)  # σ lowered alone, figures kept: the rebuilt schedule does not have it
    for g in bad["groups"]:
        for p in g["phases"]:
            p["noise_multiplier"] = 0.3
    with pytest.raises(LedgerError, match=r"groups\[0\]\.phases\[0\]\.noise_multiplier: states 0.3"):
        verify_group_ledger(bad)


def test_forgery_group_names_must_follow_the_phase_index(genuine):
    bad = _fresh(genuine)
    for g in bad["groups"]:
        g["group"], g["selection_epsilon"] = 0, 0.0
    with pytest.raises(LedgerError, match=r"groups\[1\]\.group: must be 1"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["groups"][1], bad["groups"][2] = bad["groups"][2], bad["groups"][1]
    with pytest.raises(LedgerError, match=r"groups\[1\]\.group"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["groups"][0]["group"] = "0"  # a string is not the index
    with pytest.raises(LedgerError, match=r"groups\[0\]\.group"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["groups"].pop()  # the unselected group dropped
    with pytest.raises(LedgerError, match=r"groups: must list 4 groups"):
        verify_group_ledger(bad)


def test_forgery_dropped_trailing_phases(genuine):
    bad = _fresh(genuine)
    for g in bad["groups"]:
        g["phases"] = g["phases"][:1]
    with pytest.raises(LedgerError, match=r"groups\[0\]\.phases: lists 1 phases, .* in 3"):
        verify_group_ledger(bad)


def test_forgery_self_declared_sensitivity(genuine):
    bad = _fresh(genuine)
    bad["selection"]["sensitivity"], bad["selection"]["laplace_scale"] = 0.01, 0.02
    with pytest.raises(
        PrivacyBudgetExceeded, match=r"selection\.sensitivity: states 0.01, .* clip bound is 0.8"
    ):
        verify_group_ledger(bad)
    bad = _fresh(genuine)  # the sensitivity kept, less noise
    bad["selection"]["laplace_scale"] /= 2
    with pytest.raises(PrivacyBudgetExceeded, match=r"selection\.epsilon_per_phase"):
        verify_group_ledger(bad)
    bad["selection"]["epsilon_per_phase"] *= (
        2  # ... and the per-phase ε stated to match: the plan charges less
    )
    with pytest.raises(PrivacyBudgetExceeded, match=r"selection\.laplace_scale: .* the plan charges"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["selection"]["acquisition"] = "bald"  # clip 0.5 < the stated 0.8: on the safe side, not the plan's
    with pytest.raises(LedgerError, match=r"selection\.sensitivity: states 0.8, the plan's .* is 0.5"):
        verify_group_ledger(bad)


@pytest.mark.parametrize("factor", [1.1, 2.0])
def test_a_raised_selection_sensitivity_is_rejected(genuine, factor):
    """The review's finding: a selection's sensitivity stated ×1.1 or ×2, above the acquisition's clip
    bound (the safe side), is still not the plan's figure: rejected naming the field and both values."""
    for key in ("naive/entropy/threshold", "cl/confidence/threshold", "sa/entropy/topk"):
        bad = _fresh(genuine, key)
        clip = bad["selection"]["sensitivity"]
        bad["selection"]["sensitivity"] = clip * factor
        with pytest.raises(
            LedgerError,
            match=rf"selection\.sensitivity: states {re.escape(repr(clip * factor))}, the plan's "
            rf"\(\w+ score's clip bound\) is {re.escape(repr(clip))}",
        ):
            verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["selection"]["sensitivity"] *= 0.9  # below: understates, as before
    with pytest.raises(PrivacyBudgetExceeded, match=r"selection\.sensitivity: states"):
        verify_group_ledger(bad)


def _scaled(field: str, factor: float):
    """A mutation of one plan-fixed figure of a genuine ledger by ``factor``."""

    def mutate(led: dict) -> None:
        sel = led["selection"]
        if field == "laplace_scale":  # the scale moved, the per-phase ε restated to match it
            sel["laplace_scale"] *= factor
            sel["epsilon_per_phase"] = sel["sensitivity"] / sel["laplace_scale"]
        elif field == "epsilon_per_phase":
            sel["epsilon_per_phase"] *= factor
        elif field == "overall.delta":
            led["overall"]["delta"] *= factor
        else:  # groups[i].<key>
            i, key = int(field[7]), field.split(".")[1]
            led["groups"][i][key] *= factor

    return mutate


@pytest.mark.parametrize(
    ("field", "factor", "error", "message"),
    [
        (
            "laplace_scale",
            1.1,
            LedgerError,
            r"selection\.laplace_scale: states .*, the plan's T·C_Sel/ε_Sel is",
        ),
        ("laplace_scale", 0.9, PrivacyBudgetExceeded, r"selection\.laplace_scale: .* the plan charges"),
        (
            "epsilon_per_phase",
            1.1,
            LedgerError,
            r"selection\.epsilon_per_phase: states .* \(the plan's value\)",
        ),
        ("epsilon_per_phase", 0.9, PrivacyBudgetExceeded, r"selection\.epsilon_per_phase: states"),
        (
            "groups[2].selection_epsilon",
            1.1,
            LedgerError,
            r"groups\[2\]\.selection_epsilon: states 2\.2, the plan's value is 2\.0",
        ),
        (
            "groups[1].selection_epsilon",
            0.9,
            PrivacyBudgetExceeded,
            r"groups\[1\]\.selection_epsilon: states",
        ),
        ("groups[1].delta", 2.0, LedgerError, r"groups\[1\]\.delta: states 2e-05, the plan's value is 1e-05"),
        ("groups[1].delta", 0.5, PrivacyBudgetExceeded, r"groups\[1\]\.delta: states"),
        ("overall.delta", 1.1, LedgerError, r"overall\.delta: states 1\.1\d*e-05, the plan's value is 1e-05"),
        ("overall.delta", 0.9, PrivacyBudgetExceeded, r"overall\.delta: states"),
    ],
)
def test_a_figure_the_plan_fixes_is_rejected_in_either_direction(genuine, field, factor, error, message):
    """Every figure the public plan fixes in closed form (the selection's Laplace scale and ε per phase,
    a group's selection ε g·ε_Sel/T, every δ) is refused above the plan's value (LedgerError: a safe-side
    falsehood) as well as below it (PrivacyBudgetExceeded: understated)."""
    bad = _fresh(genuine)
    _scaled(field, factor)(bad)
    with pytest.raises(error, match=message):
        verify_group_ledger(bad)


def test_the_initial_group_pays_no_selection_epsilon(genuine):
    bad = _fresh(genuine)
    bad["groups"][0]["selection_epsilon"] = 0.5  # group 0 joined before any selection: the plan charges 0
    with pytest.raises(
        LedgerError, match=r"groups\[0\]\.selection_epsilon: states 0\.5, the plan's value is 0\.0"
    ):
        verify_group_ledger(bad)


def test_forgery_no_selection_mechanism_with_selection_phases(genuine):
    bad = _fresh(genuine)
    bad["selection"] = {"mechanism": "none"}
    with pytest.raises(LedgerError, match=r"selection\.mechanism: 'none' with 2 selection phases"):
        verify_group_ledger(bad)
    bad = _fresh(genuine, "single/none")
    bad["selection"] = {"mechanism": "random_poisson", "phases": 0}
    with pytest.raises(LedgerError, match=r"selection\.mechanism"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["selection"]["mechanism"] = "gumbel"
    with pytest.raises(LedgerError, match=r"selection\.mechanism: 'gumbel' is not one of"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["initial"]["sampling"] = "stratified"
    with pytest.raises(LedgerError, match=r"initial\.sampling"):
        verify_group_ledger(bad)


def test_forgery_delta(genuine):
    bad = _fresh(genuine)
    bad["target"]["delta"] = 0.5
    with pytest.raises(LedgerError, match=r"target\.delta: 0.5 is not below 1/N .* N = 1200"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["target"]["delta"] = 1e-4  # below 1/1200, but the schedule was not solved for it
    with pytest.raises(LedgerError, match=r"phases\[0\]"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    del bad["pool"]["nominal_size"]
    bad["target"]["delta"] = 1e-3
    with pytest.raises(LedgerError, match=r"target\.delta: 0.001 is not below 1/N .* N = 5000"):
        verify_group_ledger(bad, nominal_size=5000)
    bad = _fresh(genuine)
    bad["overall"]["delta"] /= 2
    with pytest.raises(PrivacyBudgetExceeded, match=r"overall\.delta"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["groups"][1]["delta"] /= 2
    with pytest.raises(PrivacyBudgetExceeded, match=r"groups\[1\]\.delta"):
        verify_group_ledger(bad)


def test_the_nominal_pool_size_comes_from_the_config_when_given(genuine):
    led = _fresh(genuine)
    assert verify_group_ledger(led)["nominal_size"] == N_POOL
    with pytest.raises(LedgerError, match=r"pool\.nominal_size: states 1200, the config's is 1300"):
        verify_group_ledger(led, nominal_size=1300)
    del led["pool"]["nominal_size"]
    with pytest.raises(LedgerError, match=r"pool\.nominal_size: missing"):
        verify_group_ledger(led)
    assert verify_group_ledger(led, nominal_size=N_POOL)["nominal_size"] == N_POOL
    with pytest.raises(
        LedgerError, match=r"pool\.nominal_size: 200 is smaller than the planned labelling budget"
    ):
        verify_group_ledger(led, nominal_size=200)


def test_forgery_fractional_or_mistyped_counts(genuine):
    for value, why in (
        (12.5, "must be an integer"),
        (12.0, "must be an integer"),
        (True, "must be an integer"),
    ):
        bad = _fresh(genuine)
        bad["groups"][0]["phases"][1]["steps"] = value
        with pytest.raises(LedgerError, match=rf"groups\[0\]\.phases\[1\]\.steps: {why}"):
            verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["schedule"]["query_sizes"][0] = 120.0
    with pytest.raises(LedgerError, match=r"schedule\.query_sizes\[0\]: must be an integer"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["groups"][1]["selection_epsilon"] = True
    with pytest.raises(LedgerError, match=r"groups\[1\]\.selection_epsilon: must be a finite number"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["guarantee_holds"] = "true"
    with pytest.raises(LedgerError, match=r"guarantee_holds: must be true or false"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["target"]["epsilon"] = "8"
    with pytest.raises(LedgerError, match=r"target\.epsilon"):
        verify_group_ledger(bad)


def test_confidence_sensitivity_needs_the_number_of_classes(genuine):
    led = _fresh(genuine, "cl/confidence/threshold")
    assert led["selection"]["sensitivity"] == pytest.approx(1 - 1 / K)
    verify_group_ledger(led)
    with pytest.raises(LedgerError, match=r"pool\.n_classes: states 5, the data set has 10"):
        verify_group_ledger(led, n_classes=10)
    del led["pool"]["n_classes"]
    with pytest.raises(LedgerError, match=r"pool\.n_classes: missing"):
        verify_group_ledger(led)
    verify_group_ledger(led, n_classes=K)
    with pytest.raises(PrivacyBudgetExceeded, match=r"selection\.sensitivity: .* clip bound is 0.9"):
        verify_group_ledger(led, n_classes=10)  # 1 − 1/10 > the stated 0.8


def test_every_stated_figure_is_recomputed(genuine):
    for field, i in (("training_epsilon", 0), ("epsilon", 2), ("selection_epsilon", 3)):
        bad = _fresh(genuine)
        bad["groups"][i][field] *= 0.9
        with pytest.raises(PrivacyBudgetExceeded, match=rf"groups\[{i}\]\.{field}: states"):
            verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["overall"]["epsilon"] = (
        7.5  # group 0 spends 7.90 (RDP over all orders; stated 8.00 over the integers)
    )
    with pytest.raises(PrivacyBudgetExceeded, match=r"overall\.epsilon"):
        verify_group_ledger(bad)
    ok = _fresh(genuine)  # a conservative statement passes
    ok["groups"][1]["epsilon"] *= 1.01
    ok["groups"][1]["training_epsilon"] *= 1.01
    verify_group_ledger(ok)


def test_guarantee_and_why_not(genuine):
    bad = _fresh(genuine, "sa/entropy/topk")
    bad["guarantee_holds"] = True
    del bad["why_not"]
    with pytest.raises(LedgerError, match="guarantee_holds: the file says true"):
        verify_group_ledger(bad)
    bad = _fresh(genuine, "sa/entropy/topk")
    bad["why_not"] = ["no reason"]
    with pytest.raises(LedgerError, match="why_not: .* omits"):
        verify_group_ledger(bad)
    bad = _fresh(genuine, "naive/entropy/nondp")
    bad["groups"][1]["epsilon"] = bad["groups"][1]["selection_epsilon"] = 2.0
    with pytest.raises(PrivacyBudgetExceeded, match=r"groups\[1\]\.selection_epsilon"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["guarantee_holds"] = False
    with pytest.raises(LedgerError, match="why_not"):
        verify_group_ledger(bad)


def test_accountants(genuine):
    pld = _fresh(genuine, "naive/entropy/threshold/pld")
    verify_group_ledger(pld)
    bad = _fresh(genuine, "naive/entropy/threshold/pld")
    bad["accountant"]["name"] = "rdp"  # PLD figures are below what RDP proves
    with pytest.raises(PrivacyBudgetExceeded, match=r"groups\[0\]\.training_epsilon"):
        verify_group_ledger(bad)
    bad = _fresh(genuine)
    bad["accountant"]["name"] = "prv"
    with pytest.raises(LedgerError, match=r"accountant\.name: 'prv' is not one of"):
        verify_group_ledger(bad)


def test_cli_passes_the_configs_pool_size_and_classes(genuine, tmp_path, capsys):
    from dpcl.cli import main

    path = tmp_path / "privacy.json"
    path.write_text(json.dumps(genuine["cl/confidence/threshold"]))
    main(["ledger", "verify", str(path), "--nominal-size", str(N_POOL), "--classes", str(K)])
    assert "verified" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["ledger", "verify", str(path), "--nominal-size", "5000"])
    assert "pool.nominal_size: states 1200" in capsys.readouterr().err
    assert verify_group_ledger(genuine["cl/confidence/threshold"], nominal_size=N_POOL)["guarantee_holds"]


# ----------------------------------------------------------------------------- the mutation test

STRINGS = {
    "mechanism": [
        "laplace_threshold",
        "random_poisson",
        "laplace_topk",
        "random_fixed",
        "nonprivate_topk",
        "none",
    ],
    "sampling": ["poisson", "fixed_size"],
    "name": ["rdp", "pld", "prv"],
    "kind": ["naive", "step_amplification", "noise_reduction", "continual", "single", PAPER_KIND],
    "acquisition": list(ACQUISITIONS),
    "group": ["unselected", 0, 1, 2, 3],
}
#: lists whose items are dropped, duplicated and swapped (accountant.orders: informational, not mutated)
LISTS = ("groups", "phases", "query_sizes", "why_not")


def _paths(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if path == ("accountant",) and k == "orders":
                continue
            yield from _paths(v, (*path, k))
    elif isinstance(obj, list):
        yield path, obj
        for i, v in enumerate(obj):
            yield from _paths(v, (*path, i))
    else:
        yield path, obj


def _set(doc, path, value):
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


#: fields of the public plan: a valid new value makes the verifier solve another schedule (seconds)
PLAN_KEYS = {"target", "schedule"}
#: ledgers whose plan is mutated with valid values too when checked without the config's plan (each such
#: mutant's schedule is solved again; cheap for the single phase); the others' only with invalid ones.
#: Checked against the config's plan (:func:`_plan_of`), every ledger's plan gets every mutation.
PLAN_VALUES = {"single/none": "all"}
INVALID = [math.nan, math.inf, -math.inf, -1, True, "8"]


def _values(v, path):
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        return [v + 1, v - 1, v * 2, v / 2, -1, float(v), math.nan, math.inf, True]
    if isinstance(v, float):
        return [v * 0.5, v * 0.9, v * 1.1, v * 2, -1.0, math.nan, math.inf, -math.inf, 0.0 if v else 1.0]
    if v == "inf":
        return ["nan", 1.0, "-inf"]
    if path and path[-1] in STRINGS:
        return [s for s in STRINGS[path[-1]] if s != v]
    if path and path[-1] in ("adjacency", "accounting"):
        return [v + " (edited)"]
    return []  # free text (rules, sources)


def _mutants(led: dict, plan_values: str = "all"):
    """(description, mutant) for every single mutation of a genuine ledger. ``plan_values``: which
    valid values the public plan's fields get ("all", "few": ×0.9, ×1.1, ±1, "none": invalid only)."""
    for path, v in _paths(led):
        where = ".".join(map(str, path))
        in_plan = bool(path) and path[0] in PLAN_KEYS
        if isinstance(v, list):
            if path and path[-1] in LISTS:
                for i in range(len(v)):
                    for op in ("drop", "duplicate", "swap"):
                        if op == "swap" and (i + 1 >= len(v) or (in_plan and plan_values == "none")):
                            continue
                        new = list(v)
                        if op == "drop":
                            del new[i]
                        elif op == "duplicate":
                            new.insert(i, copy.deepcopy(v[i]))
                        else:
                            new[i], new[i + 1] = new[i + 1], new[i]
                        m = copy.deepcopy(led)
                        _set(m, path, new)
                        yield f"{where}: {op} [{i}]", m
            continue
        values = _values(v, path)
        if in_plan and plan_values != "all":
            few = [v * 0.9, v * 1.1] if isinstance(v, float) else [v + 1, v - 1] if isinstance(v, int) else []
            values = (
                INVALID + (few if plan_values == "few" else []) + (["magic"] if isinstance(v, str) else [])
            )
        for new in values:
            if type(new) is type(v) and new == v:  # no change (0 × 2)
                continue
            m = copy.deepcopy(led)
            _set(m, path, new)
            yield f"{where} = {new!r}", m


class Malformed(Exception):
    """The mutant's public parameters do not describe a run (a number that is not one, a missing group)."""


def _num(v, integer=False, inf=False):
    if isinstance(v, bool):
        raise Malformed(v)
    if inf and (v == "inf" or v == math.inf):
        return math.inf
    if integer:
        if not isinstance(v, int):
            raise Malformed(v)
        return v
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        raise Malformed(v)
    return float(v)


@functools.cache
def _pld(history: tuple) -> object:
    """dp_accounting's pessimistic PLD of a history (independent of dpcl.privacy)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    logging.getLogger("absl").setLevel(logging.ERROR)
    out = None
    for s, q, n in history:
        one = pld.from_gaussian_mechanism(
            standard_deviation=s,
            sensitivity=1.0,
            pessimistic_estimate=True,
            value_discretization_interval=1e-4,
            sampling_prob=q,
            use_connect_dots=True,
        ).self_compose(n)
        out = one if out is None else out.compose(one)
    return out


@functools.cache
def _train(history: tuple, delta: float) -> float:
    if not history:
        return 0.0
    if not 0 < delta < 1:
        raise Malformed(delta)
    return max(0.0, float(_pld(history).get_epsilon_for_delta(delta)))


def _real(m: dict):
    """Per stated group, (its entry, selection ε, history) as the mutant's public parameters spend them,
    and whether its selection and initial sampling keep records independent."""
    try:
        t = len(m["schedule"]["query_sizes"])
        for k in m["schedule"]["query_sizes"]:
            _num(k, integer=True)
        sel = m["selection"]
        mech = sel["mechanism"]
        if mech == "none":
            if t:
                raise Malformed("no selection mechanism with selection phases")
            per = 0.0
        else:
            if _num(sel["phases"], integer=True) != t or not t:
                raise Malformed("selection phases")
            if mech in ("random_poisson", "random_fixed"):
                per = 0.0
            elif mech == "nonprivate_topk":
                per = math.inf
            elif mech in ("laplace_threshold", "laplace_topk"):
                scale = _num(sel["laplace_scale"])
                if scale <= 0:
                    raise Malformed(scale)
                per = clip_bound(sel["acquisition"], K) / scale  # K: the data set's, not the file's
            else:
                raise Malformed(mech)
        names = [*range(t + 1), *(["unselected"] if t else [])]
        stated = [g["group"] for g in m["groups"]]
        if sorted(map(str, stated)) != sorted(map(str, names)) or any(isinstance(s, bool) for s in stated):
            raise Malformed("groups")
        out = []
        for g in m["groups"]:
            name = g["group"]
            if type(name) is not type(names[0] if name != "unselected" else "unselected"):
                raise Malformed(name)
            hist = []
            for p in g["phases"]:
                s, q, n = _num(p["noise_multiplier"]), _num(p["sample_rate"]), _num(p["steps"], integer=True)
                if not (s > 0 and 0 < q <= 1 and n >= 1):
                    raise Malformed(p)
                hist.append((s, q, n))
            j = t if name == "unselected" else name
            out.append((g, 0.0 if j == 0 else j * per, tuple(hist)))
        sound = (
            mech in ("laplace_threshold", "random_poisson", "none") and m["initial"]["sampling"] == "poisson"
        )
        return out, sound
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise Malformed(e) from None


def _harm(m: dict, target: dict) -> str | None:
    """Why accepting the mutant would be wrong (None: its statements hold for what it describes)."""
    try:
        groups, sound = _real(m)
        tol = 1 + 1e-9
        for g, paid, hist in groups:
            d = _num(g["delta"]) if hist else 0.0
            train = _train(hist, d)
            if _num(g["selection_epsilon"], inf=True) * tol < paid:
                return f"group {g['group']}: selection ε understated"
            if _num(g["training_epsilon"], inf=True) * tol < train:
                return f"group {g['group']}: training ε understated"
            if _num(g["epsilon"], inf=True) * tol < paid + train:
                return f"group {g['group']}: ε understated"
        d = _num(m["overall"]["delta"])
        worst = max(paid + _train(hist, d) for _, paid, hist in groups)
        if _num(m["overall"]["epsilon"], inf=True) * tol < worst:
            return f"overall ε understated ({m['overall']['epsilon']} < {worst})"
        if m["guarantee_holds"] is True:
            if not sound:
                return "guarantee claimed for a selection that couples records or is not DP"
            worst = max(paid + _train(hist, target["delta"]) for _, paid, hist in groups)
            if worst > target["epsilon"] * tol:
                return f"guarantee claimed, the groups spend {worst} > {target['epsilon']}"
        elif m["guarantee_holds"] is not False:
            return "guarantee_holds is not a boolean"
        return None
    except Malformed as e:
        return f"malformed ({e})"


@pytest.mark.slow
def test_mutants_are_rejected_unless_harmless(genuine, capsys):
    """Every single mutation of every genuine ledger: the verifier rejects it (LedgerError or
    PrivacyBudgetExceeded, nothing else), or its statements hold for what it describes, by an
    independent recomputation (dp_accounting's pessimistic PLD of the listed phases, the
    selection's Laplace ε from the acquisition's clip bound and the stated scale)."""
    import time

    t0 = time.perf_counter()
    for led in genuine.values():  # solves every genuine plan's schedule once (cached)
        verify_group_ledger(json.loads(json.dumps(led)), nominal_size=N_POOL, n_classes=K)
    counts = {"ledgers": len(genuine), "mutants": 0, "rejected": 0, "accepted_harmless": 0}
    for key, led in genuine.items():
        target = led["target"]
        assert _harm(led, target) is None, key  # the oracle agrees with the genuine ledgers
        for what, m in _mutants(json.loads(json.dumps(led)), PLAN_VALUES.get(key, "none")):
            counts["mutants"] += 1
            try:
                verify_group_ledger(m, nominal_size=N_POOL, n_classes=K)
            except REJECT:
                counts["rejected"] += 1
                continue
            harm = _harm(m, target)
            assert harm is None, f"{key}: accepted mutant {what}: {harm}"
            counts["accepted_harmless"] += 1
    with capsys.disabled():
        print(f"\ngroup-ledger mutation test: {counts} ({time.perf_counter() - t0:.0f} s)")
    assert counts["rejected"] + counts["accepted_harmless"] == counts["mutants"]
    assert counts["rejected"] > counts["accepted_harmless"]


def _plan_of(led: dict):
    """The GroupPlan a genuine ledger was written for (its writer's statements: the config's plan)."""
    from dpcl.active.group_ledger import GroupPlan

    sch, sel = led["schedule"], led["selection"]
    return GroupPlan(
        kind=sch["kind"],
        epsilon=led["target"]["epsilon"],
        delta=led["target"]["delta"],
        selection_epsilon=sch["selection_epsilon"],
        initial_size=sch["initial_size"],
        query_sizes=tuple(sch["query_sizes"]),
        batch_size=sch["batch_size"],
        epochs=sch["epochs_per_phase"],
        selection=sel["mechanism"],
        acquisition=sel.get("acquisition"),
        initial=led["initial"]["sampling"],
        solved_with=led["accountant"]["solved_with"],
    )


@pytest.mark.slow
def test_mutants_against_the_configs_plan_are_rejected_unless_harmless(genuine, capsys):
    """The same mutation test with the run's whole public plan from the config (what ``dpcl ledger
    verify --config`` and the pipeline pass): every plan field of every ledger is mutated with valid and
    invalid values, and a file that states another plan than the config's is rejected before any
    schedule is solved again."""
    import time

    t0 = time.perf_counter()
    counts = {"ledgers": len(genuine), "mutants": 0, "rejected": 0, "accepted_harmless": 0}
    for key, led in genuine.items():
        plan, target = _plan_of(led), led["target"]
        verify_group_ledger(json.loads(json.dumps(led)), nominal_size=N_POOL, n_classes=K, group_plan=plan)
        for what, m in _mutants(json.loads(json.dumps(led)), "all"):
            counts["mutants"] += 1
            try:
                verify_group_ledger(m, nominal_size=N_POOL, n_classes=K, group_plan=plan)
            except REJECT:
                counts["rejected"] += 1
                continue
            harm = _harm(m, target)
            assert harm is None, f"{key}: accepted mutant {what}: {harm}"
            try:  # a file accepted against the plan states the plan (a number of the same value at most)
                states = _plan_of(m)
            except (KeyError, TypeError):
                states = None
            assert states == plan, f"{key}: accepted a mutant of the plan: {what}"
            counts["accepted_harmless"] += 1
    with capsys.disabled():
        print(f"\ngroup-ledger mutation test against the plan: {counts} ({time.perf_counter() - t0:.0f} s)")
    assert counts["rejected"] > counts["accepted_harmless"]


def test_a_ledger_that_states_another_plan_than_the_configs_is_rejected(genuine):
    """Against the config's plan, a stated plan that differs is rejected naming the field, even where
    it errs on the safe side (more epochs stated than run; another acquisition; the schedule solved
    with another accountant)."""
    led = _fresh(genuine, "sa/margin/threshold")
    plan = _plan_of(led)
    verify_group_ledger(copy.deepcopy(led), nominal_size=N_POOL, n_classes=K, group_plan=plan)
    for path, value in (
        (("schedule", "epochs_per_phase"), 6.0),
        (("schedule", "kind"), "naive"),
        (("selection", "acquisition"), "entropy"),
        (("initial", "sampling"), "fixed_size"),
        (("accountant", "solved_with"), "rdp"),
        (("target", "epsilon"), 4.0),
    ):
        bad = copy.deepcopy(led)
        bad[path[0]][path[1]] = value
        with pytest.raises(LedgerError, match=re.escape(f"{path[0]}.{path[1]}: states")):
            verify_group_ledger(bad, nominal_size=N_POOL, n_classes=K, group_plan=plan)


def test_the_config_plans_a_dpal_ledger_from_its_path():
    from dpcl.config import load_config
    from dpcl.stages.active import active_ledger_plan

    cfg = load_config("config/config.yaml")
    plan = active_ledger_plan(
        cfg, "results/runs/active/imbalanced/sound/entropy-dp-sa/eps8-sel2/seed0/privacy.json"
    )
    assert (plan["target"].epsilon, plan["target"].delta) == (8.0, cfg["active"]["delta"])
    assert (
        plan["n_classes"] == 10
        and plan["nominal_size"] < 10 * cfg["datasets"]["fashion_mnist"]["pool_per_class"]
    )
    g = plan["group_plan"]  # the run's whole plan, from its cell of the config's active block
    assert (g.kind, g.selection, g.acquisition, g.initial) == (
        "step_amplification",
        "laplace_threshold",
        "entropy",
        "poisson",
    )
    assert (g.epsilon, g.selection_epsilon, g.query_sizes) == (
        8.0,
        2.0,
        tuple(cfg["active"]["query_sizes"]),
    )
    paper = active_ledger_plan(
        cfg, "results/runs/active/balanced/paper/random-sa/eps8-sel0/seed0/privacy.json"
    )["group_plan"]
    assert (paper.selection, paper.acquisition, paper.initial) == ("random_fixed", None, "fixed_size")
    with pytest.raises(ValueError, match="plans no DP-AL run"):
        active_ledger_plan(
            cfg, "results/runs/active/balanced/sound/entropy-nondp-sa/eps8-sel0/seed0/privacy.json"
        )
    with pytest.raises(ValueError, match="results layout"):
        active_ledger_plan(cfg, "results/runs/cosine/x/privacy.json")
