"""Where a private head DP-SGD step's time goes: its parts, each timed on its own, against the whole step.

    python benchmarks/bench_step_parts.py [--dim 1280 --outputs 10 --shapes 540:24 10000:256 --steps 1000 --rounds 5]

One step of ``dpcl.training.heads.train_head`` is one release of ``dpcl.training.clipped_sum.noisy_clipped_sum``
and one Adam step. This script takes the step apart with the functions the release itself calls, in its
order, and times each part over ``--steps`` consecutive steps of a real run (the head moves, the batches
are fresh Poisson samples):

* ``sample``: the Poisson sample (``dpcl.privacy.sampling.by_gaps``, geometric gaps);
* ``gather``: the batch's float32 feature rows (``HeadData.rows``);
* ``logits``: the float32 logits, softmax and δ = p − e_y (``logit_grads32``);
* ``clip``: the per-example gradient norms and clipping factors (``clip_factors``) and δ scaled by them;
* ``sums``: the clipped gradient sums, δᵀX (float32) and Σδ (float64);
* ``noise``: the Gaussian noise, (d + 1)·k standard normals (``Generator.standard_normal``);
* ``add``: the noise scaled by σC and the sums added to it;
* ``adam``: ``dpcl.training.adam.Adam.step``.

Each shape ``n:b`` is a task of n records with an expected batch of b (rate b/n). The defaults are the
embedded default's DP-A-GEM and Desai et al. jobs (a task's ~540 training records after the buffer's
share, its tuned rates near 0.045: batches of ~24) and the roofline benchmark's 256 of 10,000. Reports
microseconds per step for each part, their sum, the whole step timed as ``train_head`` runs it, and the
noise's share of the whole: medians over ``--rounds`` rounds, each timing the parts and then the whole
step (these 2-core machines drift by a third within minutes; a round keeps both in one window). A
DP-A-GEM step is two such releases (the task's and the buffer's), one projection and one Adam step: its
noise share is larger still.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dpcl.privacy.sampling import by_gaps
from dpcl.training.adam import Adam
from dpcl.training.clipped_sum import HeadData, clip_factors, logit_grads32
from dpcl.training.heads import DPSGDConfig, LinearHead, train_head

PARTS = ("sample", "gather", "logits", "clip", "sums", "noise", "add", "adam")


def parts_per_step(
    *, n: int, batch: int, dim: int, outputs: int, steps: int, seed: int = 0
) -> dict[str, float]:
    """Seconds per step of each part, over ``steps`` steps of one private run (σ = 1, C = 1)."""
    g = np.random.default_rng(seed)
    data = HeadData(g.standard_normal((n, dim)).astype(np.float32), g.integers(0, outputs, n))
    head = LinearHead(dim, outputs)
    cfg = DPSGDConfig(sample_rate=batch / n, epochs=1.0, clip=1.0, normaliser=batch)
    adam = Adam.for_head(head, cfg)
    out = np.empty_like(head.params)
    w, b = head.w, head.b
    spent = dict.fromkeys(PARTS, 0.0)
    gen = np.random.default_rng(seed + 1)
    clock = time.perf_counter
    for _ in range(steps):
        t0 = clock()
        idx = by_gaps(gen, n, cfg.sample_rate, population=data.x)
        t1 = clock()
        xb = data.rows(idx)
        t2 = clock()
        d = logit_grads32(w, b, xb, data.y[idx], None)
        t3 = clock()
        c = clip_factors(data.sq1[idx], d, cfg.clip)
        d *= c.astype(np.float32)[:, None]
        t4 = clock()
        s_w, s_b = d.T @ xb, d.sum(axis=0, dtype=np.float64)
        t5 = clock()
        gen.standard_normal(out=out)
        t6 = clock()
        out *= cfg.clip
        out[: w.size].reshape(w.shape)[...] += s_w
        out[w.size :] += s_b
        t7 = clock()
        adam.step([out])
        t8 = clock()
        for name, dt in zip(PARTS, np.diff([t0, t1, t2, t3, t4, t5, t6, t7, t8]), strict=True):
            spent[name] += dt
    return {name: s / steps for name, s in spent.items()}


def whole_step(*, n: int, batch: int, dim: int, outputs: int, steps: int, seed: int = 0) -> float:
    """Seconds per step of ``train_head`` itself on the same data and configuration."""
    g = np.random.default_rng(seed)
    x, y = g.standard_normal((n, dim)).astype(np.float32), g.integers(0, outputs, n)
    cfg = DPSGDConfig(sample_rate=batch / n, epochs=steps * batch / n, clip=1.0, normaliser=batch)
    t0 = time.perf_counter()
    train_head(LinearHead(dim, outputs), x, y, cfg, 1.0, np.random.default_rng(seed + 1))
    return (time.perf_counter() - t0) / cfg.steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=1280)
    p.add_argument("--outputs", type=int, default=10)
    p.add_argument("--shapes", nargs="+", default=["540:24", "10000:256"], help="n:expected_batch")
    p.add_argument("--steps", type=int, default=1000, help="steps per timing")
    p.add_argument("--rounds", type=int, default=5, help="rounds of (parts, whole step); medians reported")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads (the pipeline's jobs run one)")
    args = p.parse_args(argv)
    report = {"dim": args.dim, "outputs": args.outputs, "normals_per_release": (args.dim + 1) * args.outputs}
    rows = []
    with threadpool_limits(args.threads):
        for shape in args.shapes:
            n, batch = (int(v) for v in shape.split(":"))
            kw = dict(n=n, batch=batch, dim=args.dim, outputs=args.outputs, steps=args.steps)
            parts_per_step(**{**kw, "steps": 50})  # warm-up: buffers grown, code paths taken once
            rounds = [(parts_per_step(**kw), whole_step(**kw)) for _ in range(args.rounds)]
            parts = {k: statistics.median(r[0][k] for r in rounds) for k in PARTS}
            whole = statistics.median(r[1] for r in rounds)
            rows.append(
                {
                    "n": n,
                    "expected_batch": batch,
                    "parts_us": {k: round(v * 1e6, 1) for k, v in parts.items()},
                    "sum_of_parts_us": round(sum(parts.values()) * 1e6, 1),
                    "train_head_step_us": round(whole * 1e6, 1),
                    "noise_share_of_step": round(parts["noise"] / whole, 3),
                }
            )
    report["shapes"] = rows
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
