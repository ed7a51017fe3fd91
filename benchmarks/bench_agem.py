"""DP-A-GEM against the head learners, per DP-SGD step: the learner and its tuning.

    python benchmarks/bench_agem.py [--n 1024 --buffer 512 --dim 1280 --batch 256 --outputs 10 --trials 6]

* **Learner**: one task of DP-A-GEM with a memory buffer (``dpcl.learners.agem.train_agem_task``: a private
  gradient of the task's Poisson batch, a private reference gradient of the buffer's, the projection, Adam)
  against the head learners' step (``dpcl.training.heads.train_head``) on the same task data, the same
  DP-SGD configuration and the same number of outputs. The buffer is read at the training rate q.
* **Tuning**: DP-A-GEM's Optuna study (``tune_agem_head``: two tasks, the second with the buffer, plus the
  buffer rate searched) against the heads' (``tune_head``) on one tuning set, same trial count and
  epochs; each study's time is divided by the DP-SGD steps its trials took (trials differ in batch size,
  so in steps), which charges the sampler's and the noise calibrations' time (accountant cache off) to the
  steps as well.

Reports seconds per step and the ratios agem / head. Target: ≤ 1.5 for both.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

# the studies' noise calibrations are part of their cost: computed every time, never read from disk
os.environ["DPCL_ACCOUNTING_CACHE"] = "off"

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from dpcl.learners.agem import train_agem_task, tune_agem_head  # noqa: E402
from dpcl.training.heads import DPSGDConfig, LinearHead, train_head  # noqa: E402
from dpcl.training.tuning import tune_head  # noqa: E402


def learner_step_times(*, x, y, bx, by, outputs: int, q: float, steps: int, repeats: int) -> dict:
    cfg = DPSGDConfig(sample_rate=q, epochs=steps * q, clip=1.0)
    active = np.ones(outputs, dtype=bool)

    def head() -> None:
        train_head(LinearHead(x.shape[1], outputs), x, y, cfg, 1.0, np.random.default_rng(1))

    def agem() -> None:
        train_agem_task(
            LinearHead(x.shape[1], outputs), x, y, bx, by, cfg, sigma=1.0, q_ref=q, sigma_ref=1.0,
            gen=np.random.default_rng(1), gen_ref=np.random.default_rng(2), active=active,
        )  # fmt: skip

    t_head = median_time(head, repeats) / cfg.steps
    t_agem = median_time(agem, repeats) / cfg.steps
    return {
        "head_ms": round(t_head * 1e3, 4),
        "agem_ms": round(t_agem * 1e3, 4),
        "ratio": round(t_agem / t_head, 3),
    }


def tuning_step_times(*, x, y, trials: int, epochs: float) -> dict:
    def steps_of(res: dict, per_trial_tasks: int) -> int:
        n_tr = res["tuning_set"]["train"]
        return sum(
            per_trial_tasks * DPSGDConfig(sample_rate=t["params"]["batch_size"] / n_tr, epochs=epochs).steps
            for t in res["trials"]
        )

    tune_head(x, y, 1.0, 1e-5, 1, n_trials=1, epochs=0.1)  # warm-up: the imports are no study's cost
    t0 = time.perf_counter()
    res_head = tune_head(x, y, 1.0, 1e-5, 0, n_trials=trials, epochs=epochs)
    t_head = (time.perf_counter() - t0) / steps_of(res_head, 1)
    t0 = time.perf_counter()
    res_agem = tune_agem_head(x, y, 1.0, 1e-5, 0, 0.1, n_trials=trials, epochs=epochs)
    # each trial trains two tasks of `steps` steps on half the classes each
    t_agem = (time.perf_counter() - t0) / steps_of(res_agem, 2)
    return {
        "head_ms": round(t_head * 1e3, 4),
        "agem_ms": round(t_agem * 1e3, 4),
        "ratio": round(t_agem / t_head, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024, help="the task's training records")
    ap.add_argument("--buffer", type=int, default=512, help="records in the memory buffer")
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--batch", type=int, default=256, help="expected batch size (q = batch / n)")
    ap.add_argument("--outputs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--tune-n", type=int, default=1200, help="tuning set size (0: skip the tuning comparison)"
    )
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--tune-epochs", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    g = np.random.default_rng(0)
    x = g.normal(size=(args.n, args.dim)).astype(np.float32)
    y = g.integers(0, args.outputs, args.n)
    bx = g.normal(size=(args.buffer, args.dim)).astype(np.float32)
    by = g.integers(0, args.outputs, args.buffer)
    out: dict = {"n": args.n, "buffer": args.buffer, "dim": args.dim, "expected_batch": args.batch}
    with threadpool_limits(args.threads):
        out["learner"] = learner_step_times(
            x=x, y=y, bx=bx, by=by, outputs=args.outputs, q=args.batch / args.n, steps=args.steps,
            repeats=args.repeats,
        )  # fmt: skip
        if args.tune_n:
            centres = g.normal(size=(4, args.dim)) * 0.5
            ty = np.arange(args.tune_n) % 4
            tx = (centres[ty] + g.normal(size=(args.tune_n, args.dim))).astype(np.float32)
            out["tuning"] = tuning_step_times(x=tx, y=ty, trials=args.trials, epochs=args.tune_epochs)
    out["target"] = "ratio <= 1.5"
    print(json.dumps(out, indent=1))
    if not math.isfinite(out["learner"]["ratio"]):
        raise SystemExit("no timing")


if __name__ == "__main__":
    main()
