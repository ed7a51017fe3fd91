# The paper's Figures 4-7 (left) over all benchmarks of the config, and results/report.html:
# one self-contained page of every table and figure with the config that produced it.

# Figs. 4-7 compare the Cosine Classifier and the PEFT Ensemble (paper 000 Sec. 6).
PAPER_FIG_LEARNERS = [l for l in ("cosine", "peft_head", "peft_film") if l in config["learners"]]
PAPER_FIGS = ("fig4", "fig5", "fig6", "fig7")


def paper_figure_files():
    """Figs. 4, 5, 6 and 7 (left) as PNG and PDF under results/figures/paper/."""
    return [f"{R}/figures/paper/{fig}.{ext}" for fig in PAPER_FIGS for ext in ("png", "pdf")]


def _paper_figure_runs():
    """Benchmark → metrics.json of the compared learners (disjoint and i-Blurry benchmarks)."""
    return {
        name: [f for learner in PAPER_FIG_LEARNERS for f in run_files(learner, name, "metrics")]
        for name, b in config["benchmarks"].items()
        if b["scenario"] in ("disjoint", "iblurry")
    }


def report_inputs():
    """Every table and figure that rule all asks for, except the report itself."""
    files = all_reports() + aggregation_figure_files() + fig3_files() + paper_figure_files()
    files += globals().get("paper_table_files", lambda: [])()
    return list(dict.fromkeys(files))


def html_report_files():
    """Targets of this file for rule all."""
    return paper_figure_files() + [f"{R}/report.html"]


rule paper_figures:
    input:
        lambda w: [f for files in _paper_figure_runs().values() for f in files],
    output:
        **{fig: [f"{R}/figures/paper/{fig}.png", f"{R}/figures/paper/{fig}.pdf"] for fig in PAPER_FIGS},
    params:
        runs=_paper_figure_runs(),
        benchmarks=config["benchmarks"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{R}/logs/report/paper_figures.log",
    script:
        "../scripts/paper_figures.py"


rule html_report:
    input:
        lambda w: report_inputs(),
    output:
        f"{R}/report.html",
    params:
        config=config,
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{R}/logs/report/html_report.log",
    script:
        "../scripts/html_report.py"
