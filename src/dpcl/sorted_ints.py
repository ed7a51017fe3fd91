"""Sorted, distinct integer arrays (label spaces, as every learner and mechanism takes them).

:func:`sorted_distinct` is ``np.unique(np.asarray(values, dtype=np.int64))`` with a fast path for input
that already is sorted and distinct, as label spaces read from their files are (the check that makes it
safe is one comparison per label), and a sort and a comparison of neighbours where it is not: NumPy's
hash-based unique (NumPy >= 2.3) is much slower on large integer arrays, and on integers both give the
same array (``benchmarks/README.md``, "Set operations on label spaces"). :func:`sorted_union` is
``np.union1d`` of two such arrays the same way (the PEFT ensemble's votes grow their label union with
it). :func:`isin` is NumPy's own ``np.isin`` with ``kind="table"`` on integer labels (a boolean table
over the space's range: label spaces are class indices), which skips the unique that ``np.isin``
otherwise calls on its second argument.
"""

from __future__ import annotations

import numpy as np


def sorted_distinct(values) -> np.ndarray:
    """The distinct values of ``values`` (any shape, flattened), sorted, as a new int64 array: equal to
    ``np.unique(np.asarray(values, dtype=np.int64))``."""
    a = np.asarray(values, dtype=np.int64).ravel()
    if a.size < 2 or bool(np.all(a[1:] > a[:-1])):
        return a.copy()  # already sorted and distinct; a copy, as np.unique returns
    a = np.sort(a)
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])  # the first of each run of equal values
    return a[keep]


def sorted_union(a, b) -> np.ndarray:
    """The sorted distinct values of ``a`` and ``b`` together, as a new int64 array: equal to
    ``np.union1d(a, b)`` on integers."""
    return sorted_distinct(
        np.concatenate([np.asarray(a, dtype=np.int64).ravel(), np.asarray(b, dtype=np.int64).ravel()])
    )


def isin(values, space) -> np.ndarray:
    """Boolean array of ``values``' shape: which values lie in ``space``; ``np.isin(values, space)``, with
    ``kind="table"`` where the values are integers (the space is read as int64, so an empty space is one)."""
    v = np.asarray(values)
    sp = np.asarray(space, dtype=np.int64)
    if np.issubdtype(v.dtype, np.integer) or v.dtype == bool:
        return np.isin(v, sp, kind="table")
    return np.isin(v, sp)  # not integer labels: NumPy's default
