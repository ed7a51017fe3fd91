"""End-to-end: the FiLM learners through Snakemake on a tiny random ViT (CPU).

One job per (run, task) member for the PEFT FiLM ensemble, one evaluation job per run,
one job per Naive / Non-CL FiLM run; checks the outputs, the ledgers and the members.
"""

import json
import math

import numpy as np
import pytest
import yaml
from conftest import make_fake_fashion_mnist
from test_workflow import _snakemake

pytestmark = pytest.mark.slow


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
        "learners": ["peft_film", "naive_film", "noncl_film"],
        "dpsgd": {"sample_rate": 0.5, "epochs": 2, "lr": 0.01},
        "film": {"dpsgd": {"epochs": 1}, "physical_batch": 16, "device": "cpu"},
        "tuning": {"enabled": False},
        "datasets": {"fashion_mnist": {"source": "local", "local_dir": str(raw), "verify": False,
                                       "train_per_class": 8, "test_per_class": 4}},
        "backbones": {"vit": {"arch": "vit_tiny_patch16_224", "weights": "random", "image_size": 32}},
        "benchmarks": {"film_bench": {"dataset": "fashion_mnist", "backbone": "vit", "n_tasks": 2}},
    }  # fmt: skip
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = _snakemake(work)
    return work, res


def test_film_rules_run_one_job_per_member(film_run):
    work, res = film_run
    log = res.stderr + res.stdout
    for rule in ("film_member", "film_eval", "film_baseline", "report", "aggregation_figure"):
        assert f"rule {rule}" in log
    runs = work / "results" / "runs"
    members = sorted((runs / "peft_film").rglob("members/task*.npz"))
    assert len(members) == 2 * 2  # eps x tasks
    for learner in ("peft_film", "naive_film", "noncl_film"):
        assert len(sorted((runs / learner).rglob("metrics.json"))) == 2
        assert "(FiLM)" in (work / "results" / "tables" / f"film_bench_{learner}.md").read_text()
    for ext in ("png", "pdf"):
        assert (
            work / "results" / "figures" / f"film_bench_peft_film_figA2_aggregation.{ext}"
        ).stat().st_size > 1000


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
        assert mechs.count("dpsgd") == 2 and set(mechs) == {"data_independent", "dpsgd"}, p
        assert m["noise_multiplier"] > 0 and math.isfinite(m["final_accuracy"])
    peft = json.loads(
        next((work / "results" / "runs" / "peft_film").rglob("eps1/base/metrics.json")).read_text()
    )
    assert sorted(peft["final_accuracy_by_aggregation"]) == ["argmax", "entropy", "median"]
