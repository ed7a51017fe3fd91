# The paper's Figures 4-7 (left), A3, A4 and the per-task Figures A5-A9 over all benchmarks of
# the config, paper 003's Fig. 4, and results/report.html: one self-contained page of every table
# and figure with the config that produced it.

from dpcl.report.paper_figures import blurry_trios

# Figs. 4-7 and A3 compare the Cosine Classifier and the PEFT Ensemble (paper 000 Sec. 6); Figs.
# A4-A9 (App. F) every learner, the Naive and Non-CL baselines included. p003_fig4_blurry: paper
# 003 Fig. 4, Not Blurry vs I-Blurry(50, 10) vs Si-Blurry on one data set (a note where the config
# has no such trio).
PAPER_FIGS = ("fig4", "fig5", "fig6", "fig7", "figA3", "figA4", "p003_fig4_blurry")
# Per benchmark: accuracy AA_t and forgetting AF_t after each task (Figs. A5/A7/A8 and A6/A9).
PAPER_TASK_FIGS = {"accuracy": "figA5_accuracy_per_task", "forgetting": "figA6_forgetting_per_task"}


def _paper_task_figures():
    """Benchmark → {'accuracy' | 'forgetting': [PNG, PDF]} under results/figures/paper/."""
    return {
        name: {
            metric: [f"{R}/figures/paper/{name}_{stem}.{ext}" for ext in ("png", "pdf")]
            for metric, stem in PAPER_TASK_FIGS.items()
        }
        for name in config["benchmarks"]
    }


def _p003_fig4_scenarios():
    """Benchmark → its first seed's scenario file, for every benchmark of a complete paper 003 Fig. 4
    trio (the figure's per-task data panel)."""
    names = [n for trio in blurry_trios(config["benchmarks"]).values() for n in trio.values()]
    return {
        n: "{R}/scenarios/{dataset}/{scenario}/seed{seed}.json".format(
            R=R, seed=bench_seeds(n)[0], **bench_wildcards(n)
        )
        for n in names
    }


def _p003_fig4_datasets():
    """Config entries of the data sets behind paper 003 Fig. 4 (their labels count samples per task)."""
    names = sorted({config["benchmarks"][n]["dataset"] for n in _p003_fig4_scenarios()})
    return {d: config["datasets"][d] for d in names}


def paper_figure_files():
    """Figs. 4, 5, 6, 7 (left), A3, A4, paper 003's Fig. 4 and every benchmark's A5/A6 as PNG and
    PDF under results/figures/paper/."""
    files = [f"{R}/figures/paper/{fig}.{ext}" for fig in PAPER_FIGS for ext in ("png", "pdf")]
    return files + [f for outs in _paper_task_figures().values() for paths in outs.values() for f in paths]


def _paper_figure_runs():
    """Benchmark → metrics.json of every learner (the figure functions pick the learners they compare)."""
    return {
        name: [f for learner in config["learners"] for f in run_files(learner, name, "metrics")]
        for name in config["benchmarks"]
    }


def report_inputs():
    """Every table and figure that rule all asks for, except the report itself."""
    files = all_reports() + aggregation_figure_files() + fig3_files() + paper_figure_files()
    files += globals().get("paper_table_files", lambda: [])()
    files += globals().get("active_report_files", lambda: [])()
    return list(dict.fromkeys(files))


def html_report_files():
    """Targets of this file for rule all."""
    return paper_figure_files() + [f"{R}/report.html"]


rule paper_figures:
    input:
        lambda w: [f for files in _paper_figure_runs().values() for f in files],
        lambda w: list(_p003_fig4_scenarios().values()),
        lambda w: [f"{RES}/{d}/MANIFEST.json" for d in _p003_fig4_datasets()],
    output:
        **{fig: [f"{R}/figures/paper/{fig}.png", f"{R}/figures/paper/{fig}.pdf"] for fig in PAPER_FIGS},
        task=[f for outs in _paper_task_figures().values() for paths in outs.values() for f in paths],
    log:
        f"{R}/logs/report/paper_figures.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=_paper_figure_runs(),
        task_figures=_paper_task_figures(),
        benchmarks=config["benchmarks"],
        scenarios=_p003_fig4_scenarios(),
        resources=RES,
        datasets=_p003_fig4_datasets(),
    script:
        "../scripts/paper_figures.py"


rule html_report:
    input:
        lambda w: report_inputs(),
    output:
        f"{R}/report.html",
    log:
        f"{R}/logs/report/html_report.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        config=config,
    script:
        "../scripts/html_report.py"
