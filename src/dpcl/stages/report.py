"""Stages of ``workflow/rules/report.smk``: per-benchmark tables (Table A3 layout) and figures."""

from __future__ import annotations

from pathlib import Path

from .common import (
    read_records,
)
from .data import dataset_subset


def build_summary_table(
    metrics_paths: list[str | Path],
    benchmark: str,
    methods: list[str],
    out_csv: str | Path,
    out_md: str | Path,
) -> None:
    """One Table A3-style table of every learner of a benchmark (rows ε × learner)."""
    from ..io import write_text
    from ..report.tables import summarise, table_a3_markdown

    summary = summarise(read_records(metrics_paths), benchmark)
    write_text(out_csv, summary.to_csv(index=False, float_format="%.4f"))
    write_text(out_md, table_a3_markdown(summary, methods, f"{benchmark}: final accuracy (%)"))


def build_report(
    metrics_paths: list[str | Path],
    benchmark: str,
    methods: list[str],
    out_csv: str | Path,
    out_md: str | Path,
    figures: list[str | Path],
) -> None:
    """Table A3-style CSV + Markdown and the average-accuracy-per-task figure of one benchmark (a
    final-accuracy chart for a learner with no curve over tasks, Non-CL)."""
    from ..io import write_text
    from ..report.figures import plot_average_accuracy
    from ..report.tables import summarise, table_a3_markdown

    records = read_records(metrics_paths)
    summary = summarise(records, benchmark)
    write_text(out_csv, summary.to_csv(index=False, float_format="%.4f"))
    write_text(out_md, table_a3_markdown(summary, methods, f"{benchmark}: final accuracy (%)"))
    plot_average_accuracy(
        records,
        methods,
        f"{benchmark}: average accuracy per task",
        figures,
        final_title=f"{benchmark}: final accuracy (one model trained on all tasks: no curve over tasks)",
    )


def aggregation_figure(
    metrics_paths: list[str | Path],
    benchmark: str,
    methods: list[str],
    outputs: list[str | Path],
    learner: str,
) -> None:
    """Fig. A2 for one benchmark: a PEFT ensemble's final accuracy under every aggregation rule."""
    from ..learners.aggregation import RULES
    from ..report.figures import plot_aggregation_comparison
    from ..report.names import learner_name

    records = read_records(metrics_paths)
    missing = [r for r in records if "final_accuracy_by_aggregation" not in r]
    if missing:
        raise ValueError(
            f"{len(missing)} PEFT runs lack per-rule accuracies (written since the Entropy rule); rerun them"
        )
    title = f"{benchmark}: {learner_name(learner)}, aggregation rules"
    plot_aggregation_comparison(records, methods, title, outputs, RULES)


def blurry_figure(
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    *,
    n_tasks: int,
    disjoint_pct: float,
    blurry_pcts: list[float],
    seed: int,
    title: str,
    outputs: list[str | Path],
) -> None:
    """Fig. 7 right panel for a benchmark's training subset (seed 0 of the sweep)."""
    from ..report.figures import plot_blurry_samples

    ds, idx = dataset_subset(dataset, root, "train", dataset_cfg)
    plot_blurry_samples(
        ds.labels[idx],
        n_tasks=n_tasks,
        disjoint_pct=disjoint_pct,
        blurry_pcts=blurry_pcts,
        seed=seed,
        title=title,
        outputs=outputs,
    )
