"""Label-space set operations (`dpcl.sorted_ints`) against NumPy's on a large public label space.

NumPy ≥ 2.3 computes ``np.unique`` of integers by hashing, and ``np.union1d`` and ``np.isin`` (against a
second array of any size, with its default ``kind``) call it: on some CPUs that is far slower than a sort.
``sorted_distinct`` and ``sorted_union`` sort (or check that the input is sorted already):
``sorted_distinct`` against ``np.unique`` of an unsorted space, ``sorted_union`` against ``np.union1d``
(the PEFT ensemble's votes growing their label union from empty by a member's space). ``isin`` is
NumPy's own ``np.isin(kind="table")``: against ``np.isin`` with its default kind, and against a binary
search in the sorted space (``isin_search``, the implementation it replaced), a task's labels against its
output space. Every pair's results are asserted equal. Reports milliseconds per call each way and the
ratios (dpcl's time over the other's).

Run: ``python benchmarks/bench_sorted_ints.py [--labels 200000 --samples 3000 --repeats 5]``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from _timing import median_time

from dpcl.sorted_ints import isin, sorted_distinct, sorted_union


def _search_isin(values: np.ndarray, space: np.ndarray) -> np.ndarray:
    """Membership by binary search in a sorted distinct space (dpcl's ``isin`` before it used NumPy's table)."""
    at = np.searchsorted(space, values)
    found = at < space.size
    found[found] = space[at[found]] == values[found]
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=int, default=200_000, help="public labels (ImageNet-R x1000)")
    ap.add_argument("--samples", type=int, default=3000, help="a task's training labels")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    gen = np.random.default_rng(0)
    space = np.sort(gen.choice(10 * args.labels, args.labels, replace=False)).astype(np.int64)
    shuffled = gen.permutation(np.concatenate([space, space[: args.labels // 10]]))  # unsorted, repeats
    y = gen.integers(0, 10 * args.labels, args.samples)
    empty = np.zeros(0, dtype=np.int64)
    pairs = {
        "distinct": (lambda: np.unique(shuffled), lambda: sorted_distinct(shuffled)),
        "union": (lambda: np.union1d(empty, space), lambda: sorted_union(empty, space)),
        "isin": (lambda: np.isin(y, space), lambda: isin(y, space)),
        "isin_search": (lambda: _search_isin(y, space), lambda: isin(y, space)),
    }
    out = {"labels": args.labels, "samples": args.samples}
    for name, (numpy_f, dpcl_f) in pairs.items():
        assert np.array_equal(numpy_f(), dpcl_f()), name
        a, b = 1000 * median_time(numpy_f, args.repeats), 1000 * median_time(dpcl_f, args.repeats)
        out[name] = {"other_ms": round(a, 2), "dpcl_ms": round(b, 2), "ratio": round(b / a, 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
