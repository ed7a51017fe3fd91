"""Budget split and the per-run privacy ledger (paper 000 Sec. 3, App. B; DESIGN §4).

Privacy model: task-wise DP under add/remove adjacency. Within a task the mechanisms
(label release, then training) compose by basic composition; across tasks every
individual is in exactly one task, so the per-task guarantees compose in parallel
(Thm B.7): the stream is (max_t ε_t, max_t δ_t)-DP.

Every mechanism entry is *verified* from its own parameters (e.g. the Gaussian δ is
recomputed from σ), so the ledger cannot claim a guarantee the noise does not give.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from .gaussian import gaussian_delta
from .label_release import laplace_delta, tsgd_delta

ADJACENCY = "add/remove one individual; task-wise DP (each individual in exactly one task)"
REL_TOL = 1e-12  # float slack when comparing a composed sum with its target


class PrivacyBudgetExceeded(RuntimeError):
    """A run's composed guarantee exceeds its configured target."""


@dataclass(frozen=True)
class Budget:
    """An (ε, δ) pair; ε = inf means non-private."""

    epsilon: float
    delta: float

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)


def split_budget(total: Budget, fraction: float) -> tuple[Budget, Budget]:
    """Give fraction f of **both** ε and δ to label release and the rest to training (DESIGN §4)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"label-release budget fraction must lie in (0, 1), got {fraction!r}")
    if not total.private:
        return Budget(math.inf, 0.0), Budget(math.inf, 0.0)
    eps_l = total.epsilon * fraction
    delta_l = total.delta * fraction
    return Budget(eps_l, delta_l), Budget(total.epsilon - eps_l, total.delta - delta_l)


@functools.lru_cache(maxsize=256)
def _dpsgd_epsilon(sigma: float, sample_rate: float, steps: int, delta: float, accountant: str) -> float:
    """ε of a DP-SGD run recomputed by its accountant (cached: runs share settings)."""
    from .sgd_accounting import epsilon as sgd_epsilon

    return sgd_epsilon(sigma, sample_rate, steps, delta, accountant)


def verify_mechanism(entry: dict[str, Any]) -> float | None:
    """Recompute the δ a mechanism really achieves at its ε; raise if it exceeds its claim."""
    kind = entry["mechanism"]
    eps, delta = float(entry["epsilon"]), float(entry["delta"])
    achieved: float | None = None
    if kind == "gaussian":
        achieved = gaussian_delta(float(entry["sigma"]), eps, float(entry["sensitivity"]))
    elif kind == "ktsgd_label_release":
        achieved = tsgd_delta(int(entry["k"]), eps)
    elif kind == "laplace_label_release":
        achieved = laplace_delta(float(entry["tau"]), eps)
    elif kind == "dpsgd":
        spent = _dpsgd_epsilon(float(entry["noise_multiplier"]), float(entry["sample_rate"]), int(entry["steps"]),
                               delta, entry.get("accountant", "prv"))  # fmt: skip
        if spent > eps * (1 + 1e-9):
            raise PrivacyBudgetExceeded(f"DP-SGD run claims ε={eps} but its accountant gives ε={spent:.6g}")
        entry["epsilon_accounted"] = spent
        achieved = None
    elif kind == "dpsgd_buffer":
        # DP-A-GEM's memory buffer (App. D.4 (d)): a reference individual is reread at every
        # step of each later task, so its reads compose sequentially: steps = per task × tasks.
        per_task, later = int(entry["steps_per_task"]), int(entry["later_tasks"])
        if int(entry["steps"]) != per_task * later or later < 1:
            raise PrivacyBudgetExceeded(
                f"buffer entry counts steps={entry['steps']} but is reread {later} times × {per_task} steps"
            )
        if entry.get("part") != "reference":
            raise ValueError(f"a dpsgd_buffer entry must have part 'reference', got {entry.get('part')!r}")
        spent = _dpsgd_epsilon(float(entry["noise_multiplier"]), float(entry["sample_rate"]), per_task * later,
                               delta, entry.get("accountant", "prv"))  # fmt: skip
        if spent > eps * (1 + 1e-9):
            raise PrivacyBudgetExceeded(f"buffer rereads claim ε={eps}; the accountant gives ε={spent:.6g}")
        entry["epsilon_accounted"] = spent
        achieved = None
    elif kind in ("nonprivate", "label_oracle_nonprivate", "data_independent", "label_oracle"):
        achieved = None
    else:
        raise ValueError(f"unknown mechanism kind {kind!r} in the ledger")
    if achieved is not None and achieved > delta * (1 + 1e-9):
        raise PrivacyBudgetExceeded(
            f"mechanism {kind} claims (ε={eps}, δ={delta}) but its parameters give δ={achieved:.3e}"
        )
    return achieved


@dataclass
class Ledger:
    """Mechanisms applied in a run, per task, and the composed guarantee."""

    target: Budget
    tasks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, task: int, entry: dict[str, Any]) -> None:
        """Record a mechanism applied to task ``task``'s data (verified immediately)."""
        entry = dict(entry)
        achieved = verify_mechanism(entry)
        if achieved is not None:
            entry["delta_achieved"] = achieved
        self.tasks.setdefault(int(task), []).append(entry)

    def part_budgets(self, task: int) -> dict[str, Budget]:
        """Per disjoint part of a task (entries with a ``part`` key): basic composition within it."""
        parts: dict[str, Budget] = {}
        for e in self.tasks.get(task, []):
            if e.get("part") is not None:
                b = parts.get(e["part"], Budget(0.0, 0.0))
                parts[e["part"]] = Budget(b.epsilon + float(e["epsilon"]), b.delta + float(e["delta"]))
        return parts

    def task_budget(self, task: int) -> Budget:
        """Basic composition of the mechanisms applied to one task's data.

        Entries without ``part`` touch all of D_t; entries with one touch only that part of
        D_t, and the parts are disjoint (e.g. DP-A-GEM's train and reference parts, App.
        D.4 (a)), so each individual pays the shared entries plus its own part's: the
        worst part bounds everyone.
        """
        shared = [e for e in self.tasks.get(task, []) if e.get("part") is None]
        parts = self.part_budgets(task).values()
        return Budget(
            sum(float(e["epsilon"]) for e in shared) + max((b.epsilon for b in parts), default=0.0),
            sum(float(e["delta"]) for e in shared) + max((b.delta for b in parts), default=0.0),
        )

    def total(self) -> Budget:
        """Parallel composition over tasks (Thm B.7): the worst task's guarantee."""
        if not self.tasks:
            return Budget(0.0, 0.0)
        budgets = [self.task_budget(t) for t in self.tasks]
        return Budget(max(b.epsilon for b in budgets), max(b.delta for b in budgets))

    @property
    def leaky_baseline(self) -> bool:
        """True if a deliberately non-DP baseline mechanism (the Label Oracle) was applied."""
        return any(e["mechanism"] == "label_oracle" for es in self.tasks.values() for e in es)

    def holds(self) -> bool:
        """Whether the composed guarantee is within the target (always true if non-private)."""
        if not self.target.private:
            return True
        total, t = self.total(), self.target
        return total.epsilon <= t.epsilon * (1 + REL_TOL) and total.delta <= t.delta * (1 + REL_TOL)

    def check(self) -> Budget:
        """Raise :class:`PrivacyBudgetExceeded` if the composed guarantee exceeds the target.

        The one exception is the Label Oracle baseline, which is not DP by construction
        (Prop. 4.1): its ledger is written with ``guarantee_holds: false`` instead.
        """
        total = self.total()
        t = self.target
        if not self.holds() and not self.leaky_baseline:
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
        return {"parts": {"rule": "disjoint parts compose in parallel; shared entries (no part) add to each",
                          **{p: {"epsilon": b.epsilon, "delta": b.delta} for p, b in parts.items()}}}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        total = self.check()
        return {
            "adjacency": ADJACENCY,
            "target": {"epsilon": self.target.epsilon, "delta": self.target.delta},
            "private": self.target.private,
            "guarantee_holds": self.holds(),
            "leaky_baseline": self.leaky_baseline,
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
                "rule": "parallel composition across tasks (paper 000 Thm B.7)",
                "epsilon": total.epsilon,
                "delta": total.delta,
            },
        }
