"""The per-run privacy ledger and its verifier ([LabelSpace] Sec. 3-4, App. B).

A run's **release** is its released outputs (label spaces O_t, model parameters) plus its
``privacy.json``. The ledger is the part of the release that says which mechanism touched
each task's data, and it may hold only **public parameters** of those mechanisms: what the
config and the accountant determine, never a count, size or statistic of the private data.
Each mechanism kind has a closed list of fields (:data:`PUBLIC_FIELDS`); :meth:`Ledger.add`
refuses anything else, and :func:`split_public` is how a learner's raw training record is
divided into its ledger entry and its non-private diagnostics.

The ledger *proves* rather than repeats:

- every entry is re-derived from its own public parameters (the Gaussian δ from σ, the
  k-TSGD δ from k, DP-SGD's ε from (σ, q, steps) by the accountant);
- sensitivities come from the mechanism and the query it answers (:data:`QUERY_SENSITIVITY`),
  never from the entry: an entry that states another sensitivity is rejected;
- a non-private entry must say ε = ∞, a data-independent one ε = δ = 0;
- every entry carries its mechanism as a ``dp_accounting`` event, derived from the parameters just
  checked (``dp_event``, :mod:`dpcl.privacy.dp_events`), so dp_accounting's own accountants can
  compose the ledger;
- a memory buffer's reread count must be the run's own: (T − 1 − t) later tasks for task t;
- every task 0..T−1 has exactly one label-space entry and at least one training entry;
- the target comes from the validated config, not from any file the run read.

:func:`dpcl.privacy.verify.verify_privacy` re-checks a written ``privacy.json`` from its parameters alone (the
``dpcl ledger verify`` command), so a reader of a published result can check it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from .accounting import ADJACENCY, REDERIVE_TOL, REL_TOL, Budget, PrivacyBudgetExceeded
from .dp_events import entry_event
from .errors import LedgerError  # its own module (shared with the group ledgers); importable from here too
from .gaussian import gaussian_delta
from .label_release import laplace_delta, tsgd_delta

#: Mechanisms that decide a task's output label space O_t (exactly one per task).
LABEL_SPACE_KINDS = {
    "ktsgd_label_release",
    "laplace_label_release",
    "label_oracle",
    "label_oracle_nonprivate",
    "data_independent",
}
#: Mechanisms that train on a task's data (at least one per task); a learner adds its own kinds with
#: :func:`register_kind`.
TRAINING_KINDS = {"gaussian", "dpsgd", "dpsgd_buffer", "nonprivate"}
#: Mechanisms that are not DP by construction and are run as baselines: the entry says ε = ∞ and the
#: run's ledger says guarantee_holds: false (the Label Oracle, Prop. 4.1, and the kinds a learner
#: registers as leaky).
LEAKY_KINDS = {"label_oracle"}
#: Kinds that give no privacy: the entry says ε = ∞ (the non-private twins and the leaky baselines).
NON_PRIVATE_KINDS = {"nonprivate", "label_oracle_nonprivate", "label_oracle"}

#: L2 (Gaussian) or L1 (count) sensitivity of each query a mechanism may answer, under
#: add/remove adjacency. The query is named by the entry; its sensitivity is the ledger's.
QUERY_SENSITIVITY: dict[str, float] = {
    # Σ f(x)/‖f(x)‖ per label: one individual changes one sum by a unit vector (Alg. 1, Eq. 9)
    "class_sums_of_unit_norm_features": 1.0,
    # |C_t(y)| per label: one individual changes one count by one (Eq. 7, Thm C.3)
    "label_counts": 1.0,
    # Σ clip_C(g_i) over a Poisson sample: one individual changes it by ≤ C; noise std σ·C
    "clipped_gradient_sums": 1.0,  # in units of the clipping bound C
    # (Σ (e_y − 1/K) zᵀ, upper triangle of Σ z zᵀ) with ‖z‖ ≤ 1: √(1 + 1) (a quadratic loss's Taylor coefficients)
    "taylor_coefficients_projected_features": math.sqrt(2.0),
}
DEFAULT_QUERY = {
    "ktsgd_label_release": "label_counts",
    "laplace_label_release": "label_counts",
    "dpsgd": "clipped_gradient_sums",
    "dpsgd_buffer": "clipped_gradient_sums",
}

_COMMON = {
    "mechanism",
    "epsilon",
    "delta",
    "data",
    "note",
    "part",
    "query",
    "sensitivity",
    "delta_achieved",
    "epsilon_accounted",
    "epsilon_target",
    "dp_event",
}
_DPSGD = {
    "noise_multiplier",
    "sample_rate",
    "steps",
    "accountant",
    "clip",
    "normaliser",
    "accountant_history",
}
#: The public parameters each mechanism kind may record; anything else is not a ledger field.
PUBLIC_FIELDS: dict[str, frozenset[str]] = {
    "gaussian": frozenset(_COMMON | {"sigma", "dimension"}),
    "ktsgd_label_release": frozenset(_COMMON | {"k", "p"}),
    "laplace_label_release": frozenset(_COMMON | {"tau"}),
    "dpsgd": frozenset(_COMMON | _DPSGD),
    "dpsgd_buffer": frozenset(_COMMON | _DPSGD | {"steps_per_task", "later_tasks", "block_choice"}),
    "nonprivate": frozenset(_COMMON | _DPSGD | {"sigma", "dimension", "steps_per_task", "later_tasks"}),
    "label_oracle": frozenset(_COMMON),
    "label_oracle_nonprivate": frozenset(_COMMON),
    "data_independent": frozenset(_COMMON),
}


#: the queries each mechanism kind may answer (None: the kind names no query)
KIND_QUERIES: dict[str, frozenset[str | None]] = {
    "gaussian": frozenset({"class_sums_of_unit_norm_features", "taylor_coefficients_projected_features"}),
    "dpsgd": frozenset({None, "clipped_gradient_sums"}),
    "dpsgd_buffer": frozenset({None, "clipped_gradient_sums"}),
    "ktsgd_label_release": frozenset({None, "label_counts"}),
    "laplace_label_release": frozenset({None, "label_counts"}),
    "nonprivate": frozenset({None, *QUERY_SENSITIVITY}),
    "label_oracle": frozenset({None}),
    "label_oracle_nonprivate": frozenset({None}),
    "data_independent": frozenset({None}),
}
#: the type of each field a registered kind adds ("integer" or "positive"; other fields are numbers)
KIND_FIELD_TYPES: dict[str, dict[str, str]] = {}


@dataclass(frozen=True)
class MechanismKind:
    """A training mechanism a learner brings to the ledger, registered with :func:`register_kind`.

    Only a kind that is **not DP** can be registered (``private=False``): its entry says ε = ∞, its
    ``dp_event`` is ``NonPrivateDpEvent``, and, if ``leaky``, the run's ledger says
    ``guarantee_holds: false``. A private mechanism needs the ledger's own accounting (a re-derivation
    from its parameters, a sensitivity the ledger knows, a dp_accounting event), which is written here,
    not registered.
    """

    name: str
    #: the public parameters it records beyond every kind's (``epsilon``, ``delta``, ``note``, …), with
    #: their types: "integer", "positive" or "number"
    fields: dict[str, str]
    private: bool = False
    leaky: bool = True

    def __post_init__(self) -> None:
        if self.private:
            raise ValueError(
                f"mechanism kind {self.name!r}: only a kind that is not DP can be registered; a private "
                "mechanism is accounted by the ledger itself (dpcl.privacy.ledger.verify_mechanism)"
            )
        bad = sorted(k for k, v in self.fields.items() if v not in ("integer", "positive", "number"))
        if bad:
            raise ValueError(
                f"mechanism kind {self.name!r}: fields {bad} need a type: integer, positive or number"
            )


def register_kind(kind: MechanismKind) -> None:
    """Add a learner's non-DP training kind to the ledger's vocabulary (idempotent for the same kind).

    A learner's module calls it at import, so the kind is known wherever the learner runs or its
    ``LEDGER_SPEC`` is read (which imports the module); a built-in kind cannot be replaced.
    """
    fields = frozenset(_COMMON | set(kind.fields))
    if kind.name in PUBLIC_FIELDS:
        if PUBLIC_FIELDS[kind.name] == fields and KIND_FIELD_TYPES.get(kind.name) == kind.fields:
            return
        raise ValueError(f"mechanism kind {kind.name!r} is already registered with other fields")
    PUBLIC_FIELDS[kind.name] = fields
    KIND_QUERIES[kind.name] = frozenset({None})
    KIND_FIELD_TYPES[kind.name] = dict(kind.fields)
    TRAINING_KINDS.add(kind.name)
    NON_PRIVATE_KINDS.add(kind.name)
    if kind.leaky:
        LEAKY_KINDS.add(kind.name)


def split_public(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ledger entry, diagnostics) of a raw mechanism record: the kind's public fields, and the
    rest (counts, clipped fractions, batch sizes, timings) for the run's non-private diagnostics."""
    kind = entry.get("mechanism")
    if kind not in PUBLIC_FIELDS:
        raise LedgerError(f"unknown mechanism kind {kind!r}; allowed: {sorted(PUBLIC_FIELDS)}")
    allowed = PUBLIC_FIELDS[kind]
    return (
        {k: v for k, v in entry.items() if k in allowed},
        {k: v for k, v in entry.items() if k not in allowed},
    )


def _num(v: Any) -> float:
    return math.inf if v in ("inf", math.inf) else float(v)


@functools.lru_cache(maxsize=256)
def _dpsgd_epsilon(sigma: float, sample_rate: float, steps: int, delta: float, accountant: str) -> float:
    """ε of a DP-SGD run recomputed by its accountant (cached: runs share settings); "pld" is the
    pessimistic PLD (:func:`dpcl.privacy.pld.epsilon_upper`)."""
    if accountant == "pld":
        from .pld import epsilon_upper

        return epsilon_upper([(sigma, sample_rate, steps)], delta)
    from .sgd_accounting import epsilon as sgd_epsilon

    return sgd_epsilon(sigma, sample_rate, steps, delta, accountant)


#: How a dpsgd_buffer entry's block is chosen for a reread: "uniform" = [Desai2021]'s CalGref, one of the
#: τ blocks M_0..M_{τ−1} drawn uniformly at every step of task τ (probability 1/τ for this block)
BLOCK_CHOICES = ("uniform",)


def _uniform_block_epsilon(
    entry: dict[str, Any], task: int | None, n_tasks: int | None, delta: float
) -> float:
    """ε of block M_t chosen with probability 1/τ at each of steps_per_task steps of every later task
    τ = t+1..T−1 and then read at sample_rate: pessimistic PLD of that history (choice revealed,
    :mod:`dpcl.privacy.pld`). τ comes from the entry's task index and the run's task count."""
    if entry.get("block_choice") not in BLOCK_CHOICES:
        raise LedgerError(
            f"block_choice must be one of {list(BLOCK_CHOICES)}, got {entry.get('block_choice')!r}"
        )
    if entry.get("accountant") != "pld":
        raise LedgerError(
            f"a block_choice 'uniform' entry is accounted by 'pld', not {entry.get('accountant')!r}"
        )
    if task is None or n_tasks is None:
        raise LedgerError("a block_choice 'uniform' entry needs its task index and the run's n_tasks")
    from .pld import epsilon_upper

    sigma, q, per_task = entry["noise_multiplier"], entry["sample_rate"], entry["steps_per_task"]
    if isinstance(per_task, bool) or not isinstance(per_task, int):
        raise LedgerError(f"steps_per_task must be an exact integer, got {per_task!r}")
    # pld checks the rest: numbers (not bools, not strings), finite, σ > 0, q in [0, 1]
    return epsilon_upper([(sigma, q, per_task, 1.0 / tau) for tau in range(task + 1, n_tasks)], delta)


def _check_sensitivity(kind: str, entry: dict[str, Any]) -> float:
    """The query's sensitivity (from :data:`QUERY_SENSITIVITY`); the entry's own claim must agree."""
    query = entry.get("query", DEFAULT_QUERY.get(kind))
    if query not in QUERY_SENSITIVITY:
        raise LedgerError(
            f"{kind} entry answers query {query!r}, whose sensitivity the ledger does not know; "
            f"known queries: {sorted(QUERY_SENSITIVITY)}"
        )
    derived = QUERY_SENSITIVITY[query]
    stated = entry.get("sensitivity")
    if isinstance(stated, (int, float)) and not math.isclose(float(stated), derived, rel_tol=1e-12):
        raise LedgerError(
            f"{kind} entry states sensitivity {stated}, but query {query!r} has sensitivity "
            f"{derived} under add/remove adjacency"
        )
    return derived


def verify_mechanism(
    entry: dict[str, Any], task: int | None = None, n_tasks: int | None = None
) -> dict[str, Any]:
    """Check one entry from its public parameters; return the derived values to store with it.

    Raises :class:`PrivacyBudgetExceeded` when the parameters give less privacy than claimed
    and :class:`LedgerError` when the entry is malformed or cannot be checked. ``task`` and
    ``n_tasks`` (the run's task count) let a buffer entry's reread count be checked.
    """
    kind = entry.get("mechanism")
    if kind not in PUBLIC_FIELDS:
        raise LedgerError(f"unknown mechanism kind {kind!r}; allowed: {sorted(PUBLIC_FIELDS)}")
    extra = sorted(set(entry) - PUBLIC_FIELDS[kind])
    if extra:
        raise LedgerError(
            f"{kind} entry has fields {extra} that are not public parameters of the mechanism "
            "(counts and statistics of the data belong in the run's diagnostics)"
        )
    try:
        eps, delta = _num(entry["epsilon"]), float(entry["delta"])
    except (KeyError, TypeError, ValueError) as e:
        raise LedgerError(f"{kind} entry needs numeric 'epsilon' and 'delta' ({e})") from None
    if not (eps >= 0 and 0 <= delta <= 1):
        raise LedgerError(f"{kind} entry has ε = {eps}, δ = {delta}: need ε ≥ 0 and 0 ≤ δ ≤ 1")
    derived: dict[str, Any] = {}
    achieved: float | None = None
    if kind in NON_PRIVATE_KINDS:
        if not math.isinf(eps):
            raise LedgerError(f"a {kind} entry gives no privacy and must say ε = inf, not ε = {eps}")
    elif kind == "data_independent":
        if eps != 0 or delta != 0:
            raise LedgerError(
                f"a data_independent entry reads no data and must say ε = δ = 0, not ({eps}, {delta})"
            )
    elif math.isinf(eps):
        raise LedgerError(f"a {kind} entry with ε = inf must be recorded as 'nonprivate'")
    elif kind == "gaussian":
        sens = _check_sensitivity(kind, entry)
        achieved = gaussian_delta(float(entry["sigma"]), eps, sens)
        derived["sensitivity"] = sens
    elif kind == "ktsgd_label_release":
        _check_sensitivity(kind, entry)
        k = int(entry["k"])
        if "p" in entry and not math.isclose(float(entry["p"]), -math.expm1(-eps), rel_tol=1e-9):
            raise LedgerError(f"k-TSGD entry has p = {entry['p']}, but p = 1 − e^(−ε) = {-math.expm1(-eps)}")
        achieved = tsgd_delta(k, eps)
    elif kind == "laplace_label_release":
        _check_sensitivity(kind, entry)
        achieved = laplace_delta(float(entry["tau"]), eps)
    elif kind in ("dpsgd", "dpsgd_buffer"):
        _check_sensitivity(kind, entry)
        steps = int(entry["steps"])
        if kind == "dpsgd_buffer":
            steps = _check_buffer(entry, task, n_tasks)
        if kind == "dpsgd_buffer" and "block_choice" in entry:
            spent = _uniform_block_epsilon(entry, task, n_tasks, delta)
        else:
            spent = _dpsgd_epsilon(
                float(entry["noise_multiplier"]),
                float(entry["sample_rate"]),
                steps,
                delta,
                str(entry.get("accountant", "prv")),
            )
        if spent > eps * (1 + REDERIVE_TOL):  # the same accountant on another CPU: last-bit slack only
            what = "buffer rereads" if kind == "dpsgd_buffer" else "DP-SGD run"
            raise PrivacyBudgetExceeded(f"{what} claims ε={eps} but its accountant gives ε={spent:.6g}")
        derived["epsilon_accounted"] = spent
    if achieved is not None:
        if achieved > delta * (1 + 1e-9):
            raise PrivacyBudgetExceeded(
                f"mechanism {kind} claims (ε={eps}, δ={delta}) but its parameters give δ={achieved:.3e}"
            )
        derived["delta_achieved"] = achieved
    # the mechanism in dp_accounting's terms, from the parameters just checked (dpcl.privacy.dp_events)
    derived["dp_event"] = entry_event(
        entry, non_private=kind in NON_PRIVATE_KINDS, sensitivity=derived.get("sensitivity")
    )
    return derived


def _check_buffer(entry: dict[str, Any], task: int | None, n_tasks: int | None) -> int:
    """A buffer part's reread count: later_tasks × steps_per_task, later_tasks = T − 1 − t."""
    if entry.get("part") != "reference":
        raise LedgerError(f"a dpsgd_buffer entry must have part 'reference', got {entry.get('part')!r}")
    per_task, later = int(entry["steps_per_task"]), int(entry["later_tasks"])
    if later < 1 or int(entry["steps"]) != per_task * later:
        raise PrivacyBudgetExceeded(
            f"buffer entry counts steps={entry['steps']} but is reread {later} times × {per_task} steps"
        )
    if task is not None and n_tasks is not None and later != n_tasks - 1 - task:
        raise PrivacyBudgetExceeded(
            f"buffer entry of task {task} counts {later} later tasks, but a {n_tasks}-task run rereads it in "
            f"{n_tasks - 1 - task}"
        )
    return per_task * later


@dataclass
class Ledger:
    """Mechanisms applied in a run, per task, and the composed guarantee.

    ``target`` is the run's configured (ε, δ); ``n_tasks`` the scenario's task count (public),
    needed to check buffer rereads and that every task is accounted.
    """

    target: Budget
    n_tasks: int | None = None
    tasks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    #: a published method's own privacy claim (e.g. [Desai2021] Lemma 2), shown beside what the
    #: entries compose to; with a claim the run may exceed its target and says guarantee_holds: false
    claim: dict[str, Any] | None = None
    #: uses of the private data that no entry accounts for (the paper protocol's hyperparameter
    #: tuning, App. D.1): listed in privacy.json, and the guarantee does not hold end to end
    unaccounted: list[dict[str, Any]] = field(default_factory=list)

    def add(self, task: int, entry: dict[str, Any]) -> None:
        """Record a mechanism applied to task ``task``'s data (verified immediately)."""
        task = int(task)
        if self.n_tasks is not None and not 0 <= task < self.n_tasks:
            raise LedgerError(f"entry for task {task} in a {self.n_tasks}-task run")
        entry = {k: (math.inf if v == "inf" else v) for k, v in entry.items()}
        entry.update(verify_mechanism(entry, task, self.n_tasks))
        self.tasks.setdefault(task, []).append(entry)

    def part_budgets(self, task: int) -> dict[str, Budget]:
        """Per disjoint part of a task (entries with a ``part`` key): basic composition within it."""
        parts: dict[str, Budget] = {}
        for e in self.tasks.get(task, []):
            if e.get("part") is not None:
                b = parts.get(e["part"], Budget(0.0, 0.0))
                parts[e["part"]] = Budget(b.epsilon + _num(e["epsilon"]), b.delta + float(e["delta"]))
        return parts

    def task_budget(self, task: int) -> Budget:
        """Basic composition of the mechanisms applied to one task's data.

        Entries without ``part`` touch all of D_t; entries with one touch only that part of
        D_t, and the parts are disjoint (e.g. a memory-buffer method's train and reference parts,
        [LabelSpace] App. D.4 (a)), so each individual pays the shared entries plus its own part's: the
        worst part bounds everyone.
        """
        shared = [e for e in self.tasks.get(task, []) if e.get("part") is None]
        parts = self.part_budgets(task).values()
        return Budget(
            sum(_num(e["epsilon"]) for e in shared) + max((b.epsilon for b in parts), default=0.0),
            min(1.0, sum(float(e["delta"]) for e in shared) + max((b.delta for b in parts), default=0.0)),
        )

    def check_complete(self) -> None:
        """Every task 0..T−1 has exactly one label-space entry and at least one training entry."""
        n = self.n_tasks if self.n_tasks is not None else (max(self.tasks) + 1 if self.tasks else 0)
        if n < 1:
            raise LedgerError("a ledger needs at least one task")
        extra = sorted(set(self.tasks) - set(range(n)))
        if extra:
            raise LedgerError(f"entries for tasks {extra} outside the run's {n} tasks")
        for t in range(n):
            kinds = [e["mechanism"] for e in self.tasks.get(t, [])]
            n_label = sum(k in LABEL_SPACE_KINDS for k in kinds)
            if n_label != 1:
                raise LedgerError(f"task {t} has {n_label} label-space entries; every task needs exactly one")
            if not any(k in TRAINING_KINDS for k in kinds):
                raise LedgerError(
                    f"task {t} has no training entry: the mechanism that trained on D_{t} is "
                    "missing from the ledger"
                )

    def total(self) -> Budget:
        """Parallel composition over tasks (Thm B.7): the worst task's guarantee."""
        if not self.tasks:
            return Budget(0.0, 0.0)
        budgets = [self.task_budget(t) for t in self.tasks]
        return Budget(max(b.epsilon for b in budgets), max(b.delta for b in budgets))

    @property
    def leaky_baseline(self) -> bool:
        """True if a deliberately non-DP baseline mechanism (:data:`LEAKY_KINDS`) was applied."""
        return any(e["mechanism"] in LEAKY_KINDS for es in self.tasks.values() for e in es)

    def holds(self) -> bool:
        """Whether the composed guarantee is within the target (always true if the target is ε = ∞)."""
        if not self.target.private:
            return True
        total, t = self.total(), self.target
        return total.epsilon <= t.epsilon * (1 + REL_TOL) and total.delta <= t.delta * (1 + REL_TOL)

    def check(self) -> Budget:
        """Raise :class:`PrivacyBudgetExceeded` if the composed guarantee exceeds the target.

        The one exception is the Label Oracle baseline, which is not DP by construction
        (Prop. 4.1): its ledger is written with ``guarantee_holds: false`` and ε = ∞ instead.
        """
        self.check_complete()
        total = self.total()
        t = self.target
        if not self.holds() and not self.leaky_baseline and self.claim is None:
            raise PrivacyBudgetExceeded(
                f"composed guarantee (ε={total.epsilon}, δ={total.delta}) exceeds the target "
                f"(ε={t.epsilon}, δ={t.delta})"
            )
        return total

    def _parts_dict(self, task: int) -> dict[str, Any]:
        """The per-part budgets of a task, if it has disjoint parts (shown in privacy.json)."""
        parts = self.part_budgets(task)
        if not parts:
            return {}
        return {
            "parts": {
                "rule": "disjoint parts compose in parallel; shared entries (no part) add to each",
                **{p: {"epsilon": b.epsilon, "delta": b.delta} for p, b in parts.items()},
            }
        }

    def to_dict(self) -> dict[str, Any]:
        total = self.check()
        return {
            "adjacency": ADJACENCY,
            "target": {"epsilon": self.target.epsilon, "delta": self.target.delta},
            "private": self.target.private,
            "guarantee_holds": self.holds() and not self.leaky_baseline and not self.unaccounted,
            "leaky_baseline": self.leaky_baseline,
            **({"unaccounted_uses": self.unaccounted} if self.unaccounted else {}),
            "n_tasks": self.n_tasks if self.n_tasks is not None else len(self.tasks),
            "tasks": [
                {
                    "task": t,
                    "mechanisms": self.tasks[t],
                    "composed": {
                        "rule": "basic composition within the task",
                        "epsilon": self.task_budget(t).epsilon,
                        "delta": self.task_budget(t).delta,
                    },
                }
                | self._parts_dict(t)
                for t in sorted(self.tasks)
            ],
            "overall": {
                "rule": "parallel composition across tasks ([LabelSpace] Thm B.7)",
                "epsilon": total.epsilon,
                "delta": total.delta,
            },
        } | ({"published_claim": self.claim} if self.claim is not None else {})
