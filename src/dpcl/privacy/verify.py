"""The task-ledger verifier: re-check a written ``privacy.json`` against the run's public plan.

A reader of a published result holds the ledger and the plan that produced it (the validated
config: the learner, the label method, the target (ε, δ), the task count and the data set's
nominal size). The verifier trusts nothing else the file says:

- **closed vocabularies**: the top-level keys, the mechanism kinds, each kind's public fields
  and the queries each kind may answer (:data:`KIND_QUERIES`); a query's sensitivity is the
  ledger's (:data:`dpcl.privacy.ledger.QUERY_SENSITIVITY`), and the kind's accounting uses it;
- **the learner's own declaration** (:class:`LedgerSpec`): which training entries each task
  must have (kinds, parts, queries, which tasks) and whether a published claim comes with the
  run — a dropped, duplicated or extra entry is rejected, whatever the stated figures say;
- **the label method's mechanism** from the plan (Label Oracle, a data-independent space, a
  k-TSGD or Laplace release; the non-private twins at ε = ∞);
- **types**: every number finite (ε may be ∞ only where the kind is not private) and of its
  type; counts (steps, k, tasks) exact integers; a boolean is not a number and a number not a
  boolean;
- **the target** from the plan; δ in (0, 1) and below 1/N for the data set's nominal size N;
- **every stated figure recomputed and compared**: each entry's ε and δ (from σ, k, τ or
  (σ, q, steps) by the entry's accountant), the per-task ``composed`` block, each disjoint
  part's budget, the ``overall`` block, a learner's own summary block (its ``summary_check``); a figure that states *less* than its
  parameters spend is rejected (an ε or δ is a bound: stating more is conservative and allowed);
  a restated parameter (a run's one Gaussian σ, a query's sensitivity, a buffer's reread count) must
  equal its entries' or the plan's in either direction;
- ``private``, ``leaky_baseline`` and ``guarantee_holds`` recomputed; a hyperparameter choice on
  private data that is not explicitly accounted must be listed under ``unaccounted_uses``;
- a published claim's verdicts (:mod:`dpcl.privacy.verdict`) consistent with their bounds.

What it cannot do: it proves that the public parameters are enough for the stated guarantee,
not that the code used them — the empirical audits (:mod:`dpcl.audits`) test that.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .accounting import ADJACENCY, REDERIVE_TOL, REL_TOL, Budget, PrivacyBudgetExceeded
from .ledger import (
    DEFAULT_QUERY,
    KIND_FIELD_TYPES,
    KIND_QUERIES,
    LABEL_SPACE_KINDS,
    PUBLIC_FIELDS,
    TRAINING_KINDS,
    Ledger,
    LedgerError,
)
from .ledger_fields import at_least, boolean, budget, integer, mapping, number, string, where
from .verify_summaries import check_claim

#: top-level keys of a task ledger
TOP_LEVEL = frozenset(
    {
        "adjacency",
        "target",
        "private",
        "guarantee_holds",
        "leaky_baseline",
        "unaccounted_uses",
        "n_tasks",
        "tasks",
        "overall",
        "published_claim",
        "hyperparameters",
        "sigma",
        "provenance",
    }
)
_INT_FIELDS = frozenset({"steps", "steps_per_task", "later_tasks", "k", "dimension"})
_POSITIVE = frozenset({"sigma", "noise_multiplier", "tau", "clip", "normaliser"})
_STRINGS = frozenset({"mechanism", "data", "note", "part", "query", "accountant", "block_choice"})
ACCOUNTANTS = frozenset({"prv", "rdp", "pld"})


@dataclass(frozen=True)
class EntrySpec:
    """One training entry a learner writes per task: its private kind (at finite ε) and its
    non-private twin (at ε = ∞), the disjoint part of D_t it reads, the query it answers, and
    whether every task has it or every task but the last (a buffer the last task never fills)."""

    kind: str
    part: str | None = None
    query: str | None = None
    nonprivate: str = "nonprivate"
    all_but_last: bool = False
    #: how a buffer entry's block is chosen for a reread ("uniform": [Desai2021]'s CalGref); None: the
    #: whole buffer is read at every step. The learner's word, never the entry's: an entry that
    #: claims a block choice its learner does not make would understate its rereads.
    block_choice: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in TRAINING_KINDS or self.nonprivate not in TRAINING_KINDS:
            raise ValueError(f"unknown training kind {self.kind!r} / {self.nonprivate!r}")


@dataclass(frozen=True)
class LedgerSpec:
    """What a learner's ledger holds per task, declared by the learner's module."""

    training: tuple[EntrySpec, ...]
    #: a published method: privacy.json carries ``published_claim`` at finite ε
    published_claim: bool = False
    #: the top-level key of a learner's own summary block in privacy.json (required at finite ε), and
    #: ``summary_check(block, ledger, total) -> None``, which recomputes it from the verified ledger
    #: and raises LedgerError; a file with the block is rejected without a plan that names its check
    summary: str | None = None
    summary_check: Callable[[Any, Ledger, Budget], None] | None = None
    #: recomputes a published claim from the ledger's public parameters: (claim, tasks, n_tasks) -> None,
    #: raising LedgerError; None where the claim's bounds cannot be recomputed (an empirical audit)
    claim_check: Callable[[dict, dict, int], None] | None = None

    def __post_init__(self) -> None:
        if (self.summary is None) != (self.summary_check is None):
            raise ValueError("a learner's own summary block needs its check, and a check its block")


@dataclass(frozen=True)
class Plan:
    """The public plan a ledger is checked against (from the validated config)."""

    target: Budget
    n_tasks: int
    spec: LedgerSpec | None = None
    label_method: str | None = None
    nominal_size: float | None = None


# ----------------------------------------------------------------------------- entries


def _check_finite(obj: Any, path: str = "", key: str = "") -> None:
    """No NaN and no −∞ anywhere in the file; +∞ only in an ε or a bound (a non-private figure)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_finite(v, f"{path}.{k}" if path else str(k), str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_finite(v, f"{path}[{i}]", key)
    elif isinstance(obj, float) and not math.isfinite(obj):
        if math.isnan(obj) or obj < 0 or not ("epsilon" in key or "bound" in key):
            raise LedgerError(f"{where(path)}: expected a finite number, got {obj!r}")


def _check_entry_types(entry: dict, path: str) -> None:
    """Every field of an entry of its expected type (the kind's closed field list is checked by
    :func:`dpcl.privacy.ledger.verify_mechanism`)."""
    kind = entry.get("mechanism")
    if kind not in PUBLIC_FIELDS:
        raise LedgerError(f"{path}: unknown mechanism kind {kind!r}; allowed: {sorted(PUBLIC_FIELDS)}")
    own = KIND_FIELD_TYPES.get(kind, {})  # a registered kind's own fields (dpcl.privacy.ledger.register_kind)
    for key, value in entry.items():
        where = f"{path}.{key}"
        if key in _STRINGS:
            string(value, where)
        elif key == "epsilon":
            number(value, where, allow_inf=True)
        elif key == "sensitivity":
            if not isinstance(value, str):
                number(value, where)
        elif key in _INT_FIELDS or own.get(key) == "integer":
            integer(value, where, minimum=1 if key in ("steps", "later_tasks", "steps_per_task", "k") else 0)
        elif key == "accountant_history":
            if not isinstance(value, list):
                raise LedgerError(f"{where}: expected a list")
        elif key == "dp_event":  # compared whole with the event the entry's parameters give (_add_entry)
            mapping(value, where)
        elif key in _POSITIVE or own.get(key) == "positive":
            v = number(value, where)
            if v < 0 or (v == 0 and kind != "nonprivate"):
                raise LedgerError(f"{where}: expected a positive number, got {value!r}")
        else:
            number(value, where)
    query = entry.get("query")
    if query not in KIND_QUERIES[kind]:
        allowed = sorted(q for q in KIND_QUERIES[kind] if q is not None)
        raise LedgerError(
            f"{path}.query: a {kind} entry cannot answer {query!r}; allowed: {allowed or 'none'}"
        )
    if "accountant" in entry and entry["accountant"] not in ACCOUNTANTS:
        raise LedgerError(f"{path}.accountant: {entry['accountant']!r} is not one of {sorted(ACCOUNTANTS)}")
    if kind == "nonprivate" and number(entry.get("delta", 0.0), f"{path}.delta") != 0:
        raise LedgerError(f"{path}.delta: a nonprivate entry gives no guarantee and states δ = 0")


def _label_kinds(label_method: str | None, private: bool) -> frozenset[str]:
    """The label-space mechanism kinds the plan's label method may write."""
    if label_method is None:
        return frozenset(LABEL_SPACE_KINDS)
    from .label_methods import parse_label_method

    method = parse_label_method(label_method)
    if method.kind == "oracle":
        return frozenset({"label_oracle"})
    if method.kind in ("base", "public"):
        return frozenset({"data_independent"})
    if not private:
        return frozenset({"label_oracle_nonprivate"})
    return frozenset({"laplace_label_release" if method.mechanism == "laplace" else "ktsgd_label_release"})


def _check_declared(entries: list[dict], t: int, plan: Plan, private: bool) -> None:
    """Task t's entries are exactly what the learner declares and the label method writes."""
    path = f"tasks[{t}]"
    labels = [e for e in entries if e["mechanism"] in LABEL_SPACE_KINDS]
    want_label = _label_kinds(plan.label_method, private)
    if len(labels) != 1 or labels[0]["mechanism"] not in want_label:
        got = [e["mechanism"] for e in labels]
        raise LedgerError(
            f"{path}: label-space entries {got}; the plan's label method {plan.label_method!r} writes exactly "
            f"one of {sorted(want_label)}"
        )
    if plan.spec is None:
        if not any(e["mechanism"] in TRAINING_KINDS for e in entries):
            raise LedgerError(f"{path}: no training entry")
        return

    def key(kind: str, part: str | None, query: str | None, block: str | None) -> tuple:
        # a non-private entry's query and block choice are informational (no guarantee to check)
        if kind == "nonprivate":
            return (kind, part or "", "", "")
        return (kind, part or "", query or _default_query(kind) or "", block or "")

    want = sorted(
        key(s.kind if private else s.nonprivate, s.part, s.query, s.block_choice)
        for s in plan.spec.training
        if not (s.all_but_last and t == plan.n_tasks - 1)
    )
    got = sorted(
        key(e["mechanism"], e.get("part"), e.get("query"), e.get("block_choice"))
        for e in entries
        if e["mechanism"] not in LABEL_SPACE_KINDS
    )
    if want != got:
        raise LedgerError(
            f"{path}: training entries {got} (kind, part, query, block choice), but the learner declares {want}"
        )


def _default_query(kind: str) -> str | None:
    return DEFAULT_QUERY.get(kind)


# ----------------------------------------------------------------------------- blocks


def _check_hyperparameters(hp: Any, unaccounted: list) -> None:
    hp = mapping(hp, "hyperparameters")
    if "private_data_used" not in hp:
        raise LedgerError("hyperparameters: no 'private_data_used' (true or false)")
    used = boolean(hp["private_data_used"], "hyperparameters.private_data_used")
    if "chosen_by" in hp:
        string(hp["chosen_by"], "hyperparameters.chosen_by")
    accounted = boolean(hp["accounted"], "hyperparameters.accounted") if "accounted" in hp else None
    if used and accounted is not True and not unaccounted:
        raise LedgerError(
            "hyperparameters: chosen on private data and not stated as accounted ('accounted': true), but no "
            "unaccounted_uses listed"
        )


# ----------------------------------------------------------------------------- the verifier


def verify_task_ledger(privacy: Any, plan: Plan | None = None) -> dict[str, Any]:
    """Verify a continual-learning ``privacy.json`` against ``plan`` (see the module docstring).

    Without a plan the file's own target and task count are used (a consistency check only:
    a reader should pass the plan). Returns a summary; raises :class:`LedgerError` (malformed,
    inconsistent or not what the plan says) or :class:`PrivacyBudgetExceeded` (a stated figure
    below what its parameters spend), naming the field. The checks run in this order, each its own
    function, and the first that fails names the field.
    """
    privacy = mapping(privacy, "")
    _check_shape(privacy, own_block=plan.spec.summary if plan is not None and plan.spec is not None else None)
    plan = _check_target(privacy, plan)
    target = plan.target
    unaccounted = _unaccounted_uses(privacy)
    claim = privacy.get("published_claim")
    ledger = Ledger(target, plan.n_tasks, claim=claim, unaccounted=list(unaccounted))
    for i, task in enumerate(privacy["tasks"]):
        _check_task(ledger, task, i, plan)
    total = ledger.check()
    _check_overall(privacy, total, target)
    if "hyperparameters" not in privacy:
        raise LedgerError("hyperparameters: missing (how the hyperparameters were chosen)")
    _check_hyperparameters(privacy["hyperparameters"], unaccounted)
    _check_learner_blocks(privacy, plan, claim)
    if claim is not None:
        check_claim(claim, total, ledger)
        if plan.spec is not None and plan.spec.claim_check is not None and target.private:
            plan.spec.claim_check(claim, ledger.tasks, plan.n_tasks)
    if plan.spec is not None and plan.spec.summary_check is not None and plan.spec.summary in privacy:
        plan.spec.summary_check(privacy[plan.spec.summary], ledger, total)
    if "sigma" in privacy:
        _check_sigma(privacy["sigma"], ledger)
    holds, leaky = _check_flags(privacy, ledger)
    return {
        "target": {"epsilon": target.epsilon, "delta": target.delta},
        "n_tasks": plan.n_tasks,
        "published_claim": claim is not None,
        "entries": sum(len(v) for v in ledger.tasks.values()),
        "overall": {"epsilon": total.epsilon, "delta": total.delta},
        "guarantee_holds": holds,
        "leaky_baseline": leaky,
        "unaccounted_uses": len(ledger.unaccounted),
        "checked_against": "plan" if plan.spec is not None else "file",
    }


def _check_shape(privacy: dict, own_block: str | None) -> None:
    """Only finite numbers (∞ only in an ε or a bound), the closed top-level keys (and the learner's own
    summary block, ``own_block``, which only a plan's learner names), every required key, and the
    adjacency this verifier checks."""
    _check_finite(privacy)
    allowed = TOP_LEVEL | ({own_block} if own_block else set())
    extra = sorted(set(privacy) - allowed)
    if extra:
        raise LedgerError(
            f"unknown top-level keys {extra}; a task ledger has {sorted(allowed)} (a learner's own block is "
            "checked against the plan's learner: pass it)"
        )
    for key in ("target", "tasks", "overall", "n_tasks", "guarantee_holds", "leaky_baseline", "private"):
        if key not in privacy:
            raise LedgerError(f"not a task ledger: no {key!r} key")
    if privacy.get("adjacency") != ADJACENCY:
        raise LedgerError(
            f"adjacency: the file says {privacy.get('adjacency')!r}; this verifier checks {ADJACENCY!r}"
        )


def _check_target(privacy: dict, plan: Plan | None) -> Plan:
    """The stated target, privacy flag and task count against the plan's (the file's own without a
    plan); δ in (0, 1) and below 1/N for a private run, 0 for a non-private one. Returns the plan."""
    stated_target = budget(privacy["target"], "target")
    n_stated = integer(privacy["n_tasks"], "n_tasks", minimum=1)
    if plan is None:
        plan = Plan(target=stated_target, n_tasks=n_stated)
    target = plan.target
    if stated_target != target:
        raise LedgerError(
            f"target: the file states (ε={stated_target.epsilon}, δ={stated_target.delta}), but the config's is "
            f"(ε={target.epsilon}, δ={target.delta})"
        )
    if target.private:
        if not 0 < target.delta < 1:
            raise LedgerError(f"target.delta: a private run needs 0 < δ < 1, got {target.delta}")
        if plan.nominal_size is not None and not target.delta < 1 / plan.nominal_size:
            raise LedgerError(
                f"target.delta: δ = {target.delta} is not below 1/N = {1 / plan.nominal_size:.3g} for the data "
                f"set's nominal size N = {plan.nominal_size:g}"
            )
    elif target.delta != 0:
        raise LedgerError(f"target.delta: a non-private run states δ = 0, got {target.delta}")
    if boolean(privacy["private"], "private") != target.private:
        raise LedgerError(f"private: the file says {privacy['private']}, the target says {target.private}")
    if n_stated != plan.n_tasks:
        raise LedgerError(f"n_tasks: the file says {n_stated}, the plan has {plan.n_tasks} tasks")
    tasks = privacy["tasks"]
    if not isinstance(tasks, list) or len(tasks) != plan.n_tasks:
        raise LedgerError(f"tasks: expected a list of {plan.n_tasks} tasks")
    return plan


def _unaccounted_uses(privacy: dict) -> list:
    """``unaccounted_uses``: absent, or a non-empty list of objects."""
    unaccounted = privacy.get("unaccounted_uses", [])
    if not isinstance(unaccounted, list) or ("unaccounted_uses" in privacy and not unaccounted):
        raise LedgerError("unaccounted_uses: expected a non-empty list when present")
    for i, u in enumerate(unaccounted):
        mapping(u, f"unaccounted_uses[{i}]")
    return unaccounted


def _check_task(ledger: Ledger, task: Any, i: int, plan: Plan) -> None:
    """Task ``i``: in order, its entries added to ``ledger`` (which recomputes each one's figures), the
    entries the learner and the label method declare, and its composed and per-part budgets."""
    task = mapping(task, f"tasks[{i}]")
    t = integer(task.get("task"), f"tasks[{i}].task")
    if t != i:
        raise LedgerError(f"tasks[{i}].task: expected task {i} (tasks in order, each once), got {t}")
    entries = task.get("mechanisms")
    if not isinstance(entries, list) or not entries:
        raise LedgerError(f"tasks[{i}].mechanisms: expected a non-empty list")
    for j, entry in enumerate(entries):
        _add_entry(ledger, t, entry, f"tasks[{i}].mechanisms[{j}]")
    _check_declared(ledger.tasks[t], t, plan, plan.target.private)
    composed = budget(task.get("composed"), f"tasks[{i}].composed")
    b = ledger.task_budget(t)
    at_least(composed.epsilon, b.epsilon, f"tasks[{i}].composed.epsilon")
    at_least(composed.delta, b.delta, f"tasks[{i}].composed.delta")
    _check_parts(ledger, t, task.get("parts"), i)
    extra = sorted(set(task) - {"task", "mechanisms", "composed", "parts"})
    if extra:
        raise LedgerError(f"tasks[{i}]: unknown keys {extra}")


def _add_entry(ledger: Ledger, t: int, entry: Any, path: str) -> None:
    """One entry: its field types, then the ledger's own accounting of its parameters; an
    accountant's stated output (``delta_achieved``, ``epsilon_accounted``) and a target it states
    must not understate what the ledger re-derives."""
    entry = mapping(entry, path)
    _check_entry_types(entry, path)
    raw = {k: v for k, v in entry.items() if k not in ("delta_achieved", "epsilon_accounted", "dp_event")}
    try:
        ledger.add(t, raw)
    except (LedgerError, PrivacyBudgetExceeded, KeyError, TypeError, ValueError) as e:
        cls = type(e) if isinstance(e, (LedgerError, PrivacyBudgetExceeded)) else LedgerError
        raise cls(f"{path} ({entry.get('mechanism')!r}): {e}") from None
    derived = ledger.tasks[t][-1]
    if entry.get("dp_event") != derived["dp_event"]:  # a restated mechanism: equal in either direction
        raise LedgerError(
            f"{path}.dp_event: states {entry.get('dp_event')!r}, but the entry's parameters give the "
            f"dp_accounting event {derived['dp_event']!r}"
        )
    for key in ("delta_achieved", "epsilon_accounted"):  # an accountant's output, re-derived here
        if key in entry:
            at_least(
                number(entry[key], f"{path}.{key}"),
                float(derived[key]),
                f"{path}.{key}",
                rel_tol=REDERIVE_TOL,
            )
    if "epsilon_target" in entry and "epsilon_accounted" in derived:
        at_least(
            number(entry["epsilon_target"], f"{path}.epsilon_target"),
            float(derived["epsilon_accounted"]),
            f"{path}.epsilon_target",
            rel_tol=REDERIVE_TOL,
        )


def _check_parts(ledger: Ledger, t: int, stated_parts: Any, i: int) -> None:
    """A task with disjoint parts states each part's budget (and only those parts); one without states none."""
    parts = ledger.part_budgets(t)
    if parts:
        stated_parts = mapping(stated_parts, f"tasks[{i}].parts")
        names = set(stated_parts) - {"rule"}
        if names != set(parts):
            raise LedgerError(
                f"tasks[{i}].parts: lists {sorted(names)}, the entries have parts {sorted(parts)}"
            )
        for p, pb in parts.items():
            sp = budget(stated_parts[p], f"tasks[{i}].parts.{p}")
            at_least(sp.epsilon, pb.epsilon, f"tasks[{i}].parts.{p}.epsilon")
            at_least(sp.delta, pb.delta, f"tasks[{i}].parts.{p}.delta")
    elif stated_parts is not None:
        raise LedgerError(f"tasks[{i}].parts: the entries have no disjoint parts")


def _check_overall(privacy: dict, total: Budget, target: Budget) -> None:
    """The ``overall`` block must not understate the composition of every task."""
    overall = budget(privacy["overall"], "overall")
    at_least(overall.epsilon, total.epsilon, "overall.epsilon")
    at_least(overall.delta, total.delta, "overall.delta")
    if target.private and not math.isinf(overall.epsilon) and overall.delta > 1:
        raise LedgerError("overall.delta above 1")


def _check_learner_blocks(privacy: dict, plan: Plan, claim: Any) -> None:
    """The blocks the learner declares (:class:`LedgerSpec`): a published claim where it is a published
    method (at finite ε), its own summary block where it declares one (at finite ε); no claim where it
    declares none (an undeclared block is an unknown top-level key, :func:`_check_shape`)."""
    spec = plan.spec
    if spec is None:
        return
    if spec.published_claim and plan.target.private and claim is None:
        raise LedgerError(
            "published_claim: the learner is a published method; its claim must be in the ledger"
        )
    if not spec.published_claim and claim is not None:
        raise LedgerError("published_claim: the learner declares no published claim")
    if spec.summary is not None and plan.target.private and spec.summary not in privacy:
        raise LedgerError(f"{spec.summary}: the learner's summary block is missing")


def _check_sigma(stated: Any, ledger: Ledger) -> None:
    """A run's one Gaussian σ (top-level ``sigma``): its entries' own, restated (a parameter, not a bound: equal either way)."""
    sigma = number(stated, "sigma")
    used = [
        float(e["sigma"])
        for es in ledger.tasks.values()
        for e in es
        if e["mechanism"] in ("gaussian", "nonprivate") and "sigma" in e
    ]
    if not used:
        raise LedgerError(f"sigma: the file states σ = {sigma}, but no entry lists a σ")
    if any(sigma > s * (1 + REL_TOL) for s in used):
        raise PrivacyBudgetExceeded(f"sigma: the file states σ = {sigma}, its entries use σ = {min(used)}")
    if any(sigma < s * (1 - REL_TOL) for s in used):  # less noise than was added: still not the run's
        raise LedgerError(f"sigma: the file states σ = {sigma}, its entries use σ = {max(used)}")


def _check_flags(privacy: dict, ledger: Ledger) -> tuple[bool, bool]:
    """``leaky_baseline`` and ``guarantee_holds`` as the entries say; returns (holds, leaky)."""
    leaky = ledger.leaky_baseline
    if boolean(privacy["leaky_baseline"], "leaky_baseline") != leaky:
        raise LedgerError(
            f"leaky_baseline: the file says {privacy['leaky_baseline']}, the entries say {leaky}"
        )
    holds = ledger.holds() and not leaky and not ledger.unaccounted
    if boolean(privacy["guarantee_holds"], "guarantee_holds") != holds:
        raise LedgerError(
            f"guarantee_holds: the file says {privacy['guarantee_holds']}, the entries say {holds}"
        )
    return holds, leaky


def verify_privacy(
    privacy: dict[str, Any],
    target: Budget | None = None,
    n_tasks: int | None = None,
    *,
    plan: Any = None,
) -> dict:
    """Re-verify a written task ledger (``privacy.json``, :func:`verify_task_ledger`) against ``plan`` (a
    :class:`dpcl.privacy.verify.Plan`), or, without one, against ``target``/``n_tasks`` (else the file's
    own). Raises :class:`LedgerError` or :class:`PrivacyBudgetExceeded` naming the field. A ledger of
    another accounting (a per-record group ledger, ``accounting: per_record_groups``) is refused: its
    verifier lives with the system that writes it (``dpcl.active.group_ledger.verify_group_ledger``)."""
    privacy = mapping(privacy, "")
    if privacy.get("accounting") is not None:  # a task ledger states none
        raise LedgerError(
            f"accounting: {privacy.get('accounting')!r} is not a task ledger; verify it with the verifier of "
            "the system that wrote it"
        )
    if plan is None:
        if target is None:
            target = budget(privacy.get("target"), "target")
        if n_tasks is None:
            n_tasks = integer(privacy.get("n_tasks"), "n_tasks", minimum=1)
        plan = Plan(target=target, n_tasks=n_tasks)
    return verify_task_ledger(privacy, plan)
