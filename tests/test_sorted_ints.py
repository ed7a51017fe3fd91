"""dpcl.sorted_ints.sorted_distinct equals np.unique on int64, fast path or not."""

from __future__ import annotations

import numpy as np
import pytest

from dpcl.sorted_ints import sorted_distinct


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
