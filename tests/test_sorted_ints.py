"""dpcl.sorted_ints.sorted_distinct equals np.unique on int64, fast path or not; sorted_union equals
np.union1d."""

from __future__ import annotations

import numpy as np
import pytest

from dpcl.sorted_ints import isin, sorted_distinct, sorted_union


@pytest.mark.parametrize(
    "values",
    [
        [],
        [7],
        [0, 1, 2, 5, 9],  # sorted, distinct: the fast path
        [0, 1, 1, 2],  # sorted with a repeat
        [3, 1, 2],  # unsorted
        [5, 4, 4, -1],
        np.arange(200_000)[::-1],
        np.random.default_rng(0).integers(-50, 10**6, 200_000),  # unsorted with repeats: the sort
        [[2, 1], [1, 3]],  # any shape is flattened, as np.unique does
        np.array([0.0, 2.0, 3.0]),  # floats holding integers
        (np.int32(1), np.int32(4)),
    ],
)
def test_equals_np_unique(values):
    got = sorted_distinct(values)
    ref = np.unique(np.asarray(values, dtype=np.int64))
    assert got.dtype == np.int64 and got.shape == ref.shape and np.array_equal(got, ref)


def test_the_result_is_a_new_array():
    a = np.arange(5, dtype=np.int64)
    out = sorted_distinct(a)
    out[0] = 99
    assert a[0] == 0


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([], []),
        ([], [3, 5, 9]),  # the ensemble's first member: an empty union grows to its labels
        ([1, 4], []),
        ([1, 4, 7], [1, 4, 7]),
        ([0, 2, 4], [1, 2, 3, 9]),
        ([5, 5, -2], [[3, 5], [0, 0]]),
        (np.arange(0, 200_000, 2), np.arange(100_000, 300_000)),
    ],
)
def test_sorted_union_equals_np_union1d(a, b):
    got = sorted_union(a, b)
    ref = np.union1d(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    assert got.dtype == np.int64 and got.shape == ref.shape and np.array_equal(got, ref)


@pytest.mark.parametrize(
    ("values", "space"),
    [
        ([], []),
        ([1, 2, 3], []),
        ([], [1, 2]),
        ([3, 1, 4, 1, 5, 9, -2], [1, 9, -2]),
        ([[0, 7], [8, 7]], [7, 8, 7, 0]),  # shape kept; an unsorted space with a repeat
        (np.array([5, 6], dtype=np.int32), [6]),
        (np.array([0.0, 2.5, 3.0]), [0, 3]),  # not integers: NumPy's own comparison
        (np.random.default_rng(1).integers(0, 10**6, 3000), np.arange(0, 10**6, 5)),
    ],
)
def test_isin_equals_np_isin(values, space):
    got = isin(values, space)
    ref = np.isin(np.asarray(values), np.asarray(space, dtype=np.int64))
    assert got.dtype == bool and got.shape == ref.shape and np.array_equal(got, ref)
