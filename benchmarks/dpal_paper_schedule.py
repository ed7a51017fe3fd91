"""The authors' step-amplification schedule ([Schwethelm2025]) re-accounted per group, against ours.

Computes the released schedule (:func:`dpcl.active.paper_schedule.authors_run`) at the CIFAR-10
settings of the paper (Table III; ``scripts/entropy.sh`` of ``kschwethelm/DPAL``): initial set
10,000, query sizes 10,000 / 3,000 / 1,000 / 1,000 (B = 25,000, T = 4), expected batch 4096,
30 epochs per training phase (Table III's 150 AL epochs over 5 phases), ε = 8, noise
correction on (``step_ampl_prob_noise``), for ε_Sel = 2 and ε_Sel = 0, and prints each group's
own-history ε (selection ε paid + training, opacus RDP with its default orders, the released
accountant) next to the ε the method believes. δ: the script's 1e-5 by default (the paper's
text says δ = 1/B = 4e-5; pass ``--delta 1e-5 4e-5`` for both).

It also builds our sound ``build_schedule("step_amplification", plan)`` at the same plan (our
naive steps are ⌈e·|D_p|/b⌉ at rate b/|D_p|, the paper's Alg. 1, not the released code's
drop-last loader) and reports its per-group ε from :meth:`Schedule.check` (pessimistic PLD, the
accountant it is solved with). Wall times of both. The verdicts on the authors' claim (RDP beside
PLD, both bounds) are :func:`dpcl.active.paper_schedule.published_claim` and
``results/tables/active_authors_schedule.md``.

Run: ``python benchmarks/dpal_paper_schedule.py [--out results.json]`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import time

from dpcl.active.paper_schedule import authors_run, reaccount
from dpcl.active.schedules import ALPlan, build_schedule

INITIAL, QUERIES, BATCH, EPOCHS, EPSILON = 10_000, (10_000, 3_000, 1_000, 1_000), 4096, 30, 8.0


def _authors(plan: ALPlan, sigma_corr: bool) -> dict:
    t0 = time.perf_counter()
    run = authors_run(plan, sigma_corr=sigma_corr)
    secs = time.perf_counter() - t0
    groups = reaccount(run.schedule)
    return {
        "seconds": round(secs, 2),
        "sigma_naive": run.sigma,
        "naive_steps": run.naive_steps,
        "naive_rates": run.naive_rates,
        "targets": run.targets,
        "segments": run.schedule.to_dict()["segments"],
        "expected_batch": [run.schedule.expected_batch(s) for s in run.schedule.segments],
        "groups": groups,
    }


def _ours(plan: ALPlan) -> dict:
    t0 = time.perf_counter()
    sched = build_schedule("step_amplification", plan)
    eps = sched.check()
    return {
        "seconds": round(time.perf_counter() - t0, 2),
        "group_epsilons": eps,
        "segments": sched.to_dict()["segments"],
        "expected_batch": [sched.expected_batch(s) for s in sched.segments],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--delta", type=float, nargs="+", default=[1e-5])
    ap.add_argument("--selection-epsilon", type=float, nargs="+", default=[2.0, 0.0])
    ap.add_argument("--epochs", type=float, default=EPOCHS, help="epochs per training phase")
    ap.add_argument("--no-sigma-corr", action="store_true", help="step_ampl_prob (no noise correction)")
    ap.add_argument("--skip-ours", action="store_true")
    args = ap.parse_args()

    results = []
    for delta in args.delta:
        for esel in args.selection_epsilon:
            plan = ALPlan(EPSILON, delta, esel, INITIAL, QUERIES, BATCH, args.epochs)
            res = {
                "plan": {
                    "epsilon": EPSILON,
                    "delta": delta,
                    "selection_epsilon": esel,
                    "initial_size": INITIAL,
                    "query_sizes": list(QUERIES),
                    "batch_size": BATCH,
                    "epochs": args.epochs,
                },
                "sigma_corr": not args.no_sigma_corr,
                "authors": _authors(plan, not args.no_sigma_corr),
            }
            if not args.skip_ours:
                res["ours"] = _ours(plan)
            results.append(res)
            a = res["authors"]
            print(
                f"δ = {delta:g}, ε_Sel = {esel:g}: authors' schedule in {a['seconds']:.1f} s, σ̂ = {a['sigma_naive']:.4f}, "
                f"steps {[s['steps'] for s in a['segments']]}, σ {[round(s['noise_multiplier'], 4) for s in a['segments']]}"
            )
            print("  group  paid   believed  own-history ε (opacus default α)  project ε   ours")
            for g in a["groups"]:
                ours = f"{res['ours']['group_epsilons'][g['group']]:.4f}" if "ours" in res else "-"
                print(
                    f"  {g['group']:5d}  {g['paid']:.2f}   {g['believed_epsilon']:.4f}    {g['own_history_epsilon']:.4f}"
                    f"{'  > ε' if g['own_history_epsilon'] > EPSILON else '     '}"
                    f"                        {g['project_epsilon']:.4f}    {ours}"
                )
            if "ours" in res:
                print(
                    f"  ours: build_schedule('step_amplification') in {res['ours']['seconds']:.1f} s, "
                    f"steps {[s['steps'] for s in res['ours']['segments']]}"
                )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
