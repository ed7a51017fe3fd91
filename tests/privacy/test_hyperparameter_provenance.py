"""privacy.json's ``hyperparameters.chosen_by`` says how each learner's values were really chosen, and
the values it lists are the ones the run used: per learner, the stated protocol is the one used.

FM-A-GEM: a grid search on the public tuning split (tuning on), or, untuned, the config's values,
whose defaults were measured on the default benchmark's training and test data: then the choice is
an unaccounted use and the guarantee is not certified. The DP-SGD learners: their Optuna study
(public split) or the config. DP-A-GEM and Desai et al.: DP-A-GEM's study in the run's label space.
The cosine classifier: nothing to choose. L2DP-ML: the config."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpcl.config import eps_tag
from dpcl.data.label_space import output_label_spaces, parse_label_method
from dpcl.data.scenarios import disjoint_scenario
from dpcl.features import save_feature_cache
from dpcl.io import read_json, write_json
from dpcl.privacy.accounting import Budget
from dpcl.privacy.verify import verify_privacy

DATASET, DCFG = "fashion_mnist", {"train_per_class": 30, "tune_per_class": 20}
DPSGD = {"sample_rate": 0.5, "epochs": 2.0, "lr": 0.01, "clip": 1.0, "normaliser": 16.0}


def _labels(y, sc, method, eps=1.0):
    lab = output_label_spaces(
        parse_label_method(method),
        [y[i] for i in sc.train_indices],
        4,
        Budget(eps, 1e-5 if math.isfinite(eps) else 0.0),
        0,
        run_key=("release", "synthetic", "disjoint-t2", method),
    )
    lab.update(
        seed=0,
        scenario="disjoint-t2",
        epsilon_tag=eps_tag(eps),
        stream={"dataset": "synthetic", "scenario": "disjoint-t2"},
    )
    return json.loads(json.dumps(lab, default=str).replace("Infinity", '"inf"'))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Four separable classes in two tasks: train/test/public-tune caches, scenario, two label files."""
    d = tmp_path_factory.mktemp("provenance")
    gen = np.random.default_rng(0)
    means = 3 * gen.normal(size=(4, 40))

    def draw(per):
        y = np.repeat(np.arange(4), per)
        return (means[y] + gen.normal(size=(len(y), 40))).astype(np.float32), y

    for split, per in (("train", 30), ("test", 10), ("tune", 20)):
        x, y = draw(per)
        save_feature_cache(
            d / f"{split}.npz", x, y, np.arange(len(y)), {"backbone": "synthetic", "split": split}
        )
        if split == "train":
            sc = disjoint_scenario(y, 2, seed=0)
            write_json(d / "scenario.json", sc.to_dict())
            for m in ("oracle", "base"):
                write_json(d / f"{m}.json", _labels(y, sc, m))
                write_json(d / f"{m}-inf.json", _labels(y, sc, m, math.inf))
    return d


def _verified(privacy, tmp):
    write_json(tmp / "privacy.json", privacy)
    written = read_json(tmp / "privacy.json")
    return written, verify_privacy(written)


def _fm_runs(d, tmp, method, **kw):
    from dpcl.stages.projected import projected_sweep

    out = {
        lr: tuple(str(tmp / lr / method / f"{k}.json") for k in ("metrics", "privacy", "diagnostics"))
        for lr in ("l2dpml", "fm_agem")
    }
    projected_sweep(
        d / "train.npz",
        d / "test.npz",
        d / "tune.npz",
        d / "scenario.json",
        [{"labels": str(d / f"{method}.json"), "outputs": out}],
        ["l2dpml", "fm_agem"],
        blocks={
            "l2dpml": {"input_dim": 4, "hidden": 4, "batch_size": 8, "epochs": 1},
            "fm_agem": kw.pop("fm_cfg", {}),
        },
        **kw,
    )
    return {lr: [read_json(p) for p in paths] for lr, paths in out.items()}


@pytest.mark.parametrize("method", ["oracle", "base"])
def test_fm_agem_tuned_states_the_public_grid_search_and_runs_its_result(data, tmp_path, method):
    from dpcl.features import load_feature_cache
    from dpcl.learners.fm_agem import tune_fm_agem
    from dpcl.public_pca import PublicPCA
    from dpcl.training.tuning_protocol import tuning_label_space, tuning_plan, tuning_rows

    runs = _fm_runs(
        data,
        tmp_path,
        method,
        tuning={"enabled": True, "protocol": "public"},
        dataset=DATASET,
        dataset_cfg=DCFG,
    )
    metrics, privacy, diag = runs["fm_agem"]
    hp = privacy["hyperparameters"]
    assert hp["chosen_by"].startswith("grid search") and "public tuning split" in hp["chosen_by"]
    assert hp["private_data_used"] is False and hp["values"]["label_space"] == tuning_label_space(method)
    # the values it states are the ones the run used, and the ones the search picks on the public split
    used = {k: metrics["fm_agem"][k] for k in ("dim", "lr", "steps")}
    assert {k: hp["values"][k] for k in used} == used == diag["fm_agem_tuning"]["best"]
    ux, uy, _, _ = load_feature_cache(data / "tune.npz")
    sc = read_json(data / "scenario.json")
    plan = tuning_plan(DATASET, DCFG, sc["task_classes"], "public", 2)
    rows = tuning_rows(uy, plan, 0)
    tb = read_json(data / f"{method}.json")["training_budget"]
    again = tune_fm_agem(
        ux[rows],
        uy[rows],
        plan.tasks,
        tuning_label_space(method),
        float(tb["epsilon"]),
        float(tb["delta"]),
        seed=0,
        projection_for=PublicPCA(ux).projection,
        max_dim=40,
    )
    assert again["best"] == used
    written, summary = _verified(privacy, tmp_path)
    assert summary["guarantee_holds"] is (method != "oracle") and "unaccounted_uses" not in written


def test_fm_agem_untuned_defaults_are_an_unaccounted_use_of_private_data(data, tmp_path):
    fm = _fm_runs(data, tmp_path / "a", "base")["fm_agem"][1]  # no tuning: the block (defaults) as is
    hp = fm["hyperparameters"]
    assert hp["private_data_used"] is True and hp["accounted"] is False
    assert "training and test data" in hp["chosen_by"]
    written, summary = _verified(fm, tmp_path)
    assert summary["guarantee_holds"] is False and written["guarantee_holds"] is False
    assert written["unaccounted_uses"][0]["use"] == "hyperparameter choice"
    forged = {k: v for k, v in written.items() if k != "unaccounted_uses"} | {"guarantee_holds": True}
    with pytest.raises(Exception, match="no unaccounted_uses listed"):
        verify_privacy(forged)
    # values none of which is a measured default: fixed in the config, no private data
    own = _fm_runs(data, tmp_path / "b", "base", fm_cfg={"dim": 3, "lr": 0.3, "steps": 2})["fm_agem"][1]
    assert own["hyperparameters"]["private_data_used"] is False
    assert own["hyperparameters"]["chosen_by"].startswith("fixed in the config")
    assert _verified(own, tmp_path)[1]["guarantee_holds"] is True


def test_l2dpml_states_its_config_values(data, tmp_path):
    metrics, privacy, _ = _fm_runs(data, tmp_path, "base", fm_cfg={"dim": 3, "lr": 0.3, "steps": 2})["l2dpml"]
    hp = privacy["hyperparameters"]
    assert hp["chosen_by"].startswith("fixed in the config") and hp["values"] == metrics["l2dpml"]


def test_cosine_has_nothing_to_choose(data, tmp_path):
    from dpcl.stages.prototypes import prototypes_sweep

    run = {k: str(tmp_path / f"{k}.json") for k in ("metrics", "privacy", "diagnostics")}
    prototypes_sweep(
        data / "train.npz",
        data / "test.npz",
        data / "scenario.json",
        [run | {"labels": str(data / "base.json")}],
        learners=["cosine"],
    )
    hp = read_json(run["privacy"])["hyperparameters"]
    assert hp["chosen_by"].startswith("none") and hp["private_data_used"] is False and "values" not in hp


def test_dp_sgd_heads_state_the_config_when_untuned(data):
    """Untuned, the heads state the config's block, which is what they ran (tuned: see
    tests/training/test_tuning_protocol.py::test_privacy_json_says_on_what_data_the_hyperparameters_were_tuned)."""
    from dpcl.features import load_feature_cache
    from dpcl.stages.heads import run_head_learners

    x, y, i, _ = load_feature_cache(data / "train.npz")
    xt, yt, _, _ = load_feature_cache(data / "test.npz")
    sc = disjoint_scenario(y, 2, seed=0)
    labels = read_json(data / "base.json")
    out = run_head_learners(
        (x, y, i), (xt, yt), sc, labels, 0, ["peft_head", "naive_head", "noncl_head"], dpsgd_cfg=DPSGD
    )
    for learner, (metrics, privacy, _) in out.items():
        hp = privacy["hyperparameters"]
        assert hp["chosen_by"].startswith("fixed in the config"), learner
        assert hp["values"] == metrics["dpsgd"] == DPSGD and hp["private_data_used"] is False


def test_dp_agem_and_desai_state_dp_agems_study(data, tmp_path):
    """Every run takes DP-A-GEM's one study (Base Dataset label space); privacy.json states that study
    and the values the run trained with."""
    from dpcl.stages.agem import agem_sweep
    from dpcl.training.tuning_protocol import tuning_plan, with_run_configs

    sc = read_json(data / "scenario.json")
    plan = tuning_plan(DATASET, DCFG, sc["task_classes"], "public", 2)
    res = {"best": dict(DPSGD, lr=0.01), "epsilon": math.inf, "best_buffer_sample_rate": 0.5}
    write_json(tmp_path / "study.json", with_run_configs(res, plan))
    runs = []
    for m in ("oracle", "base"):  # at ε = inf: no Desai claim (that is its own verifier's business)
        runs.append(
            {
                "labels": str(data / f"{m}-inf.json"),
                "outputs": {
                    lr: tuple(
                        str(tmp_path / lr / m / f"{k}.json") for k in ("metrics", "privacy", "diagnostics")
                    )
                    for lr in ("agem_head", "desai_head")
                },
            }
        )
    agem_sweep(
        data / "train.npz",
        data / "test.npz",
        data / "scenario.json",
        runs,
        dpsgd_cfg=DPSGD,
        agem_cfg={},
        tuned={"inf": str(tmp_path / "study.json")},
        learners=("agem_head", "desai_head"),
    )
    want = read_json(tmp_path / "study.json")["dpsgd"]
    for run in runs:
        for learner, paths in run["outputs"].items():
            metrics, privacy = read_json(paths[0]), read_json(paths[1])
            hp = privacy["hyperparameters"]
            assert (
                "DP-A-GEM's Optuna search" in hp["chosen_by"]
                and "Base Dataset label space" in hp["chosen_by"]
            )
            assert "public tuning split" in hp["chosen_by"]
            assert hp["values"] == metrics["dpsgd"] == want, learner
            assert metrics["agem"]["buffer_sample_rate"] == 0.5


def test_a_dpsgd_block_chosen_with_private_data_says_so_untuned(data, tmp_path):
    """config/film_cpu.yaml's lr was picked by hand on the benchmark's data with tuning off: its runs
    (head-only here; the FiLM stages build the same note from resolve_dpsgd's config) list that
    choice under unaccounted_uses; tuned runs state their study instead."""
    from dpcl.config import load_config
    from dpcl.features import load_feature_cache
    from dpcl.stages.common import hyperparameters_note, resolve_dpsgd
    from dpcl.stages.heads import run_head_learners
    from dpcl.training.heads import CHOSEN_WITH_PRIVATE_DATA

    block = load_config("config/film_cpu.yaml")["dpsgd"]
    assert "picked by hand" in block[CHOSEN_WITH_PRIVATE_DATA]
    assert load_config("config/config.yaml")["dpsgd"][CHOSEN_WITH_PRIVATE_DATA] is None
    x, y, i, _ = load_feature_cache(data / "train.npz")
    xt, yt, _, _ = load_feature_cache(data / "test.npz")
    sc = disjoint_scenario(y, 2, seed=0)
    out = run_head_learners(
        (x, y, i), (xt, yt), sc, read_json(data / "base.json"), 0, ["peft_head"], dpsgd_cfg=block
    )
    privacy = out["peft_head"][1]
    hp = privacy["hyperparameters"]
    assert hp["private_data_used"] is True and "picked by hand" in hp["chosen_by"]
    assert CHOSEN_WITH_PRIVATE_DATA not in hp["values"]
    written, summary = _verified(privacy, tmp_path)
    assert summary["guarantee_holds"] is False and "picked by hand" in written["unaccounted_uses"][0]["why"]
    for learner in ("peft_film", "naive_film", "noncl_film", "agem_film"):
        cfg, protocol = resolve_dpsgd(block, None, "1", learner)
        assert hyperparameters_note(cfg, protocol)["private_data_used"] is True
    assert hyperparameters_note(block, "public")["private_data_used"] is False  # tuned: the study's
