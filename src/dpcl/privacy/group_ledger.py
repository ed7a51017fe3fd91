"""The per-record (per-group) privacy ledger of a DP active-learning run and its verifier.

Paper 004 accounts each record by the group it joined (Sec. III-C/E): group 0 is the initial
labelled set, group g the records selected at selection phase g, and "unselected" the records
never labelled. A record's loss is the selection ε it paid before it was labelled (g·ε_Sel/T;
ε_Sel for the unselected) plus the ε of **its own** DP-SGD history (basic composition). The
ledger lists, for every group, its training segments as (noise_multiplier, sample_rate, steps)
and its ``selection_epsilon``, so that a reader can recompute its total with any accountant.
The stated figures are those of the accountant named in ``accountant`` — the pessimistic PLD
(a valid upper bound) that our schedules are solved with, or RDP for a schedule solved with RDP;
:func:`verify_group_ledger` recomputes them.

Like the continual-learning ledger it holds public parameters only: the planned sizes of the
schedule, never how many records a selection returned. Whether the per-record bound is an
end-to-end guarantee depends on the selection: per-record (Poisson / threshold) selection
changes nobody else's membership, fixed-size selection (top-k, a fixed-size random initial
set) does not, and non-private selection spends ε = ∞ on the scores.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from .accounting import ADJACENCY, PrivacyBudgetExceeded
from .group_accounting import ACCOUNTANTS, accountant, group_epsilon, training_epsilon
from .ledger import LedgerError

ACCOUNTING = "per_record_groups"
#: selection mechanisms and whether each keeps records' memberships independent (add/remove sound)
SELECTIONS = {
    "laplace_threshold": True,  # per-record noisy score > public threshold
    "random_poisson": True,  # per-record coin at a public rate
    "laplace_topk": False,  # the paper's: noisy top-k couples records
    "random_fixed": False,  # fixed-size uniform sample couples records
    "nonprivate_topk": False,  # exact top-k of the scores: not DP at all
    "none": True,  # no selection phases (one training phase on the initial set)
}
INITIAL = {"poisson": True, "fixed_size": False}
COUPLING = (
    "fixed-size selection couples records: adding a record can displace another from the labelled "
    "set, so neighbouring pools can give training sets that differ by a swap, which add/remove "
    "accounting does not cover (paper 004 states no end-to-end theorem for it)"
)
NONPRIVATE = "the selection reads exact (un-noised) acquisition scores: it is not differentially private"
REL_TOL = 1e-9


@functools.lru_cache(maxsize=4096)
def _verified(history: tuple, selection_epsilon: float, delta: float, accountant_name: str = "rdp") -> float:
    return group_epsilon(history, selection_epsilon, delta, accountant_name)


def _group_entry(
    group: int | str, history: list, paid: float, delta: float, accountant_name: str = "rdp"
) -> dict[str, Any]:
    train = training_epsilon(history, delta, accountant_name)
    return {
        "group": group,
        "selection_epsilon": paid,
        "phases": [{"noise_multiplier": s, "sample_rate": q, "steps": n} for s, q, n in history],
        "training_epsilon": train,
        "epsilon": paid + train,
        "delta": delta if history else 0.0,
    }


def group_ledger(
    schedule, selection: dict[str, Any], initial: str, claim: dict | None = None
) -> dict[str, Any]:
    """privacy.json of a DP-AL run from its (public) schedule and selection parameters.

    ``selection``: {"mechanism": one of :data:`SELECTIONS`, "acquisition", "sensitivity",
    "epsilon_per_phase", "laplace_scale", "phases"}; ``initial``: "poisson" or "fixed_size".
    """
    plan = schedule.plan
    acc = schedule.stating_accountant  # what solved the schedule, or PLD for the authors' (opacus RDP)
    mech = selection["mechanism"]
    if mech not in SELECTIONS:
        raise LedgerError(f"unknown selection mechanism {mech!r}; allowed: {sorted(SELECTIONS)}")
    if initial not in INITIAL:
        raise LedgerError(f"unknown initial-set sampling {initial!r}; allowed: {sorted(INITIAL)}")
    groups = [
        _group_entry(g, schedule.history(g), plan.paid(g), plan.delta, acc) for g in range(schedule.groups)
    ]
    t = len(plan.query_sizes)
    if t:
        groups.append(_group_entry("unselected", [], plan.selection_epsilon, plan.delta, acc))
    reasons = []
    if not SELECTIONS[mech] or not INITIAL[initial]:
        reasons.append(COUPLING)
    if mech == "nonprivate_topk":
        reasons.append(NONPRIVATE)
    worst = max(groups, key=lambda e: e["epsilon"])
    over = [e["group"] for e in groups if e["epsilon"] > plan.epsilon * (1 + REL_TOL)]
    if over and claim is None:  # our schedules are verified when solved: an overshoot here is a defect
        raise PrivacyBudgetExceeded(
            f"groups {over} of a {schedule.kind} schedule spend more than the target "
            f"ε = {plan.epsilon} over their own histories"
        )
    if over:
        reasons.append(
            f"groups {over} spend more than the target ε = {plan.epsilon} over their own histories"
        )
    overall_eps = math.inf if mech == "nonprivate_topk" else worst["epsilon"]
    out = {
        "adjacency": ADJACENCY + " (one record of the pool)",
        "accounting": ACCOUNTING,
        "target": {"epsilon": plan.epsilon, "delta": plan.delta},
        "private": True,
        "accountant": accountant(acc).describe() | {"solved_with": schedule.accountant},
        "schedule": {
            "kind": schedule.kind,
            "batch_size": plan.batch_size,
            "epochs_per_phase": plan.epochs,
            "initial_size": plan.initial_size,
            "query_sizes": list(plan.query_sizes),
            "normaliser": plan.batch_size,
        },
        "initial": {"sampling": initial},
        "selection": dict(selection),
        "groups": groups,
        "overall": {
            "rule": "per-record accounting: every record's loss is its group's; the worst group bounds all",
            "epsilon": overall_eps,
            "delta": plan.delta,
        },
        "guarantee_holds": not reasons,
    }
    if reasons:
        out["why_not"] = reasons
    if claim is not None:
        out["published_claim"] = claim
    return out


def _check_selection(sel: dict[str, Any], n_phases: int) -> float:
    """The per-phase ε the selection entry proves (0 if it reads no scores); raises if inconsistent."""
    mech = sel.get("mechanism")
    if mech not in SELECTIONS:
        raise LedgerError(f"unknown selection mechanism {mech!r}")
    if mech in ("laplace_topk", "laplace_threshold"):
        eps, c, scale = (
            float(sel["epsilon_per_phase"]),
            float(sel["sensitivity"]),
            float(sel["laplace_scale"]),
        )
        if int(sel.get("phases", n_phases)) != n_phases:
            raise LedgerError(f"selection states {sel.get('phases')} phases, the schedule has {n_phases}")
        if not (eps > 0 and c > 0) or scale < c / eps * (1 - 1e-12):
            raise PrivacyBudgetExceeded(
                f"Laplace scale {scale} gives ε = {c / scale if scale else math.inf} per phase for sensitivity "
                f"{c}, more than the stated {eps}"
            )
        return eps
    return 0.0


def verify_group_ledger(privacy: dict[str, Any]) -> dict[str, Any]:
    """Re-verify a DP-AL ``privacy.json`` from its parameters: every group's training ε is recomputed
    from its listed phases (project RDP accountant, all orders), its selection ε from the selection
    mechanism and the group's position, and the stated overall and guarantee_holds are checked."""
    if privacy.get("accounting") != ACCOUNTING:
        raise LedgerError(f"not a per-group ledger (accounting = {privacy.get('accounting')!r})")
    target = float(privacy["target"]["epsilon"])
    delta = float(privacy["target"]["delta"])
    n_sel = len(privacy["schedule"]["query_sizes"])
    per_phase = _check_selection(privacy["selection"], n_sel)
    charged = privacy["selection"].get("charged_epsilon_per_phase", per_phase)
    if float(charged) < per_phase * (1 - 1e-12):
        raise PrivacyBudgetExceeded(
            f"groups are charged {charged} per selection phase, the mechanism spends {per_phase}"
        )
    acc_name = (privacy.get("accountant") or {}).get("name")
    if acc_name not in ACCOUNTANTS:
        raise LedgerError(f"accountant.name is {acc_name!r}; allowed: {list(ACCOUNTANTS)}")
    worst = 0.0
    for i, g in enumerate(privacy["groups"]):
        name = g["group"]
        expected_paid = float(charged) * (n_sel if name == "unselected" else int(name))
        if float(g["selection_epsilon"]) < expected_paid * (1 - 1e-12) - 1e-15:
            raise PrivacyBudgetExceeded(
                f"group {name}: states selection ε {g['selection_epsilon']}, but it took "
                f"part in selections worth {expected_paid}"
            )
        hist = tuple(
            (float(p["noise_multiplier"]), float(p["sample_rate"]), int(p["steps"])) for p in g["phases"]
        )
        if any(not (0 < q <= 1) or s <= 0 or n < 1 for s, q, n in hist):
            raise LedgerError(f"group {name}: a phase with an invalid (σ, q, steps): {hist}")
        eps = _verified(hist, float(g["selection_epsilon"]), delta, acc_name)
        if eps > float(g["epsilon"]) * (1 + 1e-9):
            raise PrivacyBudgetExceeded(f"group {name} states ε = {g['epsilon']}, its phases give {eps:.6g}")
        if i != len(privacy["groups"]) - 1 and name == "unselected":
            raise LedgerError("the unselected group must come last")
        worst = max(worst, float(g["epsilon"]))
    if len(privacy["groups"]) != n_sel + 1 + (1 if n_sel else 0):
        raise LedgerError(f"{len(privacy['groups'])} groups listed for {n_sel} selection phases")
    mech = privacy["selection"]["mechanism"]
    overall = math.inf if mech == "nonprivate_topk" else worst
    stated = privacy["overall"]["epsilon"]
    stated = math.inf if stated in ("inf", math.inf) else float(stated)
    if stated < overall * (1 - 1e-12):
        raise PrivacyBudgetExceeded(f"overall states ε = {stated}, the groups give {overall}")
    sound = SELECTIONS[mech] and INITIAL[privacy["initial"]["sampling"]] and mech != "nonprivate_topk"
    holds = sound and overall <= target * (1 + REL_TOL)
    if bool(privacy.get("guarantee_holds")) != holds:
        raise LedgerError(
            f"guarantee_holds: the file says {privacy.get('guarantee_holds')}, the entries say {holds}"
        )
    return {
        "accounting": ACCOUNTING,
        "target": {"epsilon": target, "delta": delta},
        "entries": len(privacy["groups"]),
        "n_tasks": 1,
        "groups": len(privacy["groups"]),
        "overall": {"epsilon": overall, "delta": delta},
        "guarantee_holds": holds,
        "leaky_baseline": not sound,
        "published_claim": "published_claim" in privacy,
        "why_not": privacy.get("why_not", []),
    }
