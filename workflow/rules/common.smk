# Helpers shared by the rules: file names from config entries (no computation here).

import re
from pathlib import Path
from dpcl.active.grid import run_cells, schedule_keys
from dpcl.report.paper_figures import blurry_trios


def scenario_tag(bench):
    if bench["scenario"] in ("iblurry", "siblurry"):
        return f"{bench['scenario']}-n{bench['disjoint_pct']:g}-m{bench['blurry_pct']:g}-t{bench['n_tasks']}"
    return f"{bench['scenario']}-t{bench['n_tasks']}"


def bench_seeds(name):
    """Run seeds of a benchmark: its own `seeds` (e.g. all 120 task orders of 5-datasets) or the global list."""
    return config["benchmarks"][name].get("seeds") or SEEDS


def bench_wildcards(name, seed=None):
    """Path parts of a benchmark's runs at ``seed`` (default: its first seed; the data set may be a
    variant per seed, config key benchmarks.<name>.dataset with {seed})."""
    b = config["benchmarks"][name]
    seed = bench_seeds(name)[0] if seed is None else seed
    return dict(
        dataset=benchmark_dataset(config, name, seed), backbone=b["backbone"], scenario=scenario_tag(b)
    )


# DP-SGD learners on cached features sharing one job per seed (heads.smk); DP-A-GEM
# (agem.smk) and the FiLM learners on images (film.smk) have rules of their own.
HEAD_LEARNERS = learners.job_learners(config["learners"], "heads")
FILM_LEARNERS = learners.select(config["learners"], adapter="film")
FILM_DPSGD = {**config["dpsgd"], **(config["film"]["dpsgd"] or {})}
# GPUs a FiLM job takes (resource gpu): none with film.device cpu, else one. A workstation with N GPUs
# runs at most N FiLM jobs at once with `--resources gpu=N`; without it Snakemake does not count them.
FILM_GPU = 0 if config["film"]["device"] == "cpu" else 1
HEAD_METHODS = config["head_label_methods"] or METHODS
# Every run's target (ε, δ) by ε tag, from the validated config (the learners check their label
# file against it).
TARGETS = run_targets(config["epsilons"], config["delta"])


BASELINE_METHODS = config["baseline_label_methods"] or HEAD_METHODS


def _method_list(key):
    """A config list of label methods (LearnerSpec.methods): a top-level list, or the label_methods
    of a learner's config block (null: those of head_label_methods)."""
    top = {
        "label_methods": METHODS,
        "head_label_methods": HEAD_METHODS,
        "baseline_label_methods": BASELINE_METHODS,
    }
    return top[key] if key in top else (config[key]["label_methods"] or HEAD_METHODS)


# the label methods of each config list a learner may take them from (LearnerSpec.methods)
METHOD_LISTS = {
    learners.method_list_key(k): _method_list(learners.method_list_key(k)) for k in learners.METHOD_LISTS
}


def methods_for(learner, name=None):
    """Label methods a learner runs (on benchmark ``name``: restricted by its own label_methods)."""
    methods = METHOD_LISTS[learners.label_methods_key(learner)]
    own = config["benchmarks"][name].get("label_methods") if name else None
    return [m for m in methods if not own or m in own]


def bench_learners(name):
    """Learners run on a benchmark: its own `learners` (a subset of the global list) or all."""
    own = config["benchmarks"][name].get("learners")
    return [l for l in config["learners"] if not own or l in own]


def bench_eps(name):
    """ε tags of a benchmark: its own `epsilons` (a subset of the global list) or all."""
    own = config["benchmarks"][name].get("epsilons")
    tags = {eps_tag(float(e)) for e in own} if own else None
    return [e for e in EPS if tags is None or e in tags]


NONPRIVATE_METHODS = config["nonprivate_label_methods"]


def run_settings(learner, name):
    """(ε tag, label method) pairs a learner runs on a benchmark: its ε × methods, at ε = inf only
    the nonprivate_label_methods (when set)."""
    methods = methods_for(learner, name)
    return [
        (e, m)
        for e in bench_eps(name)
        for m in methods
        if e != "inf" or NONPRIVATE_METHODS is None or m in NONPRIVATE_METHODS
    ]


def run_files(learner, name, kind):
    """Per-run files of a learner on a benchmark. The per-seed jobs of the cached-feature
    learners compute every global (ε, method) anyway; a benchmark's own lists only restrict
    what is requested, which is what bounds the FiLM jobs (one per run and task)."""
    if learner not in bench_learners(name):
        return []
    settings = run_settings(learner, name)
    return [
        f"{R}/runs/{learner}/{w['dataset']}/{w['backbone']}/{w['scenario']}/seed{s}/eps{e}/{m}/{kind}.json"
        for s in bench_seeds(name)
        for w in (bench_wildcards(name, s),)
        for e, m in settings
    ]


def report_files(learner, name):
    return [
        f"{R}/tables/{name}_{learner}.csv",
        f"{R}/tables/{name}_{learner}.md",
        f"{R}/figures/{name}_{learner}_avg_acc.png",
        f"{R}/figures/{name}_{learner}_avg_acc.pdf",
    ]


def privacy_files():
    figures = [
        f"{R}/figures/{stem}.{ext}"
        for stem in ("fig2_label_drop_probability", "figA1_drop_lower_bound", "privacy_audit_claims")
        for ext in ("png", "pdf")
    ]
    tables = [
        f"{R}/tables/{stem}.{ext}"
        for stem in ("fig1_label_space_attack", "privacy_audit")
        for ext in ("csv", "md")
    ]
    return figures + tables


def all_reports():
    runs = [
        f
        for name in config["benchmarks"]
        for learner in bench_learners(name)
        for f in report_files(learner, name)
    ]
    runs += [f"{R}/tables/{name}.{ext}" for name in config["benchmarks"] for ext in ("csv", "md")]
    runs += [
        f"{R}/figures/{name}_blurry_samples.{ext}"
        for name, b in config["benchmarks"].items()
        if b["scenario"] == "iblurry"
        for ext in ("png", "pdf")
    ]
    return runs + privacy_files()


# ---- helpers of the per-seed jobs on cached features (prototypes, agem, projected) ----


def job_methods(job):
    """The label methods every run of a per-seed job makes: the list its learners share (their
    LearnerSpec.methods must name one list; a job computes every (ε, method) of it)."""
    lists = {learners.label_methods_key(l) for l in learners.job_learners(config["learners"], job)}
    if len(lists) > 1:
        raise ValueError(
            f"the learners of job {job!r} take their label methods from different lists {sorted(lists)}"
        )
    return METHOD_LISTS[lists.pop()] if lists else []


def _job_outputs(job, kind):
    """A per-seed job's run files, learner-major (dpcl.stages.common.runs_by_learner reads them so)."""
    return expand(
        f"{R}/runs/{{learner}}/{{{{dataset}}}}/{{{{backbone}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}/{kind}.json",
        learner=learners.job_learners(config["learners"], job),
        eps=EPS,
        method=job_methods(job),
    )


def job_blocks(job_learners):
    """The config blocks the learners of a job declare they read (LearnerSpec.config_blocks)."""
    return {b: config[b] for l in job_learners for b in learners.get(l).config_blocks}


PROTOTYPE_LEARNERS = learners.job_learners(config["learners"], "prototypes")


# ---- helpers of heads.smk -----------------------------------------------------


# (ε tag, method) of every run a heads job makes: at ε = inf only the nonprivate_label_methods
# (config/paper.yaml: base; the 1000x public label spaces without DP were most of a job's time)
# Each head learner runs only its own label methods (methods_for: Naive and Non-CL the
# baseline_label_methods, config/paper.yaml: Base Dataset only), so a heads job trains no run
# that nothing requests.
HEAD_RUN_LEARNERS = {
    (e, m): [l for l in HEAD_LEARNERS if m in methods_for(l)]
    for e in EPS
    for m in HEAD_METHODS
    if e != "inf" or NONPRIVATE_METHODS is None or m in NONPRIVATE_METHODS
}
HEAD_PAIRS = [pair for pair, learners in HEAD_RUN_LEARNERS.items() if learners]


def _head_outputs(kind):
    # learner-major, then HEAD_PAIRS in the order of the label files, each learner only where it
    # runs (dpcl.stages.common.runs_by_learner with requested=HEAD_RUN_LEARNERS)
    return [
        f"{R}/runs/{learner}/{{dataset}}/{{backbone}}/{{scenario}}/seed{{seed}}/eps{e}/{m}/{kind}.json"
        for learner in HEAD_LEARNERS
        for e, m in HEAD_PAIRS
        if learner in HEAD_RUN_LEARNERS[(e, m)]
    ]


TUNE = config["tuning"]["enabled"]

# tuning.protocol (App. D.1): "public" tunes on the public tune split, "paper" on the private
# training data (unaccounted, as the paper; privacy.json says so)
TUNE_SPLIT = "train" if config["tuning"]["protocol"] == "paper" else "tune"


def _tuning_files(w):
    if not TUNE:
        return []
    return expand(f"{R}/tuning/{w.dataset}/{w.backbone}/{w.scenario}/seed{w.seed}/eps{{eps}}.json", eps=EPS)


# ---- helpers of agem.smk ------------------------------------------------------


# the memory-buffer learners of registry job "agem" (the enhanced DP-A-GEM, App. D.4, and Desai et al.'s
# DP-CL as published, [Desai2021]): one job per seed runs them all.
AGEM_LEARNERS = learners.job_learners(config["learners"], "agem")

AGEM = bool(AGEM_LEARNERS)

FIG3_EPS = [e for e in EPS if e in ("1", "8")] or [e for e in EPS if e != "inf"] or EPS


def _fig3_runs(w):
    learners_ = [
        l
        for l in learners.names()
        if learners.get(l).fig3 and l in bench_learners(w.benchmark) and "base" in methods_for(l, w.benchmark)
    ]
    eps = [e for e in FIG3_EPS if e in bench_eps(w.benchmark)]
    return [
        f
        for l in learners_
        for f in run_files(l, w.benchmark, "metrics")
        if Path(f).parts[-2:] == ("base", "metrics.json") and any(f"/eps{e}/" in f for e in eps)
    ]


def fig3_files():
    """Fig. 3 targets: benchmarks where DP-A-GEM (head-only or FiLM) runs the Base Dataset setting."""
    return [
        f"{R}/figures/{name}_fig3_desai.{ext}"
        for name in config["benchmarks"]
        if any(
            l in bench_learners(name) and "base" in methods_for(l, name)
            for l in learners.names()
            if learners.get(l).fig3 == "compared"
        )
        and any(e in bench_eps(name) for e in FIG3_EPS)
        for ext in ("png", "pdf")
    ]


def _agem_tuning_files(w):
    if not TUNE:
        return []
    return expand(
        f"{R}/tuning_agem/{w.dataset}/{w.backbone}/{w.scenario}/seed{w.seed}/eps{{eps}}.json", eps=EPS
    )


# ---- helpers of projected.smk -------------------------------------------------


PROJECTED_LEARNERS = learners.job_learners(config["learners"], "projected")


# ---- helpers of film.smk ------------------------------------------------------


FILM_RUN = f"{R}/runs/{{learner}}/{{dataset}}/{{backbone}}/{{scenario}}/seed{{seed}}/eps{{eps}}/{{method}}"

FILM_TUNE = config["tuning"]["enabled"]


# Plain wildcard patterns (not input functions): the paper grid has ~10,000 FiLM jobs and
# patterns keep Snakemake's planning cost per job low.
FILM_COMMON = dict(
    manifest=f"{RES}/{{dataset}}/MANIFEST.json",
    scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
    labels=f"{R}/labels/{{dataset}}/{{scenario}}/seed{{seed}}/eps{{eps}}/{{method}}.json",
    # the tuned DP-SGD config of this (ε, seed); absent: params.dpsgd is used
    **(
        {"tuned": f"{R}/tuning_film/{{dataset}}/{{backbone}}/{{scenario}}/seed{{seed}}/eps{{eps}}.json"}
        if FILM_TUNE
        else {}
    ),
)

FILM_PARAMS = dict(
    dataset_cfg=lambda w: config["datasets"][w.dataset],
    backbone_cfg=lambda w: config["backbones"][w.backbone],
    dpsgd=FILM_DPSGD,
    physical_batch=config["film"]["physical_batch"],
    device=config["film"]["device"],
    deterministic=config["film"]["deterministic"],
    precision=config["film"]["precision"],
    targets=lambda w: {w.eps: TARGETS[w.eps]},  # this run's (ε, δ) from the config
)


# ---- helpers of report.smk ----------------------------------------------------


def aggregation_figure_files():
    """Fig. A2 (aggregation rules of a PEFT ensemble) per benchmark and PEFT learner that runs."""
    return [
        f"{R}/figures/{name}_{learner}_figA2_aggregation.{ext}"
        for name in config["benchmarks"]
        for learner in learners.names()
        if learners.get(learner).ensemble and learner in bench_learners(name)
        for ext in ("png", "pdf")
    ]


# ---- helpers of paper_tables.smk ----------------------------------------------


PAPER_TABLE_IDS = ["A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "F1", "F2"]


def paper_table_files():
    """results/tables/paper/table_<ID>.{csv,md,tex} for Tables A3-A10, F1 and F2."""
    return [f"{R}/tables/paper/table_{t}.{ext}" for t in PAPER_TABLE_IDS for ext in ("csv", "md", "tex")]


def _paper_table_runs():
    return {
        name: [f for learner in config["learners"] for f in run_files(learner, name, "metrics")]
        for name in config["benchmarks"]
    }


# ---- helpers of active.smk ----------------------------------------------------


ACTIVE = config["active"]

ACTIVE_ON = bool(ACTIVE["enabled"])

ACTIVE_CELLS = run_cells(ACTIVE) if ACTIVE_ON else []

ACTIVE_SCHEDULES = schedule_keys(ACTIVE) if ACTIVE_ON else []

# the authors' step amplification at the main setting, for the per-group privacy figure only
ACTIVE_MAIN = f"eps{ACTIVE['epsilon']:g}-sel{ACTIVE['selection_epsilon']:g}"

ACTIVE_FIGURE_SCHEDULES = {
    "naive": f"naive-{ACTIVE_MAIN}",
    "step amplification (ours)": f"step_amplification-{ACTIVE_MAIN}",
    "step amplification (authors')": f"paper_step_amplification-{ACTIVE_MAIN}",
}


def _active_feature(split):
    return f"{R}/features/{ACTIVE['dataset']}/{ACTIVE['backbone']}/{split}.npz"


def _active_runs(kind, pool="{pool}", seed="{seed}"):
    return [f"{R}/runs/active/{pool}/{c['key']}/seed{seed}/{kind}" for c in ACTIVE_CELLS]


def active_report_files():
    """Targets of this file for rule all (none when active.enabled is false)."""
    if not ACTIVE_ON:
        return []
    files = [f"{R}/tables/active_table1.{ext}" for ext in ("csv", "md")]
    if ACTIVE["table2_settings"]:
        files += [f"{R}/tables/active_table2.{ext}" for ext in ("csv", "md")]
    if ACTIVE["table5"]:
        files += [f"{R}/tables/active_table5.{ext}" for ext in ("csv", "md")]
    if ACTIVE["fig5_selection_epsilons"]:
        files += [f"{R}/figures/active_fig5_selection_budget.{ext}" for ext in ("png", "pdf")]
    files += [f"{R}/tables/active_authors_schedule.{ext}" for ext in ("csv", "md")]
    return files + [f"{R}/figures/active_group_privacy.{ext}" for ext in ("png", "pdf")]


# ---- helpers of paper_figures.smk ---------------------------------------------


# Figs. 4-7 and A3 compare the Cosine Classifier and the PEFT Ensemble ([LabelSpace] Sec. 6); Figs.
# A4-A9 (App. F) every learner, the Naive and Non-CL baselines included. p003_fig4_blurry: paper
# [Tobaben2024] Fig. 4, Not Blurry vs I-Blurry(50, 10) vs Si-Blurry on one data set (a note where the config
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
    """Benchmark → its first seed's scenario file, for every benchmark of a complete [Tobaben2024] Fig. 4
    trio (the figure's per-task data panel)."""
    names = [n for trio in blurry_trios(config["benchmarks"]).values() for n in trio.values()]
    return {
        n: "{R}/scenarios/{dataset}/{scenario}/seed{seed}.json".format(
            R=R, seed=bench_seeds(n)[0], **bench_wildcards(n)
        )
        for n in names
    }


def _p003_fig4_datasets():
    """Config entries of the data sets behind [Tobaben2024] Fig. 4 (their labels count samples per task)."""
    names = sorted({config["benchmarks"][n]["dataset"] for n in _p003_fig4_scenarios()})
    return {d: config["datasets"][d] for d in names}


def paper_figure_files():
    """Figs. 4, 5, 6, 7 (left), A3, A4, [Tobaben2024] Fig. 4 and every benchmark's A5/A6 as PNG and
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
