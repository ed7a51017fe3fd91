"""Continual-learning metrics ([LabelSpace] App. D, Eq. A98-A100).

acc[t, i] is the test accuracy on task i's test classes after learning task t
(0-based here; NaN where i > t).
- average accuracy AA_t = mean_{i ≤ t} acc[t, i]                          (A98)
- forgetting f_{t,i} = max_{k < t} acc[k, i] − acc[t, i] for i < t        (A99)
  (k ranges over the rows where task i was already learned, i ≤ k < t)
- average forgetting AF_t = mean_{i < t} f_{t,i}; undefined (NaN) for t = 0 (A100)
- worst-case forgetting WF_t = max_{i < t} f_{t,i} ([Desai2021]'s "worst-case" view of the same f)

A task without test classes of its own (possible in blurry scenarios, where a task may
introduce no new class) has an undefined column; the means skip undefined entries.
"""

from __future__ import annotations

import numpy as np


def accuracy_matrix(predictions: list[list[np.ndarray]], targets: list[np.ndarray]) -> np.ndarray:
    """acc[t, i] from ``predictions[t][i]`` (after task t, on task i's test set) and ``targets[i]``.

    A ``None`` prediction leaves acc[t, i] undefined (NaN), e.g. for a non-CL model that
    exists only after the last task.
    """
    n = len(targets)
    acc = np.full((n, n), np.nan)
    for t, row in enumerate(predictions):
        for i, pred in enumerate(row[: t + 1]):
            y = np.asarray(targets[i])
            if pred is None or not y.size:
                continue
            acc[t, i] = float(np.mean(np.asarray(pred) == y))
    return acc


def _nanmean(v: np.ndarray) -> float:
    v = v[~np.isnan(v)]
    return float(v.mean()) if v.size else float("nan")


def average_accuracy(acc: np.ndarray) -> np.ndarray:
    """AA_t for every t (A98), over the tasks i ≤ t whose accuracy is defined."""
    acc = np.asarray(acc, dtype=float)
    return np.array([_nanmean(acc[t, : t + 1]) for t in range(len(acc))])


def forgetting(acc: np.ndarray) -> np.ndarray:
    """f[t, i] = max_{i ≤ k < t} acc[k, i] − acc[t, i] for i < t, NaN elsewhere (A99)."""
    acc = np.asarray(acc, dtype=float)
    n = len(acc)
    f = np.full((n, n), np.nan)
    for t in range(1, n):
        for i in range(t):
            past = acc[i:t, i]
            if not np.all(np.isnan(past)):
                f[t, i] = np.nanmax(past) - acc[t, i]
    return f


def average_forgetting(acc: np.ndarray) -> np.ndarray:
    """AF_t for every t (A100); NaN at t = 0, where no task has been left behind yet."""
    f = forgetting(acc)
    return np.array([np.nan] + [_nanmean(f[t, :t]) for t in range(1, len(f))])


def worst_case_forgetting(acc: np.ndarray) -> np.ndarray:
    """WF_t = max_{i < t} f_{t,i} for every t; NaN at t = 0 and where no f_{t,i} is defined."""
    f = forgetting(acc)
    out = [np.nan]
    for t in range(1, len(f)):
        row = f[t, :t][~np.isnan(f[t, :t])]
        out.append(float(row.max()) if row.size else np.nan)
    return np.array(out)
