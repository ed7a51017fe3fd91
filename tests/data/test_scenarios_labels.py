"""Si-Blurry and i-Blurry split properties; Public Labels schedules and remapping (Eq. 8) end to end."""

import math

import numpy as np
import pytest

from dpcl.data.label_space import (
    evaluation_labels,
    output_label_spaces,
    parse_label_method,
    public_label_spaces,
    remap_task_data,
)
from dpcl.data.scenarios import (
    Scenario,
    iblurry_scenario,
    make_scenario,
    siblurry,
    siblurry_scenario,
    siblurry_split,
)
from dpcl.privacy.accounting import Budget


def _labels(n_classes: int, per_class: int, seed: int = 0) -> np.ndarray:
    """Shuffled labels with ``per_class`` samples of each class."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(n_classes), per_class))


# --- Si-Blurry ---------------------------------------------------------------------------


@pytest.mark.parametrize("n, m", [(50, 10), (0, 50), (100, 0), (30, 100)])
def test_siblurry_partitions_samples_and_keeps_disjoint_classes_in_one_task(n, m):
    labels = _labels(40, 12)
    split = siblurry_split(labels, 4, n, m, seed=3)
    allidx = np.concatenate(split.train_indices)
    assert np.array_equal(np.sort(allidx), np.arange(len(labels)))  # each sample in exactly one task
    d_classes = [c for g in split.disjoint_classes for c in g]
    b_classes = [c for g in split.blurry_classes for c in g]
    assert len(d_classes) == round(n / 100 * 40) and sorted(d_classes + b_classes) == list(range(40))
    for t, group in enumerate(split.disjoint_classes):  # disjoint classes only in their task
        for c in group:
            where = [u for u, idx in enumerate(split.train_indices) if np.any(labels[idx] == c)]
            assert where == [t]
    for t, idx in enumerate(split.train_indices):  # no task is empty of classes
        assert len(np.unique(labels[idx])) >= 1
        own = np.flatnonzero(np.isin(labels, split.disjoint_classes[t] + split.blurry_classes[t]))
        assert len(idx) == len(own)  # a task gets back exactly as many samples as it gave


def test_siblurry_moves_m_percent_of_blurry_samples():
    labels = _labels(40, 12)
    for m in (0, 10, 25, 50, 75, 100):
        split = siblurry_split(labels, 4, 50, m, seed=1)
        n_blurry_samples = int(np.isin(labels, [c for g in split.blurry_classes for c in g]).sum())
        target = round(m / 100 * n_blurry_samples)
        out = np.concatenate(split.moved_out)
        # the M % is exact unless a random share exceeds a task's own blurry samples (then capped)
        caps = [int(np.isin(labels, g).sum()) for g in split.blurry_classes]
        assert len(out) <= target
        assert all(len(o) <= c for o, c in zip(split.moved_out, caps, strict=True))
        if all(len(o) < c for o, c in zip(split.moved_out, caps, strict=True)):
            assert len(out) == target
        assert np.array_equal(np.sort(out), np.sort(np.concatenate(split.moved_in)))  # pool conserved
        for t, g in enumerate(split.moved_out):  # moved samples come from the task's own blurry classes
            assert np.isin(labels[g], split.blurry_classes[t]).all()
        # everything a task holds is its own classes' samples or received from the pool
        for t, idx in enumerate(split.train_indices):
            own = np.isin(labels[idx], split.disjoint_classes[t] + split.blurry_classes[t])
            assert np.isin(idx[~own], split.moved_in[t]).all()
    assert len(np.concatenate(siblurry_split(labels, 4, 50, 0, seed=1).moved_out)) == 0


def test_siblurry_is_deterministic_in_the_seed_and_stochastic_across_seeds():
    labels = _labels(40, 12)
    a, b, c = (siblurry(labels, 4, 50, 10, seed=s) for s in (7, 7, 8))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    # the number of disjoint classes per task varies (stochastic task boundary)
    sizes = {
        tuple(len(g) for g in siblurry_split(labels, 4, 50, 10, seed=s).disjoint_classes) for s in range(20)
    }
    assert len(sizes) > 1


def test_siblurry_class_cuts_are_a_uniform_random_composition():
    """Task 0's number of disjoint classes has the uniform-composition law of n into T positive parts."""
    n, t, runs = 20, 4, 300
    labels = _labels(40, 3)
    x = np.array([len(siblurry_split(labels, t, 50, 0, seed=s).disjoint_classes[0]) for s in range(runs)])
    ks = np.arange(1, n - t + 2)
    pmf = np.array([math.comb(n - k - 1, t - 2) for k in ks]) / math.comb(n - 1, t - 1)
    assert pmf.sum() == pytest.approx(1.0)
    mean, sd = float((ks * pmf).sum()), float(np.sqrt(((ks - n / t) ** 2 * pmf).sum()))
    assert mean == pytest.approx(n / t)
    assert abs(x.mean() - mean) < 4 * sd / np.sqrt(runs)  # 4 standard errors
    assert x.min() >= 1


def test_siblurry_scenario_wrapper_and_dispatch():
    labels = _labels(40, 12)
    sc = make_scenario("siblurry", labels, 4, seed=2, disjoint_pct=50, blurry_pct=25)
    assert sc.name == "siblurry-n50-m25-t4" and sc.n_tasks == 4
    ref = siblurry_scenario(labels, 4, 50, 25, seed=2)
    assert all(np.array_equal(a, b) for a, b in zip(sc.train_indices, ref.train_indices, strict=True))
    seen: set[int] = set()
    for idx, cs in zip(sc.train_indices, sc.task_classes, strict=True):  # test classes: first appearance
        assert set(cs) == set(np.unique(labels[idx]).tolist()) - seen
        seen |= set(cs)
    assert seen == set(range(40)) and sorted(sc.class_order) == list(range(40))
    back = Scenario.from_dict(sc.to_dict())
    assert back.task_classes == sc.task_classes
    with pytest.raises(ValueError, match="at least 5 disjoint or 5 blurry"):
        siblurry(_labels(8, 3), 5, 50, 10, seed=0)
    with pytest.raises(ValueError, match="blurry_pct"):
        siblurry(labels, 4, 50, 101, seed=0)
    with pytest.raises(ValueError, match="siblurry"):
        make_scenario("nope", labels, 4, seed=0)


# --- i-Blurry: the blurry share moved is M % ----------------------------------------------


@pytest.mark.parametrize("m", [10, 25, 50, 75, 100])
def test_iblurry_moves_m_percent_within_rounding(m):
    labels, t_tasks, n = _labels(40, 30), 4, 50
    sc = iblurry_scenario(labels, t_tasks, n, m, seed=4)
    n_disjoint = round(n / 100 * 40)
    blurry_parts = np.array_split(np.asarray(sc.class_order)[n_disjoint:], t_tasks)  # the owners
    task_of = np.empty(len(labels), dtype=np.int64)
    for t, idx in enumerate(sc.train_indices):
        task_of[idx] = t
    moved = [round(m / 100 * int(np.isin(labels, p).sum())) for p in blurry_parts]
    pool = sum(moved)
    dealt = [len(p) for p in np.array_split(np.arange(pool), t_tasks)]
    outside_total, var_bound = 0, 0.0
    for t, p in enumerate(blurry_parts):
        mine = np.flatnonzero(np.isin(labels, p))
        outside = int((task_of[mine] != t).sum())
        # exactly moved_t left the owner; at most the owner's dealt share came back
        assert moved[t] - dealt[t] <= outside <= moved[t]
        outside_total += outside
        # returned_t is hypergeometric(pool, moved_t, dealt_t); sd(sum) <= sum of sds
        var_bound += math.sqrt(
            dealt[t] * (moved[t] / pool) * (1 - moved[t] / pool) * (pool - dealt[t]) / (pool - 1)
        )
    expected = pool - sum(mv * d / pool for mv, d in zip(moved, dealt, strict=True))
    assert abs(outside_total - expected) <= 4 * var_bound


# --- Public Labels: schedules and remapping -----------------------------------------------


def test_public_tags_round_trip_and_reject_vacuous_or_bad_forms():
    for tag in (
        "public-x10",
        "public-x100-grow",
        "public-x1000",
        "public-x10-c50-unknown",
        "public-x1-c0-parent",
        "public-x100-c25-grow-parent",
    ):
        assert parse_label_method(tag).tag == tag
    for bad, msg in (
        ("public-x10-unknown", "coverage below 100"),
        ("public-x10-c100", "unknown label"),
        ("public-x1-c0", "discard every sample"),
        ("public-x10-c0-grow", "discard every sample"),
        ("public-x10-c05", "unknown label"),
    ):
        with pytest.raises(ValueError, match=msg):
            parse_label_method(bad)


@pytest.mark.parametrize("mult", [10, 100, 1000])
def test_public_grow_schedule_is_linear_from_base_to_n_times_base(mult):
    n_base, t_tasks = 10, 5
    fixed = public_label_spaces(parse_label_method(f"public-x{mult}"), n_base, t_tasks, seed=0)
    grow = public_label_spaces(parse_label_method(f"public-x{mult}-grow"), n_base, t_tasks, seed=0)
    assert all(o == list(range(mult * n_base)) for o in fixed)  # S_prior^all: same set at every task
    sizes = [len(o) for o in grow]
    assert sizes[0] == n_base and sizes[-1] == mult * n_base
    assert sizes == [n_base + round((mult - 1) * n_base * t / (t_tasks - 1)) for t in range(t_tasks)]
    assert all(set(range(n_base)) <= set(o) for o in grow)  # every base label public at every task
    assert all(set(a) <= set(b) for a, b in zip(grow, grow[1:], strict=False))


def test_public_spaces_depend_on_public_information_only():
    """Changing the private task data changes no public O_t (Sec. 4.3); coverage is nested in P."""
    budget, parent = Budget(1.0, 1e-5), np.arange(12) // 3
    data_a = [np.array([0, 1, 2]), np.array([5, 6]), np.array([11])]
    data_b = [np.array([9, 9]), np.array([], dtype=np.int64), np.array([0, 3, 4, 7])]
    for tag in ("public-x10-grow", "public-x2-c50-unknown", "public-x3-c25-grow-parent"):
        a = output_label_spaces(parse_label_method(tag), data_a, 12, budget, seed=5, parent=parent)
        b = output_label_spaces(parse_label_method(tag), data_b, 12, budget, seed=5, parent=parent)
        assert a["tasks"] == b["tasks"] and a["remap"] == b["remap"]
        assert all(e["epsilon"] == 0.0 and e["delta"] == 0.0 for e in a["ledger"])
        assert a["training_budget"] == {"epsilon": 1.0, "delta": 1e-5}
    half = set(public_label_spaces(parse_label_method("public-x1-c50-unknown"), 12, 1, seed=5)[0]) - {12}
    quarter = set(public_label_spaces(parse_label_method("public-x1-c25-unknown"), 12, 1, seed=5)[0]) - {12}
    assert len(half) == 6 and len(quarter) == 3 and quarter <= half


def test_remap_task_data_and_evaluation_labels_follow_eq8():
    parent = np.arange(12) // 3  # 4 parents
    res = output_label_spaces(
        parse_label_method("public-x2-c50-parent"),
        [np.arange(12)],
        12,
        Budget(1.0, 1e-5),
        seed=0,
        parent=parent,
    )
    o_t = res["tasks"][0]["labels"]
    public_base = [y for y in o_t if y < 12]
    assert res["label_universe"] == 24 + 4 and set(range(24, 28)) <= set(o_t)
    y = np.arange(12)
    keep, mapped = remap_task_data(y, o_t, res["remap"])
    expected = [int(v) if v in public_base else 24 + int(parent[v]) for v in y]
    assert keep.all() and mapped.tolist() == expected
    assert evaluation_labels(y, res).tolist() == expected
    unk = output_label_spaces(parse_label_method("public-x2-c50-unknown"), [y], 12, Budget(1.0, 1e-5), seed=0)
    keep, mapped = remap_task_data(y, unk["tasks"][0]["labels"], unk["remap"])
    inside = np.isin(y, unk["tasks"][0]["labels"])
    assert keep.all() and np.array_equal(mapped, np.where(inside, y, 24))
    drop = output_label_spaces(parse_label_method("release-f0.5"), [y], 12, Budget(1.0, 1e-5), seed=0)
    assert drop["remap"]["rule"] == "drop" and np.array_equal(evaluation_labels(y, drop), y)
    with pytest.raises(ValueError, match="hierarchy"):
        output_label_spaces(parse_label_method("public-x2-c50-parent"), [y], 12, Budget(1.0, 1e-5), seed=0)


# --- through the stages: label file → learners train on R_t^task(D_t) ---------------------


@pytest.fixture
def cifar_run(tmp_path):
    """A fake CIFAR-100 in the official layout, a Si-Blurry scenario and label files from the stages."""
    from dpcl.data.datasets import CIFAR_ARCHIVES, RemoteFile, obtain_cifar
    from dpcl.data.registry import load_dataset
    from dpcl.fixtures import make_fake_cifar
    from dpcl.io import read_json
    from dpcl.stages.labels import release_label_spaces
    from dpcl.stages.scenarios import build_scenario

    src = tmp_path / "mirror"
    src.mkdir()
    _, md5, _ = make_fake_cifar(src, "cifar100", n_train=2000, n_test=200, seed=1)
    res = tmp_path / "res"
    obtain_cifar(
        "cifar100",
        res,
        local_dir=src,
        archives={"cifar100": RemoteFile(CIFAR_ARCHIVES["cifar100"].name, md5, "")},
    )
    sc_path = tmp_path / "scenario.json"
    sc = build_scenario("cifar100", res, {}, "siblurry", 5, 0, out=sc_path, disjoint_pct=50, blurry_pct=30)
    methods = [
        "public-x2-c50-parent",
        "public-x1-c0-parent",
        "public-x2-c50-unknown",
        "public-x10-grow",
        "base",
    ]
    outputs = {("inf", m): str(tmp_path / f"{m}.json") for m in methods}
    release_label_spaces("cifar100", res, sc_path, methods, [math.inf], 1e-5, seed=0, outputs=outputs)
    train, test = load_dataset("cifar100", res, "train"), load_dataset("cifar100", res, "test")
    gen = np.random.default_rng(0)
    feats = gen.normal(size=(len(train.labels), 6)), gen.normal(size=(len(test.labels), 6))
    return sc, {m: read_json(outputs[("inf", m)]) for m in methods}, train, test, feats


def _eq8(y: np.ndarray, o_t: list[int], remap: dict) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 8 written out by hand: keep y in O_t, else unknown / parent if public, else drop."""
    keep, out = [], []
    for v in y.tolist():
        if v in o_t:
            keep.append(True), out.append(v)
        elif remap["rule"] == "unknown":
            keep.append(True), out.append(remap["unknown"])
        elif remap["rule"] == "hierarchy" and remap["parent"][v] in o_t:
            keep.append(True), out.append(remap["parent"][v])
        else:
            keep.append(False)
    return np.array(keep, dtype=bool), np.array(out, dtype=np.int64)


def test_stage_label_files_carry_the_remap_spec(cifar_run):
    _, files, train, _, _ = cifar_run
    coarse = files["public-x1-c0-parent"]  # the public set is exactly the 20 CIFAR-100 coarse labels
    assert all(t["labels"] == list(range(100, 120)) for t in coarse["tasks"])
    assert coarse["label_universe"] == 120 and coarse["remap"]["rule"] == "hierarchy"
    assert coarse["remap"]["parent"] == [
        100 + int(train.coarse_labels[train.labels == y][0]) for y in range(100)
    ]
    grow = files["public-x10-grow"]
    assert [t["n_labels"] for t in grow["tasks"]] == [100 + round(900 * t / 4) for t in range(5)]
    assert grow["remap"]["rule"] == "drop" and files["base"]["remap"]["rule"] == "drop"


def test_cosine_stage_trains_on_exactly_the_remapped_task_data(cifar_run):
    from dpcl.learners.cosine import normalize_rows
    from dpcl.stages.prototypes import run_prototype_learner

    sc, files, train, test, (ftr, fte) = cifar_run
    idx = np.arange(len(train.labels))
    for method in ("public-x2-c50-parent", "public-x1-c0-parent", "public-x2-c50-unknown"):
        labels = files[method]
        metrics, _, model, _ = run_prototype_learner(
            (ftr, train.labels, idx), (fte, test.labels), sc, labels, learner="cosine"
        )
        expected = np.zeros((labels["label_universe"], ftr.shape[1]))
        for t, rows in enumerate(sc.train_indices):  # ε = inf: the sums are the data sums, no noise
            keep, y = _eq8(train.labels[rows], labels["tasks"][t]["labels"], labels["remap"])
            np.add.at(expected, y, normalize_rows(ftr[rows[keep]]))
        assert np.allclose(model["sums"], expected, atol=1e-5)
        if method == "public-x1-c0-parent":
            # predictions are coarse ids >= 100: against raw fine test labels every one would be
            # wrong; scored against the remapped labels, chance level is 1/20 on 200 samples
            assert metrics["final_accuracy"] > 0


def test_head_stage_hands_the_learners_the_remapped_task_data(cifar_run, monkeypatch):
    import dpcl.learners.peft as peft
    from dpcl.stages.heads import run_head_learners

    sc, files, train, test, (ftr, fte) = cifar_run
    labels = files["public-x2-c50-parent"]
    seen = {}
    original = peft.run_head_learner

    def spy(learner, task_data, test_sets, *args, **kwargs):
        seen["task_data"], seen["test_sets"] = task_data, test_sets
        return original(learner, task_data, test_sets, *args, **kwargs)

    monkeypatch.setattr(peft, "run_head_learner", spy)
    cfg = {"sample_rate": 0.5, "epochs": 1.0, "lr": 0.01, "clip": 1.0, "normaliser": 8.0}
    out = run_head_learners(
        (ftr, train.labels, np.arange(len(train.labels))),
        (fte, test.labels),
        sc,
        labels,
        0,
        ["peft_head"],
        dpsgd_cfg=cfg,
    )
    for t, rows in enumerate(sc.train_indices):
        keep, y = _eq8(train.labels[rows], labels["tasks"][t]["labels"], labels["remap"])
        x_t, y_t = seen["task_data"][t]
        assert np.array_equal(y_t, y) and np.array_equal(x_t, ftr[rows[keep]])
    union = sorted(set().union(*(t["labels"] for t in labels["tasks"])))
    for (_, y_test), cs in zip(seen["test_sets"], sc.task_classes, strict=True):
        _, want = _eq8(test.labels[np.isin(test.labels, cs)], union, labels["remap"])
        assert np.array_equal(y_test, want)
    assert np.isfinite(out["peft_head"][0]["final_accuracy"])
