"""End-to-end: the FiLM learners through Snakemake on a tiny random ViT (CPU).

One job per run trains every member of the PEFT FiLM ensemble, one evaluation job per run,
one job per Naive / Non-CL / DP-A-GEM FiLM run, with the DP-SGD hyperparameters tuned
once per (ε, seed) on the public tuning split (App. D.1); checks the outputs, the ledgers
(DP-A-GEM's buffer part included), the members, Fig. 3 and that every run used its tuned config.
"""

import json
import math
import re

import numpy as np
import pytest
import yaml
from helpers import SMALL_AUDIT, run_snakemake

from dpcl.fixtures import make_fake_fashion_mnist

pytestmark = pytest.mark.slow
FILM = ("peft_film", "naive_film", "noncl_film", "agem_film")


@pytest.fixture(scope="module")
def film_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("wf_film")
    raw = work / "raw"
    raw.mkdir()
    make_fake_fashion_mnist(raw, n_train_per_class=12, n_test_per_class=6)
    cfg = {
        "seeds": [0],
        "epsilons": [1, "inf"],
        "label_methods": ["base"],
        "learners": ["peft_film", "naive_film", "noncl_film", "agem_film"],
        "agem": {"buffer_fraction": 0.3},
        "dpsgd": {"sample_rate": 0.5, "epochs": 2, "lr": 0.01},
        "film": {"dpsgd": {"epochs": 1}, "physical_batch": 16, "device": "cpu"},
        "tuning": {"trials": 2},  # enabled by default
        "audit": SMALL_AUDIT,
        "active": {"enabled": False},
        "datasets": {
            "fashion_mnist": {
                "source": "local",
                "local_dir": str(raw),
                "verify": False,
                "train_per_class": 8,
                "test_per_class": 4,
            }
        },
        "backbones": {"vit": {"arch": "vit_tiny_patch16_224", "weights": "random", "image_size": 32}},
        "benchmarks": {"film_bench": {"dataset": "fashion_mnist", "backbone": "vit", "n_tasks": 2}},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = run_snakemake(work)
    return work, res


def test_film_rules_run_one_ensemble_job_per_run(film_run):
    work, res = film_run
    log = res.stderr + res.stdout
    for rule in ("tune_film", "film_ensemble", "film_baseline", "report", "aggregation_figure"):
        assert f"rule {rule}" in log
    runs = work / "results" / "runs"
    members = sorted((runs / "peft_film").rglob("members/task*.npz"))
    assert len(members) == 2 * 2  # eps x tasks
    assert len(list((work / "results" / "logs" / "film_ensemble").glob("*.log"))) == 2  # one job per run
    for learner in FILM:
        assert len(sorted((runs / learner).rglob("metrics.json"))) == 2
        assert "(FiLM)" in (work / "results" / "tables" / f"film_bench_{learner}.md").read_text()
    for ext in ("png", "pdf"):
        assert (
            work / "results" / "figures" / f"film_bench_peft_film_figA2_aggregation.{ext}"
        ).stat().st_size > 1000
        # Fig. 3 fires for DP-A-GEM with FiLM alone (no agem_head) in the Base Dataset setting
        assert (work / "results" / "figures" / f"film_bench_fig3_desai.{ext}").stat().st_size > 1000
    assert "rule fig3_desai" in log


def test_film_members_hold_only_film_values_and_head(film_run):
    work, _ = film_run
    path = next((work / "results" / "runs" / "peft_film").rglob("eps1/base/members/task1.npz"))
    with np.load(path) as z:
        keys = z.files
        film = [k for k in keys if k.startswith("film/")]
        assert set(keys) - set(film) == {"head/weight", "head/bias"}
        assert all(k.endswith((".weight", ".bias")) and "norm" in k for k in film)
        assert z["head/weight"].shape == (10, 192)  # base: all 10 labels, ViT-Tiny width 192
    rec = json.loads(path.with_suffix(".json").read_text())
    assert rec["mechanism"] == "dpsgd" and rec["trainable_parameters"] == sum(
        np.load(path)[k].size for k in keys
    )


def test_film_ledgers_hold_the_target(film_run):
    work, _ = film_run
    for p in sorted((work / "results" / "runs").rglob("privacy.json")):
        led = json.loads(p.read_text())
        m = json.loads(p.with_name("metrics.json").read_text())
        if m["epsilon"] == "inf":
            continue
        assert led["guarantee_holds"] and led["overall"]["epsilon"] <= 1.0 + 1e-9, p
        mechs = [mech["mechanism"] for t in led["tasks"] for mech in t["mechanisms"]]
        if m["learner"] == "agem_film":  # task 0's reference part, reread by task 1 (T = 2)
            assert mechs.count("dpsgd") == 2 and mechs.count("dpsgd_buffer") == 1, p
            continue
        assert mechs.count("dpsgd") == 2 and set(mechs) == {"data_independent", "dpsgd"}, p
        assert m["noise_multiplier"] > 0 and math.isfinite(m["final_accuracy"])
    peft = json.loads(
        next((work / "results" / "runs" / "peft_film").rglob("eps1/base/metrics.json")).read_text()
    )
    assert sorted(peft["final_accuracy_by_aggregation"]) == ["argmax", "entropy", "median"]


CPU_FP32 = {"type": "cpu", "precision": "fp32"}  # film.device cpu, film.precision's default


def test_film_outputs_record_the_device_they_computed_on(film_run):
    """film.device: cpu -> every FiLM run's metrics and ledger and every tuning result say so, with the
    passes' precision (provenance.device; feature caches: tests/workflow/test_workflow.py)."""
    work, _ = film_run
    res = work / "results"
    for learner in FILM:
        for name in ("metrics.json", "privacy.json"):
            for p in sorted((res / "runs" / learner).rglob(name)):
                assert json.loads(p.read_text())["provenance"]["device"] == CPU_FP32, p
    tuned = sorted((res / "tuning_film").rglob("eps*.json"))
    assert tuned and all(json.loads(p.read_text())["device"] == CPU_FP32 for p in tuned)


def test_film_runs_use_the_tuned_config_of_their_epsilon(film_run):
    """App. D.1: one tuning result per (ε, seed) on the public tuning split (first task's classes),
    reused by every FiLM job of that (ε, seed); metrics.json names the config used."""
    work, _ = film_run
    res = work / "results"
    scenario = json.loads(next((res / "scenarios" / "fashion_mnist").rglob("seed0.json")).read_text())
    tuned = {}
    for tag in ("1", "inf"):
        path = next((res / "tuning_film").rglob(f"seed0/eps{tag}.json"))
        tuned[tag] = json.loads(path.read_text())
        t = tuned[tag]
        assert len(t["trials"]) == 2 and t["learner"] == "film" and t["seed"] == 0
        assert t["tuning_set"]["classes"] == sorted(scenario["task_classes"][0])
        assert t["tuning_set"]["train"] >= 10 and t["dpsgd"]["epochs"] == 1  # film.dpsgd's epochs
    for learner in FILM:
        for tag in ("1", "inf"):
            m = json.loads(next((res / "runs" / learner).rglob(f"eps{tag}/base/metrics.json")).read_text())
            key = "dpsgd_all_tasks" if learner == "noncl_film" else "dpsgd"  # Non-CL: scaled to all tasks
            assert m["tuned"] is True and m["dpsgd"] == tuned[tag][key], (learner, tag)
            assert tuned[tag]["dpsgd"]["sample_rate"] == tuned[tag]["best"]["sample_rate"]
    rec = json.loads(next((res / "runs" / "peft_film").rglob("eps1/base/members/task0.json")).read_text())
    assert rec["tuned"] is True and rec["sample_rate"] == tuned["1"]["dpsgd"]["sample_rate"]
    assert rec["lr"] == tuned["1"]["dpsgd"]["lr"] and rec["clip"] == tuned["1"]["dpsgd"]["clip"]


def test_agem_film_writes_model_metrics_and_the_agem_privacy_block(film_run):
    """App. D.4 with FiLM: one job per run; the ledger's train part (own task's steps) and buffer
    part ((T − 1 − s)·steps rereads at its own noise), the "agem" block and the released model."""
    work, _ = film_run
    run = next((work / "results" / "runs" / "agem_film").rglob("eps1/base/metrics.json")).parent
    m = json.loads((run / "metrics.json").read_text())
    led = json.loads((run / "privacy.json").read_text())
    steps = max(1, round(m["dpsgd"]["epochs"] / m["dpsgd"]["sample_rate"]))  # DPSGDConfig.steps
    assert m["learner"] == "agem_film" and m["agem"]["buffer_fraction"] == 0.3
    # T = 2 and q_ref = q: the buffer's worst case is (T − 1)·steps = steps reads, so σ_ref = σ
    assert (
        m["buffer_noise_multiplier"] == m["noise_multiplier"] > 0 and "tasks" not in m
    )  # sizes: diagnostics
    diag = json.loads((run / "diagnostics.json").read_text())
    assert next(iter(diag)) == "non_private" and len(diag["agem_tasks"]) == 2
    t0 = {mech.get("part"): mech for mech in led["tasks"][0]["mechanisms"]}
    assert t0["train"]["steps"] == steps and t0["train"]["noise_multiplier"] == m["noise_multiplier"]
    buf = t0["reference"]
    assert buf["mechanism"] == "dpsgd_buffer" and buf["later_tasks"] == 1 and buf["steps"] == steps
    assert buf["noise_multiplier"] == m["buffer_noise_multiplier"] and "raw" in buf["data"]
    assert [mech.get("part") for mech in led["tasks"][1]["mechanisms"]][-1] == "train"  # last task: no buffer
    block = led["agem"]
    assert "raw samples" in block["note"] and block["per_individual_total"] == led["overall"]
    assert block["buffer_part"]["worst_case_compositions"] == steps
    assert block["buffer_part"]["epsilon_worst_case"] == buf["epsilon"] <= 1.0
    with np.load(run / "model.npz") as z:
        assert z["head/weight"].shape == (10, 192) and list(z["label_ids"]) == list(range(10))
        assert any(k.startswith("film/") for k in z.files)


def test_without_tuning_no_tune_film_job_is_planned(film_run, tmp_path):
    """tuning.enabled: false keeps the configured film.dpsgd / dpsgd path (a dry run of the same workflow)."""
    work, _ = film_run
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    cfg["tuning"] = {"enabled": False}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = run_snakemake(tmp_path, "-n")
    log = out.stdout + out.stderr
    assert "rule film_ensemble" in log and "rule film_baseline" in log and "rule tune_film" not in log
    # film.device: cpu, so no FiLM job counts against --resources gpu=N
    film_jobs = re.findall(r"^rule (?:film_ensemble|film_baseline):\n(?:    .*\n)*", log, re.M)
    assert film_jobs and all(re.search(r"resources: .*\bgpu=0\b", j) for j in film_jobs)


def _job_counts(log: str) -> dict[str, int]:
    stats = log[log.index("Job stats:") :].splitlines()[3:]
    out = {}
    for line in stats:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        out[parts[0]] = int(parts[1])
    return out


def test_per_benchmark_learners_methods_epsilons_and_seeds_bound_the_jobs(film_run, tmp_path):
    """A benchmark's own lists restrict the requested runs: FiLM ensemble jobs = seeds x ε x methods."""
    work, _ = film_run
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    cfg["label_methods"] = ["oracle", "base"]
    cfg["learners"] = ["cosine", "peft_film", "naive_film"]
    cfg["tuning"] = {"enabled": False}
    full = dict(cfg["benchmarks"]["film_bench"])
    cfg["benchmarks"] = {
        "all": full,  # 1 seed x 2 ε x 2 methods = 4 ensemble jobs (2 tasks each); naive: 4 runs
        "small": {
            **full,
            "n_tasks": 5,
            "seeds": [3, 4],
            "label_methods": ["base"],
            "epsilons": [1],
            "learners": ["cosine", "peft_film"],
        },  # 2 seeds x 1 x 1 = 2 ensemble jobs (5 tasks each)
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = run_snakemake(tmp_path, "-n")
    jobs = _job_counts(out.stdout + out.stderr)
    assert jobs["film_ensemble"] == 4 + 2 and "film_eval" not in jobs and jobs["film_baseline"] == 4
    assert jobs["report"] == 3 + 2  # per (benchmark, learner run there)
    cfg["benchmarks"]["small"]["label_methods"] = ["public-x10"]  # not a global label method
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    bad = run_snakemake(tmp_path, "-n", check=False)
    assert bad.returncode != 0 and "benchmarks.small.label_methods" in bad.stdout + bad.stderr
