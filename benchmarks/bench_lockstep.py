"""Runs of one job in lockstep: R independent head DP-SGD runs as one batched computation, against
the same R runs one at a time (``dpcl.training.heads.train_head``).

    python benchmarks/bench_lockstep.py [--runs 6 18 --n 10000 --dim 1280 --batch 256 --outputs 2 10]

The runs share their features and labels and differ in their noise multiplier and their random
streams (as a job's ε × seed runs do). The lockstep candidate keeps each run's law exactly: every
run draws, from its own generator and in train_head's order, its Poisson sample (by gaps), its
weight noise and its bias noise; then one padded gather of every run's batch (R × B_max rows, a mask
for the padding), batched float32 products for the logits and the clipped gradient sums, the
clipping factors in float64 with train_head's float32 margin, and one Adam step over the stacked
(R, k, d) heads. Only the order of float32 summation can differ from one-at-a-time (padded products),
so the report gives the largest difference of the trained heads as well as the times.

What it shows: whether the per-call overhead that one run's step pays (about 45 NumPy calls on
arrays of a few hundred kB) is worth trading for R times the batch's memory traffic (the padded
gather of R × B_max × d float32 values no longer stays in cache between the gather and the two
products). Ratios in one run, never absolute times, compare across machines.
"""

from __future__ import annotations

import argparse
import json
from functools import partial

import numpy as np
from _timing import median_time
from threadpoolctl import threadpool_limits

from dpcl.privacy.sampling import by_gaps
from dpcl.training.adam import Adam
from dpcl.training.clipped_sum import CLIP_MARGIN, FLOOR
from dpcl.training.heads import DPSGDConfig, LinearHead, train_head


def train_lockstep(
    x: np.ndarray, y: np.ndarray, n_out: int, cfg: DPSGDConfig, sigmas: list[float], gens: list
) -> tuple[np.ndarray, np.ndarray]:
    """R = len(sigmas) private runs of train_head's algorithm in lockstep; returns the (R, k, d) weights
    and (R, k) biases (float64, as train_head's heads)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    r_count = len(sigmas)
    sq1 = np.einsum("ij,ij->i", x, x, dtype=np.float64) + 1.0
    w = np.zeros((r_count, n_out, d))
    b = np.zeros((r_count, n_out))
    std = np.asarray(sigmas, dtype=np.float64)[:, None, None] * cfg.clip
    adam = Adam(
        [w, b], lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps, normaliser=cfg.normaliser
    )  # elementwise
    noise_w, noise_b = np.empty_like(w), np.empty_like(b)
    for _ in range(cfg.steps):
        batches = [by_gaps(g, n, cfg.sample_rate, population=x) for g in gens]
        width = max(1, max(len(bt) for bt in batches))
        idx = np.zeros((r_count, width), dtype=np.int64)
        live = np.zeros((r_count, width), dtype=bool)
        for r, bt in enumerate(batches):
            idx[r, : len(bt)] = bt
            live[r, : len(bt)] = True
            noise_w[r] = gens[r].standard_normal((n_out, d))  # train_head's order: sample, weight, bias
            noise_b[r] = gens[r].standard_normal(n_out)
        xb = np.take(x, idx.ravel(), axis=0).reshape(r_count, width, d)  # one gather for every run
        yb = y[idx][..., None]
        z = np.matmul(xb, w.astype(np.float32).transpose(0, 2, 1))
        z += b.astype(np.float32)[:, None, :]
        z -= z.max(axis=2, keepdims=True)
        np.maximum(z, FLOOR, out=z)
        np.exp(z, out=z)
        z /= z.sum(axis=2, keepdims=True)
        np.put_along_axis(z, yb, np.take_along_axis(z, yb, 2) - 1.0, 2)
        norms = np.sqrt(sq1[idx] * np.einsum("rbk,rbk->rb", z, z, dtype=np.float64))
        c = np.minimum(1.0, (cfg.clip * CLIP_MARGIN) / np.maximum(norms, 1e-12))
        c[~live] = 0.0  # the padding contributes nothing
        z *= c.astype(np.float32)[..., None]
        g_w = np.matmul(z.transpose(0, 2, 1), xb).astype(np.float64)
        g_b = z.sum(axis=1, dtype=np.float64)
        g_w += noise_w * std
        g_b += noise_b * std[:, :, 0]
        adam.step([g_w, g_b])
    return w, b


def _one_at_a_time(*, x, y, n_out: int, cfg: DPSGDConfig, sigmas: list[float]) -> list[LinearHead]:
    heads = [LinearHead(x.shape[1], n_out) for _ in sigmas]
    for r, (head, s) in enumerate(zip(heads, sigmas, strict=True)):
        train_head(head, x, y, cfg, s, np.random.default_rng(100 + r))
    return heads


def _lockstep(*, x, y, n_out: int, cfg: DPSGDConfig, sigmas: list[float]) -> tuple[np.ndarray, np.ndarray]:
    gens = [np.random.default_rng(100 + r) for r in range(len(sigmas))]  # the same streams as one at a time
    return train_lockstep(x, y, n_out, cfg, sigmas, gens)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[6, 18], help="runs per job (R)")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--batch", type=int, default=256, help="expected batch size (q = batch / n)")
    ap.add_argument("--outputs", type=int, nargs="+", default=[2, 10])
    ap.add_argument("--steps", type=int, default=100, help="steps per timed training")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    g = np.random.default_rng(0)
    x = g.normal(size=(args.n, args.dim)).astype(np.float32)
    q = args.batch / args.n
    cfg = DPSGDConfig(sample_rate=q, epochs=args.steps * q, clip=1.0)
    rows = []
    with threadpool_limits(args.threads):
        for k in args.outputs:
            y = g.integers(0, k, args.n)
            for r_count in args.runs:
                sigmas = [0.5 + 0.25 * r for r in range(r_count)]

                one_at_a_time = partial(_one_at_a_time, x=x, y=y, n_out=k, cfg=cfg, sigmas=sigmas)
                lockstep = partial(_lockstep, x=x, y=y, n_out=k, cfg=cfg, sigmas=sigmas)
                heads = one_at_a_time()
                w, b = lockstep()
                diff = max(
                    max(float(np.abs(h.w - w[r]).max()), float(np.abs(h.b - b[r]).max()))
                    for r, h in enumerate(heads)
                )
                scale = max(float(np.abs(h.w).max()) for h in heads)
                t_one = median_time(one_at_a_time, args.repeats) / cfg.steps
                t_lock = median_time(lockstep, args.repeats) / cfg.steps
                rows.append(
                    {
                        "outputs": k,
                        "runs": r_count,
                        "one_at_a_time_ms_per_step": round(t_one * 1e3, 3),
                        "lockstep_ms_per_step": round(t_lock * 1e3, 3),
                        "speedup": round(t_one / t_lock, 2),
                        "max_abs_difference": diff,
                        "max_abs_weight": scale,
                    }
                )
    print(json.dumps({"n": args.n, "dim": args.dim, "expected_batch": args.batch, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
