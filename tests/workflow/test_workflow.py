"""End-to-end: the Snakemake workflow on a tiny config through every rule."""

import json
import math
import re
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from helpers import SMALL_AUDIT, run_snakemake

from dpcl.fixtures import make_fake_fashion_mnist

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("wf")
    raw = work / "raw"
    raw.mkdir()
    make_fake_fashion_mnist(raw, n_train_per_class=70, n_test_per_class=12)
    cfg = {
        "seeds": [0, 1],  # two: every table's mean ± std over seeds
        "epsilons": [1, "inf"],
        "delta": 1e-5,
        "label_methods": ["oracle", "base", "public-x10", "release-f0.1"],
        "learners": ["cosine", "peft_head", "naive_head", "noncl_head", "agem_head"],
        "head_label_methods": ["oracle", "base", "release-f0.1"],  # base: Fig. 3 (DP-A-GEM comparison)
        "dpsgd": {"sample_rate": 0.5, "epochs": 4},
        "tuning": {"trials": 3},
        "audit": SMALL_AUDIT,
        "datasets": {
            "fashion_mnist": {
                "source": "local",
                "local_dir": str(raw),
                "verify": False,
                "train_per_class": 25,
                "test_per_class": 10,
                "tune_per_class": 20,
                "pool_per_class": 25,
            }
        },
        "backbones": {
            "tiny": {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32, "batch_size": 64}
        },
        "benchmarks": {"tiny_bench": {"dataset": "fashion_mnist", "backbone": "tiny", "n_tasks": 5}},
        # DP active learning ([Schwethelm2025]) on a 250-record pool: every rule of active.smk
        "active": {
            "enabled": True,
            "backbone": "tiny",
            "seeds": [0, 1],
            "initial_size": 40,
            "query_sizes": [40, 20],
            "batch_size": 16,
            "epochs": 2,
            "epochs_random": 3,
            "imbalance": 0.5,
            "mc_passes": 3,
            "methods": ["random-nal", "random-sa", "entropy-dp-sa", "entropy-nondp-sa", "margin-dp-naive"],
        },
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = run_snakemake(work)
    return work, res


def test_every_rule_runs_and_writes_outputs(tiny_run):
    work, res = tiny_run
    out = work / "results"
    for rule in (
        "obtain_dataset",
        "features",
        "scenario",
        "label_spaces",
        "prototypes",
        "tune_heads",
        "heads",
        "tune_agem",
        "agem",
        "fig3_desai",
        "report",
    ):
        assert f"rule {rule}" in res.stderr + res.stdout
    assert (out / "tables" / "tiny_bench_cosine.csv").is_file()
    md = (out / "tables" / "tiny_bench_cosine.md").read_text()
    assert "Release Labels (10 %)" in md and "non-DP" in md
    for ext in ("png", "pdf"):
        assert (out / "figures" / f"tiny_bench_cosine_avg_acc.{ext}").stat().st_size > 1000
        assert (out / "figures" / f"tiny_bench_fig3_desai.{ext}").stat().st_size > 1000
        assert (out / "figures" / f"tiny_bench_peft_head_figA2_aggregation.{ext}").stat().st_size > 1000
    runs = sorted((out / "runs" / "cosine").rglob("metrics.json"))
    assert len(runs) == 2 * 2 * 4
    for learner in ("peft_head", "naive_head", "noncl_head"):
        assert len(sorted((out / "runs" / learner).rglob("privacy.json"))) == 2 * 2 * 3
        assert "head-only" in (out / "tables" / f"tiny_bench_{learner}.md").read_text()
    assert len(sorted((out / "runs" / "agem_head").rglob("privacy.json"))) == 2 * 2 * 3
    assert "agem_head" in (out / "tables" / "tiny_bench.csv").read_text()  # the summary table picks it up
    assert "rule paper_tables" in res.stderr + res.stdout  # Tables A3-A10 beside the published numbers
    for fig in ("fig4", "fig5", "fig6", "fig7"):  # Figs. 4-7 (left), notes where the tiny config has no sweep
        for ext in ("png", "pdf"):
            assert (out / "figures" / "paper" / f"{fig}.{ext}").stat().st_size > 1000
    page = (out / "report.html").read_text()  # one self-contained page of every table and figure
    assert page.count('<img alt="') >= 8 and "tiny_bench_cosine_avg_acc" in page
    assert "Full configuration" in page
    for tid in ("A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "F1", "F2"):
        for ext in ("csv", "md", "tex"):
            assert (out / "tables" / "paper" / f"table_{tid}.{ext}").stat().st_size > 0, (tid, ext)
    task_figs = ("tiny_bench_figA5_accuracy_per_task", "tiny_bench_figA6_forgetting_per_task")
    for stem in ("figA3", "figA4", "p003_fig4_blurry", *task_figs):
        for ext in ("png", "pdf"):  # Figs. A3, A4 and the per-task A5/A6 (every learner, Non-CL included)
            assert (out / "figures" / "paper" / f"{stem}.{ext}").stat().st_size > 1000, (stem, ext)
    a3 = (out / "tables" / "paper" / "table_A3.md").read_text()
    assert "| Fashion-MNIST (tiny_bench) | 1 | Cosine Classifier |" in a3
    assert "| – | – |" in a3  # Fashion-MNIST has no published numbers: paper and difference read "–"
    assert "Budget: 10%" in (out / "tables" / "paper" / "table_A4.md").read_text()
    assert "(no rows)" in (out / "tables" / "paper" / "table_A9.md").read_text()  # no ImageNet-R benchmark
    f2 = (out / "tables" / "paper" / "table_F2.md").read_text()  # Not Blurry only, notes on the rest
    assert "| Fashion-MNIST | 1 | Cosine Classifier |" in f2 and "no I-Blurry benchmark" in f2


def test_run_outputs_are_consistent(tiny_run):
    work, _ = tiny_run
    run = work / "results/runs/cosine/fashion_mnist/tiny/disjoint-t5/seed0"
    m = json.loads((run / "eps1/release-f0.1/metrics.json").read_text())
    p = json.loads((run / "eps1/release-f0.1/privacy.json").read_text())
    assert len(m["acc"]) == 5 and len(m["average_accuracy"]) == 5
    assert p["guarantee_holds"] and p["overall"]["epsilon"] == pytest.approx(1.0)
    assert p["overall"]["delta"] == pytest.approx(1e-5)
    kinds = [mech["mechanism"] for mech in p["tasks"][0]["mechanisms"]]
    assert kinds == ["ktsgd_label_release", "gaussian"]
    # with 25 samples per class and only 0.1 of eps = 1 for labels, k(0.1, 1e-6) > 25: nothing released
    assert m["released_labels"] == [0] * 5
    oracle = json.loads((run / "eps1/oracle/privacy.json").read_text())
    assert oracle["guarantee_holds"] is False and oracle["overall"]["epsilon"] == "inf"
    peft = json.loads(
        (
            work / "results/runs/peft_head/fashion_mnist/tiny/disjoint-t5/seed0/eps1/release-f0.1/"
            "privacy.json"
        ).read_text()
    )
    assert peft["guarantee_holds"] and peft["overall"]["epsilon"] <= 1.0
    assert [m["mechanism"] for m in peft["tasks"][0]["mechanisms"]] == ["ktsgd_label_release", "dpsgd"]
    agem = json.loads(
        (
            work / "results/runs/agem_head/fashion_mnist/tiny/disjoint-t5/seed0/eps1/release-f0.1/"
            "privacy.json"
        ).read_text()
    )
    assert agem["guarantee_holds"] and agem["overall"]["epsilon"] <= 1.0
    kinds = [m["mechanism"] for m in agem["tasks"][0]["mechanisms"]]
    assert kinds == ["ktsgd_label_release", "dpsgd", "dpsgd_buffer"]
    steps = agem["tasks"][0]["mechanisms"][1]["steps"]
    assert agem["agem"]["buffer_part"]["worst_case_compositions"] == 4 * steps  # T - 1 = 4 later tasks
    assert set(agem["tasks"][0]["parts"]) == {"rule", "train", "reference"}
    nondp = json.loads((run / "epsinf/base/metrics.json").read_text())
    assert nondp["sigma"] == 0 and 0 < nondp["final_accuracy"] <= 1
    # a head run computes in numpy: no device; the feature caches record where the backbone ran
    assert "device" not in m["provenance"]
    from dpcl.features import load_feature_cache

    caches = sorted((work / "results" / "features").rglob("*.npz"))
    assert caches and all(load_feature_cache(c)[3]["provenance"]["device"] == {"type": "cpu"} for c in caches)
    assert math.isinf(float(nondp["epsilon"]))


def test_resume_has_nothing_to_do_and_results_are_reproducible(tiny_run, tmp_path):
    work, _ = tiny_run
    dry = run_snakemake(work, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr
    # Re-running from scratch in another folder gives bit-identical results, and so does every
    # job in a fresh interpreter instead of a child of the warm worker (workflow/scripts/warm_worker.py)
    other = tmp_path / "again"
    other.mkdir()
    shutil.copy(work / "config.yaml", other / "config.yaml")
    run_snakemake(other, env={"DPCL_WARM_WORKER": "0"})

    # every file a run writes, but logs and the non-private diagnostics, which
    # hold timings: features, labels, runs, tuning results, tables, PNG/PDF figures, report.html
    def written(root):
        return {
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and "logs" not in p.relative_to(root).parts and p.name != "diagnostics.json"
        }

    files = written(work / "results")
    assert files == written(other / "results") and len(files) > 300
    assert {f.rsplit(".", 1)[-1] for f in files} >= {"npz", "json", "csv", "md", "tex", "png", "pdf", "html"}
    differ = sorted(
        f for f in files if (work / "results" / f).read_bytes() != (other / "results" / f).read_bytes()
    )
    assert not differ, differ[:10]


def test_adding_a_seed_reruns_no_job_of_the_seeds_already_run(tiny_run):
    """More seeds on a finished run plan the new seed's jobs and the aggregates only: every job of the
    seeds already run is kept (the one-seed first look of docs/getting-started.md relies on it)."""
    work, _ = tiny_run
    dry = run_snakemake(work, "-n", "--config", "seeds=[0,1,2]")
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(?:\s+.*\n)*?\s+wildcards: (.*)$", dry.stdout, re.M)
    seeded = {(rule, m.group(1)) for rule, wildcards in jobs if (m := re.search(r"\bseed=(\d+)", wildcards))}
    assert {"scenario", "tune_heads", "heads", "tune_agem", "agem", "prototypes"} <= {r for r, _ in seeded}
    assert {s for _, s in seeded} == {"2"}, sorted(seeded)


def test_snakemake_report_has_the_captioned_results(tiny_run):
    """`snakemake --report`: Snakemake's own report holds the benchmark table, every
    learner's table and figure, the paper figures and tables, the privacy outputs and
    report.html, each with its caption and provenance."""
    work, _ = tiny_run
    zipped = work / "report.zip"
    run_snakemake(work, "--report", str(zipped))
    with zipfile.ZipFile(zipped) as z:
        names = {Path(n).name for n in z.namelist()}
        page = z.read(next(n for n in z.namelist() if n.endswith("report/report.html"))).decode()
    expected = {"tiny_bench.csv", "report.html", "privacy_audit.csv", "fig1_label_space_attack.csv"}
    expected |= {"fig2_label_drop_probability.png", "figA1_drop_lower_bound.png", "tiny_bench_fig3_desai.png"}
    expected |= {f"{f}.png" for f in ("fig4", "fig5", "fig6", "fig7", "figA3", "figA4")}
    expected |= {f"table_{t}.csv" for t in ("A3", "A4", "A5", "A6", "A7", "A8")}
    for learner in ("cosine", "peft_head", "naive_head", "noncl_head", "agem_head"):
        expected |= {f"tiny_bench_{learner}.csv", f"tiny_bench_{learner}_avg_acc.png"}
    assert expected <= names, sorted(expected - names)
    # the captions and the workflow description are in the page (its data is embedded as JSON)
    for phrase in (
        "attack on the output label space",
        "Empirical privacy audit",
        "Benchmark tables",
        "Paper figures",
    ):
        assert phrase in page, phrase


def test_bad_config_is_rejected_with_the_key_named(tmp_path):
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "epsilons": [1, -3],
                "datasets": {"fashion_mnist": {}},
                "backbones": {"b": {"arch": "x"}},
                "benchmarks": {"t": {"dataset": "fashion_mnist", "backbone": "b"}},
            }
        )
    )
    res = run_snakemake(tmp_path, "-n", check=False)
    assert res.returncode != 0
    assert "config key 'epsilons[1]'" in res.stdout + res.stderr
    assert not (tmp_path / "results").exists()


def test_paper_config_plans_offline(tmp_path):
    """config/paper.yaml validates and its whole DAG resolves without the network (a dry run)."""
    shutil.copy(REPO / "config" / "paper.yaml", tmp_path / "config.yaml")
    res = run_snakemake(tmp_path, "-n")
    log = res.stdout + res.stderr
    total = int(log[log.index("Job stats:") :].split("total", 1)[1].split()[0])
    assert 2_000 < total < 3_000  # one film_ensemble job per PEFT run (1,160), not per (run, task) member
    for rule in (
        "obtain_dataset",
        "features",
        "film_ensemble",
        "tune_film",
        "tune_heads",
        "tune_agem",
        "agem",
        "paper_tables",
        "paper_figures",
        "html_report",
    ):
        assert f"rule {rule}" in log, rule
    # tuned as the paper on the private training data (no public tune split is cached),
    # ImageNet-R split per seed, non-DP runs in the Base Dataset setting only, F.1/F.2 and [Tobaben2024] Fig. 4
    assert "/tune.npz" not in log
    # film.device: cuda, so every FiLM job takes a GPU (--resources gpu=N runs at most N at once)
    film_jobs = re.findall(r"^rule (?:film_ensemble|film_baseline|tune_film):\n(?:    .*\n)*", log, re.M)
    assert len(film_jobs) > 1_000 and all(re.search(r"resources: .*\bgpu=1\b", j) for j in film_jobs)
    for seed in range(5):
        assert f"features/imagenet_r__seed{seed}/vit_b16/train.npz" in log
        assert f"runs/peft_film/imagenet_r__seed{seed}/vit_b16/disjoint-t10/seed{seed}/eps1/base" in log
    assert "runs/peft_film/imagenet_r__seed0/vit_b16/disjoint-t10/seed1/" not in log
    assert not re.search(r"runs/\w+_film/\S+/epsinf/(?!base/)", log)
    assert re.search(r"runs/peft_film/cifar100/vit_b16/iblurry-n50-m10-t10/seed0/epsinf/base/", log)
    assert re.search(r"runs/peft_film/cifar100/vit_b16/siblurry-n50-m10-t10/seed0/eps1/release-f0.2/", log)
    assert re.search(r"runs/peft_film/cifar100/vit_b16/disjoint-t10/seed0/eps8/public-x100/", log)
    for out in ("tables/paper/table_F1.md", "tables/paper/table_F2.md", "figures/paper/p003_fig4_blurry.png"):
        assert out in log, out


def test_active_learning_workflow(tiny_run):
    """[Schwethelm2025] beside the CL DAG: schedules, runs per (pool, seed), summary, tables and figures."""
    from dpcl.active.group_ledger import verify_group_ledger

    work, res = tiny_run
    out = work / "results"
    log = res.stderr + res.stdout
    for rule in ("active_schedule", "active_runs", "active_report"):
        assert f"rule {rule}" in log, rule
    assert (out / "features/fashion_mnist/tiny/pool.npz").is_file()
    runs = sorted((out / "runs" / "active").rglob("privacy.json"))
    # 2 pools x 2 seeds x (4 methods in both modes + entropy-nondp-sa in paper mode only)
    assert len(runs) == 2 * 2 * 9
    for path in runs:
        p = json.loads(path.read_text())
        summary = verify_group_ledger(p)
        assert summary["guarantee_holds"] == ("/sound/" in str(path)), path
        assert next(iter(json.loads((path.parent / "diagnostics.json").read_text()))) == "non_private"
    sa = json.loads(
        (out / "runs/active/balanced/sound/entropy-dp-sa/eps8-sel2/seed0/privacy.json").read_text()
    )
    assert [g["group"] for g in sa["groups"]] == [0, 1, 2, "unselected"]
    assert [g["selection_epsilon"] for g in sa["groups"]] == pytest.approx([0, 1, 2, 2])
    assert all(g["epsilon"] <= 8 for g in sa["groups"])
    summary = (out / "active" / "summary.csv").read_text().splitlines()
    assert len(summary) == 1 + len(runs)
    table = (out / "tables" / "active_table1.md").read_text()
    for row in ("| Random |", "| Random AL |", "| Entropy |", "[Schwethelm2025]: CIFAR-10 ResNet-9"):
        assert row in table, row
    for ext in ("png", "pdf"):
        assert (out / "figures" / f"active_group_privacy.{ext}").stat().st_size > 1000
    assert "active_table1" in (out / "report.html").read_text()
    authors = (out / "tables" / "active_authors_schedule.md").read_text()
    assert "RDP (authors')" in authors and "| violated |" in authors  # the 1,000 + [1,000, 300] plan


def test_dpal_config_plans_offline(tmp_path):
    """config/dpal.yaml ([Schwethelm2025]'s full grid) validates and its active DAG resolves (a dry run)."""
    shutil.copy(REPO / "config" / "dpal.yaml", tmp_path / "config.yaml")
    res = run_snakemake(tmp_path, "-n", "active_all")
    log = res.stdout + res.stderr
    for rule in ("features", "active_schedule", "active_runs", "active_report"):
        assert f"rule {rule}" in log, rule
    assert "rule prototypes" not in log  # the active target runs no continual-learning job
