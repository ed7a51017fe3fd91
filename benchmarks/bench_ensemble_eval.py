"""The PEFT ensemble's evaluation over a large public label space, and the JSON writer.

1. One member joining the ensemble's votes on a test set (`EnsembleVotes.add`: the argmax,
   median and entropy rules) with |O_l| = 100,000 outputs (Public Labels ×1000 on CIFAR-100)
   and 20 test rows, against the same rules written as before, with ``np.median`` (NumPy
   partitions at the two middle indices and the last one at once, a slower path) and a fresh
   array per intermediate result. The two give the same votes bit for bit (asserted).
2. Writing a released label file of 200,000 labels (Public Labels ×1000 on ImageNet-R) with
   `dpcl.io.json_text` against ``json.dumps(..., indent=1)`` after the non-finite cleaning
   (the standard library's pure-Python indented encoder); the same bytes (asserted).

Run: ``python benchmarks/bench_ensemble_eval.py [--labels 100000 --rows 20 --repeat 20]``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from _timing import median_time

from dpcl import io
from dpcl.learners.aggregation import EnsembleVotes, entropy


class _Reference:
    """EnsembleVotes.add for a repeated label space as written before (np.median, temporaries)."""

    def __init__(self, n: int, labels: np.ndarray) -> None:
        self.best = {r: np.full(n, -np.inf) for r in ("argmax", "median")}
        self.pred = {r: np.full(n, -1, dtype=np.int64) for r in ("argmax", "median")}
        self.score = np.zeros((n, labels.size))
        self.labels = labels

    def add(self, z: np.ndarray) -> None:
        rows = np.arange(z.shape[0])
        for rule in ("argmax", "median"):
            zz = z - np.median(z, axis=1, keepdims=True) if rule == "median" else z
            j = zz.argmax(axis=1)
            s = zz[rows, j]
            better = s > self.best[rule]
            self.best[rule][better] = s[better]
            self.pred[rule][better] = self.labels[j[better]]
        self.score += np.exp(-entropy(z))[:, None] * z


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    labels = np.arange(args.labels, dtype=np.int64)
    print(f"ensemble votes: one member over {args.labels:,} labels x {args.rows} test rows")
    for dtype in (np.float32, np.float64):  # FiLM members' logits are float32, the heads' float64
        members = [rng.normal(size=(args.rows, args.labels)).astype(dtype) for _ in range(4)]
        new, ref = EnsembleVotes(args.rows), _Reference(args.rows, labels)
        for z in members:
            new.add(z, labels)
            ref.add(z)
        for rule in ("argmax", "median"):
            assert np.array_equal(new.predict(rule), ref.pred[rule])
        assert np.array_equal(new._score, ref.score)
        t_new = median_time(lambda z=members[0], v=new: v.add(z, labels), args.repeat)
        t_ref = median_time(lambda z=members[0], r=ref: r.add(z), args.repeat)
        print(
            f"  {np.dtype(dtype).name}: {1e3 * t_new:.2f} ms per member vs {1e3 * t_ref:.2f} ms before "
            f"(ratio {t_new / t_ref:.2f}; identical votes)"
        )
    doc = {
        "method": "public-x1000",
        "tasks": [{"labels": rng.permutation(200_000)[:20_000].tolist()} for _ in range(10)],
    }
    assert io.json_text(doc) == json.dumps(io._clean(doc), indent=1, default=io._json_default)
    t_new = median_time(lambda: io.json_text(doc), 3)
    t_ref = median_time(lambda: json.dumps(io._clean(doc), indent=1, default=io._json_default), 3)
    print(
        f"label file of 200,000 labels: json_text {1e3 * t_new:.0f} ms vs json.dumps(indent=1) "
        f"{1e3 * t_ref:.0f} ms (ratio {t_new / t_ref:.2f}; identical bytes)"
    )


if __name__ == "__main__":
    main()
