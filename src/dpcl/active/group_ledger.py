"""The per-record (per-group) privacy ledger of a DP active-learning run and its verifier.

[Schwethelm2025] accounts each record by the group it joined (Sec. III-C/E): group 0 is the initial
labelled set, group g the records selected at selection phase g, and "unselected" the records
never labelled. A record's loss is the selection ε it paid before it was labelled (g·ε_Sel/T;
ε_Sel for the unselected) plus the ε of **its own** DP-SGD history (basic composition). The
ledger lists, for every group, its training segments as (noise_multiplier, sample_rate, steps)
and its ``selection_epsilon``, so that a reader can recompute its total with any accountant;
:func:`verify_group_ledger` rebuilds the schedule from the ledger's public plan, checks every
group's phases against it and recomputes every stated figure with the accountant the ledger
names (RDP or pessimistic PLD, :func:`dpcl.privacy.group_accounting.group_epsilon`).

Like the continual-learning ledger it holds public parameters only: the planned sizes of the
schedule, never how many records a selection returned. Whether the per-record bound is an
end-to-end guarantee depends on the selection: per-record (Poisson / threshold) selection
changes nobody else's membership, fixed-size selection (top-k, a fixed-size random initial
set) does not, and non-private selection spends ε = ∞ on the scores.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from ..privacy.accounting import ADJACENCY, REDERIVE_TOL, Budget, PrivacyBudgetExceeded
from ..privacy.errors import LedgerError
from ..privacy.group_accounting import ACCOUNTANTS, SOLVE_RESOLUTION, accountant, group_epsilon

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
    "accounting does not cover ([Schwethelm2025] states no end-to-end theorem for it)"
)
NONPRIVATE = "the selection reads exact (un-noised) acquisition scores: it is not differentially private"
REL_TOL = 1e-9


@functools.lru_cache(maxsize=4096)
def _verified(history: tuple, selection_epsilon: float, delta: float, accountant_name: str = "rdp") -> float:
    return group_epsilon(history, selection_epsilon, delta, accountant_name)


def _group_entry(
    group: int | str, history: list, paid: float, delta: float, accountant_name: str = "rdp"
) -> dict[str, Any]:
    # the figure the verifier recomputes (group_epsilon), which the schedule's check kept ≤ ε
    train = group_epsilon(history, 0.0, delta, accountant_name)
    return {
        "group": group,
        "selection_epsilon": paid,
        "phases": [{"noise_multiplier": s, "sample_rate": q, "steps": n} for s, q, n in history],
        "training_epsilon": train,
        "epsilon": paid + train,
        "delta": delta if history else 0.0,
    }


def group_ledger(
    schedule,
    selection: dict[str, Any],
    initial: str,
    claim: dict | None = None,
    *,
    pool_size: int | None = None,
    n_classes: int | None = None,
) -> dict[str, Any]:
    """privacy.json of a DP-AL run from its (public) schedule and selection parameters.

    ``selection``: {"mechanism": one of :data:`SELECTIONS`, "acquisition", "sensitivity",
    "epsilon_per_phase", "laplace_scale", "phases"}; ``initial``: "poisson" or "fixed_size".
    ``pool_size`` (the pool's planned size) and ``n_classes`` (K, the data set's number of
    classes) are public and recorded for the verifier: δ must lie below 1/pool size, and the
    least-confidence score's sensitivity is 1 − 1/K.
    """
    plan = schedule.plan
    acc = schedule.stating_accountant  # what solved the schedule, or PLD for the authors' (opacus RDP)
    mech = selection["mechanism"]
    if mech not in SELECTIONS:
        raise LedgerError(f"unknown selection mechanism {mech!r}; allowed: {sorted(SELECTIONS)}")
    if initial not in INITIAL:
        raise LedgerError(f"unknown initial-set sampling {initial!r}; allowed: {sorted(INITIAL)}")
    t = len(plan.query_sizes)

    def paid(g: int | str) -> float:  # exact scores are read at every selection: ε = ∞ once scored
        if mech == "nonprivate_topk" and g != 0:
            return math.inf
        return plan.selection_epsilon if g == "unselected" else plan.paid(g)

    groups = [_group_entry(g, schedule.history(g), paid(g), plan.delta, acc) for g in range(schedule.groups)]
    if t:
        groups.append(_group_entry("unselected", [], paid("unselected"), plan.delta, acc))
    reasons = []
    if not SELECTIONS[mech] or not INITIAL[initial]:
        reasons.append(COUPLING)
    if mech == "nonprivate_topk":
        reasons.append(NONPRIVATE)
    worst = max(groups, key=lambda e: e["epsilon"])
    over = [
        e["group"]
        for e in groups
        if math.isfinite(e["selection_epsilon"]) and e["epsilon"] > plan.epsilon * (1 + REL_TOL)
    ]
    if over and claim is None:  # our schedules are verified when solved: an overshoot here is a defect
        raise PrivacyBudgetExceeded(
            f"groups {over} of a {schedule.kind} schedule spend more than the target "
            f"ε = {plan.epsilon} over their own histories"
        )
    if over:
        reasons.append(
            f"groups {over} spend more than the target ε = {plan.epsilon} over their own histories"
        )
    overall_eps = worst["epsilon"]
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
            "selection_epsilon": plan.selection_epsilon,
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
    pool = {"nominal_size": pool_size, "n_classes": n_classes}
    if any(v is not None for v in pool.values()):
        out["pool"] = {k: int(v) for k, v in pool.items() if v is not None}
    if reasons:
        out["why_not"] = reasons
    if claim is not None:
        out["published_claim"] = claim
    return out


# ----------------------------------------------------------------------------- the verifier
#
# Everything checked is derived from the public plan (target, schedule block, pool, selection
# parameters): the groups' phase histories are rebuilt with the project's schedule builders,
# the selection's sensitivity comes from the acquisition's clip bound, the selection charges from
# the group's position, and every stated figure is recomputed. A figure the plan fixes (the phases,
# the selection's sensitivity, Laplace scale and ε per phase, a group's selection ε, every δ) must
# equal the plan's in either direction: a value on the safe side is still not the plan's. An
# accountant's ε (a group's training ε and total, the worst group) is an upper bound: it may be
# stated above the recomputed one (conservative), never below. Every number must be finite (or
# "inf" where a loss may be infinite) and of its type: integers exact, a bool is not a number.

ADJACENCY_AL = ADJACENCY + " (one record of the pool)"
#: relative slack between a stated figure and its recomputation in closed form (float rounding, JSON round
#: trip): the selection's sensitivity and Laplace ε, δ. A figure an accountant re-derives (a group's training ε,
#: its total, the worst group; a group's ε against the target) is compared with
#: :data:`dpcl.privacy.accounting.REDERIVE_TOL` instead: the accountants' last bits differ between CPUs.
STATE_TOL = 1e-9
#: relative slack between a listed σ or sampling rate and the schedule rebuilt from the public plan: twice
#: the resolution the schedule builders solve them to (:data:`dpcl.privacy.group_accounting.SOLVE_RESOLUTION`). Two
#: correct solves of one plan agree to that resolution, not to the last bit: on another CPU the accountant's
#: last bits differ, secant steps move with them, and a probe that lies on a boundary (a group whose history is
#: the naive schedule's, solved against the naive trajectory) can be decided the other way, one bracket off.
#: What the listed history spends is still re-derived from the listed numbers themselves and held to the
#: target; step counts must match exactly.
SCHEDULE_TOL = 2 * SOLVE_RESOLUTION


@dataclass(frozen=True, kw_only=True)
class GroupPlan:
    """The whole public plan of one DP-AL run, as its config's run cell fixes it (built by
    :func:`dpcl.stages.active.active_ledger_plan`): the schedule's kind and its plan's numbers, the
    selection's mechanism and acquisition, the initial set's sampling and the accountant the pipeline
    solves the schedule with. :func:`verify_group_ledger` given one checks the file's statements of them
    against it, and rebuilds the schedule from it, never from the file's words."""

    kind: str
    epsilon: float
    delta: float
    selection_epsilon: float
    initial_size: int
    query_sizes: tuple[int, ...]
    batch_size: float
    epochs: float
    selection: str  #: the selection mechanism (:data:`SELECTIONS`)
    acquisition: str | None  #: the acquisition function (None: a random selection or none)
    initial: str  #: the initial set's sampling (:data:`INITIAL`)
    solved_with: str  #: the accountant the schedule is solved with

    def al_plan(self):
        from .schedules import ALPlan

        return ALPlan(
            self.epsilon,
            self.delta,
            self.selection_epsilon,
            self.initial_size,
            tuple(self.query_sizes),
            self.batch_size,
            self.epochs,
        )


def _against_plan(privacy: dict[str, Any], plan: GroupPlan) -> None:
    """Every statement of the file that the run's public plan fixes must be the plan's, even where it
    errs on the safe side (a verifier checks what the config planned, not what the file says)."""
    sel = privacy.get("selection") or {}
    stated = {
        "target.epsilon": privacy["target"]["epsilon"],
        "target.delta": privacy["target"]["delta"],
        "schedule.kind": privacy["schedule"]["kind"],
        "schedule.batch_size": privacy["schedule"]["batch_size"],
        "schedule.epochs_per_phase": privacy["schedule"]["epochs_per_phase"],
        "schedule.initial_size": privacy["schedule"]["initial_size"],
        "schedule.query_sizes": tuple(privacy["schedule"]["query_sizes"]),
        "schedule.selection_epsilon": privacy["schedule"]["selection_epsilon"],
        "selection.mechanism": sel.get("mechanism"),
        "selection.acquisition": sel.get("acquisition"),
        "initial.sampling": (privacy.get("initial") or {}).get("sampling"),
        "accountant.solved_with": (privacy.get("accountant") or {}).get("solved_with", "rdp"),
    }
    planned = {
        "target.epsilon": plan.epsilon,
        "target.delta": plan.delta,
        "schedule.kind": plan.kind,
        "schedule.batch_size": plan.batch_size,
        "schedule.epochs_per_phase": plan.epochs,
        "schedule.initial_size": plan.initial_size,
        "schedule.query_sizes": tuple(plan.query_sizes),
        "schedule.selection_epsilon": plan.selection_epsilon,
        "selection.mechanism": plan.selection,
        "selection.acquisition": plan.acquisition,
        "initial.sampling": plan.initial,
        "accountant.solved_with": plan.solved_with,
    }
    for path, want in planned.items():
        got = stated[path]
        same = (
            got == want and type(got) is type(want)
            if isinstance(want, str | tuple) or want is None
            else not isinstance(got, bool) and isinstance(got, int | float) and float(got) == float(want)
        )
        if not same:
            raise _path_error(path, f"states {got!r}, the config's plan for this run has {want!r}")


def _path_error(path: str, msg: str) -> LedgerError:
    return LedgerError(f"{path}: {msg}")


def _field(d: Any, key: str, path: str) -> Any:
    if not isinstance(d, dict):
        raise _path_error(path, f"must be an object, got {type(d).__name__}")
    if key not in d:
        raise _path_error(f"{path}.{key}" if path else key, "missing")
    return d[key]


def _int(v: Any, path: str, lo: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _path_error(path, f"must be an integer, got {v!r}")
    if lo is not None and v < lo:
        raise _path_error(path, f"must be an integer >= {lo}, got {v!r}")
    return v


def _real(v: Any, path: str, lo: float = -math.inf, hi: float = math.inf, inf_ok: bool = False) -> float:
    """A finite number in [lo, hi] (bool, strings, NaN refused); ``inf_ok``: also +∞ ("inf")."""
    if inf_ok and (v == "inf" or (isinstance(v, float) and v == math.inf)):
        return math.inf
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        allowed = "a finite number" + (' or "inf"' if inf_ok else "")
        raise _path_error(path, f"must be {allowed}, got {v!r}")
    if not lo <= v <= hi:
        raise _path_error(path, f"must lie in [{lo}, {hi}], got {v!r}")
    return float(v)


def _choice(v: Any, path: str, allowed) -> Any:
    if isinstance(v, bool) or v not in allowed:
        raise _path_error(path, f"{v!r} is not one of {sorted(allowed, key=str)}")
    return v


def _plan(privacy: dict[str, Any]):
    """The public plan (an ``ALPlan``) and schedule kind stated by the ledger, every field typed."""
    from .paper_schedule import KIND as PAPER_KIND
    from .schedules import BUILDERS, ALPlan

    tgt = _field(privacy, "target", "")
    eps = _real(_field(tgt, "epsilon", "target"), "target.epsilon", inf_ok=True)
    if not eps > 0:
        raise _path_error("target.epsilon", f"must be positive, got {eps}")
    delta = _real(_field(tgt, "delta", "target"), "target.delta")
    if not 0 < delta < 1:
        raise _path_error("target.delta", f"must lie in (0, 1), got {delta}")
    sch = _field(privacy, "schedule", "")
    kind = _choice(_field(sch, "kind", "schedule"), "schedule.kind", [*BUILDERS, PAPER_KIND])
    b = _real(_field(sch, "batch_size", "schedule"), "schedule.batch_size")
    epochs = _real(_field(sch, "epochs_per_phase", "schedule"), "schedule.epochs_per_phase")
    k0 = _int(_field(sch, "initial_size", "schedule"), "schedule.initial_size", 1)
    qs = _field(sch, "query_sizes", "schedule")
    if not isinstance(qs, list):
        raise _path_error("schedule.query_sizes", f"must be a list, got {qs!r}")
    qs = tuple(_int(k, f"schedule.query_sizes[{i}]", 1) for i, k in enumerate(qs))
    sel_eps = _real(_field(sch, "selection_epsilon", "schedule"), "schedule.selection_epsilon", 0.0)
    if _real(_field(sch, "normaliser", "schedule"), "schedule.normaliser") != b:
        raise _path_error("schedule.normaliser", f"must be the batch size {b}, got {sch['normaliser']!r}")
    try:
        plan = ALPlan(eps, delta, sel_eps, k0, qs, b, epochs)
    except ValueError as e:
        raise LedgerError(f"schedule: not a valid public plan: {e}") from None
    return kind, plan


@functools.lru_cache(maxsize=64)
def _rebuilt(kind: str, plan, solved_with: str) -> tuple[tuple[tuple[float, float, int], ...], ...]:
    """Every group's phase history of the schedule rebuilt from the public plan with the accountant
    that solved it (cached)."""
    from .paper_schedule import KIND as PAPER_KIND
    from .paper_schedule import authors_step_amplification
    from .schedules import build_schedule

    try:
        sched = (
            authors_step_amplification(plan)
            if kind == PAPER_KIND
            else build_schedule(kind, plan, accountant_name=solved_with)
        )
    except (ValueError, ArithmeticError) as e:
        raise LedgerError(
            f"schedule: the {kind} schedule cannot be rebuilt from the public plan: {e}"
        ) from None
    return tuple(tuple(sched.history(g)) for g in range(sched.groups))


def _selection(privacy: dict[str, Any], plan, n_classes: int | None) -> tuple[str, float]:
    """(mechanism, ε one selection phase really spends), from the acquisition's clip bound."""
    from .acquisition import ACQUISITIONS, clip_bound

    sel = _field(privacy, "selection", "")
    mech = _choice(_field(sel, "mechanism", "selection"), "selection.mechanism", SELECTIONS)
    t = len(plan.query_sizes)
    if mech == "none":
        if t:
            raise _path_error("selection.mechanism", f"'none' with {t} selection phases")
        return mech, 0.0
    if not t:
        raise _path_error("selection.mechanism", f"{mech!r} with no selection phase (use 'none')")
    if _int(_field(sel, "phases", "selection"), "selection.phases", 1) != t:
        raise _path_error("selection.phases", f"states {sel['phases']}, the plan has {t} selection phases")
    if mech in ("random_poisson", "random_fixed"):
        return mech, 0.0
    acq = _choice(_field(sel, "acquisition", "selection"), "selection.acquisition", ACQUISITIONS)
    if mech == "nonprivate_topk":
        if _real(
            _field(sel, "epsilon_per_phase", "selection"), "selection.epsilon_per_phase", inf_ok=True
        ) < (math.inf):
            raise _path_error("selection.epsilon_per_phase", "a non-private selection spends ε = inf")
        return mech, math.inf
    if acq == "confidence" and n_classes is None:
        raise _path_error("pool.n_classes", "missing: the confidence score's sensitivity 1 − 1/K needs K")
    clip = clip_bound(acq, n_classes or 2)
    stated_c = _real(_field(sel, "sensitivity", "selection"), "selection.sensitivity")
    if stated_c < clip * (1 - STATE_TOL):
        raise PrivacyBudgetExceeded(
            f"selection.sensitivity: states {stated_c}, the {acq} score's clip bound is {clip}"
        )
    if stated_c > clip * (1 + STATE_TOL):  # the plan fixes it: a larger one is no bound, it is not the plan's
        raise _path_error(
            "selection.sensitivity",
            f"states {stated_c!r}, the plan's ({acq} score's clip bound) is {clip!r}",
        )
    scale = _real(_field(sel, "laplace_scale", "selection"), "selection.laplace_scale")
    stated_eps = _real(_field(sel, "epsilon_per_phase", "selection"), "selection.epsilon_per_phase")
    if not scale > 0:
        raise _path_error("selection.laplace_scale", f"must be positive, got {scale}")
    spent = clip / scale  # Laplace mechanism on a score of sensitivity C_Sel, per phase
    if stated_eps < spent * (1 - STATE_TOL):
        raise PrivacyBudgetExceeded(
            f"selection.epsilon_per_phase: states {stated_eps}, Laplace scale {scale} at sensitivity "
            f"{clip} spends {spent:.6g} per phase"
        )
    if stated_eps > spent * (1 + STATE_TOL):  # the Laplace ε is exact (C_Sel/scale), not a bound
        raise _path_error(
            "selection.epsilon_per_phase",
            f"states {stated_eps!r}, Laplace scale {scale!r} at sensitivity {clip!r} spends {spent!r} "
            "per phase (the plan's value)",
        )
    charged = plan.selection_epsilon / t
    planned = t * clip / plan.selection_epsilon if plan.selection_epsilon else math.inf
    if spent > charged * (1 + STATE_TOL):
        raise PrivacyBudgetExceeded(
            f"selection.laplace_scale: {scale} spends ε = {spent:.6g} per phase at sensitivity {clip}, "
            f"the plan charges ε_Sel/T = {charged:.6g} (scale must be >= T·C_Sel/ε_Sel = "
            f"{planned:.6g})"
        )
    if scale > planned * (1 + STATE_TOL):  # more noise than the plan's: not the run the plan describes
        raise _path_error(
            "selection.laplace_scale",
            f"states {scale!r}, the plan's T·C_Sel/ε_Sel is {planned!r} (it spends ε = {spent:.6g} per "
            f"phase, the plan charges ε_Sel/T = {charged:.6g})",
        )
    return mech, spent


def _pool(
    privacy: dict[str, Any], plan, nominal_size: int | None, n_classes: int | None
) -> tuple[int, int | None]:
    """(nominal pool size N, K or None): δ must lie below 1/N (every record of the pool is at risk).
    The caller's (config's) values win; a file that states others is rejected."""
    pool = privacy.get("pool", {})
    if not isinstance(pool, dict):
        raise _path_error("pool", f"must be an object, got {pool!r}")
    k = _int(pool["n_classes"], "pool.n_classes", 2) if "n_classes" in pool else None
    if n_classes is not None:
        n_classes = _int(n_classes, "n_classes (the caller's)", 2)
        if k is not None and k != n_classes:
            raise _path_error("pool.n_classes", f"states {k}, the data set has {n_classes} classes")
        k = n_classes
    stated = _int(pool["nominal_size"], "pool.nominal_size", 1) if "nominal_size" in pool else None
    if nominal_size is not None:
        nominal_size = _int(nominal_size, "nominal_size (the caller's)", 1)
        if stated is not None and stated != nominal_size:
            raise _path_error("pool.nominal_size", f"states {stated}, the config's is {nominal_size}")
    n = nominal_size if nominal_size is not None else stated
    if n is None:
        raise _path_error("pool.nominal_size", "missing: pass the run's planned pool size (--nominal-size)")
    budget = plan.labelled(plan.phases - 1)
    if n < budget:
        raise _path_error("pool.nominal_size", f"{n} is smaller than the planned labelling budget {budget}")
    if plan.delta * n >= 1:
        raise _path_error(
            "target.delta", f"{plan.delta} is not below 1/N for the pool's nominal size N = {n}"
        )
    return n, k


def _history(g: dict, path: str) -> tuple:
    """The group's listed phases, every number typed."""
    phases = _field(g, "phases", path)
    if not isinstance(phases, list):
        raise _path_error(f"{path}.phases", f"must be a list, got {phases!r}")
    hist = []
    for j, ph in enumerate(phases):
        pp = f"{path}.phases[{j}]"
        s = _real(_field(ph, "noise_multiplier", pp), f"{pp}.noise_multiplier")
        q = _real(_field(ph, "sample_rate", pp), f"{pp}.sample_rate", 0.0, 1.0)
        n = _int(_field(ph, "steps", pp), f"{pp}.steps", 1)
        if not (s > 0 and q > 0):
            raise _path_error(pp, f"noise_multiplier and sample_rate must be positive, got {s}, {q}")
        hist.append((s, q, n))
    return tuple(hist)


def _compare_history(hist: tuple, expected: tuple, path: str) -> None:
    """The listed phases must be the schedule's, rebuilt from the public plan (σ, q to float rounding)."""
    if len(hist) != len(expected):
        raise _path_error(
            f"{path}.phases",
            f"lists {len(hist)} phases, the schedule rebuilt from the public plan trains this group in "
            f"{len(expected)}",
        )
    for j, (got, want) in enumerate(zip(hist, expected, strict=True)):
        for name, x, y in zip(("noise_multiplier", "sample_rate", "steps"), got, want, strict=True):
            if not (x == y if name == "steps" else math.isclose(x, y, rel_tol=SCHEDULE_TOL, abs_tol=0.0)):
                raise _path_error(
                    f"{path}.phases[{j}].{name}",
                    f"states {x!r}, the schedule rebuilt from the public plan has {y!r}",
                )


def _at_least(stated: float, recomputed: float, path: str, what: str, tol: float = STATE_TOL) -> None:
    if stated < recomputed * (1 - tol) - 1e-15:
        raise PrivacyBudgetExceeded(f"{path}: states {stated!r}, {what} gives {recomputed:.6g}")


def _exactly(stated: float, planned: float, path: str, what: str, tol: float = STATE_TOL) -> None:
    """A figure the plan fixes: below it understates (:class:`PrivacyBudgetExceeded`), above it is
    not the plan's either (:class:`LedgerError`), though it errs on the safe side."""
    _at_least(stated, planned, path, what, tol)
    if stated > planned * (1 + tol) + 1e-15:
        raise _path_error(path, f"states {stated!r}, the plan's value is {planned!r}, from {what}")


def verify_group_ledger(
    privacy: dict[str, Any],
    nominal_size: int | None = None,
    n_classes: int | None = None,
    *,
    group_plan: GroupPlan | None = None,
    target: Any = None,
) -> dict[str, Any]:
    """Re-verify a DP-AL ``privacy.json`` from its public plan (see the section comment above).

    ``target``: the config's (ε, δ) target (a :class:`dpcl.privacy.accounting.Budget`); the file's must
    be it (default: the file's own).

    ``group_plan``: the run's whole public plan from the config (:class:`GroupPlan`): every statement of it
    in the file must be the plan's, and the schedule is rebuilt from it; without one (a file checked
    without its config), from the file's own statements, typed and checked for consistency.
    ``nominal_size``: the run's planned pool size from the config (default: the file's
    ``pool.nominal_size``); ``n_classes``: the data set's number of classes K (default: the
    file's ``pool.n_classes``; needed for the confidence score's sensitivity). Raises :class:`LedgerError` (malformed, inconsistent with the plan) or
    :class:`PrivacyBudgetExceeded` (a stated figure below what the plan spends), naming the field.
    """
    from ..privacy.group_accounting import group_epsilon

    if not isinstance(privacy, dict):
        raise LedgerError("not a ledger: the file holds no JSON object")
    if privacy.get("accounting") != ACCOUNTING:
        raise LedgerError(f"accounting: not a per-group ledger ({privacy.get('accounting')!r})")
    if target is not None:
        tgt = _field(privacy, "target", "")
        stated = Budget(
            _real(_field(tgt, "epsilon", "target"), "target.epsilon", inf_ok=True),
            _real(_field(tgt, "delta", "target"), "target.delta"),
        )
        if stated != target:
            raise LedgerError(f"the file states target {privacy.get('target')}, but the config's is {target}")
    if privacy.get("adjacency") != ADJACENCY_AL:
        raise _path_error("adjacency", f"{privacy.get('adjacency')!r}; this verifier checks {ADJACENCY_AL!r}")
    if privacy.get("private") is not True:
        raise _path_error("private", f"must be true, got {privacy.get('private')!r}")
    accountant = _choice(
        _field(_field(privacy, "accountant", ""), "name", "accountant"), "accountant.name", ACCOUNTANTS
    )
    kind, plan = _plan(privacy)  # every field typed
    if (
        group_plan is not None
    ):  # the config's plan: the file must state it, and the schedule is rebuilt from it
        _against_plan(privacy, group_plan)
        kind, plan = group_plan.kind, group_plan.al_plan()
    n_pool, k = _pool(privacy, plan, nominal_size, n_classes)
    mech, per_phase = _selection(privacy, plan, k)
    init = _choice(_field(_field(privacy, "initial", ""), "sampling", "initial"), "initial.sampling", INITIAL)
    t = len(plan.query_sizes)
    delta = plan.delta
    groups = _field(privacy, "groups", "")
    names: list[int | str] = [*range(plan.phases), *(["unselected"] if t else [])]
    if not isinstance(groups, list) or len(groups) != len(names):
        raise _path_error(
            "groups", f"must list {len(names)} groups ({names}) for {t} selection phases, got {len(groups)}"
        )
    stated = []  # (path, history, selection ε, training ε, ε, δ) as the file states them, typed
    for i, (g, name) in enumerate(zip(groups, names, strict=True)):
        path = f"groups[{i}]"
        got = _field(g, "group", path)
        if got != name or isinstance(got, bool) or type(got) is not type(name):
            raise _path_error(f"{path}.group", f"must be {name!r} (groups in order 0..T, then 'unselected')")
        hist = _history(g, path)
        figures = [
            _real(_field(g, key, path), f"{path}.{key}", 0.0, inf_ok=True)
            for key in ("selection_epsilon", "training_epsilon", "epsilon")
        ]
        g_delta = _real(_field(g, "delta", path), f"{path}.delta", 0.0, 1.0)
        if g_delta >= 1:
            raise _path_error(f"{path}.delta", f"must be below 1, got {g_delta}")
        stated.append((path, hist, *figures, g_delta))

    ov = _field(privacy, "overall", "")
    stated_overall = _real(_field(ov, "epsilon", "overall"), "overall.epsilon", 0.0, inf_ok=True)
    stated_delta = _real(_field(ov, "delta", "overall"), "overall.delta", 0.0, 1.0)
    if stated_delta >= 1:
        raise _path_error("overall.delta", f"must be below 1, got {stated_delta}")
    stated_holds = _field(privacy, "guarantee_holds", "")
    if not isinstance(stated_holds, bool):
        raise _path_error("guarantee_holds", f"must be true or false, got {stated_holds!r}")
    why = privacy.get("why_not", [])
    if not isinstance(why, list) or not all(isinstance(w, str) for w in why):
        raise _path_error("why_not", f"must be a list of strings, got {why!r}")
    sound = SELECTIONS[mech] and INITIAL[init] and mech != "nonprivate_topk"
    if stated_holds and not sound:
        raise LedgerError(
            f"guarantee_holds: the file says true, but selection {mech!r} with initial sampling {init!r} "
            "is not an add/remove guarantee"
        )

    from .paper_schedule import ACCOUNTANT as PAPER_ACCOUNTANT
    from .paper_schedule import KIND as PAPER_KIND

    solved_with = (privacy.get("accountant") or {}).get("solved_with", "rdp")
    allowed = (
        (PAPER_ACCOUNTANT,) if kind == PAPER_KIND else ACCOUNTANTS
    )  # the released code solves with its own
    if solved_with not in allowed:
        raise _path_error("accountant.solved_with", f"{solved_with!r} is not one of {list(allowed)}")
    expected = _rebuilt(kind, plan, solved_with)  # after every cheap check: rebuilding solves the schedule
    totals = []
    for name, (path, hist, s_paid, s_train, s_eps, s_delta) in zip(names, stated, strict=True):
        _compare_history(hist, expected[name] if name != "unselected" else (), path)
        if mech == "nonprivate_topk" and name != 0:
            paid = math.inf  # its exact score was read
        else:
            paid = plan.selection_epsilon if name == "unselected" else plan.paid(name)
            paid = max(paid, per_phase * (t if name == "unselected" else name))
        train = group_epsilon(hist, 0.0, delta, accountant)
        total = paid + train
        _exactly(s_paid, paid, f"{path}.selection_epsilon", "its position (selections before it joined)")
        acct = f"{accountant} accountant"  # an accountant's ε is an upper bound: stating more is conservative
        _at_least(s_train, train, f"{path}.training_epsilon", f"its phases ({acct})", REDERIVE_TOL)
        _at_least(s_eps, total, f"{path}.epsilon", f"selection + training ({acct})", REDERIVE_TOL)
        _exactly(s_delta, delta if hist else 0.0, f"{path}.delta", "the plan's δ")
        totals.append(total)

    worst = max(totals)
    _at_least(stated_overall, worst, "overall.epsilon", "the worst group", REDERIVE_TOL)
    _exactly(stated_delta, delta, "overall.delta", "the plan's δ")

    # groups over the target by their own histories, re-derived here (a non-private selection's ∞ has its
    # own reason)
    over = [
        name
        for name, e in zip(names, totals, strict=True)
        if e > plan.epsilon * (1 + REDERIVE_TOL) and not (mech == "nonprivate_topk" and name != 0)
    ]
    holds = sound and not over
    if stated_holds:
        if not holds:
            reasons = ([] if sound else ["the selection or initial sampling is not sound"]) + (
                [f"groups {over} spend more than the target ε = {plan.epsilon}"] if over else []
            )
            raise LedgerError(
                f"guarantee_holds: the file says true, the entries say false ({'; '.join(reasons)})"
            )
        if stated_overall > plan.epsilon * (1 + REL_TOL):
            raise _path_error(
                "guarantee_holds",
                f"true, but overall.epsilon states {stated_overall} > target {plan.epsilon}",
            )
        if why:
            raise _path_error("why_not", "given, but guarantee_holds is true")
    else:
        needed = ([COUPLING] if not (SELECTIONS[mech] and INITIAL[init]) else []) + (
            [NONPRIVATE] if mech == "nonprivate_topk" else []
        )
        missing = [r for r in needed if r not in why]
        if missing or not why:
            raise _path_error(
                "why_not", f"the guarantee does not hold, but why_not omits {missing or 'every reason'}"
            )
        if over and not any("more than the target" in w for w in why):
            raise _path_error("why_not", f"omits that groups {over} spend more than the target")
    return {
        "accounting": ACCOUNTING,
        "target": {"epsilon": plan.epsilon, "delta": delta},
        "entries": len(groups),
        "n_tasks": 1,
        "groups": len(groups),
        "accountant": accountant,
        "nominal_size": n_pool,
        "overall": {"epsilon": worst, "delta": delta},
        "guarantee_holds": stated_holds,
        "leaky_baseline": not sound,
        "published_claim": "published_claim" in privacy,
        "why_not": why,
    }
