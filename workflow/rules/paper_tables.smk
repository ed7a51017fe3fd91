# [LabelSpace] Tables A3-A10 (App. E.2, F.2-F.4) and [Tobaben2024] Tables F.1, F.2 in their published
# layout from every run of every configured benchmark and learner, with the published number and
# ours - published beside each cell (config/paper_reference). One set for the whole config; tables
# whose runs are not part of it are still written, with a note naming the config keys that would
# fill them.


rule paper_tables:
    input:
        [f for files in _paper_table_runs().values() for f in files],
    output:
        [
            (
                report(f, caption="../report/paper_table.rst", category="3. Paper tables")
                if f.endswith(".csv")
                else f
            )
            for f in paper_table_files()
        ],
    log:
        f"{R}/logs/report/paper_tables.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=_paper_table_runs(),
        benchmarks=config["benchmarks"],
        tuning=config["tuning"],  # a table note says how the runs were tuned
        miniature=config["miniature"],  # config/paper_mini.yaml: every table says so first
    script:
        "../scripts/paper_tables.py"
