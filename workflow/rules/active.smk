# DP active learning ([Schwethelm2025]) on cached features, beside the continual-learning DAG: schedules
# solved once from public quantities, one job per (pool variant, seed) running every configured
# method, then a summary, the Table I/II/V analogues and the Fig. 5 and per-group privacy figures.


rule active_schedule:
    output:
        f"{R}/active/schedules/{{key}}.json",
    log:
        f"{R}/logs/active/schedule_{{key}}.log",
    priority: 85  # the DP-AL chain (schedules, runs, report) early: its report is a long last job
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=30,
    params:
        active=ACTIVE,
    script:
        "../scripts/active_schedule.py"


rule active_runs:
    input:
        pool=_active_feature("pool"),
        public=_active_feature("tune"),  # public shadow pool: calibrates the sound selection's threshold
        test=_active_feature("test"),
        schedules=[f"{R}/active/schedules/{k}.json" for k in ACTIVE_SCHEDULES],
    output:
        metrics=_active_runs("metrics.json"),
        privacy=_active_runs("privacy.json"),
        diagnostics=_active_runs("diagnostics.json"),  # NOT private: realised set sizes, never published
        heads=_active_runs("head.npz"),
    log:
        f"{R}/logs/active/runs_{{pool}}_seed{{seed}}.log",
    wildcard_constraints:
        pool="balanced|imbalanced",
    priority: 85
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        active=ACTIVE,
        schedule_keys=ACTIVE_SCHEDULES,
        per_class=config["datasets"][ACTIVE["dataset"]]["pool_per_class"] if ACTIVE_ON else 0,
        dataset_cfg=config["datasets"][ACTIVE["dataset"]] if ACTIVE_ON else {},  # its public classes
        root=lambda w: f"{R}/runs/active/{w.pool}",
    script:
        "../scripts/active_runs.py"


rule active_report:
    input:
        metrics=[
            f
            for pool in ACTIVE["pools"]
            for seed in ACTIVE["seeds"]
            for f in _active_runs("metrics.json", pool, seed)
        ],
        schedules=[f"{R}/active/schedules/{k}.json" for k in ACTIVE_FIGURE_SCHEDULES.values()],
    output:
        summary=f"{R}/active/summary.csv",
        files=[
            (
                report(f, caption="../report/active.rst", category="7. Active learning")
                if f.endswith((".png", ".csv"))
                else f
            )
            for f in active_report_files()
        ],
    log:
        f"{R}/logs/active/report.log",
    priority: 85
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        names=list(ACTIVE_FIGURE_SCHEDULES),
        epsilon=ACTIVE["epsilon"],
        selection_epsilon=ACTIVE["selection_epsilon"],
        fig5=bool(ACTIVE["fig5_selection_epsilons"]),
        table2_settings=ACTIVE["table2_settings"],
        tables=lambda w, output: os.path.dirname(output.files[0]),  # active_table1.csv
        figures=lambda w, output: os.path.dirname(output.files[-1]),  # active_group_privacy.pdf
    script:
        "../scripts/active_report.py"


rule active_all:
    """Only the active-learning outputs (e.g. snakemake --cores all active_all --configfile config/dpal.yaml)."""
    input:
        active_report_files(),
