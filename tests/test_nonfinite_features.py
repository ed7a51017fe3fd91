"""Non-finite features are refused where every learner reads them (dpcl.features.load_feature_cache),
by name, before anything is trained or released: a NaN passes norm checks (it compares false) and
clipping, and would turn a release (FM-A-GEM's coefficients, a DP-SGD head) into NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcl.data.scenarios import disjoint_scenario
from dpcl.features import FeatureCacheError, load_feature_cache, save_feature_cache
from dpcl.io import write_json

DPSGD = {"sample_rate": 0.5, "epochs": 1.0, "lr": 0.01, "clip": 1.0, "normaliser": 8.0}


def _cache(path, bad: float | None = None, row: int = 3):
    gen = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 6)
    x = gen.normal(size=(len(y), 5)).astype(np.float32)
    if bad is not None:
        x[row, 2] = bad
    save_feature_cache(path, x, y, np.arange(len(y)), {"backbone": "synthetic", "split": "tune"})
    return y


@pytest.fixture
def files(tmp_path):
    """A good cache, a NaN one, an inf one and a scenario over the good cache's labels."""
    y = _cache(tmp_path / "good.npz")
    _cache(tmp_path / "nan.npz", math.nan)
    _cache(tmp_path / "inf.npz", -math.inf, row=0)
    write_json(tmp_path / "scenario.json", disjoint_scenario(y, 2, seed=0).to_dict())
    return tmp_path


def _stages(d, bad):
    """Every learner stage that reads feature caches, called as the workflow calls it, with ``bad`` as
    one of its caches (no run is reached: the caches are read first)."""
    from dpcl.stages.active import run_active_seed
    from dpcl.stages.agem import agem_sweep
    from dpcl.stages.heads import head_learner_sweep, tune_head_learners
    from dpcl.stages.projected import projected_sweep
    from dpcl.stages.prototypes import prototypes_sweep

    good, sc = d / "good.npz", d / "scenario.json"
    run = {"labels": str(d / "never-read.json"), "metrics": "m", "privacy": "p", "diagnostics": "g"}
    runs = [run | {"outputs": {}}]
    return {
        "cosine (train)": lambda: prototypes_sweep(bad, good, sc, [run], learners=["cosine"]),
        "cosine (test)": lambda: prototypes_sweep(good, bad, sc, [run], learners=["cosine"]),
        "heads": lambda: head_learner_sweep(bad, good, sc, runs, ["peft_head"], DPSGD),
        "tune_heads": lambda: tune_head_learners(
            bad,
            sc,
            "fashion_mnist",
            {"tune_per_class": 6},
            "public",
            [1.0],
            delta=1e-5,
            outputs={"1": "o"},
            n_trials=1,
            epochs=1,
            normaliser=8,
        ),
        "tune_agem": lambda: tune_head_learners(
            bad,
            sc,
            "fashion_mnist",
            {"tune_per_class": 6},
            "public",
            [1.0],
            delta=1e-5,
            outputs={"1": "o"},
            n_trials=1,
            epochs=1,
            normaliser=8,
            agem_buffer_fraction=0.1,
        ),
        "agem_head and desai_head": lambda: agem_sweep(
            bad, good, sc, runs, dpsgd_cfg=DPSGD, agem_cfg={}, learners=("agem_head", "desai_head")
        ),
        "l2dpml and fm_agem (train)": lambda: projected_sweep(
            bad, good, good, sc, runs, ["l2dpml", "fm_agem"], blocks={"l2dpml": {}, "fm_agem": {}}
        ),
        "l2dpml and fm_agem (public tune split)": lambda: projected_sweep(
            good, good, bad, sc, runs, ["l2dpml", "fm_agem"], blocks={"l2dpml": {}, "fm_agem": {}}
        ),
        "DP active learning (pool)": lambda: run_active_seed(
            bad,
            good,
            good,
            {},
            {},
            "balanced",
            seed=0,
            per_class=6,
            out_root=d / "out",
            dataset="fashion_mnist",
        ),
        "DP active learning (public shadow pool)": lambda: run_active_seed(
            good,
            bad,
            good,
            {},
            {},
            "balanced",
            seed=0,
            per_class=6,
            out_root=d / "out",
            dataset="fashion_mnist",
        ),
    }


NAMES = [
    "cosine (train)",
    "cosine (test)",
    "heads",
    "tune_heads",
    "tune_agem",
    "agem_head and desai_head",
    "l2dpml and fm_agem (train)",
    "l2dpml and fm_agem (public tune split)",
    "DP active learning (pool)",
    "DP active learning (public shadow pool)",
]


@pytest.mark.parametrize("kind", ["nan", "inf"])
@pytest.mark.parametrize("stage", NAMES)
def test_every_learner_stage_refuses_a_nonfinite_cache_by_name(files, stage, kind):
    bad = files / f"{kind}.npz"
    call = _stages(files, bad)[stage]
    with pytest.raises(FeatureCacheError, match=r"nan\.npz|inf\.npz") as err:
        call()
    msg = str(err.value)
    assert str(bad) in msg and "NaN or inf" in msg
    assert f"first: row {3 if kind == 'nan' else 0}" in msg


def test_a_finite_cache_loads_and_names_the_stages_covered(files):
    x, *_ = load_feature_cache(files / "good.npz")
    assert np.isfinite(x).all()
    assert sorted(_stages(files, files / "nan.npz")) == sorted(NAMES)


def test_fm_agem_refuses_nonfinite_records_itself():
    """The library entry points too (FM-A-GEM's norm check alone would let NaN through)."""
    from dpcl.learners.fm_agem import coefficients
    from dpcl.public_pca import fit_projection

    z = np.zeros((2, 3))
    z[1, 0] = math.nan
    assert not float(np.max(np.einsum("ij,ij->i", z, z))) > 1.0  # the old check's blind spot
    with pytest.raises(ValueError, match="finite"):
        coefficients(z, np.array([0, 1]), 2)
    proj = fit_projection(np.random.default_rng(0).normal(size=(10, 4)), 3)
    with pytest.raises(ValueError, match="finite"):
        proj.apply(np.full((1, 4), math.inf))
    with pytest.raises(ValueError, match="finite"):
        fit_projection(np.full((10, 4), math.nan), 3)
