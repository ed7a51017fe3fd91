# Paper 000 Tables A3-A10 (App. E.2, F.2-F.4) and paper 003 Tables F.1, F.2 in their published
# layout from every run of every configured benchmark and learner, with the published number and
# ours - published beside each cell (config/paper_reference). One set for the whole config; tables
# whose runs are not part of it are still written, with a note naming the config keys that would
# fill them.

PAPER_TABLE_IDS = ["A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "F1", "F2"]


def paper_table_files():
    """results/tables/paper/table_<ID>.{csv,md,tex} for Tables A3-A10, F1 and F2."""
    return [f"{R}/tables/paper/table_{t}.{ext}" for t in PAPER_TABLE_IDS for ext in ("csv", "md", "tex")]


def _paper_table_runs():
    return {
        name: [f for learner in config["learners"] for f in run_files(learner, name, "metrics")]
        for name in config["benchmarks"]
    }


rule paper_tables:
    input:
        [f for files in _paper_table_runs().values() for f in files],
    output:
        paper_table_files(),
    log:
        f"{R}/logs/report/paper_tables.log",
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
