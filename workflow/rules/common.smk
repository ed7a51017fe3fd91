# Helpers shared by the rules: file names from config entries (no computation here).


def scenario_tag(bench):
    return f"{bench['scenario']}-t{bench['n_tasks']}"


def bench_wildcards(name):
    b = config["benchmarks"][name]
    return dict(dataset=b["dataset"], backbone=b["backbone"], scenario=scenario_tag(b))


def run_files(learner, name, kind):
    w = bench_wildcards(name)
    return expand(
        f"{R}/runs/{learner}/{w['dataset']}/{w['backbone']}/{w['scenario']}/seed{{seed}}/eps{{eps}}/{{method}}/{kind}.json",
        seed=SEEDS, eps=EPS, method=METHODS,
    )


def report_files(learner, name):
    return [
        f"{R}/tables/{name}_{learner}.csv",
        f"{R}/tables/{name}_{learner}.md",
        f"{R}/figures/{name}_{learner}_avg_acc.png",
        f"{R}/figures/{name}_{learner}_avg_acc.pdf",
    ]


def all_reports():
    return [f for name in config["benchmarks"] for learner in config["learners"] for f in report_files(learner, name)]
