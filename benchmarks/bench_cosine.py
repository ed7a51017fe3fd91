"""Cosine-classifier scoring: blocked running top-1 vs one full score matrix.

Synthetic features shaped like the default sweep's Public Labels ×1000 runs (10,000
labels × 1,280 dims, 2,000 test rows). Both give the same predictions; the blocked
path bounds memory to ``max_block_bytes`` and should cost little extra time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from dpcl.learners.cosine import CosineClassifier, normalize_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--labels", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    gen = np.random.default_rng(0)
    clf = CosineClassifier(args.labels, args.dim)
    clf.update(np.zeros((0, args.dim)), np.zeros(0, dtype=int), range(args.labels), 3.73, gen)
    x = gen.normal(size=(args.rows, args.dim))

    def full() -> np.ndarray:
        protos = clf.sums / np.linalg.norm(clf.sums, axis=1, keepdims=True)
        return (normalize_rows(x).astype(np.float32) @ protos.T).argmax(1)

    blocked_t, full_t = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        a = clf.predict(x)
        blocked_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = full()
        full_t.append(time.perf_counter() - t0)
    assert np.array_equal(a, b)
    out = {
        "labels": args.labels,
        "dim": args.dim,
        "rows": args.rows,
        "blocked_s": round(statistics.median(blocked_t), 3),
        "full_matrix_s": round(statistics.median(full_t), 3),
        "ratio_blocked_over_full": round(statistics.median(blocked_t) / statistics.median(full_t), 3),
        "full_matrix_mb": round(args.rows * args.labels * 4 / 2**20, 1),
        "blocked_max_mb": 64,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
