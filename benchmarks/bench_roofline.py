"""Head DP-SGD step against the machine's limit: a roofline measured in the same run.

    python benchmarks/bench_roofline.py [--n 10000 --dim 1280 --batch 256 --outputs 2 10 --plot roofline.png]

The machine: the throughput of a large float32 matrix product (its compute roof, FLOP/s: the step's two
products with the batch run in float32), of a large array copy (its memory roof, bytes/s) and of drawing
standard normals (its noise roof, draws/s: the Gaussian mechanism's essential work is neither FLOPs nor
traffic), all measured here with the same thread count as the step.

The step (``dpcl.training.heads.train_head``, one Poisson-sampled batch of expected size ``batch`` from
``n`` records of ``dim`` features, ``outputs`` classes): its essential work, counted from the algorithm,
not from the implementation —

* FLOPs: the logits (2·b·d·k), the clipped gradient sum (2·b·d·k), the per-example norms
  (2·b·d for ‖x‖², 2·b·k for ‖δ‖²), softmax and clipping (≈ 8·b·k), Adam (≈ 12·(d + 1)·k);
* bytes: the batch's float32 rows read once (b·d·4), the head, its gradient, the noise and Adam's two
  moments read and written in float64 (≈ 10·(d + 1)·k·8) and the sample's indices (b·8);
* normals: the noise, (d + 1)·k draws (private step only).

Its bound is max(FLOPs / compute roof, bytes / memory roof) + normals / noise roof; the report gives the
measured step time, the bound and their ratio (1 = at the machine's limit), for the private step and its
non-private twin (clip = ∞, σ = 0, same sampling; its bound has no noise term), and the
private/non-private ratio. Ratios, never absolute times, are what compares across machines.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass

import numpy as np
from _timing import median_time
from threadpoolctl import threadpool_limits

from dpcl.training.heads import DPSGDConfig, LinearHead, train_head


@dataclass(frozen=True)
class Roofs:
    flops_per_s: float  # float32 matrix product
    bytes_per_s: float  # large array copy (read + write counted)
    normals_per_s: float  # numpy Generator.standard_normal (float64, as the mechanism draws)


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure_roofs(repeats: int = 5) -> Roofs:
    g = np.random.default_rng(0)
    m = 1024
    a, b = g.normal(size=(m, m)).astype(np.float32), g.normal(size=(m, m)).astype(np.float32)
    a @ b  # warm-up
    t = _best(lambda: a @ b, repeats)
    src = g.normal(size=16 * 2**20 // 8 * 8)  # 128 MB: beyond any cache
    dst = np.empty_like(src)
    np.copyto(dst, src)
    c = _best(lambda: np.copyto(dst, src), repeats)
    noise = np.empty(2**20)
    r = _best(lambda: g.standard_normal(out=noise), repeats)
    return Roofs(flops_per_s=2 * m**3 / t, bytes_per_s=2 * src.nbytes / c, normals_per_s=noise.size / r)


@dataclass(frozen=True)
class StepWork:
    flops: float
    bytes: float
    normals: float

    @classmethod
    def head_step(cls, *, batch: int, dim: int, outputs: int, private: bool) -> StepWork:
        b, d, k = batch, dim, outputs
        flops = 4 * b * d * k + 2 * b * d + 2 * b * k + 8 * b * k + 12 * (d + 1) * k
        nbytes = 4 * b * d + 8 * (10 * (d + 1) * k + b)
        return cls(flops=float(flops), bytes=float(nbytes), normals=float((d + 1) * k if private else 0))

    def bound_s(self, roofs: Roofs) -> float:
        return (
            max(self.flops / roofs.flops_per_s, self.bytes / roofs.bytes_per_s)
            + self.normals / roofs.normals_per_s
        )


def step_time(*, x, y, outputs: int, q: float, private: bool, steps: int, repeats: int) -> float:
    cfg = DPSGDConfig(sample_rate=q, epochs=steps * q, clip=1.0 if private else math.inf)
    sigma = 1.0 if private else 0.0

    def run() -> None:
        train_head(LinearHead(x.shape[1], outputs), x, y, cfg, sigma, np.random.default_rng(1))

    return median_time(run, repeats) / cfg.steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="records the batch is sampled from")
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--batch", type=int, default=256, help="expected batch size (q = batch / n)")
    ap.add_argument("--outputs", type=int, nargs="+", default=[2, 10])
    ap.add_argument("--steps", type=int, default=200, help="steps per timed training")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--plot", default=None, help="write the roofline figure to this PNG")
    args = ap.parse_args()
    g = np.random.default_rng(0)
    x = g.normal(size=(args.n, args.dim)).astype(np.float32)  # cached features are float32
    q = args.batch / args.n
    rows = []
    with threadpool_limits(args.threads):
        roofs = measure_roofs(args.repeats)
        for k in args.outputs:
            y = g.integers(0, k, args.n)
            work = StepWork.head_step(batch=args.batch, dim=args.dim, outputs=k, private=True)
            work_pub = StepWork.head_step(batch=args.batch, dim=args.dim, outputs=k, private=False)
            bound, bound_pub = work.bound_s(roofs), work_pub.bound_s(roofs)
            t_priv = step_time(x=x, y=y, outputs=k, q=q, private=True, steps=args.steps, repeats=args.repeats)
            t_pub = step_time(x=x, y=y, outputs=k, q=q, private=False, steps=args.steps, repeats=args.repeats)
            rows.append(
                {
                    "outputs": k,
                    "flops": work.flops,
                    "bytes": work.bytes,
                    "normals": work.normals,
                    "bound_ms": round(bound * 1e3, 4),
                    "nonprivate_bound_ms": round(bound_pub * 1e3, 4),
                    "private_ms": round(t_priv * 1e3, 4),
                    "nonprivate_ms": round(t_pub * 1e3, 4),
                    "private_over_bound": round(t_priv / bound, 2),
                    "nonprivate_over_bound": round(t_pub / bound_pub, 2),
                    "private_over_nonprivate": round(t_priv / t_pub, 3),
                }
            )
    out = {
        "n": args.n,
        "dim": args.dim,
        "expected_batch": args.batch,
        "roofs": {
            "gflops": round(roofs.flops_per_s / 1e9, 2),
            "gbytes_per_s": round(roofs.bytes_per_s / 1e9, 2),
            "mnormals_per_s": round(roofs.normals_per_s / 1e6, 2),
        },
        "steps": rows,
    }
    print(json.dumps(out, indent=1))
    if args.plot:
        plot(roofs, rows, args.plot)


def plot(roofs: Roofs, rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    intensity = np.logspace(-2, 3, 200)
    ax.loglog(
        intensity,
        np.minimum(roofs.flops_per_s, intensity * roofs.bytes_per_s) / 1e9,
        "k-",
        label="machine roof",
    )
    for row, marker in zip(rows, "os^v", strict=False):
        ai = row["flops"] / row["bytes"]
        for kind, fill, bound_key in (
            ("private", "C3", "bound_ms"),
            ("nonprivate", "C0", "nonprivate_bound_ms"),
        ):
            rate = row["flops"] / (row[f"{kind}_ms"] / 1e3) / 1e9
            ceiling = row["flops"] / (row[bound_key] / 1e3) / 1e9  # the step's own bound (noise included)
            ax.loglog([ai, ai], [rate, ceiling], "-", color=fill, alpha=0.4)
            ax.loglog(ai, ceiling, marker, color=fill, mfc="none")
            ax.loglog(
                ai,
                rate,
                marker,
                color=fill,
                label=f"{kind.replace('nonprivate', 'non-private')}, {row['outputs']} outputs",
            )
    ax.set_xlabel("arithmetic intensity (FLOP / byte of essential traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Head DP-SGD step against the machine's roofline\n(filled: measured; hollow: its bound)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
