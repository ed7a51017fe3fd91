"""Head-only DP-SGD: one private epoch against one non-private epoch on the same data.

Target: private/non-private time ratio ≤ 3 at 10,000 × 1280 features, 10 classes,
expected batch 256. The private step adds the closed-form per-sample gradient norms,
clipping and Gaussian noise; the non-private twin skips all three (clip = inf, σ = 0).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dpcl.training.heads import DPSGDConfig, LinearHead, train_head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    g = np.random.default_rng(0)
    x = g.normal(size=(args.n, args.dim)).astype(np.float32)  # cached features are float32
    y = g.integers(0, args.classes, args.n)
    q = args.batch / args.n
    private = DPSGDConfig(sample_rate=q, epochs=1.0, clip=1.0)
    public = DPSGDConfig(sample_rate=q, epochs=1.0, clip=math.inf)

    def epoch(cfg: DPSGDConfig, sigma: float) -> float:
        t0 = time.perf_counter()
        train_head(LinearHead(args.dim, args.classes), x, y, cfg, sigma, np.random.default_rng(1))
        return time.perf_counter() - t0

    with threadpool_limits(args.threads):
        epoch(public, 0.0)  # warm-up
        p, n = [], []
        for _ in range(args.repeats):
            p.append(epoch(private, 1.0))
            n.append(epoch(public, 0.0))
    out = {
        "n": args.n,
        "dim": args.dim,
        "classes": args.classes,
        "expected_batch": args.batch,
        "steps": private.steps,
        "private_epoch_s": round(statistics.median(p), 3),
        "nonprivate_epoch_s": round(statistics.median(n), 3),
        "ratio": round(statistics.median(p) / statistics.median(n), 3),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
