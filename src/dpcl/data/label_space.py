"""Output label spaces O_t per task (paper 000 Sec. 4, 6; DESIGN §4).

Methods (config tags):
- ``oracle``: O_t = labels present in D_t. A leaky baseline: not DP for any δ < 1 (Prop. 4.1).
- ``base``: all labels of the base dataset at every task (data-independent).
- ``public-xN``: the base labels plus dummy labels up to N × the base size (S_prior,
  Sec. 4.3), data-independent; dummy ids are ``n_base .. N*n_base-1``.
- ``release-fF``: O_t released by k-TSGD thresholding (Eq. 7) with fraction F of both ε
  and δ; data of labels not released is dropped (Prop. 4.2).
- ``release-laplace-fF``: the same with Laplace thresholding (App. C.3, Thm C.3; the
  mechanism of paper 003).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..privacy.accounting import Budget, split_budget
from ..privacy.label_release import release_labels
from ..seeding import rng

_TAG = re.compile(r"^(?:(oracle)|(base)|public-x(\d+)|release-(?:(laplace)-)?f(0?\.\d+|[01]\.\d+))$")


@dataclass(frozen=True)
class LabelMethod:
    kind: str  # oracle | base | public | release
    multiplier: int = 1
    fraction: float | None = None
    mechanism: str = "tsgd"  # release only: tsgd | laplace

    @property
    def tag(self) -> str:
        if self.kind == "public":
            return f"public-x{self.multiplier}"
        if self.kind == "release":
            mech = "" if self.mechanism == "tsgd" else f"{self.mechanism}-"
            return f"release-{mech}f{self.fraction:g}"
        return self.kind

    @property
    def data_dependent(self) -> bool:
        return self.kind in ("oracle", "release")


def parse_label_method(tag: str) -> LabelMethod:
    """Parse a config tag such as ``release-f0.1`` or ``public-x1000``."""
    m = _TAG.match(str(tag))
    if not m:
        raise ValueError(
            f"unknown label method {tag!r}: allowed are 'oracle', 'base', 'public-xN' (N >= 1) "
            "'release-fF' and 'release-laplace-fF' (0 < F < 1)"
        )
    if m.group(1):
        return LabelMethod("oracle")
    if m.group(2):
        return LabelMethod("base")
    if m.group(3):
        n = int(m.group(3))
        if n < 1:
            raise ValueError(f"label method {tag!r}: the public multiplier must be >= 1")
        return LabelMethod("public", multiplier=n)
    f = float(m.group(5))
    if not 0 < f < 1:
        raise ValueError(f"label method {tag!r}: the release fraction must lie in (0, 1)")
    return LabelMethod("release", fraction=f, mechanism=m.group(4) or "tsgd")


def label_universe_size(method: LabelMethod, n_base: int) -> int:
    """Number of label ids a classifier may have to hold under ``method``."""
    return n_base * method.multiplier if method.kind == "public" else n_base


def output_label_spaces(
    method: LabelMethod,
    task_labels: list[np.ndarray],
    n_base: int,
    budget: Budget,
    seed: int,
    run_key: tuple = (),
) -> dict:
    """O_t for every task, the budget left for training, and ledger entries per task.

    ``task_labels[t]`` are the (private) labels of D_t. Label-release noise is drawn from
    ``rng(seed, "labels", *run_key, method.tag, "task", t)``.
    """
    spaces: list[list[int]] = []
    entries: list[dict] = []
    training = budget
    if method.kind == "release":
        label_budget, training = split_budget(budget, method.fraction)
    for t, labels in enumerate(task_labels):
        labels = np.asarray(labels, dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= n_base):
            raise ValueError(f"task {t}: labels outside 0..{n_base - 1}")
        if method.kind == "oracle":
            o_t = sorted(int(y) for y in np.unique(labels))
            entry = {
                "mechanism": "label_oracle",
                "epsilon": math.inf,
                "delta": 1.0,
                "note": "O_t = labels present in D_t: not DP for any delta < 1 (paper 000 Prop. 4.1)",
            }
        elif method.kind in ("base", "public"):
            o_t = list(range(label_universe_size(method, n_base)))
            entry = {
                "mechanism": "data_independent",
                "epsilon": 0.0,
                "delta": 0.0,
                "note": f"{method.tag}: label space fixed before seeing data (paper 000 Sec. 4.3)",
            }
        else:
            counts = dict(zip(*np.unique(labels, return_counts=True), strict=True))
            o_t, entry = release_labels(
                counts,
                n_base,
                label_budget.epsilon,
                label_budget.delta,
                rng(seed, "labels", *run_key, method.tag, "task", t),
                mechanism=method.mechanism,
            )
        spaces.append(o_t)
        entries.append(entry)
    return {
        "method": method.tag,
        "n_base": n_base,
        "label_universe": label_universe_size(method, n_base),
        "target": {"epsilon": budget.epsilon, "delta": budget.delta},
        "training_budget": {"epsilon": training.epsilon, "delta": training.delta},
        "tasks": [{"task": t, "labels": o, "n_labels": len(o)} for t, o in enumerate(spaces)],
        "ledger": [{"task": t, **e} for t, e in enumerate(entries)],
    }


def keep_mask(labels: np.ndarray, label_space: list[int] | np.ndarray) -> np.ndarray:
    """Samples whose label is in O_t; the others are dropped (paper 000 Eq. 8, R = drop)."""
    return np.isin(np.asarray(labels), np.asarray(label_space, dtype=np.int64))


REMAP_RULES = ("drop", "hierarchy", "unknown")


def remap_task(
    labels: np.ndarray,
    label_space: list[int] | np.ndarray,
    rule: str = "drop",
    parent: dict[int, int] | np.ndarray | None = None,
    unknown: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """R_t^task of paper 000 Eq. 8: map each data label into O_t or drop the sample.

    R_t^label(y) = y if y ∈ O_t; otherwise, by ``rule``: ``drop``; ``hierarchy``:
    parent[y] if that is in O_t, else drop (e.g. CIFAR-100 fine → coarse); ``unknown``:
    the label ``unknown``, which must itself be in O_t. Returns (kept sample mask, new
    labels of the kept samples). Any such R keeps the release (ε, δ)-DP w.r.t. D_t when
    O_t is data-independent (Prop. 4.2).
    """
    if rule not in REMAP_RULES:
        raise ValueError(f"unknown remapping rule {rule!r}; allowed: {list(REMAP_RULES)}")
    labels = np.asarray(labels, dtype=np.int64)
    space = np.asarray(sorted(set(int(o) for o in label_space)), dtype=np.int64)
    mapped = labels.copy()
    inside = np.isin(labels, space)
    if rule == "hierarchy":
        if parent is None:
            raise ValueError("the hierarchy rule needs a parent map")
        par = np.asarray([parent[int(y)] for y in labels[~inside]], dtype=np.int64) if isinstance(parent, dict) \
            else np.asarray(parent, dtype=np.int64)[labels[~inside]]  # fmt: skip
        mapped[~inside] = par
        keep = inside.copy()
        keep[~inside] = np.isin(par, space)
    elif rule == "unknown":
        if unknown is None or int(unknown) not in set(space.tolist()):
            raise ValueError(f"the unknown rule needs an 'unknown' label inside O_t, got {unknown!r}")
        mapped[~inside] = int(unknown)
        keep = np.ones(len(labels), dtype=bool)
    else:
        keep = inside
    return keep, mapped[keep]
