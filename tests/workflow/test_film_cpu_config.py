"""config/film_cpu.yaml (FiLM on the embedded EfficientNet-Lite0) and its CI overlay
config/film_cpu_ci.yaml: both validate, keep their own results directories, and the overlay only
shrinks the run (seeds, per-class counts, input size, FiLM epochs, audit sizes; one thread per FiLM job),
never its shape."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from helpers import merge_configs

from dpcl.config import validate_config

ROOT = Path(__file__).resolve().parents[2]
FULL = yaml.safe_load((ROOT / "config" / "film_cpu.yaml").read_text())
CI = yaml.safe_load((ROOT / "config" / "film_cpu_ci.yaml").read_text())
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_film_cpu_runs_the_film_learners_beside_cosine_and_peft_head_on_the_embedded_backbone():
    cfg = validate_config(copy.deepcopy(FULL))
    assert not cfg["film"]["dpsgd"]  # head-only and FiLM learners share the dpsgd hyperparameters
    assert {"peft_film", "naive_film", "noncl_film", "cosine", "peft_head"} <= set(cfg["learners"])
    assert cfg["epsilons"] == [1, 8, float("inf")] and cfg["label_methods"] == ["base", "release-f0.1"]
    assert len(cfg["seeds"]) >= 2
    (bench,) = cfg["benchmarks"].values()
    backbone = cfg["backbones"][bench["backbone"]]
    assert bench["dataset"] == "fashion_mnist" and bench["scenario"] == "disjoint"
    assert backbone["arch"] == DEFAULT["backbones"]["effnet_lite0"]["arch"] == "tf_efficientnet_lite0"
    assert backbone["weights"] == DEFAULT["backbones"]["effnet_lite0"]["weights"]  # ImageNet, offline
    assert cfg["results"] != DEFAULT["results"] and cfg["resources"] != DEFAULT["resources"]


def test_ci_overlay_only_shrinks_the_run():
    full = validate_config(copy.deepcopy(FULL))
    ci = validate_config(merge_configs(copy.deepcopy(FULL), CI))
    assert ci["results"] not in (full["results"], DEFAULT["results"])
    assert set(CI) == {"results", "resources", "seeds", "dpsgd", "datasets", "backbones", "audit", "film"}
    assert CI["film"] == {"threads": 1}  # a resource setting: two one-thread FiLM jobs at once on 2 cores
    # the audit's parts at smaller sizes, never fewer parts or other ε
    assert set(CI["audit"]) <= {
        "trials",
        "learner_trials",
        "whitebox_runs",
        "whitebox_canaries",
        "whitebox_bias_trials",
        "canary_runs",
        "canary_count",
    }
    for key, size in CI["audit"].items():
        assert 0 < size <= (full["audit"][key] or size), key
    assert set(ci["seeds"]) < set(full["seeds"])
    for key in ("learners", "epsilons", "label_methods", "benchmarks", "tuning"):
        assert ci[key] == full[key], key
    assert {k: v for k, v in ci["film"].items() if k != "threads"} == {
        k: v for k, v in full["film"].items() if k != "threads"
    }
    d, dfull = ci["datasets"]["fashion_mnist"], full["datasets"]["fashion_mnist"]
    assert d["train_per_class"] < dfull["train_per_class"] and d["test_per_class"] < dfull["test_per_class"]
    b, bfull = ci["backbones"]["effnet_lite0"], full["backbones"]["effnet_lite0"]
    assert b["image_size"] < bfull["image_size"] and b["weights"] == bfull["weights"]
    assert ci["dpsgd"]["epochs"] < full["dpsgd"]["epochs"]
    assert {k: v for k, v in ci["dpsgd"].items() if k != "epochs"} == {
        k: v for k, v in full["dpsgd"].items() if k != "epochs"
    }
