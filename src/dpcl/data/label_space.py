"""Output label spaces O_t per task ([LabelSpace] Sec. 4, 6).

Methods (config tags):

- ``oracle``: O_t = labels present in D_t. A leaky baseline: not DP for any δ < 1 (Prop. 4.1).
- ``base``: all labels of the base dataset at every task (data-independent).
- ``public-xN[-cP][-grow][-unknown|-parent]``: Public Labels (S_prior, Sec. 4.3), fixed
  before seeing data, from public information only (T, n_base, N, P, the dataset's
  published class hierarchy and the run seed):

  * ``xN``: label ids ``0 .. N*n_base-1``: the base labels ``0 .. n_base-1`` plus dummy
    labels ``n_base .. N*n_base-1`` that never occur in the data (×10, ×100, ×1000 in the
    paper's Sec. 6.1 / Fig. 6 use the same set at every task, S_prior^all);
  * ``-cP`` (coverage, default 100): only P % of the base labels are public, a subset
    fixed by the run seed alone (``rng(seed, "labels", "public", "coverage")``, nested in
    P), simulating an imprecise public taxonomy that misses some data labels; the dummy
    ids stay; ``public-x1-c0-parent`` is "the public set is the coarse labels";
  * ``-grow``: a per-task schedule: task t (0-based, T tasks) holds the public base labels
    plus the first round((N-1)·n_base·t/(T-1)) dummy labels, so O_t grows linearly from
    the base labels (t = 0) to N × base (t = T-1); with T = 1 the full set;
  * remapping R_t^label of data labels outside O_t (Eq. 8, Prop. 4.2): default ``drop``;
    ``-unknown`` maps them to one extra public label ``unknown`` (id N*n_base);
    ``-parent`` maps a fine label y to its parent in the dataset's hierarchy (CIFAR-100
    fine → coarse), the parents being extra public labels with ids N*n_base + p. With
    full coverage (P = 100) no data label is outside O_t, so a rule would be vacuous:
    ``-unknown``/``-parent`` therefore need P < 100.

- ``release-fF``: O_t released by k-TSGD thresholding (Eq. 7) with fraction F of both ε
  and δ; data of labels not released is dropped (Prop. 4.2).
- ``release-laplace-fF``: the same with Laplace thresholding (App. C.3, Thm C.3; the
  mechanism of [Tobaben2024]).

Every label file carries a ``remap`` spec (rule, unknown id, parent ids); the learners
map each task's (x, y) through :func:`remap_task_data` and the test labels through
:func:`evaluation_labels`, so training data is exactly R_t^task(D_t) of Eq. 8.
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy.accounting import Budget, split_budget
from ..privacy.label_methods import LabelMethod, parse_label_method  # noqa: F401 (their home for data/)
from ..privacy.label_release import release_labels
from ..seeding import rng
from ..sorted_ints import isin, sorted_distinct


def label_universe_size(method: LabelMethod, n_base: int, n_parents: int = 0) -> int:
    """Number of label ids a classifier may have to hold under ``method`` (see the module doc)."""
    if method.kind != "public":
        return n_base
    extra = {"drop": 0, "unknown": 1, "parent": n_parents}[method.remap]
    return n_base * method.multiplier + extra


def public_base_labels(method: LabelMethod, n_base: int, seed: int) -> list[int]:
    """The base labels in the public set: all, or the coverage subset fixed by ``seed`` alone."""
    if method.coverage == 100:
        return list(range(n_base))
    order = rng(seed, "labels", "public", "coverage").permutation(n_base)  # nested in P
    return sorted(int(y) for y in order[: int(round(method.coverage / 100 * n_base))])


def public_label_spaces(
    method: LabelMethod, n_base: int, n_tasks: int, seed: int, n_parents: int = 0
) -> list[list[int]]:
    """O_t^prior of every task from public information only (T, n_base, N, P, hierarchy size, seed)."""
    if method.kind != "public":
        raise ValueError(f"{method.tag} is not a public label method")
    if method.remap == "parent" and n_parents < 1:
        raise ValueError(
            f"label method {method.tag!r} needs a class hierarchy (parents); the dataset has none"
        )
    top = n_base * method.multiplier
    extra = {"drop": [], "unknown": [top], "parent": list(range(top, top + n_parents))}[method.remap]
    base = public_base_labels(method, n_base, seed)
    n_dummy = top - n_base
    spaces = []
    for t in range(n_tasks):
        k = n_dummy if method.schedule == "fixed" or n_tasks == 1 else round(n_dummy * t / (n_tasks - 1))
        spaces.append(base + list(range(n_base, n_base + k)) + extra)
    return spaces


def remap_spec(method: LabelMethod, n_base: int, parent: np.ndarray | None = None) -> dict:
    """The label file's ``remap`` entry: R_t^label of Eq. 8 as data (rule, unknown id, parent ids)."""
    top = n_base * method.multiplier
    if method.kind != "public" or method.remap == "drop":
        return {"rule": "drop", "unknown": None, "parent": None}
    if method.remap == "unknown":
        return {"rule": "unknown", "unknown": top, "parent": None}
    if parent is None:
        raise ValueError(
            f"label method {method.tag!r} needs a class hierarchy (parents); the dataset has none"
        )
    parent = np.asarray(parent, dtype=np.int64)
    if parent.shape != (n_base,):
        raise ValueError(f"the parent map must give one parent per base label ({n_base}), got {parent.shape}")
    return {"rule": "hierarchy", "unknown": None, "parent": [int(top + p) for p in parent]}


def output_label_spaces(
    method: LabelMethod,
    task_labels: list[np.ndarray],
    n_base: int,
    budget: Budget,
    seed: int,
    *,
    run_key: tuple = (),
    parent: np.ndarray | None = None,
) -> dict:
    """O_t for every task, the budget left for training, ledger entries and the remap spec.

    ``task_labels[t]`` are the (private) labels of D_t. Label-release noise is drawn from
    ``rng(seed, "labels", *run_key, method.tag, "task", t)``. ``parent[y]`` is the parent
    of base label y in the dataset's (public) hierarchy, needed by ``-parent`` tags.
    """
    spaces: list[list[int]] = []
    entries: list[dict] = []
    training = budget
    n_parents = int(np.max(parent)) + 1 if parent is not None and len(parent) else 0
    spec = remap_spec(method, n_base, parent)
    public = (
        public_label_spaces(method, n_base, len(task_labels), seed, n_parents)
        if method.kind == "public"
        else None
    )
    if method.kind == "release":
        label_budget, training = split_budget(budget, method.fraction)
    for t, labels in enumerate(task_labels):
        labels = np.asarray(labels, dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= n_base):
            raise ValueError(f"task {t}: labels outside 0..{n_base - 1}")
        if method.kind == "oracle":
            o_t = np.unique(labels).tolist()  # sorted, Python ints
            entry = {
                "mechanism": "label_oracle",
                "epsilon": math.inf,
                "delta": 1.0,
                "note": "O_t = labels present in D_t: not DP for any delta < 1 ([LabelSpace] Prop. 4.1)",
            }
        elif method.kind in ("base", "public"):
            o_t = public[t] if public is not None else list(range(n_base))
            entry = {
                "mechanism": "data_independent",
                "epsilon": 0.0,
                "delta": 0.0,
                "note": f"{method.tag}: label space fixed before seeing data ([LabelSpace] Sec. 4.3)",
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
        "label_universe": label_universe_size(method, n_base, n_parents),
        "remap": spec,
        "target": {"epsilon": budget.epsilon, "delta": budget.delta},
        "training_budget": {"epsilon": training.epsilon, "delta": training.delta},
        "tasks": [{"task": t, "labels": o, "n_labels": len(o)} for t, o in enumerate(spaces)],
        "ledger": [{"task": t, **e} for t, e in enumerate(entries)],
    }


def keep_mask(labels: np.ndarray, label_space: list[int] | np.ndarray) -> np.ndarray:
    """Samples whose label is in O_t; the others are dropped ([LabelSpace] Eq. 8, R = drop)."""
    return isin(labels, label_space)


REMAP_RULES = ("drop", "hierarchy", "unknown")


def remap_task(
    labels: np.ndarray,
    label_space: list[int] | np.ndarray,
    rule: str = "drop",
    parent: dict[int, int] | np.ndarray | None = None,
    unknown: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """R_t^task of [LabelSpace] Eq. 8: map each data label into O_t or drop the sample.

    R_t^label(y) = y if y ∈ O_t; otherwise, by ``rule``: ``drop``; ``hierarchy``:
    parent[y] if that is in O_t, else drop (e.g. CIFAR-100 fine → coarse); ``unknown``:
    the label ``unknown``, which must itself be in O_t. Returns (kept sample mask, new
    labels of the kept samples). Any such R keeps the release (ε, δ)-DP w.r.t. D_t when
    O_t is data-independent (Prop. 4.2).
    """
    if rule not in REMAP_RULES:
        raise ValueError(f"unknown remapping rule {rule!r}; allowed: {list(REMAP_RULES)}")
    labels = np.asarray(labels, dtype=np.int64)
    space = sorted_distinct(label_space)
    mapped = labels.copy()
    inside = isin(labels, space)
    if rule == "hierarchy":
        if parent is None:
            raise ValueError("the hierarchy rule needs a parent map")
        par = (
            np.asarray([parent[int(y)] for y in labels[~inside]], dtype=np.int64)
            if isinstance(parent, dict)
            else np.asarray(parent, dtype=np.int64)[labels[~inside]]
        )
        mapped[~inside] = par
        keep = inside.copy()
        keep[~inside] = isin(par, space)
    elif rule == "unknown":
        if unknown is None or int(unknown) not in set(space.tolist()):
            raise ValueError(f"the unknown rule needs an 'unknown' label inside O_t, got {unknown!r}")
        mapped[~inside] = int(unknown)
        keep = np.ones(len(labels), dtype=bool)
    else:
        keep = inside
    return keep, mapped[keep]


def remap_task_data(
    labels: np.ndarray, label_space: list[int] | np.ndarray, spec: dict | None
) -> tuple[np.ndarray, np.ndarray]:
    """(kept sample mask, trained labels) of one task: R_t^task of Eq. 8 under a label file's spec.

    A missing spec (label files written before remapping existed) means ``drop``.
    """
    spec = spec or {"rule": "drop"}
    return remap_task(
        labels, label_space, spec["rule"], parent=spec.get("parent"), unknown=spec.get("unknown")
    )


def evaluation_labels(labels: np.ndarray, label_file: dict) -> np.ndarray:
    """Test labels as the released model names them: R^label over the union of all O_t.

    Labels in the public vocabulary stay; others become ``unknown`` or their parent (the
    classes a remapped model is trained to predict); under ``drop`` they stay as they are
    and count as errors (no model can output them).
    """
    labels = np.asarray(labels, dtype=np.int64)
    spec = label_file.get("remap") or {"rule": "drop"}
    if spec["rule"] == "drop":
        return labels.copy()
    union = sorted(set().union(*(set(t["labels"]) for t in label_file["tasks"])))
    _, mapped = remap_task(
        labels, union, spec["rule"], parent=spec.get("parent"), unknown=spec.get("unknown")
    )
    return mapped
