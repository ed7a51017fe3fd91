"""Stages of ``workflow/rules/paper_figures.smk``: [LabelSpace] Figs. 4-7, A3-A9, [Tobaben2024] Fig. 4 and the HTML report."""

from __future__ import annotations

from pathlib import Path

from ..io import log, read_json
from .common import (
    read_records,
)
from .data import dataset_subset


def p003_fig4_groups(
    records: dict[str, list[dict]],
    benchmarks: dict[str, dict],
    scenarios: dict[str, str | Path],
    resources: str | Path,
    datasets: dict[str, dict],
) -> dict[str, dict]:
    """[Tobaben2024] Fig. 4's groups (``blurry_trios``): per setting the benchmark's runs and its
    training samples per task of disjoint and blurry classes, from its scenario file in
    ``scenarios`` (benchmark → path) and the labels of the data set under ``resources/<dataset>``
    (``datasets``: the config's entries)."""
    from ..data.scenarios import samples_per_task
    from ..report.paper_figures import BlurrySetting, blurry_trios

    labels: dict[str, object] = {}
    out: dict[str, dict] = {}
    for group, settings in blurry_trios(benchmarks).items():
        out[group] = {}
        for setting, name in settings.items():
            out[group][setting] = s = BlurrySetting(name, records.get(name, []))
            if name in scenarios:
                ds = benchmarks[name]["dataset"]
                if ds not in labels:
                    labels[ds] = dataset_subset(ds, Path(resources) / ds, "train", datasets[ds])[0].labels
                sc = read_json(scenarios[name])
                s.samples, s.seed = samples_per_task(sc["train_indices"], labels[ds]), int(sc["seed"])
    return out


def paper_figures(
    runs: dict[str, list[str | Path]],
    benchmarks: dict[str, dict],
    *,
    outputs: dict[str, list[str | Path]],
    task_outputs: dict[str, dict[str, list[str | Path]]] | None = None,
    scenarios: dict[str, str | Path] | None = None,
    resources: str | Path = "resources",
    datasets: dict[str, dict] | None = None,
) -> dict[str, list[str]]:
    """Figs. 4-7 (left), A3, A4 and the per-task Figs. A5-A9 of [LabelSpace] (Sec. 6, App. E.1, F) and
    [Tobaben2024] Fig. 4 from the run metrics of every benchmark; returns (and logs) per figure the
    notes on what the config does not sweep.

    ``runs`` maps a benchmark to its metrics.json paths (any learners; Figs. 4-7 and A3 keep the
    Cosine Classifier and PEFT Ensemble), ``benchmarks`` is the config's ``benchmarks`` entry,
    ``outputs`` maps 'fig4' … 'fig7' and optionally 'figA3', 'figA4' to their PNG/PDF paths,
    ``task_outputs`` maps a benchmark to {'accuracy': paths, 'forgetting': paths} (Figs. A5-A9).
    Figs. 4-6 use the disjoint-split benchmarks (Sec. 6.1), Figs. 7 and A3 the i-Blurry ones
    (Sec. 6.2), Fig. A4 the disjoint and 5-dataset ones (App. F). 'p003_fig4_blurry' in ``outputs``:
    [Tobaben2024] Fig. 4 on each data set with a disjoint, an i-Blurry(50, 10) and a Si-Blurry
    benchmark (``p003_fig4_groups``: ``scenarios``, ``resources`` and ``datasets`` feed its data panel).
    """
    from ..report.paper_figures import (
        blurry_groups,
        fig_learners,
        plot_fig4_label_methods,
        plot_fig5_release_fraction,
        plot_fig6_public_labels,
        plot_fig7_blurriness,
        plot_figA3_blurriness,
        plot_figA4_privacy_utility,
        plot_p003_fig4_blurry,
        plot_task_metric,
    )

    task_outputs = task_outputs or {}
    unknown = sorted((set(runs) | set(task_outputs)) - set(benchmarks))
    if unknown:
        raise ValueError(
            f"runs given for benchmarks {unknown} that are not in the config; allowed: {sorted(benchmarks)}"
        )
    all_records = {b: read_records(paths) for b, paths in runs.items()}
    ours = set(fig_learners())
    records = {b: [r for r in recs if r["learner"] in ours] for b, recs in all_records.items()}
    disjoint = {b: records.get(b, []) for b, cfg in benchmarks.items() if cfg["scenario"] == "disjoint"}
    groups = {
        g: {m: records.get(b, []) for m, b in by_m.items()} for g, by_m in blurry_groups(benchmarks).items()
    }
    notes = {
        "fig4": plot_fig4_label_methods(disjoint, outputs["fig4"]),
        "fig5": plot_fig5_release_fraction(disjoint, outputs["fig5"]),
        "fig6": plot_fig6_public_labels(disjoint, outputs["fig6"]),
        "fig7": plot_fig7_blurriness(groups, outputs["fig7"]),
    }
    if "figA3" in outputs:
        notes["figA3"] = plot_figA3_blurriness(groups, outputs["figA3"])
    if "figA4" in outputs:
        shifted = {
            b: all_records.get(b, [])
            for b, c in benchmarks.items()
            if c["scenario"] in ("disjoint", "datasets")
        }
        notes["figA4"] = plot_figA4_privacy_utility(shifted, benchmarks, outputs["figA4"])
    if "p003_fig4_blurry" in outputs:
        groups = p003_fig4_groups(all_records, benchmarks, scenarios or {}, resources, datasets or {})
        notes["p003_fig4_blurry"] = plot_p003_fig4_blurry(groups, outputs["p003_fig4_blurry"])
    for bench, outs in task_outputs.items():
        for metric, paths in outs.items():
            notes[f"{bench}_{metric}_per_task"] = plot_task_metric(
                all_records.get(bench, []), metric, bench, benchmarks[bench], paths
            )
    for fig, lines in notes.items():
        for line in lines:
            log(f"{fig}: {line}")
    return notes


def html_report(files: list[str | Path], config: dict, out: str | Path) -> None:
    """results/report.html: every table and figure of the run, grouped per benchmark, with the
    config entries behind each section and the full validated config (one self-contained page)."""
    from ..report.html import build_html_report, group_files

    build_html_report(
        group_files(files, config),
        config,
        out,
        title="dpcl: differentially private continual learning, tables and figures",
    )
