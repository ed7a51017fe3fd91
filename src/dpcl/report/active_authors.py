"""The DP-AL report's table of [Schwethelm2025]'s own step-amplification schedule
(:mod:`dpcl.active.paper_schedule`), judged per group with PLD bounds both ways beside the main
setting's: the authors' CIFAR-10 plan and a smaller plan at which a group's training provably
exceeds the budget Alg. 3 gives it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..io import write_text
from .active import load_schedule
from .table import Table as ModelTable
from .table import to_csv, to_markdown

#: plans at which the authors' step amplification (:mod:`dpcl.active.paper_schedule`) is judged
#: beside the main setting's: their CIFAR-10 setting (Table III, ``scripts/entropy.sh``: δ = 1e-5)
#: and a smaller plan at which a group's training provably exceeds the budget Alg. 3 gives it
AUTHORS_PLANS: dict[str, dict[str, Any]] = {
    "[Schwethelm2025] CIFAR-10 (10,000 + [10,000, 3,000, 1,000, 1,000], b = 4096, 30 epochs)": dict(
        epsilon=8.0,
        delta=1e-5,
        selection_epsilon=2.0,
        initial_size=10_000,
        query_sizes=(10_000, 3_000, 1_000, 1_000),
        batch_size=4096,
        epochs=30,
    ),
    "1,000 + [1,000, 300], b = 256, 12 epochs": dict(
        epsilon=8.0,
        delta=1e-5,
        selection_epsilon=2.0,
        initial_size=1000,
        query_sizes=(1000, 300),
        batch_size=256,
        epochs=12,
    ),
}
AUTHORS_COLUMNS = [
    "plan",
    "group",
    "selection_epsilon_paid",
    "rdp_authors",
    "rdp_project",
    "pld_upper",
    "training_claim",
    "pld_training_lower",
    "pld_training_upper",
    "training_verdict",
    "end_to_end_verdict",
]


def authors_schedule_rows(name: str, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per group of an authors' schedule from its ``published_claim``
    (:func:`dpcl.active.paper_schedule.published_claim`)."""
    pool, *per_group = claim["verdicts"]
    rows = []
    for g, v in zip(claim["groups"], per_group, strict=True):
        rows.append(
            {
                "plan": name,
                "group": g["group"],
                "selection_epsilon_paid": g["paid"],
                "rdp_authors": g["rdp_authors"],
                "rdp_project": g["rdp_project"],
                "pld_upper": g["pld_upper"],
                "training_claim": v["claimed_epsilon"],
                "pld_training_lower": g["pld_training_lower"],
                "pld_training_upper": g["pld_training_upper"],
                "training_verdict": v["verdict"],
                "end_to_end_verdict": pool["verdict"],
            }
        )
    return rows


def authors_plan_claim(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The authors' step amplification solved at ``plan`` (:class:`dpcl.active.schedules.ALPlan`'s
    fields) and its published claim's verdicts (:func:`dpcl.active.paper_schedule.published_claim`): a
    pure function of public numbers (about ten seconds for the authors' CIFAR-10 plan: their accountant's
    rate bisections and the groups' PLD bounds), so kept in the accountant's disk cache
    (:func:`dpcl.privacy.cache.memo`, keyed by the code of ``dpcl.privacy`` and ``dpcl.active``)."""
    from ..active.paper_schedule import authors_step_amplification, published_claim
    from ..active.schedules import ALPlan
    from ..privacy.cache import memo

    kw = dict(plan)
    return memo(
        "authors_plan_claim",
        tuple(sorted(kw.items())),  # JSON keys: the plan's sizes tuple reads as a list either way
        lambda: published_claim(authors_step_amplification(ALPlan(**kw))),
        packages=("active",),
    )


def authors_schedule_table(
    main: str | Path | Mapping | None, out_dir: str | Path, prefix: str = "", plans: Mapping | None = None
) -> list[Path]:
    """The authors' step amplification per group, RDP (their accountant) beside PLD, with the
    three-valued verdicts (:mod:`dpcl.privacy.verdict`): at the main setting (``main``: its
    schedule JSON, which carries the claim) and at :data:`AUTHORS_PLANS` (:func:`authors_plan_claim`:
    seconds, or read from the accountant's cache). Writes ``{prefix}authors_schedule.csv`` (tidy) and ``.md``."""
    from ..active.paper_schedule import group_adjacency, published_claim

    rows = []
    if main is not None:
        d = dict(main) if isinstance(main, Mapping) else json.loads(Path(main).read_text())
        s = load_schedule(d)
        claim = d.get("published_claim") or published_claim(s)
        p = s.plan
        name = (
            f"this run's main setting ({p.initial_size:,} + {list(p.query_sizes)}, b = {p.batch_size:g}, "
            f"{p.epochs:g} epochs)"
        )
        rows += authors_schedule_rows(name, claim)
    for name, kw in (AUTHORS_PLANS if plans is None else plans).items():
        rows += authors_schedule_rows(name, authors_plan_claim(kw))
    df = pd.DataFrame(rows, columns=AUTHORS_COLUMNS)
    out_dir = Path(out_dir)
    csv, md = out_dir / f"{prefix}authors_schedule.csv", out_dir / f"{prefix}authors_schedule.md"
    write_text(csv, to_csv(df))
    table_rows, prev = [], None
    for r in rows:
        first = r["plan"] != prev
        prev = r["plan"]
        table_rows.append(
            [
                r["plan"] if first else "",
                str(r["group"]),
                f"{r['selection_epsilon_paid']:.2f}",
                f"{r['rdp_authors']:.4f}",
                f"{r['rdp_project']:.4f}",
                f"{r['pld_upper']:.4f}",
                r["end_to_end_verdict"] if first else "",
                f"{r['training_claim']:.2f}",
                f"[{r['pld_training_lower']:.4f}, {r['pld_training_upper']:.4f}]",
                r["training_verdict"],
            ]
        )
    notes = [
        "Claim: every record (ε = 8, δ = 1e-5)-DP, a group-g record's training solved to ε − g·ε_Sel/T "
        "(Alg. 3). RDP (authors'): opacus's accountant at its default orders, as released; RDP (ours): the "
        "project's orders; both are upper bounds. PLD upper: pessimistic PLD (dp_accounting, discretisation "
        "1e-4) of the group's own history plus its selection ε (basic composition).",
        "Verdict, end to end: adjacency add/remove one record of the pool; certified if every group's PLD "
        "upper bound is ≤ 8, else not_certified — no lower bound: basic composition with the selection "
        "is an upper bound only, and a record's group is itself random.",
        f"Verdict, training: adjacency {group_adjacency(0).replace('group 0', 'group g')}; "
        "certified if the PLD upper bound is within the budget, violated if the optimistic PLD (a lower "
        "bound realised by a record whose clipped gradient has norm C while every other record's "
        "gradient vanishes) exceeds it, else not_certified.",
    ]
    table = ModelTable(
        "The authors' step amplification ([Schwethelm2025], as released) per group: RDP beside PLD",
        [
            "Plan",
            "Group",
            "Sel. ε paid",
            "RDP (authors')",
            "RDP (ours)",
            "PLD upper",
            "verdict, end to end",
            "Training budget ε − paid",
            "PLD training [lower, upper]",
            "verdict, training",
        ],
        table_rows,
        notes,
        list("lrrrrrlrrl"),
        notes_style="list",
    )
    write_text(md, to_markdown(table))
    return [csv, md]
