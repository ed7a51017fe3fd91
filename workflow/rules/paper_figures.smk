# The paper's Figures 4-7 (left), A3, A4 and the per-task Figures A5-A9 over all benchmarks of
# the config, [Tobaben2024] Fig. 4, and results/report.html: one self-contained page of every table
# and figure with the config that produced it.


rule paper_figures:
    input:
        lambda w: [f for files in _paper_figure_runs().values() for f in files],
        lambda w: list(_p003_fig4_scenarios().values()),
        lambda w: [f"{RES}/{d}/MANIFEST.json" for d in _p003_fig4_datasets()],
    output:
        **{
            fig: [
                report(
                    f"{R}/figures/paper/{fig}.png",
                    caption="../report/paper_figure.rst",
                    category="4. Paper figures",
                ),
                f"{R}/figures/paper/{fig}.pdf",
            ]
            for fig in PAPER_FIGS
        },
        task=[
            (
                report(f, caption="../report/paper_figure.rst", category="4. Paper figures")
                if f.endswith(".png")
                else f
            )
            for outs in _paper_task_figures().values()
            for paths in outs.values()
            for f in paths
        ],
    log:
        f"{R}/logs/report/paper_figures.log",
    conda:
        "../envs/dpcl.yaml"
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
        report(f"{R}/report.html", caption="../report/html_report.rst", category="0. Overview"),
    log:
        f"{R}/logs/report/html_report.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        config=config,
    script:
        "../scripts/html_report.py"
