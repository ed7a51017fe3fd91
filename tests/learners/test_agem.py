"""DP-A-GEM baseline ([LabelSpace] App. D.4): projection, buffer, accounting, end to end."""

import json
import math
from dataclasses import asdict

import numpy as np
import pytest

import dpcl.learners.agem as agem_mod
from dpcl.config import eps_tag
from dpcl.data.label_space import output_label_spaces, parse_label_method
from dpcl.data.scenarios import disjoint_scenario
from dpcl.io import read_json, write_json
from dpcl.learners.agem import AGEMConfig, agem_noise, buffer_record, reference_mask, run_agem_head
from dpcl.privacy.accounting import Budget, PrivacyBudgetExceeded
from dpcl.privacy.ledger import Ledger
from dpcl.privacy.sgd_accounting import epsilon as sgd_epsilon
from dpcl.stages.agem import run_memory_learner
from dpcl.training.heads import DPSGDConfig
from dpcl.training.projection import project

CFG = DPSGDConfig(sample_rate=0.5, epochs=4, lr=0.05, clip=1.0, normaliser=20.0)


def test_projection_only_when_the_dot_product_is_negative():
    gen = np.random.default_rng(0)
    for _ in range(200):
        g, g_ref = gen.standard_normal(7), gen.standard_normal(7)
        out, did = project(g, g_ref)
        if g @ g_ref < 0:
            assert did and abs(out @ g_ref) <= 1e-10 * np.linalg.norm(g) * np.linalg.norm(g_ref)
            # what is removed is the component along g_ref only
            resid = g - out
            assert np.linalg.norm(
                resid - (resid @ g_ref) / (g_ref @ g_ref) * g_ref
            ) <= 1e-10 * np.linalg.norm(g)
        else:
            assert not did and out is g
    g = np.array([1.0, 0.0])
    assert project(g, np.array([0.0, 1.0]))[1] is False  # orthogonal: left alone


def test_reference_split_is_a_fixed_coin_per_individual():
    ids = np.arange(20000)
    mask = reference_mask(ids, 0.1, seed=3)
    # Binomial(20000, 0.1): sd = 42.4; 5 sd
    assert abs(int(mask.sum()) - 2000) <= 5 * math.sqrt(20000 * 0.1 * 0.9)
    # adding/removing individuals never moves another individual between the parts
    sub = ids[::3]
    assert np.array_equal(reference_mask(sub, 0.1, seed=3), mask[sub])
    assert not np.array_equal(reference_mask(ids, 0.1, seed=4), mask)  # seeded
    with pytest.raises(ValueError, match="buffer_fraction"):
        AGEMConfig(buffer_fraction=1.0).validate()


def _synthetic(n_classes=6, per_class=40, test_per_class=20, dim=8, seed=0):
    """Well-separated Gaussian clusters; feature column 0 carries the sample id (for tracing)."""
    gen = np.random.default_rng(seed)
    means = 3.0 * gen.standard_normal((n_classes, dim))
    y = np.repeat(np.arange(n_classes), per_class)
    x = means[y] + gen.standard_normal((len(y), dim))
    yt = np.repeat(np.arange(n_classes), test_per_class)
    xt = means[yt] + gen.standard_normal((len(yt), dim))
    return x, y, xt, yt


def test_buffer_is_filled_only_from_reference_parts(monkeypatch):
    x, y, xt, yt = _synthetic()
    ids = np.arange(len(y)) * 7 + 11  # ids need not be row numbers
    x = np.column_stack([ids.astype(float), x])
    sc = disjoint_scenario(y, 3, seed=1)
    tasks = [(x[i], y[i], ids[i]) for i in sc.train_indices]
    tests = [
        (np.column_stack([np.zeros(np.isin(yt, c).sum()), xt[np.isin(yt, c)]]), yt[np.isin(yt, c)])
        for c in sc.task_classes
    ]
    seen = []
    real = agem_mod.train_agem_task

    def spy(head, xs, ys, bx, by, *args, **kwargs):
        seen.append((xs[:, 0].astype(int), None if bx is None else bx[:, 0].astype(int)))
        return real(head, xs, ys, bx, by, *args, **kwargs)

    monkeypatch.setattr(agem_mod, "train_agem_task", spy)
    agem = AGEMConfig(buffer_fraction=0.3)
    noise, noise_ref = agem_noise(math.inf, 0.0, CFG, agem, 3)
    spaces = [list(range(6))] * 3
    run_agem_head(
        tasks,
        tests,
        spaces,
        6,
        CFG,
        agem,
        noise=noise,
        noise_ref=noise_ref,
        rng_for=lambda t, p: np.random.default_rng([t, len(p)]),
        split_seed=5,
    )
    refs = [set(i[reference_mask(i, 0.3, 5)].tolist()) for _, _, i in tasks]
    assert seen[0][1] is None  # no buffer mechanism at task 0
    for t, (train_ids, buf_ids) in enumerate(seen):
        task_ids = set(tasks[t][2].tolist())
        if t < 2:
            assert set(train_ids) == task_ids - refs[t]  # train part: everything but the reference part
        else:
            assert set(train_ids) == task_ids  # last task: never reread, so not split
        if t:
            assert sorted(buf_ids) == sorted(set().union(*refs[:t]))  # exactly the past reference parts
            assert not set(buf_ids) & task_ids


def test_buffer_epsilon_grows_with_the_number_of_later_tasks():
    sigma, q, steps, delta = 1.5, 0.1, 50, 1e-5
    eps = [buffer_record(sigma, q, steps, k, delta)["epsilon"] for k in (1, 2, 4, 8)]
    assert all(a < b for a, b in zip(eps, eps[1:], strict=False))
    assert eps[2] == pytest.approx(sgd_epsilon(sigma, q, 4 * steps, delta))
    # and the ledger re-derives it: a forged (understated) entry or a wrong step count is rejected
    ledger = Ledger(Budget(10.0, 1e-5))
    ok = buffer_record(sigma, q, steps, 4, delta)
    ledger.add(0, ok)
    assert ledger.tasks[0][0]["epsilon_accounted"] == pytest.approx(ok["epsilon"])
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.add(0, {**ok, "epsilon": eps[0]})
    with pytest.raises(PrivacyBudgetExceeded, match="reread"):
        ledger.add(0, {**ok, "steps": steps})


def test_buffer_noise_is_calibrated_for_all_later_tasks():
    cfg = DPSGDConfig(sample_rate=0.1, epochs=5)
    train, ref = agem_noise(2.0, 1e-5, cfg, AGEMConfig(buffer_sample_rate=0.05), n_tasks=5)
    assert ref["worst_case_steps"] == 4 * cfg.steps
    assert sgd_epsilon(ref["noise_multiplier"], 0.05, 4 * cfg.steps, 1e-5, ref["accountant"]) <= 2.0
    # (T - 1)·steps reads need more noise than the training data's own steps at the same rate
    _, same_rate = agem_noise(2.0, 1e-5, cfg, AGEMConfig(), n_tasks=5)
    assert same_rate["noise_multiplier"] > train["noise_multiplier"]


def _gauss(eps, delta, **kw):
    from dpcl.privacy.gaussian import gaussian_sigma

    return {
        "mechanism": "gaussian",
        "epsilon": eps,
        "delta": delta,
        "sigma": gaussian_sigma(eps, delta),
        "query": "class_sums_of_unit_norm_features",
        **kw,
    }


def test_disjoint_parts_compose_in_parallel_and_shared_entries_add():
    ledger = Ledger(Budget(1.0, 1e-5))
    ledger.add(0, _gauss(0.2, 2e-6))
    ledger.add(0, _gauss(0.5, 1e-6, part="train"))
    ledger.add(0, _gauss(0.7, 3e-6, part="reference"))
    b = ledger.task_budget(0)
    assert b.epsilon == pytest.approx(0.9) and b.delta == pytest.approx(5e-6)
    ledger.add(0, {"mechanism": "data_independent", "epsilon": 0.0, "delta": 0.0})  # its label space
    d = ledger.to_dict()["tasks"][0]
    assert d["parts"]["train"]["epsilon"] == 0.5 and d["parts"]["reference"]["epsilon"] == 0.7


def _labels(y_tasks, n_base, eps, delta, method, seed):
    res = output_label_spaces(
        parse_label_method(method),
        y_tasks,
        n_base,
        Budget(eps, delta) if math.isfinite(eps) else Budget(math.inf, 0.0),
        seed,
        run_key=(eps_tag(eps),),
    )
    res.update(
        seed=seed,
        scenario="disjoint-t3",
        epsilon_tag=eps_tag(eps),
        stream={"dataset": "synthetic", "scenario": "disjoint-t3"},
    )
    return res


@pytest.mark.parametrize("eps,method", [(1.0, "base"), (8.0, "release-f0.1"), (math.inf, "base")])
def test_end_to_end_on_synthetic_features(tmp_path, eps, method):
    x, y, xt, yt = _synthetic(per_class=60)
    sc = disjoint_scenario(y, 3, seed=0)
    ids = np.arange(len(y))
    labels = _labels([y[i] for i in sc.train_indices], 6, eps, 1e-5, method, 0)
    write_json(tmp_path / "labels.json", labels)  # the on-disk format the workflow reads
    labels = read_json(tmp_path / "labels.json")
    metrics, privacy, diag = run_memory_learner(
        (x, y, ids),
        (xt, yt),
        sc,
        labels,
        learner="agem_head",
        dpsgd_cfg=asdict(CFG),
        agem_cfg={"buffer_fraction": 0.1},
    )
    assert (
        next(iter(diag)) == "non_private" and len(diag["agem_tasks"]) == 3
    )  # sizes live here, not in metrics
    assert "tasks" not in metrics
    write_json(tmp_path / "privacy.json", privacy)
    p = json.loads((tmp_path / "privacy.json").read_text())
    acc = np.array(metrics["acc"], dtype=float)
    assert acc.shape == (3, 3) and np.all(np.isnan(acc[np.triu_indices(3, 1)]))
    if math.isinf(eps):
        assert p["private"] is False and metrics["final_accuracy"] > 0.8  # separable clusters, 6 classes
        return
    assert p["guarantee_holds"]
    total = p["overall"]
    assert total["epsilon"] <= eps * (1 + 1e-12) and total["delta"] <= 1e-5 * (1 + 1e-12)
    train_budget = float(labels["training_budget"]["epsilon"])
    for t, task in enumerate(p["tasks"]):
        kinds = [m["mechanism"] for m in task["mechanisms"]]
        assert kinds[-2:] == ["dpsgd", "dpsgd_buffer"] if t < 2 else kinds[-1] == "dpsgd"
        parts = task["parts"]
        assert parts["train"]["epsilon"] <= train_budget
        if t < 2:
            buf = task["mechanisms"][-1]
            assert buf["later_tasks"] == 2 - t and buf["steps"] == (2 - t) * CFG.steps
            assert parts["reference"]["epsilon"] <= train_budget
        assert task["composed"]["epsilon"] <= eps * (1 + 1e-12)
    b0, b1 = (p["tasks"][t]["parts"]["reference"]["epsilon"] for t in (0, 1))
    assert b0 > b1  # task 0's buffer is reread by more later tasks
    summary = p["agem"]["buffer_part"]
    assert summary["worst_case_compositions"] == 2 * CFG.steps and summary["epsilon_worst_case"] == b0
    assert metrics["learner"] == "agem_head" and 0 <= metrics["final_accuracy"] <= 1


def test_fig3_is_drawn_from_base_dataset_runs_only(tmp_path):
    from dpcl.stages.agem import desai_figure

    x, y, xt, yt = _synthetic()
    sc = disjoint_scenario(y, 3, seed=0)
    paths = []
    for seed in (0, 1, 2):
        labels = _labels([y[i] for i in sc.train_indices], 6, math.inf, 1e-5, "base", seed)
        m, _, _ = run_memory_learner(
            (x, y, np.arange(len(y))),
            (xt, yt),
            sc,
            labels,
            learner="agem_head",
            dpsgd_cfg=asdict(CFG),
            agem_cfg={},
        )
        for learner in ("agem_head", "cosine"):  # the figure reads only these fields of a run's metrics
            paths.append(tmp_path / f"{learner}{seed}.json")
            write_json(paths[-1], m | {"learner": learner})
    outs = [tmp_path / "fig3.png", tmp_path / "fig3.pdf"]
    desai_figure(paths, "synthetic", outs)
    assert all(o.stat().st_size > 1000 for o in outs)
    write_json(paths[0], read_json(paths[0]) | {"label_method": "oracle"})
    with pytest.raises(ValueError, match="Base Dataset"):
        desai_figure(paths, "synthetic", outs)


def test_dp_agem_has_its_own_study_with_a_buffer_rate(monkeypatch, tmp_path):
    """DP-A-GEM is tuned on its own (the head ranges plus its buffer rate), each
    trial running its two-task loop with the buffer reread at the trial's rate and its own σ_ref;
    the agem stage then runs the tuned buffer rate."""
    pytest.importorskip("optuna")
    from dpcl.learners.agem import tune_agem_head
    from dpcl.privacy.sgd_accounting import coarse_noise_multiplier
    from dpcl.stages.agem import tuned_agem
    from dpcl.training.tuning import MIN_BATCH, split_tuning_set

    gen = np.random.default_rng(3)
    y = np.repeat([2, 5, 7, 9], 25)
    x = gen.normal(size=(10, 6))[y] * 2 + gen.normal(size=(len(y), 6))
    calls = []
    original = agem_mod.train_agem_task

    def spy(head, x_t, y_t, buf_x, buf_y, cfg, *, sigma, q_ref, sigma_ref, **rest):
        calls.append(
            (
                set(np.unique(y_t)),
                None if buf_y is None else set(np.unique(buf_y)),
                q_ref,
                sigma_ref,
                cfg.steps,
            )
        )
        return original(
            head, x_t, y_t, buf_x, buf_y, cfg, sigma=sigma, q_ref=q_ref, sigma_ref=sigma_ref, **rest
        )

    monkeypatch.setattr(agem_mod, "train_agem_task", spy)
    res = tune_agem_head(x, y, 4.0, 1e-5, seed=2, buffer_fraction=0.3, n_trials=3, epochs=1)
    n_tr = len(split_tuning_set(np.unique(y, return_inverse=True)[1], 2, "agem_head")[0])
    assert len(res["trials"]) == 3 and len(calls) == 6 and res["learner"] == "agem_head"
    for trial, (first, second) in zip(res["trials"], zip(calls[::2], calls[1::2], strict=True), strict=True):
        q = trial["params"]["buffer_sample_rate"]
        assert MIN_BATCH / n_tr <= q <= 1.0
        # two pseudo-tasks over the class rows {0, 1} and {2, 3}; the buffer holds task 0's rows only
        assert first[0] == {0, 1} and first[1] is None and second[0] == {2, 3} and second[1] <= {0, 1}
        assert second[2] == q and second[3] == coarse_noise_multiplier(4.0, 1e-5, q, second[4])
    best = max(res["trials"], key=lambda t: t["accuracy"])["params"]
    assert res["best_buffer_sample_rate"] == best["buffer_sample_rate"]
    assert res == tune_agem_head(x, y, 4.0, 1e-5, seed=2, buffer_fraction=0.3, n_trials=3, epochs=1)
    calls.clear()  # the workflow passes the benchmark's first two tasks
    tune_agem_head(x, y, 4.0, 1e-5, seed=2, buffer_fraction=0.3, n_trials=1, epochs=1, tasks=[[9, 2], [5, 7]])
    assert calls[0][0] == {0, 3} and calls[1][0] == {1, 2}
    with pytest.raises(ValueError, match="two tasks of classes covering"):
        tune_agem_head(x, y, 4.0, 1e-5, 0, 0.3, n_trials=1, epochs=1, tasks=[[2, 5], [7]])
    write_json(tmp_path / "t.json", res)
    assert (
        tuned_agem({"buffer_fraction": 0.3}, tmp_path / "t.json")["buffer_sample_rate"]
        == best["buffer_sample_rate"]
    )
