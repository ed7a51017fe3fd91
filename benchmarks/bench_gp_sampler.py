"""The tuning studies' GP sampler (`dpcl.training.tuning.gp_sampler`) against Optuna's own `GPSampler`.

Optuna runs the GP sampler's acquisition search under ``with torch.device("cpu")``, a torch function
mode through which every small tensor operation of the search passes a Python handler; dpcl's sampler
switches that dispatch off inside the search. Both run the same study as `dpcl.training.tuning.tune_dpsgd`
does: DP-A-GEM's search space (learning rate, expected batch size, clipping bound, buffer rate; the
heads' has the first three), a fresh sampler seeded per trial, ``--trials`` trials of which the first 10
are Optuna's random start-up; the objective is a cheap deterministic function of the parameters, so
the time is the sampler's. Reports seconds per study each way, the ratio, and checks that both studies
suggested the same parameters bit for bit (asserted).

Run: ``python benchmarks/bench_gp_sampler.py [--trials 20 --studies 3]``.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import optuna
import torch

from dpcl.training.tuning import CLIP_RANGE, LR_RANGE, MIN_BATCH, gp_sampler


def objective(trial: optuna.Trial, n_train: int) -> float:
    lr = trial.suggest_float("lr", *LR_RANGE, log=True)
    batch = trial.suggest_int("batch_size", MIN_BATCH, n_train, log=True)
    clip = trial.suggest_float("clip", *CLIP_RANGE, log=True)
    rate = trial.suggest_float("buffer_sample_rate", MIN_BATCH / n_train, 1.0, log=True)
    return math.sin(math.log(lr)) * math.cos(batch / 50) + 0.1 * math.log(clip) * rate


def study(make_sampler, *, trials: int, seed: int, n_train: int) -> tuple[float, list[dict]]:
    """(seconds, the trials' parameters) of one study with a fresh sampler per trial."""
    s = optuna.create_study(direction="maximize")
    t0 = time.perf_counter()
    for k in range(trials):
        s.sampler = make_sampler((seed + 7919 * k) % 2**31)
        s.optimize(lambda t: objective(t, n_train), n_trials=1)
    return time.perf_counter() - t0, [t.params for t in s.trials]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--studies", type=int, default=3, help="studies each way (different seeds), interleaved")
    ap.add_argument(
        "--n-train", type=int, default=420, help="the tuning set's training records (batch range)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the pipeline's jobs: 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    plain_s = ours_s = 0.0
    for i in range(args.studies):
        kw = {"trials": args.trials, "seed": 1234 + i, "n_train": args.n_train}
        t_plain, p_plain = study(lambda seed: optuna.samplers.GPSampler(seed=seed), **kw)
        t_ours, p_ours = study(gp_sampler, **kw)
        assert p_plain == p_ours, f"study {i}: the two samplers suggested different parameters"
        plain_s, ours_s = plain_s + t_plain, ours_s + t_ours
    print(
        json.dumps(
            {
                "trials": args.trials,
                "studies": args.studies,
                "optuna_gp_sampler_s_per_study": round(plain_s / args.studies, 3),
                "dpcl_gp_sampler_s_per_study": round(ours_s / args.studies, 3),
                "ratio": round(ours_s / plain_s, 3),
                "same_suggestions": True,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
