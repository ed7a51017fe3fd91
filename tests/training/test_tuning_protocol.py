"""App. D.1's tuning protocol: which data the hyperparameters are tuned on (the public holdout, or
as the paper private training data, unaccounted), the nominal sizes the tuned learning rate is
scaled by (final training set / tuning training set), and what privacy.json says about it."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from dpcl.config import ConfigError, load_config, validate_config
from dpcl.data.scenarios import disjoint_scenario
from dpcl.io import read_json, write_json
from dpcl.privacy.ledger import LedgerError
from dpcl.privacy.verify import verify_privacy
from dpcl.training.tuning_protocol import (
    FIVE_DATASETS_TUNING_CLASSES,
    scaled_dpsgd,
    tuning_plan,
    tuning_rows,
    with_run_configs,
)

CIFAR100_TASKS = [list(range(10 * t, 10 * t + 10)) for t in range(10)]
IMAGENET_R_TASKS = [list(range(20 * t, 20 * t + 20)) for t in range(10)]
FIVE_TASKS = [list(range(10 * s, 10 * s + 10)) for s in (2, 0, 4, 1, 3)]  # one task order
FIVE_SIZE = 60_000 + 73_257 + 16_853 + 60_000 + 50_000  # config/paper.yaml's nominal_train_size


def _sizes(plan):
    return plan.nominal_tuning_train, plan.factor("task"), plan.factor("all_tasks")


def test_cifar100_paper_protocol_tunes_on_one_private_task_at_full_class_size():
    plan = tuning_plan("cifar100", {}, CIFAR100_TASKS, "paper")
    assert (plan.split, plan.classes, plan.per_class, plan.private) == ("train", tuple(range(10)), None, True)
    # the first task's 10 x 500 images, 70 % of them train the trials: 3,500; a task is 5,000
    assert _sizes(plan) == pytest.approx((3500, 5000 / 3500, 50000 / 3500), rel=1e-12)


def test_cifar100_public_protocol_tunes_on_the_holdout():
    plan = tuning_plan("cifar100", {"holdout_fraction": 0.1}, CIFAR100_TASKS, "public")
    assert (plan.split, plan.classes, plan.private) == ("tune", tuple(range(10)), False)
    # 10 % of 500 = 50 public images per class, 35 of them train: 350 vs a 4,500-image task
    assert _sizes(plan) == pytest.approx((350, 4500 / 350, 45000 / 350), rel=1e-12)
    assert plan.factor("task") == pytest.approx(12.857, abs=1e-3)  # 4,500 / 350


def test_imagenet_r_sizes_are_nominal_under_both_protocols():
    paper = tuning_plan("imagenet_r__seed3", {}, IMAGENET_R_TASKS, "paper")
    # 24,000 training images (80 % of 30,000) over 200 classes: 120 per class nominally
    assert paper.classes == tuple(range(20)) and paper.per_class is None
    assert _sizes(paper) == pytest.approx((0.7 * 2400, 2400 / 1680, 24000 / 1680), rel=1e-12)
    public = tuning_plan("imagenet_r", {"holdout_fraction": 0.1}, IMAGENET_R_TASKS, "public")
    assert _sizes(public) == pytest.approx((0.7 * 12 * 20, 2160 / 168, 21600 / 168), rel=1e-12)


def test_five_datasets_paper_protocol_tunes_on_a_cifar10_subset_a_tenth_of_a_task():
    cfg = {"nominal_train_size": FIVE_SIZE}
    plan = tuning_plan("five_datasets", cfg, FIVE_TASKS, "paper")
    task = FIVE_SIZE / 5
    assert (
        plan.classes == FIVE_DATASETS_TUNING_CLASSES == tuple(range(40, 50))
    )  # CIFAR-10, whatever the order
    assert plan.per_class == round(0.1428 * task / 10) == 743  # 10 % tuning + 4.28 % validation
    # the paper's factor is 10 by construction; per-class rounding moves it by < 1e-3
    assert plan.factor("task") == pytest.approx(10, rel=1e-3)
    assert plan.factor("all_tasks") == pytest.approx(50, rel=1e-3)
    public = tuning_plan("five_datasets", {**cfg, "holdout_fraction": 0.1}, FIVE_TASKS, "public")
    assert public.classes == tuple(range(20, 30)) and public.split == "tune"  # the first task's (notMNIST)
    # min(tune_per_class 300, 10 % of 5,202 per class) = 300 per class; a task 90 % of 52,022
    assert _sizes(public) == pytest.approx((2100, 0.9 * task / 2100, 0.9 * FIVE_SIZE / 2100), rel=1e-12)


def test_the_embedded_default_tunes_on_its_separate_public_split():
    cfg = load_config("config/config.yaml")
    assert cfg["tuning"]["protocol"] == "public"
    fm = cfg["datasets"]["fashion_mnist"]
    plan = tuning_plan("fashion_mnist", fm, [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]], "public")
    assert _sizes(plan) == pytest.approx((420, 600 / 420, 3000 / 420), rel=1e-12)


def test_the_paper_config_uses_the_paper_protocol_at_full_class_sizes():
    cfg = load_config("config/paper.yaml")
    assert cfg["tuning"]["protocol"] == "paper"
    assert all(not d.get("holdout_fraction") for d in cfg["datasets"].values())
    # Tables A4/A5: CIFAR-100 trains on all 500 images per class again (450 with the old holdout)
    assert tuning_plan("cifar100", cfg["datasets"]["cifar100"], CIFAR100_TASKS, "paper").nominal_task == 5000


def test_a_data_set_without_a_published_size_needs_a_nominal_one():
    cfg = load_config("config/paper.yaml")
    bad = copy.deepcopy(cfg)
    del bad["datasets"]["five_datasets"]["nominal_train_size"]
    with pytest.raises(ConfigError, match="datasets.five_datasets.nominal_train_size"):
        validate_config(bad)
    bad["tuning"]["enabled"] = False  # nothing is scaled: no size needed
    validate_config(bad)
    with pytest.raises(ValueError, match="tuning.protocol"):
        tuning_plan("cifar100", {}, CIFAR100_TASKS, "private")


def test_tuning_rows_keep_the_plans_classes_and_per_class_cap():
    y = np.repeat(np.arange(50), 800)
    plan = tuning_plan("five_datasets", {"nominal_train_size": FIVE_SIZE}, FIVE_TASKS, "paper")
    rows = tuning_rows(y, plan, seed=4)
    assert set(np.unique(y[rows])) == set(range(40, 50))
    assert np.all(np.bincount(y[rows], minlength=50)[40:] == plan.per_class)
    assert np.array_equal(rows, tuning_rows(y, plan, seed=4)) and not np.array_equal(
        rows, tuning_rows(y, plan, 5)
    )
    first = tuning_plan("cifar100", {}, CIFAR100_TASKS, "paper")
    y100 = np.repeat(np.arange(100), 7)
    assert np.array_equal(tuning_rows(y100, first, 0), np.flatnonzero(y100 < 10))  # all of the first task's
    with pytest.raises(ValueError, match="no images of the tuning classes"):
        tuning_rows(np.full(5, 99), first, 0)


def test_scaling_keeps_the_sampling_rate_and_multiplies_lr_by_the_root_of_the_factor():
    plan = tuning_plan("cifar100", {"holdout_fraction": 0.1}, CIFAR100_TASKS, "public")
    best = {"sample_rate": 0.2, "epochs": 40.0, "lr": 1e-3, "clip": 1.5, "normaliser": 128.0}
    res = with_run_configs({"best": best, "epsilon": 1.0}, plan)
    assert res["dpsgd"] == {**best, "lr": pytest.approx(1e-3 * math.sqrt(4500 / 350))}
    assert res["dpsgd_all_tasks"]["lr"] == pytest.approx(1e-3 * math.sqrt(45000 / 350))
    assert res["dpsgd"]["sample_rate"] == res["dpsgd_all_tasks"]["sample_rate"] == 0.2
    assert scaled_dpsgd(best, plan, "task") == res["dpsgd"]  # Naive trains task by task
    assert res["plan"]["factor_per_task"] == pytest.approx(4500 / 350) and res["protocol"] == "public"


@pytest.mark.parametrize("protocol", ["public", "paper"])
def test_privacy_json_says_on_what_data_the_hyperparameters_were_tuned(tmp_path, protocol):
    """The paper protocol's runs list the tuning as an unaccounted use of private data and say
    guarantee_holds: false; the ledger verifier rejects a file that hides it."""
    from dpcl.config import eps_tag
    from dpcl.data.label_space import output_label_spaces, parse_label_method
    from dpcl.privacy.accounting import Budget
    from dpcl.stages.heads import run_head_learners

    gen = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 30)
    x = gen.normal(size=(4, 6))[y] * 3 + gen.normal(size=(len(y), 6))
    yt = np.repeat(np.arange(4), 5)
    xt = gen.normal(size=(len(yt), 6))
    sc = disjoint_scenario(y, 2, seed=0)
    labels = output_label_spaces(
        parse_label_method("base"),
        [y[i] for i in sc.train_indices],
        4,
        Budget(1.0, 1e-5),
        0,
        run_key=("release", "synthetic", "disjoint-t2", "1"),
    )
    labels.update(
        seed=0,
        scenario="disjoint-t2",
        epsilon_tag=eps_tag(1.0),
        stream={"dataset": "synthetic", "scenario": "disjoint-t2"},
    )
    labels = json.loads(json.dumps(labels, default=str).replace("Infinity", '"inf"'))
    plan = tuning_plan("cifar100", {"train_per_class": 30, "tune_per_class": 10}, sc.task_classes, protocol)
    best = {"sample_rate": 0.5, "epochs": 2.0, "lr": 0.01, "clip": 1.0, "normaliser": 16.0}
    write_json(tmp_path / "eps1.json", with_run_configs({"best": best, "epsilon": 1.0}, plan))
    out = run_head_learners(
        (x, y, np.arange(len(y))),
        (xt, yt),
        sc,
        labels,
        0,
        ["peft_head", "noncl_head"],
        dpsgd_cfg=dict(best, lr=0.5),
        tuned_path=tmp_path / "eps1.json",
    )
    for learner, key in (("peft_head", "dpsgd"), ("noncl_head", "dpsgd_all_tasks")):
        metrics, privacy, _ = out[learner]
        assert metrics["dpsgd"] == read_json(tmp_path / "eps1.json")[key]
        hp = privacy["hyperparameters"]
        assert hp["private_data_used"] is (protocol == "paper") and hp["values"] == metrics["dpsgd"]
        write_json(tmp_path / "privacy.json", privacy)
        written = read_json(tmp_path / "privacy.json")
        assert verify_privacy(written)["guarantee_holds"] is (protocol == "public")
        if protocol == "paper":
            assert written["guarantee_holds"] is False and "App. D.1" in written["unaccounted_uses"][0]["why"]
            forged = dict(written, guarantee_holds=True)
            del forged["unaccounted_uses"]
            with pytest.raises(LedgerError, match="no unaccounted_uses listed"):
                verify_privacy(forged)
        else:
            assert "unaccounted_uses" not in written and written["guarantee_holds"] is True
    # Non-CL's lr is scaled to all tasks (60 vs 30 nominal images here), the ensemble's to one task
    ratio = out["noncl_head"][0]["dpsgd"]["lr"] / out["peft_head"][0]["dpsgd"]["lr"]
    assert ratio == pytest.approx(math.sqrt(2), rel=1e-12)


def test_dp_agem_tunes_on_two_tasks_of_the_benchmarks_shape():
    plan = tuning_plan("cifar100", {}, CIFAR100_TASKS, "paper", n_tasks=2)
    assert plan.tasks == (tuple(range(10)), tuple(range(10, 20))) and plan.classes == tuple(range(20))
    assert plan.factor("task") == pytest.approx(5000 / 3500)  # per task, as the heads'
    five = tuning_plan("five_datasets", {"nominal_train_size": FIVE_SIZE}, FIVE_TASKS, "paper", n_tasks=2)
    assert five.tasks == (tuple(range(40, 45)), tuple(range(45, 50)))  # CIFAR-10 in two halves
    assert five.factor("task") == pytest.approx(20, rel=1e-3)  # a half-sized pseudo-task
    with pytest.raises(ValueError, match="needs a scenario with as many"):
        tuning_plan("cifar100", {}, CIFAR100_TASKS[:1], "public", n_tasks=2)


def test_every_paper_table_says_how_its_runs_were_tuned():
    from dpcl.report.paper_tables import build_paper_tables
    from dpcl.training.tuning_protocol import protocol_note

    paper = protocol_note({"enabled": True, "trials": 20, "protocol": "paper"})
    assert "private training data" in paper and "not accounted" in paper and "mean) task" in paper
    assert "PUBLIC" in protocol_note({"enabled": True, "protocol": "public"})
    assert "not tuned" in protocol_note({"enabled": False})
    bench = {
        "split_cifar100": {
            "dataset": "cifar100",
            "backbone": "vit_b16",
            "scenario": "disjoint",
            "n_tasks": 10,
        }
    }
    tables = build_paper_tables({"split_cifar100": []}, bench, notes=[paper])
    assert {t.table for t in tables} >= {"A3", "A10", "F1", "F2"} and all(
        t.notes[-1] == paper for t in tables
    )
