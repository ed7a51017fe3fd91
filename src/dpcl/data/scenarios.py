"""Continual-learning task splits (paper 000 Sec. 6, App. D; DESIGN §6).

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
        }

    @classmethod
    def from_dict(cls, d: dict) -> Scenario:
        return cls(
            name=d["name"],
            seed=int(d["seed"]),
            class_order=list(d["class_order"]),
            task_classes=[list(c) for c in d["task_classes"]],
            train_indices=[np.asarray(i, dtype=np.int64) for i in d["train_indices"]],
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


def iblurry_scenario(
    labels: np.ndarray, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int
) -> Scenario:
    """i-Blurry(N, M) of Koh et al. 2022 (paper 000 Sec. 3 "Blurry Tasks", Sec. 6.2).

    N % of the classes are disjoint (all their samples in the one task that owns them),
    the rest are blurry; every task owns an equal share of disjoint and of blurry classes.
    From each task's blurry-class samples M % are taken, pooled, shuffled and dealt
    evenly over all tasks (so a blurry class appears in several tasks). M = 0 is a
    disjoint (class-incremental) split. Each sample is in exactly one task.
    ``task_classes[t]`` are the classes whose training samples first appear in task t
    (the test classes that task t adds to the evaluation).
    """
    labels = np.asarray(labels)
    if not 0 <= disjoint_pct <= 100 or not 0 <= blurry_pct <= 100:
        raise ValueError(
            f"disjoint_pct and blurry_pct must lie in [0, 100], got {disjoint_pct}, {blurry_pct}"
        )
    classes = np.unique(labels)
    if not 1 <= n_tasks <= len(classes):
        raise ValueError(f"n_tasks must lie in 1..{len(classes)} (the number of classes), got {n_tasks}")
    gen = rng(seed, "scenario", "iblurry")
    order = gen.permutation(classes)
    n_disjoint = int(round(disjoint_pct / 100 * len(classes)))
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


def make_scenario(kind: str, labels: np.ndarray, n_tasks: int, seed: int, disjoint_pct: float = 50,
                  blurry_pct: float = 0) -> Scenario:  # fmt: skip
    """Build the scenario named ``kind`` (one entry per supported split)."""
    if kind == "disjoint":
        return disjoint_scenario(labels, n_tasks, seed)
    if kind == "iblurry":
        return iblurry_scenario(labels, n_tasks, disjoint_pct, blurry_pct, seed)
    raise ValueError(f"unknown scenario {kind!r}; known: ['disjoint', 'iblurry']")
