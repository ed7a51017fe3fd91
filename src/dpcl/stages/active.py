"""Stages of ``workflow/rules/active.smk``: DP active learning ([Schwethelm2025]) on cached features.

Schedules are solved once per (kind, ε, ε_Sel) from public quantities and shared by every run;
one job per (pool variant, seed) runs every configured method; a summary CSV, the Table I/II/V
analogues, the ε_Sel figure (Fig. 5) and the per-group privacy figure (Fig. 2/4) follow.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..active.grid import parse_method, parse_schedule_key, plan_for, run_cells, tag
from ..io import log, read_json, write_json, write_npz
from ..provenance import provenance
from ..seeding import rng
from .common import NON_PRIVATE


def imbalanced_subset(labels: np.ndarray, imbalance: float, seed: int) -> np.ndarray:
    """Sorted indices keeping round(n_c · imbalance^(c/(K−1))) records of class c (seeded)."""
    classes = np.unique(labels)
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0xA11B])))
    keep = []
    for i, c in enumerate(classes):
        idx = np.flatnonzero(labels == c)
        share = imbalance ** (i / max(len(classes) - 1, 1))
        keep.append(gen.permutation(idx)[: max(1, int(round(share * len(idx))))])
    return np.sort(np.concatenate(keep))


def planned_pool_size(n_classes: int, per_class: int, variant: str, imbalance: float) -> int:
    """The pool's size from the config alone (public): what the sound mode's rates are computed from."""
    if variant == "balanced":
        return n_classes * per_class
    return sum(
        max(1, int(round(imbalance ** (i / max(n_classes - 1, 1)) * per_class))) for i in range(n_classes)
    )


def active_ledger_plan(config: dict, path: str | Path) -> dict:
    """The public plan a DP-AL run's privacy.json is checked against, from the validated ``config``
    and the file's place in the results layout (``runs/active/{pool}/{mode}/{method}/eps{ε}-sel{ε_Sel}/
    seed{s}/privacy.json``): the run's target, the pool's planned size, the data set's classes and the
    run's whole public plan (``group_plan``, a :class:`dpcl.active.group_ledger.GroupPlan`: its
    schedule's kind and numbers, its selection and initial sampling, the accountant its schedule is
    solved with), as its job runs it. The file itself is not read; a path the config did not plan is an
    error."""
    from ..active.grid import run_cells
    from ..data.registry import n_classes
    from ..privacy.accounting import Budget

    parts = Path(path).parts
    if len(parts) < 8 or parts[-8:-6] != ("runs", "active") or parts[-1] != "privacy.json":
        raise ValueError(
            f"{path}: not a DP-AL run's privacy.json in the results layout "
            "runs/active/{pool}/{mode}/{method}/eps{e}-sel{s}/seed{n}/privacy.json"
        )
    pool, mode, method, setting = parts[-6:-2]
    active = config["active"]
    cells = {c["key"]: c for c in run_cells(active)}
    key = f"{mode}/{method}/{setting}"
    if key not in cells or pool not in active["pools"]:
        raise ValueError(f"{path}: the config plans no DP-AL run {pool}/{key}")
    dataset = active["dataset"]
    k = n_classes(dataset, config["datasets"].get(dataset))
    size = planned_pool_size(
        k, int(config["datasets"][dataset]["pool_per_class"]), pool, float(active["imbalance"])
    )
    target = Budget(float(cells[key]["epsilon"]), float(active["delta"]))
    return {
        "target": target,
        "nominal_size": size,
        "n_classes": k,
        "group_plan": group_plan(active, cells[key]),
    }


def group_plan(active: dict, cell: dict):
    """The :class:`dpcl.active.group_ledger.GroupPlan` of one run cell of the config's ``active`` block
    (:func:`dpcl.active.grid.run_cells`), as :func:`active_runs` runs it: the schedule its solve job
    builds (the authors' step amplification solves the step-amplification plan), the selection record
    :func:`dpcl.active.run.selection_record` writes for its mode, the initial set's sampling."""
    from ..active.grid import parse_method, plan_for
    from ..active.group_ledger import GroupPlan
    from ..active.paper_schedule import ACCOUNTANT as PAPER_ACCOUNTANT
    from ..active.paper_schedule import KIND as PAPER_KIND
    from ..active.schedules import DEFAULT_ACCOUNTANT

    spec = parse_method(cell["method"])
    kind, paper = spec.schedule, cell["mode"] == "paper"
    plan = plan_for(
        active,
        "step_amplification" if kind == PAPER_KIND else kind,
        cell["epsilon"],
        cell["selection_epsilon"],
    )
    if not plan.query_sizes:
        selection = "none"
    elif spec.selection == "random":
        selection = "random_fixed" if paper else "random_poisson"
    elif spec.selection == "nondp":
        selection = "nonprivate_topk"
    else:
        selection = "laplace_topk" if paper else "laplace_threshold"
    return GroupPlan(
        kind=kind,
        epsilon=plan.epsilon,
        delta=plan.delta,
        selection_epsilon=plan.selection_epsilon,
        initial_size=plan.initial_size,
        query_sizes=tuple(plan.query_sizes),
        batch_size=plan.batch_size,
        epochs=plan.epochs,
        selection=selection,
        acquisition=spec.acquisition if selection not in ("none", "random_fixed", "random_poisson") else None,
        initial="fixed_size" if paper else "poisson",
        solved_with=PAPER_ACCOUNTANT if kind == PAPER_KIND else DEFAULT_ACCOUNTANT,
    )


def solve_schedule(key: str, active: dict, out: str | Path) -> dict:
    """Solve and verify one schedule (``{kind}-eps{ε}-sel{ε_Sel}``) and write it as JSON.

    The schedule is a pure function of public numbers (the key and the plan the config gives it), so
    it is kept in the accountant's disk cache (:func:`dpcl.privacy.cache.memo`, keyed by the code of
    ``dpcl.privacy`` and ``dpcl.active``): a rerun writes the same file without solving again."""
    import dataclasses
    import time

    from ..active.schedules import Schedule
    from ..privacy.cache import memo

    kind, eps, sel = parse_schedule_key(key)
    plan = plan_for(active, "step_amplification" if kind == "paper_step_amplification" else kind, eps, sel)
    t0 = time.perf_counter()
    solved = []

    def compute() -> dict:
        solved.append(True)
        return _solve_schedule(key, kind, plan)

    fields = sorted(dataclasses.asdict(plan).items())
    d = memo("active_schedule", (kind, fields), compute, packages=("active",))
    stating = Schedule.from_dict(d).stating_accountant
    log(
        f"schedule {key}: {len(d['segments'])} segments, per-group ε {[round(g, 4) for g in d['group_epsilons']]} "
        f"({stating}; {time.perf_counter() - t0:.1f} s"
        + ("" if solved else ", from the accountant cache")
        + ")"
    )
    write_json(out, d)
    return d


def _solve_schedule(key: str, kind: str, plan) -> dict:
    """The schedule document of :func:`solve_schedule`, solved and verified."""
    from ..active.schedules import build_schedule

    if kind == "paper_step_amplification":
        from ..active.paper_schedule import authors_step_amplification, published_claim

        sched = authors_step_amplification(plan)
        groups = sched.group_epsilons()  # stated with PLD (pessimistic): what they really spend at most
        extra = {"published_claim": published_claim(sched)}
        log(
            f"schedule {key}: the authors' claim is {extra['published_claim']['verdict']}; per group RDP "
            f"(their accountant) {[round(g['rdp_authors'], 4) for g in extra['published_claim']['groups']]}"
        )
    else:
        sched = build_schedule(kind, plan)
        groups, extra = sched.check(), {}
    return sched.to_dict() | {"group_epsilons": groups} | extra


def _load(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    from ..features import load_feature_cache

    feats, labels, _, _ = load_feature_cache(path)
    return feats.astype(np.float64), labels.astype(np.int64)


def run_active_seed(
    pool_path: str | Path,
    public_path: str | Path,
    test_path: str | Path,
    schedule_paths: dict[str, str],
    active: dict,
    pool_variant: str,
    *,
    seed: int,
    per_class: int,
    out_root: str | Path,
    dataset: str,
    threads: int | None = None,
    dataset_cfg: dict | None = None,
) -> list[dict]:
    """Every configured run of one (pool variant, seed); files under ``out_root/{key}/seed{seed}/``."""
    from threadpoolctl import threadpool_limits

    from ..active.run import ActiveMethod, run_active
    from ..active.schedules import Schedule

    px, py = _load(pool_path)
    ux, uy = _load(public_path)
    tx, ty = _load(test_path)
    from ..data.registry import n_classes as published_classes

    n_classes = published_classes(dataset, dataset_cfg)  # public (the data set's classes), not counted
    if max(py.max(), ty.max()) >= n_classes:
        raise ValueError(f"{dataset}: labels beyond its {n_classes} classes")
    imb = float(active["imbalance"])
    if pool_variant == "imbalanced":
        sub = imbalanced_subset(py, imb, 0)
        px, py = px[sub], py[sub]
        ux = ux[imbalanced_subset(uy, imb, 1)]
    size = planned_pool_size(n_classes, per_class, pool_variant, imb)
    if float(active["delta"]) * size >= 1:
        raise ValueError(
            f"active.delta = {active['delta']} is not below 1/pool size (1/{size}): δ is set for the "
            "whole pool, every record of which is an individual at risk"
        )
    schedules = {k: Schedule.from_dict(read_json(p)) for k, p in schedule_paths.items()}
    done = []
    with threadpool_limits(threads):
        for cell in run_cells(active):
            spec = parse_method(cell["method"])
            skey = f"{spec.schedule}-eps{tag(cell['epsilon'])}-sel{tag(cell['selection_epsilon'])}"
            method = ActiveMethod(spec.acquisition, spec.selection, cell["mode"])

            def stream(*keys, _c=cell):
                return rng(seed, "active", dataset, pool_variant, _c["key"], *keys)

            metrics, privacy, diag, head = run_active(
                (px, py),
                (tx, ty),
                ux,
                n_classes,
                size,
                method,
                schedule=schedules[skey],
                lr=float(active["lr"]),
                clip=float(active["clip"]),
                stream=stream,
                mc_passes=int(active["mc_passes"]),
                dropout=float(active["mc_dropout"]),
            )
            metrics |= {"method": cell["method"], "pool": pool_variant, "seed": seed}
            run_dir = Path(out_root) / cell["key"] / f"seed{seed}"
            write_json(run_dir / "metrics.json", metrics | {"provenance": provenance()})
            write_json(run_dir / "privacy.json", privacy | {"provenance": provenance()})
            write_json(run_dir / "diagnostics.json", {"non_private": NON_PRIVATE} | diag)
            write_npz(run_dir / "head.npz", w=head.w, b=head.b)
            log(
                f"active {pool_variant} seed {seed} {cell['key']}: accuracy {metrics['final_accuracy']:.4f}, "
                f"guarantee {'holds' if privacy['guarantee_holds'] else 'does NOT hold'}"
            )
            done.append(metrics)
    return done


SUMMARY_COLUMNS = (
    "pool",
    "mode",
    "method",
    "acquisition",
    "selection",
    "schedule",
    "epsilon",
    "selection_epsilon",
    "seed",
    "final_accuracy",
    "guarantee_holds",
)


def summarise(metrics_paths: list[str], out_csv: str | Path) -> None:
    """One row per run (the input of the tables and figures)."""
    from ..io import atomic_path

    rows = [read_json(p) for p in metrics_paths]
    with atomic_path(out_csv) as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUMMARY_COLUMNS)
        for r in rows:
            w.writerow([r[c] for c in SUMMARY_COLUMNS])


def report(
    summary_csv: str | Path,
    schedules: dict[str, str],
    *,
    out_tables: str | Path,
    out_figures: str | Path,
    epsilon: float,
    selection_epsilon: float,
    fig5: bool = False,
    table2_settings: list | None = None,
) -> list[Path]:
    """Table I, II, V analogues, the Fig. 5 analogue (when the config sweeps ε_Sel), the
    per-group privacy figure (Fig. 2/4 analogue: naive, ours and the authors' step amplification)
    and the authors' schedule per group under RDP and PLD with its verdicts."""
    from ..report import active as rep
    from ..report import active_figures as figs
    from ..report.active_authors import authors_schedule_table

    out = rep.active_tables(
        summary_csv,
        out_tables,
        setting=(epsilon, selection_epsilon),
        prefix="active_",
        table2_settings=table2_settings,
    )
    if fig5:
        out += figs.selection_epsilon_figure(
            summary_csv, Path(out_figures) / "active_fig5_selection_budget.png", epsilon=epsilon
        )
    out += figs.group_privacy_figure(schedules, Path(out_figures) / "active_group_privacy.png")
    authors = [p for name, p in schedules.items() if "authors" in name]
    out += authors_schedule_table(authors[0] if authors else None, out_tables, prefix="active_")
    return out
