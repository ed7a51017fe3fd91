# Helpers shared by the rules: file names from config entries (no computation here).


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
HEAD_LEARNERS = [l for l in config["learners"] if l in ("peft_head", "naive_head", "noncl_head")]
FILM_LEARNERS = [l for l in config["learners"] if l.endswith("_film")]
FILM_DPSGD = {**config["dpsgd"], **(config["film"]["dpsgd"] or {})}
HEAD_METHODS = config["head_label_methods"] or METHODS
# Every run's target (ε, δ) by ε tag, from the validated config (the learners check their label
# file against it; DESIGN §4).
TARGETS = run_targets(config["epsilons"], config["delta"])


AGEM_METHODS = config["agem"]["label_methods"] or HEAD_METHODS
L2DPML_METHODS = config["l2dpml"]["label_methods"] or HEAD_METHODS
BASELINE_METHODS = config["baseline_label_methods"] or HEAD_METHODS


def methods_for(learner, name=None):
    """Label methods a learner runs (on benchmark ``name``: restricted by its own label_methods)."""
    if learner == "cosine":
        methods = METHODS
    elif learner.startswith("agem_") or learner == "desai_head":
        methods = AGEM_METHODS
    elif learner in ("l2dpml", "fm_agem"):
        methods = L2DPML_METHODS
    elif learner.startswith(("naive_", "noncl_")):
        methods = BASELINE_METHODS
    else:
        methods = HEAD_METHODS
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
        for stem in ("fig2_label_drop_probability", "figA1_drop_lower_bound")
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
