"""Continual-learning task splits ([LabelSpace] Sec. 6, App. D).

A scenario assigns every training sample to exactly one task and names, per task, the
classes whose *test* data evaluate that task. Everything is deterministic in ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..seeding import rng


@dataclass
class Scenario:
    """Task assignment: classes introduced per task and train-sample indices per task."""

    name: str
    seed: int
    class_order: list[int]
    task_classes: list[list[int]]
    train_indices: list[np.ndarray]
    #: domain-incremental "permuted features" (:func:`permuted_scenario`): task t sees every feature
    #: vector through the public permutation :func:`feature_permutation` (seed, t)
    feature_permutation: bool = False

    @property
    def n_tasks(self) -> int:
        return len(self.task_classes)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "seed": self.seed,
            "n_tasks": self.n_tasks,
            "class_order": [int(c) for c in self.class_order],
            "task_classes": [[int(c) for c in cs] for cs in self.task_classes],
            "train_indices": [idx.astype(int).tolist() for idx in self.train_indices],
        } | ({"feature_permutation": True} if self.feature_permutation else {})

    @classmethod
    def from_dict(cls, d: dict) -> Scenario:
        return cls(
            name=d["name"],
            seed=int(d["seed"]),
            class_order=list(d["class_order"]),
            task_classes=[list(c) for c in d["task_classes"]],
            train_indices=[np.asarray(i, dtype=np.int64) for i in d["train_indices"]],
            feature_permutation=bool(d.get("feature_permutation", False)),
        )


def disjoint_classes(
    classes: np.ndarray | list[int], n_tasks: int, seed: int
) -> tuple[list[list[int]], list[int]]:
    """Permute the classes with ``seed``; split them evenly into ``n_tasks`` groups (and the order)."""
    classes = np.unique(np.asarray(classes))
    if not 1 <= n_tasks <= len(classes):
        raise ValueError(f"n_tasks must lie in 1..{len(classes)} (the number of classes), got {n_tasks}")
    order = rng(seed, "scenario", "class_order").permutation(classes)
    return [sorted(int(c) for c in part) for part in np.array_split(order, n_tasks)], [int(c) for c in order]


def disjoint(labels: np.ndarray, n_tasks: int, seed: int) -> list[np.ndarray]:
    """Class-incremental disjoint split: train-sample indices per task (each class in one task)."""
    return disjoint_scenario(labels, n_tasks, seed).train_indices


def disjoint_scenario(labels: np.ndarray, n_tasks: int, seed: int) -> Scenario:
    """:func:`disjoint` with the class assignment kept, as a :class:`Scenario`."""
    labels = np.asarray(labels)
    task_classes, order = disjoint_classes(labels, n_tasks, seed)
    train_indices = [np.flatnonzero(np.isin(labels, cs)) for cs in task_classes]
    return Scenario(f"disjoint-t{n_tasks}", seed, order, task_classes, train_indices)


def _blurry_setup(labels, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int, kind: str):
    """Checked inputs of a blurry split: (labels, classes, generator, class order, #disjoint classes)."""
    labels = np.asarray(labels)
    if not 0 <= disjoint_pct <= 100 or not 0 <= blurry_pct <= 100:
        raise ValueError(
            f"disjoint_pct and blurry_pct must lie in [0, 100], got {disjoint_pct}, {blurry_pct}"
        )
    classes = np.unique(labels)
    if not 1 <= n_tasks <= len(classes):
        raise ValueError(f"n_tasks must lie in 1..{len(classes)} (the number of classes), got {n_tasks}")
    gen = rng(seed, "scenario", kind)
    order = gen.permutation(classes)
    return labels, classes, gen, order, int(round(disjoint_pct / 100 * len(classes)))


def iblurry_scenario(
    labels: np.ndarray, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int
) -> Scenario:
    """i-Blurry(N, M) of [Koh2022] ([LabelSpace] Sec. 3 "Blurry Tasks", Sec. 6.2).

    N % of the classes are disjoint (all their samples in the one task that owns them),
    the rest are blurry; every task owns an equal share of disjoint and of blurry classes.
    From each task's blurry-class samples M % are taken, pooled, shuffled and dealt
    evenly over all tasks (so a blurry class appears in several tasks). M = 0 is a
    disjoint (class-incremental) split. Each sample is in exactly one task.
    ``task_classes[t]`` are the classes whose training samples first appear in task t
    (the test classes that task t adds to the evaluation).
    """
    labels, classes, gen, order, n_disjoint = _blurry_setup(
        labels, n_tasks, disjoint_pct, blurry_pct, seed, "iblurry"
    )
    disjoint_parts = np.array_split(order[:n_disjoint], n_tasks)
    blurry_parts = np.array_split(order[n_disjoint:], n_tasks)
    own = [
        np.flatnonzero(np.isin(labels, np.concatenate([d, b])))
        for d, b in zip(disjoint_parts, blurry_parts, strict=True)
    ]
    moved = []
    for t, b in enumerate(blurry_parts):
        idx = gen.permutation(np.flatnonzero(np.isin(labels, b)))
        take = idx[: int(round(blurry_pct / 100 * len(idx)))]
        moved.append(take)
        own[t] = np.setdiff1d(own[t], take)
    pool = gen.permutation(np.concatenate(moved)) if moved else np.zeros(0, dtype=np.int64)
    for t, part in enumerate(np.array_split(pool, n_tasks)):
        own[t] = np.sort(np.concatenate([own[t], part]))
    seen: set[int] = set()
    task_classes = []
    for idx in own:
        new = sorted(int(c) for c in np.unique(labels[idx]) if int(c) not in seen)
        seen.update(new)
        task_classes.append(new)
    name = f"iblurry-n{disjoint_pct:g}-m{blurry_pct:g}-t{n_tasks}"
    return Scenario(name, seed, [int(c) for c in order], task_classes, [i.astype(np.int64) for i in own])


def iblurry(
    labels: np.ndarray, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int
) -> list[np.ndarray]:
    """Train-sample indices per task of :func:`iblurry_scenario`."""
    return iblurry_scenario(labels, n_tasks, disjoint_pct, blurry_pct, seed).train_indices


def _random_composition(total: int, n_parts: int, gen: np.random.Generator, positive: bool) -> np.ndarray:
    """Sizes of ``n_parts`` consecutive parts of ``total`` items, cut at random points.

    ``positive``: T - 1 distinct cuts drawn uniformly from 1..total-1 (every part non-empty,
    a uniform random composition); otherwise T - 1 cuts drawn with replacement from
    0..total (the ``torch.randint`` cuts of [Moon2023]'s code; parts may be empty).
    """
    if n_parts == 1:
        return np.asarray([total], dtype=np.int64)
    if positive:
        cuts = np.sort(gen.choice(np.arange(1, total), size=n_parts - 1, replace=False))
    else:
        cuts = np.sort(gen.integers(0, total + 1, size=n_parts - 1))
    return np.diff(np.concatenate([[0], cuts, [total]])).astype(np.int64)


@dataclass
class SiBlurrySplit:
    """Si-Blurry internals kept for checks: class ownership and the blurry samples moved."""

    disjoint_classes: list[list[int]]
    blurry_classes: list[list[int]]
    moved_out: list[np.ndarray]  # sample indices task t gave to the pool
    moved_in: list[np.ndarray]  # sample indices task t received from the pool
    train_indices: list[np.ndarray]


def siblurry_split(
    labels: np.ndarray, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int
) -> SiBlurrySplit:
    """Si-Blurry ([Moon2023]; [Tobaben2024] Sec. 7.2): stochastic blurry task boundaries.

    Follows the ``varing_NM`` branch of the ``OnlineSampler`` of [Moon2023] (MVP code):

    1. permute the classes; the first round(N % · C) are disjoint, the rest blurry;
    2. cut the disjoint classes into T consecutive groups at random points, and likewise
       the blurry classes (so the number of disjoint and blurry classes varies per task);
    3. the number of moved samples is round(M % · B) (B = all blurry-class samples); it is
       cut into T random shares m_t; task t gives min(m_t, b_t) random samples of its own
       blurry classes to a pool, the pool is shuffled and task t gets back as many as it
       gave (so the blurry ratio varies per task, and task sizes are those of step 2).

    Our choices (documented deviations): N % is rounded, not truncated to a multiple of T,
    and no class is discarded (MVP drops the remainder); the class cuts are distinct, so a
    group with >= T classes gives every task at least one (MVP's cuts may coincide and
    leave a task empty); the moved samples are drawn at random, not the first in file
    order; a task returns to the pool at most its own blurry samples and receives exactly
    that count back. The sample shares m_t use MVP's cuts with replacement (may be 0).
    """
    labels, classes, gen, order, n_disjoint = _blurry_setup(
        labels, n_tasks, disjoint_pct, blurry_pct, seed, "siblurry"
    )
    n_blurry = len(classes) - n_disjoint
    if max(n_disjoint, n_blurry) < n_tasks:
        raise ValueError(
            f"Si-Blurry with {n_tasks} tasks needs at least {n_tasks} disjoint or {n_tasks} blurry "
            f"classes; N = {disjoint_pct:g} % of {len(classes)} classes gives {n_disjoint} and {n_blurry}"
        )

    def groups(part: np.ndarray) -> list[list[int]]:
        sizes = _random_composition(len(part), n_tasks, gen, positive=len(part) >= n_tasks)
        bounds = np.cumsum(sizes)[:-1]
        return [sorted(int(c) for c in g) for g in np.split(part, bounds)]

    d_groups, b_groups = groups(order[:n_disjoint]), groups(order[n_disjoint:])
    own = [np.flatnonzero(np.isin(labels, d + b)) for d, b in zip(d_groups, b_groups, strict=True)]
    blurry_idx = [np.flatnonzero(np.isin(labels, b)) for b in b_groups]
    total_blurry = int(sum(len(i) for i in blurry_idx))
    shares = _random_composition(int(round(blurry_pct / 100 * total_blurry)), n_tasks, gen, positive=False)
    moved_out = []
    for t, idx in enumerate(blurry_idx):
        take = np.sort(gen.permutation(idx)[: min(int(shares[t]), len(idx))]).astype(np.int64)
        moved_out.append(take)
        own[t] = np.setdiff1d(own[t], take)
    pool = gen.permutation(np.concatenate(moved_out))
    bounds = np.cumsum([len(m) for m in moved_out])[:-1]
    moved_in = [np.sort(p).astype(np.int64) for p in np.split(pool, bounds)]
    train = [np.sort(np.concatenate([o, i])).astype(np.int64) for o, i in zip(own, moved_in, strict=True)]
    return SiBlurrySplit(d_groups, b_groups, moved_out, moved_in, train)


def siblurry_scenario(
    labels: np.ndarray, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int
) -> Scenario:
    """:func:`siblurry_split` as a :class:`Scenario` (test classes: first appearance, as i-Blurry)."""
    labels = np.asarray(labels)
    split = siblurry_split(labels, n_tasks, disjoint_pct, blurry_pct, seed)
    seen: set[int] = set()
    task_classes = []
    for idx in split.train_indices:
        new = sorted(int(c) for c in np.unique(labels[idx]) if int(c) not in seen)
        seen.update(new)
        task_classes.append(new)
    order = [c for d, b in zip(split.disjoint_classes, split.blurry_classes, strict=True) for c in d + b]
    name = f"siblurry-n{disjoint_pct:g}-m{blurry_pct:g}-t{n_tasks}"
    return Scenario(name, seed, order, task_classes, split.train_indices)


def siblurry(
    labels: np.ndarray, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int
) -> list[np.ndarray]:
    """Train-sample indices per task of :func:`siblurry_scenario`."""
    return siblurry_split(labels, n_tasks, disjoint_pct, blurry_pct, seed).train_indices


def samples_per_task(train_indices: list, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Training samples per task of disjoint and of blurry classes ([Tobaben2024] Sec. 7.2: a class is
    disjoint when all its data lie in one task, blurry when they are split over several tasks).
    ``labels[i]`` is the label of train index i (a scenario file's indices are the data set's)."""
    labels = np.asarray(labels)
    task_labels = [labels[np.asarray(idx, dtype=np.int64)] for idx in train_indices]
    classes, n_tasks = np.unique(np.concatenate([np.unique(y) for y in task_labels]), return_counts=True)
    blurry = classes[n_tasks > 1]
    in_blurry = np.array([int(np.isin(y, blurry).sum()) for y in task_labels], dtype=np.int64)
    return np.array([y.size for y in task_labels], dtype=np.int64) - in_blurry, in_blurry


def make_scenario(
    kind: str, labels: np.ndarray, n_tasks: int, seed: int, disjoint_pct: float = 50, blurry_pct: float = 0
) -> Scenario:
    """Build the scenario named ``kind`` (one entry per supported split)."""
    if kind == "disjoint":
        return disjoint_scenario(labels, n_tasks, seed)
    if kind == "iblurry":
        return iblurry_scenario(labels, n_tasks, disjoint_pct, blurry_pct, seed)
    if kind == "siblurry":
        return siblurry_scenario(labels, n_tasks, disjoint_pct, blurry_pct, seed)
    if kind == "datasets":
        return datasets_scenario(labels, n_tasks, seed)
    if kind == "permuted":
        return permuted_scenario(labels, n_tasks, seed)
    raise ValueError(
        f"unknown scenario {kind!r}; known: ['disjoint', 'iblurry', 'siblurry', 'datasets', 'permuted']"
    )


def permuted_scenario(labels: np.ndarray, n_tasks: int, seed: int) -> Scenario:
    """Domain-incremental "permuted features" (the cached-feature analogue of Permuted MNIST, [Lai2022]
    Sec. 6): every task has every class; each class's training samples are dealt by a seeded permutation
    into ``n_tasks`` near-equal parts (each individual in exactly one task); task t sees features through
    the public permutation :func:`feature_permutation` (seed, t) of their dimensions (task 0: identity).
    Task i's test set is all test data seen through task i's permutation, so acc[t, i] and the metrics
    keep their definitions (App. D)."""
    labels = np.asarray(labels)
    classes = [int(c) for c in np.unique(labels)]
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
    gen = rng(seed, "scenario", "permuted", "split")
    parts: list[list[np.ndarray]] = [[] for _ in range(n_tasks)]
    for c in classes:
        idx = gen.permutation(np.flatnonzero(labels == c))
        for t, part in enumerate(np.array_split(idx, n_tasks)):
            parts[t].append(part)
    train_indices = [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]
    return Scenario(
        f"permuted-t{n_tasks}",
        seed,
        classes,
        [list(classes)] * n_tasks,
        train_indices,
        feature_permutation=True,
    )


def feature_permutation(seed: int, task: int, dim: int) -> np.ndarray:
    """The public permutation of feature dimensions seen by ``task`` of a permuted scenario (task 0: identity)."""
    if task == 0:
        return np.arange(dim)
    return rng(seed, "scenario", "permuted", "features", int(task)).permutation(dim)


def datasets_scenario(labels: np.ndarray, n_tasks: int, seed: int, classes_per_dataset: int = 10) -> Scenario:
    """5-datasets ([LabelSpace] App. E, F.5): task t is the whole source dataset ``order[t]``.

    Sources are label blocks of ``classes_per_dataset`` (label // 10 for the composite
    ``five_datasets``); ``order`` is the ``seed``-th of the n! source orders in
    ``itertools.permutations`` order (seed mod n!), so seeds 0..119 run all 120 orders of
    5-datasets and each seed names one order.
    """
    import itertools
    import math

    labels = np.asarray(labels)
    groups = labels // classes_per_dataset
    present = [int(g) for g in np.unique(groups)]
    if n_tasks != len(present):
        raise ValueError(
            f"scenario 'datasets' has one task per source dataset: n_tasks must be {len(present)}, got {n_tasks}"
        )
    order = next(itertools.islice(itertools.permutations(present), seed % math.factorial(len(present)), None))
    task_classes = [sorted(int(c) for c in np.unique(labels[groups == g])) for g in order]
    train_indices = [np.flatnonzero(groups == g).astype(np.int64) for g in order]
    class_order = [c for cs in task_classes for c in cs]
    return Scenario(f"datasets-t{n_tasks}", seed, class_order, task_classes, train_indices)
