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


def make_scenario(kind: str, labels: np.ndarray, n_tasks: int, seed: int) -> Scenario:
    """Build the scenario named ``kind`` (one entry per supported split)."""
    if kind == "disjoint":
        return disjoint_scenario(labels, n_tasks, seed)
    raise ValueError(f"unknown scenario {kind!r}; known: ['disjoint']")
