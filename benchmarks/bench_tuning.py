"""The tuning studies' two speed-ups on the embedded default's real tuning sets, each against its
baseline in the same run.

    python benchmarks/bench_tuning.py [--results results --seeds 0 1 2 3 4 --epsilons 1 8 inf]

Needs the default pipeline's outputs (``snakemake --cores all``): the public tuning split's features and
the scenarios. Per seed and ε:

* **Noise calibration**: every trial of the heads' study needs the noise multiplier of (ε, δ) for its
  (q, steps). The full RDP search over all orders (what the trials used before) against the coarse
  integer-order search the trials use now (``coarse_noise_multiplier``), both with the accountant's disk
  cache off; reports the time ratio and how much larger the coarse σ is (at most ~2 %).
* **Pruning**: the heads' study with the median rule (``tune_head(prune=True)``, the default) against
  the same study without it; reports the time ratio, the trials stopped, and the chosen trial's
  validation accuracy of each (pruning should keep it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

os.environ["DPCL_ACCOUNTING_CACHE"] = "off"  # every calibration is computed, none read from disk

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from dpcl.config import load_config  # noqa: E402
from dpcl.data.scenarios import Scenario  # noqa: E402
from dpcl.features import load_feature_cache  # noqa: E402
from dpcl.io import read_json  # noqa: E402
from dpcl.privacy.sgd_accounting import coarse_noise_multiplier, noise_multiplier  # noqa: E402
from dpcl.training.heads import DPSGDConfig  # noqa: E402
from dpcl.training.tuning import tune_head  # noqa: E402
from dpcl.training.tuning_protocol import tuning_plan, tuning_rows  # noqa: E402


def tuning_set(cfg: dict, results: Path, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The heads' tuning set of ``seed`` as the pipeline's tune_heads job builds it."""
    bench = next(iter(cfg["benchmarks"].values()))
    ds, bb = bench["dataset"], bench["backbone"]
    scenario = f"{bench['scenario']}-t{bench['n_tasks']}"
    sc = Scenario.from_dict(read_json(results / "scenarios" / ds / scenario / f"seed{seed}.json"))
    plan = tuning_plan(ds, cfg["datasets"][ds], sc.task_classes, cfg["tuning"]["protocol"], 1)
    path = results / "features" / ds / bb / f"{plan.split}.npz"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run the default pipeline first (snakemake --cores all)")
    x, y, _, _ = load_feature_cache(path)
    rows = tuning_rows(y, plan, seed)
    return x[rows], y[rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 8.0, math.inf])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    cfg = load_config(str(args.config))
    delta, trials = cfg["delta"], cfg["tuning"]["trials"]
    d = cfg["dpsgd"]
    rows, totals = [], {"full_s": 0.0, "coarse_s": 0.0, "pruned_s": 0.0, "unpruned_s": 0.0}
    with threadpool_limits(args.threads):
        x, y = tuning_set(cfg, args.results, args.seeds[0])
        tune_head(x, y, 1.0, delta, 99, n_trials=1, epochs=0.1)  # warm-up: the imports are no study's cost
        for seed in args.seeds:
            x, y = tuning_set(cfg, args.results, seed)
            for eps in args.epsilons:
                kw = {"n_trials": trials, "epochs": d["epochs"], "normaliser": d["normaliser"]}
                t0 = time.perf_counter()
                pruned = tune_head(x, y, eps, delta, seed, **kw)
                t1 = time.perf_counter()
                whole = tune_head(x, y, eps, delta, seed, **kw, prune=False)
                t2 = time.perf_counter()
                row = {
                    "seed": seed,
                    "epsilon": eps,
                    "pruned_s": round(t1 - t0, 2),
                    "unpruned_s": round(t2 - t1, 2),
                    "stopped": sum(t["stopped_at_percent"] is not None for t in pruned["trials"]),
                    "chosen_accuracy_pruned": pruned["best_validation_accuracy"],
                    "chosen_accuracy_unpruned": whole["best_validation_accuracy"],
                }
                totals["pruned_s"] += t1 - t0
                totals["unpruned_s"] += t2 - t1
                if math.isfinite(eps):
                    n_tr = whole["tuning_set"]["train"]
                    keys = sorted(
                        {
                            (q, DPSGDConfig(sample_rate=q, epochs=d["epochs"]).steps)
                            for q in (t["params"]["batch_size"] / n_tr for t in whole["trials"])
                        }
                    )
                    t0 = time.perf_counter()
                    full = [noise_multiplier(eps, delta, q, n, accountant="rdp") for q, n in keys]
                    t1 = time.perf_counter()
                    coarse = [coarse_noise_multiplier(eps, delta, q, n) for q, n in keys]
                    t2 = time.perf_counter()
                    row |= {
                        "calibrations": len(keys),
                        "full_s": round(t1 - t0, 3),
                        "coarse_s": round(t2 - t1, 3),
                        "coarse_sigma_excess_max": round(
                            max(c / f for c, f in zip(coarse, full, strict=True)) - 1, 4
                        ),
                    }
                    totals["full_s"] += t1 - t0
                    totals["coarse_s"] += t2 - t1
                rows.append(row)
                print(json.dumps(row), flush=True)
    summary = {
        "calibration_coarse_over_full": round(totals["coarse_s"] / totals["full_s"], 3),
        "study_pruned_over_unpruned": round(totals["pruned_s"] / totals["unpruned_s"], 3),
        "calibration_full_s": round(totals["full_s"], 1),
        "calibration_coarse_s": round(totals["coarse_s"], 1),
        "mean_chosen_accuracy_pruned": round(float(np.mean([r["chosen_accuracy_pruned"] for r in rows])), 4),
        "mean_chosen_accuracy_unpruned": round(
            float(np.mean([r["chosen_accuracy_unpruned"] for r in rows])), 4
        ),
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
