# Tables (Table A3 layout) and figures per benchmark and learner.


rule report:
    input:
        lambda w: run_files(w.learner, w.benchmark, "metrics"),
    output:
        csv=report(
            f"{R}/tables/{{benchmark}}_{{learner}}.csv",
            caption="../report/learner_table.rst",
            category="2. Learners",
            subcategory="{benchmark}",
            labels={"learner": "{learner}", "kind": "table"},
        ),
        md=f"{R}/tables/{{benchmark}}_{{learner}}.md",
        png=report(
            f"{R}/figures/{{benchmark}}_{{learner}}_avg_acc.png",
            caption="../report/learner_figure.rst",
            category="2. Learners",
            subcategory="{benchmark}",
            labels={"learner": "{learner}", "kind": "figure"},
        ),
        pdf=f"{R}/figures/{{benchmark}}_{{learner}}_avg_acc.pdf",
    log:
        f"{R}/logs/report/{{benchmark}}_{{learner}}.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        methods=lambda w: methods_for(w.learner, w.benchmark),
    script:
        "../scripts/report.py"


rule summary_table:
    input:
        lambda w: [f for learner in config["learners"] for f in run_files(learner, w.benchmark, "metrics")],
    output:
        csv=report(
            f"{R}/tables/{{benchmark}}.csv",
            caption="../report/benchmark_table.rst",
            category="1. Benchmark tables",
            subcategory="{benchmark}",
        ),
        md=f"{R}/tables/{{benchmark}}.md",
    log:
        f"{R}/logs/report/{{benchmark}}_summary.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        methods=METHODS,
    script:
        "../scripts/summary_table.py"


rule blurry_figure:
    input:
        lambda w: f"{RES}/{bench_wildcards(w.benchmark)['dataset']}/MANIFEST.json",
    output:
        report(
            f"{R}/figures/{{benchmark}}_blurry_samples.png",
            caption="../report/blurry_figure.rst",
            category="6. Scenarios",
            subcategory="{benchmark}",
        ),
        f"{R}/figures/{{benchmark}}_blurry_samples.pdf",
    log:
        f"{R}/logs/report/{{benchmark}}_blurry_samples.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        bench=lambda w: config["benchmarks"][w.benchmark],
        dataset=lambda w: bench_wildcards(w.benchmark)["dataset"],  # the first seed's (a variant per seed)
        dataset_cfg=lambda w: config["datasets"][bench_wildcards(w.benchmark)["dataset"]],
        seed=lambda w: bench_seeds(w.benchmark)[0],
    script:
        "../scripts/blurry_figure.py"


rule aggregation_figure:
    input:
        lambda w: run_files(w.learner, w.benchmark, "metrics"),
    output:
        report(
            f"{R}/figures/{{benchmark}}_{{learner}}_figA2_aggregation.png",
            caption="../report/aggregation_figure.rst",
            category="4. Paper figures",
            subcategory="{benchmark}",
        ),
        f"{R}/figures/{{benchmark}}_{{learner}}_figA2_aggregation.pdf",
    log:
        f"{R}/logs/report/{{benchmark}}_{{learner}}_figA2_aggregation.log",
    wildcard_constraints:
        learner="|".join(l for l in learners.names() if learners.get(l).ensemble),
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        methods=lambda w: methods_for(w.learner, w.benchmark),
    script:
        "../scripts/aggregation_figure.py"
