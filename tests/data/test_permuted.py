"""The domain-incremental "permuted features" scenario (the cached-feature analogue of [Lai2022]'s
Permuted MNIST): the split, the public permutations, and that the learner stages see task t's data
through task t's permutation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcl.data.label_space import output_label_spaces, parse_label_method
from dpcl.data.scenarios import Scenario, feature_permutation, make_scenario
from dpcl.learners.cosine import normalize_rows
from dpcl.privacy.accounting import Budget
from dpcl.stages.common import task_inputs
from dpcl.stages.prototypes import run_prototype_learner


def _labels(sc, y, eps=math.inf, method="base"):
    budget = Budget(eps, 1e-5) if math.isfinite(eps) else Budget(math.inf, 0.0)
    res = output_label_spaces(
        parse_label_method(method),
        [y[i] for i in sc.train_indices],
        4,
        budget,
        0,
        run_key=("release", "synthetic", sc.name, "inf"),
    )
    res.update(
        seed=0, scenario=sc.name, epsilon_tag="inf", stream={"dataset": "synthetic", "scenario": sc.name}
    )
    return res


def test_split_gives_every_task_every_class_and_each_sample_one_task():
    y = np.repeat(np.arange(4), [10, 11, 12, 13])
    sc = make_scenario("permuted", y, 3, seed=5)
    assert sc.name == "permuted-t3" and sc.feature_permutation
    assert all(cs == [0, 1, 2, 3] for cs in sc.task_classes)
    allidx = np.concatenate(sc.train_indices)
    assert sorted(allidx.tolist()) == list(range(len(y)))  # each sample in exactly one task
    for c, n in zip(range(4), (10, 11, 12, 13), strict=True):
        sizes = [int(np.sum(y[idx] == c)) for idx in sc.train_indices]
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n  # near-equal parts per class
    again = Scenario.from_dict(sc.to_dict())
    assert again.feature_permutation and all(
        np.array_equal(a, b) for a, b in zip(again.train_indices, sc.train_indices, strict=True)
    )
    assert make_scenario("permuted", y, 3, seed=6).train_indices[0].tolist() != sc.train_indices[0].tolist()


def test_permutations_are_public_fixed_and_distinct():
    assert np.array_equal(feature_permutation(3, 0, 16), np.arange(16))  # task 0 sees the original features
    p1, p2 = feature_permutation(3, 1, 16), feature_permutation(3, 2, 16)
    assert sorted(p1) == list(range(16)) and not np.array_equal(p1, p2)
    assert np.array_equal(p1, feature_permutation(3, 1, 16))


def test_stages_see_each_task_through_its_permutation_and_the_cosine_sums_match():
    gen = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 30)
    x = gen.normal(size=(len(y), 8)) + 3 * np.eye(8)[y]
    yt = np.repeat(np.arange(4), 5)
    xt = gen.normal(size=(len(yt), 8)) + 3 * np.eye(8)[yt]
    sc = make_scenario("permuted", y, 3, seed=1)
    labels = _labels(sc, y)
    spaces, task_data, test_sets = task_inputs((x, y, np.arange(len(y))), (xt, yt), sc, labels)
    for t, ((xs, ys), (xts, yts)) in enumerate(zip(task_data, test_sets, strict=True)):
        p = feature_permutation(1, t, 8)
        assert np.array_equal(xs, x[sc.train_indices[t]][:, p]) and np.array_equal(ys, y[sc.train_indices[t]])
        assert np.array_equal(xts, xt[:, p]) and np.array_equal(yts, yt)  # all test data, task t's view
    metrics, _, model, _ = run_prototype_learner(
        (x, y, np.arange(len(y))), (xt, yt), sc, labels, learner="cosine"
    )
    expected = np.zeros((4, 8))
    for t, idx in enumerate(sc.train_indices):  # ε = inf: sums of the permuted unit features
        np.add.at(expected, y[idx], normalize_rows(x[idx][:, feature_permutation(1, t, 8)]))
    assert np.allclose(model["sums"], expected, atol=1e-5)
    acc = np.array(metrics["acc"], dtype=float)
    assert acc.shape == (3, 3) and acc[0, 0] >= 0.85  # task 0 (identity view) is learnt (chance: 0.25)


def test_film_stages_refuse_a_permuted_scenario(tmp_path):
    from dpcl.io import write_json
    from dpcl.stages.film import film_run_stage

    sc = make_scenario("permuted", np.repeat(np.arange(2), 4), 2, seed=0)
    write_json(tmp_path / "sc.json", sc.to_dict())
    with pytest.raises(ValueError, match="permutes cached feature dimensions"):
        film_run_stage(
            "peft_film",
            "fashion_mnist",
            tmp_path,
            {},
            {},
            scenario_path=tmp_path / "sc.json",
            labels_path=tmp_path / "labels.json",
            dpsgd_cfg={},
            physical_batch=8,
            device="cpu",
            out_metrics=tmp_path / "metrics.json",
            out_privacy=tmp_path / "privacy.json",
            out_members=tmp_path / "members",
        )
