"""The user's own data (dpcl.data.own): image folders and precomputed features, their config checks,
and the data-set registry they join."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpcl.config import ConfigError, ConfigWarning, validate_config
from dpcl.data import own, registry
from dpcl.data.datasets import DatasetError
from dpcl.data.manifest import ManifestError
from dpcl.stages.data import dataset_subset, obtain_dataset

CLASSES = ("cat", "dog", "emu")
# one (size, mode) per image: any size, grey / RGB / RGBA / palette / 16-bit grey
SHAPES = [
    ((12, 9), "L"),
    ((7, 20), "RGB"),
    ((16, 16), "RGBA"),
    ((9, 9), "P"),
    ((30, 11), "I;16"),
    ((5, 6), "RGB"),
]


def _png(path: Path, size, mode, value: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.full((size[1], size[0]), value, dtype=np.uint16 if mode == "I;16" else np.uint8)
    if mode in ("RGB", "RGBA"):
        arr = np.stack([arr] * len(mode), axis=-1)
    Image.fromarray(arr).convert(mode).save(path)


def make_tree(root: Path, splits=("train", "test"), per_class: int = 6) -> Path:
    """3 classes × ``per_class`` PNGs of different sizes and modes per split (class c's pixels 40 c + i)."""
    for split in splits:
        base = root / split if split else root
        for c, name in enumerate(CLASSES):
            for i in range(per_class):
                size, mode = SHAPES[i % len(SHAPES)]
                _png(base / name / f"img{i}.png", size, mode, 40 * c + i)
    return root


def _logged(fn, *args):
    """Run ``fn(*args)`` and return the lines it logged through the ``dpcl`` logger, whether or not an
    earlier test has already given that logger its own (non-propagating) stderr handler."""
    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("dpcl")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        fn(*args)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return "\n".join(lines)


def test_image_folder_decodes_every_size_and_mode_and_skips_non_images(tmp_path):
    root = make_tree(tmp_path / "mine")
    (root / "train" / "dog" / "notes.txt").write_text("not an image")
    (root / "train" / "dog" / ".DS_Store").write_bytes(b"\0")  # hidden: not a candidate at all
    cfg = {"format": "image_folder", "root": str(root), "image_size": 16}
    assert registry.spec("mine", cfg).classes == CLASSES and registry.n_classes("mine", cfg) == 3
    manifest = tmp_path / "res" / "mine" / "MANIFEST.json"
    logged = _logged(obtain_dataset, "mine", manifest, cfg)
    meta = own.read_dataset_meta(manifest.parent)
    assert meta["counts"] == {"train": 18, "test": 18} and meta["skipped"] == [
        str(root / "train/dog/notes.txt")
    ]
    assert "mine: skipped 1 file(s) that are not readable images" in logged
    assert len(meta["source_sha256"]) == 37 and "train/dog/notes.txt" in meta["source_sha256"]
    for split in ("train", "test"):
        ds = registry.load_dataset("mine", manifest.parent, split)
        assert ds.images.shape == (18, 16, 16, 3) and ds.images.dtype == np.uint8
        assert ds.classes == CLASSES and np.array_equal(np.bincount(ds.labels), [6, 6, 6])
        # a constant image stays constant (RGB of the same grey value) whatever its size and mode
        first = ds.images[0]
        assert (first == first[0, 0, 0]).all()
    ds, idx = dataset_subset(
        "mine", manifest.parent, "train", cfg | {"train_per_class": 4, "tune_per_class": 2}
    )
    assert np.array_equal(np.bincount(ds.labels[idx]), [4, 4, 4])
    ds, tune = dataset_subset(
        "mine", manifest.parent, "tune", cfg | {"train_per_class": 4, "tune_per_class": 2}
    )
    assert len(np.intersect1d(idx, tune)) == 0 and len(tune) == 6
    # the manifest hashes the decoded arrays like every obtained data set's
    arr = manifest.parent / "train_images.npy"
    arr.write_bytes(arr.read_bytes()[:-1] + b"\1")
    with pytest.raises(ManifestError, match="train_images.npy changed"):
        dataset_subset("mine", manifest.parent, "train", cfg)


def test_image_folder_one_tree_split_by_test_fraction_is_seeded(tmp_path):
    root = make_tree(tmp_path / "tree", splits=("",))
    cfg = {"format": "image_folder", "root": str(root), "test_fraction": 0.25, "image_size": 8}
    labels = {}
    for seed, where in ((0, "a"), (0, "b"), (1, "c")):
        obtain_dataset("tree", tmp_path / where / "MANIFEST.json", cfg | {"split_seed": seed})
        meta = own.read_dataset_meta(tmp_path / where)
        assert meta["counts"] == {"train": 14, "test": 4}  # round(0.25 * 18) = round(4.5) = 4 (half to even)
        labels[where] = registry.load_dataset("tree", tmp_path / where, "test").images
    assert np.array_equal(labels["a"], labels["b"]) and not np.array_equal(labels["a"], labels["c"])
    with pytest.raises(ValueError, match="split_seed"):  # read with other options than obtained with
        dataset_subset("tree", tmp_path / "a", "train", cfg | {"split_seed": 1})


@pytest.mark.parametrize(
    "damage, match",
    [
        (
            lambda r: [p.unlink() for p in (r / "train" / "emu").iterdir()],
            r"train/emu: class folder holds no files",
        ),
        (
            lambda r: (
                [p.unlink() for p in (r / "train" / "emu").glob("*.png")],
                (r / "train" / "emu" / "x.txt").write_text("x"),
            ),
            r"train/emu: no readable image",
        ),
        (
            lambda r: [__import__("shutil").rmtree(r / "train" / c) for c in CLASSES],
            r"train: no class folders",
        ),
        (lambda r: __import__("shutil").rmtree(r / "test"), r"has no train/ and test/ folders"),
    ],
)
def test_malformed_trees_are_refused_naming_the_path(tmp_path, damage, match):
    root = make_tree(tmp_path / "bad", per_class=2)
    damage(root)
    cfg = {"format": "image_folder", "root": str(root), "image_size": 8}
    with pytest.raises(DatasetError, match=match):
        obtain_dataset("bad", tmp_path / "res" / "MANIFEST.json", cfg)


def _features(rng, n: int, dim: int = 8, k: int = 3):
    y = np.arange(n) % k
    return rng.normal(size=(n, dim)) + 3 * np.eye(k, dim)[y], y


def test_npz_features_two_files_and_one_file_split(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "feat"
    folder.mkdir()
    for split, n in (("train", 30), ("test", 12)):
        x, y = _features(rng, n)
        np.savez(folder / f"{split}.npz", x=x, y=y, names=np.array(["a", "b", "c"]))
    cfg = {"format": "npz", "root": str(folder)}
    entry = registry.spec("f", cfg)
    assert entry.precomputed and entry.classes == ("a", "b", "c")
    obtain_dataset("f", tmp_path / "res" / "MANIFEST.json", cfg)
    ds = registry.load_dataset("f", tmp_path / "res", "train")
    with np.load(folder / "train.npz") as z:
        assert np.array_equal(ds.images, z["x"].astype(np.float32)) and np.array_equal(ds.labels, z["y"])
    x, y = _features(rng, 40)
    np.savez(tmp_path / "one.npz", x=x, y=y)  # no names: the class list would come from the labels
    cfg = {"format": "npz", "root": str(tmp_path / "one.npz"), "test_fraction": 0.25}
    with pytest.raises(DatasetError, match="no 'names' array.*public_label_names"):
        registry.spec("g", cfg)
    np.savez(tmp_path / "one.npz", x=x, y=y, names=np.array(["0", "1", "2"]))
    assert registry.spec("g", cfg).classes == ("0", "1", "2")
    obtain_dataset("g", tmp_path / "g" / "MANIFEST.json", cfg)
    tr, te = (registry.load_dataset("g", tmp_path / "g", s) for s in ("train", "test"))
    assert (len(tr), len(te)) == (30, 10)
    assert sorted(map(tuple, np.concatenate([tr.images, te.images]).round(4))) == sorted(
        map(tuple, x.astype(np.float32).round(4))
    )


@pytest.mark.parametrize(
    "arrays, match",
    [
        ({"x": np.zeros((4, 2)), "y": np.zeros(3, int), "names": np.array(["a"])}, "x must be"),
        ({"x": np.full((4, 2), np.nan), "y": np.zeros(4, int), "names": np.array(["a"])}, "NaN or inf"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4), "names": np.array(["a"])}, "integer"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4, int)}, "no 'names' array"),
        ({"x": np.zeros((4, 2))}, "needs arrays 'x'"),
        (
            {"x": np.zeros((4, 2)), "y": np.array([0, 1, 2, 3]), "names": np.array(["a", "b"])},
            r"labels must lie",
        ),
    ],
)
def test_bad_npz_is_refused_naming_the_file(tmp_path, arrays, match):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(DatasetError, match=match):
        cfg = {"format": "npz", "root": str(tmp_path / "bad.npz"), "test_fraction": 0.5}
        obtain_dataset("b", tmp_path / "res" / "MANIFEST.json", cfg)


def _config(dataset_cfg: dict, **top) -> dict:
    cfg = {
        "seeds": [0],
        "epsilons": [1],
        "label_methods": ["oracle", "base", "release-f0.1"],
        "learners": ["cosine"],
        "datasets": {"mine": dataset_cfg},
        "backbones": {"tiny": {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32}},
        "benchmarks": {"b": {"dataset": "mine", "backbone": "tiny", "n_tasks": 3}},
        "active": {"enabled": False},
        "tuning": {"enabled": False},
    }
    cfg.update(top)
    return cfg


def test_config_validation_of_own_data(tmp_path):
    root = make_tree(tmp_path / "mine", per_class=1)
    ok = {"format": "image_folder", "root": str(root)}
    validate_config(_config(dict(ok)))
    public = _config(dict(ok), label_methods=["oracle", "public-x10"])
    with pytest.raises(ConfigError, match=r"'datasets.mine.public_label_names'.*one class name per line"):
        validate_config(copy.deepcopy(public))
    names = tmp_path / "names.txt"
    names.write_text("cat\ndog\nemu\nyak\n")
    with pytest.warns(ConfigWarning, match="the 4 classes of mine do not split evenly"):
        cfg = validate_config(_config(ok | {"public_label_names": str(names)}, label_methods=["public-x10"]))
    assert registry.spec("mine", cfg["datasets"]["mine"]).classes == ("cat", "dog", "emu", "yak")
    names.write_text("cat\ndog\n")
    with pytest.raises(ConfigError, match=r"class 'emu' is not in the public label universe"):
        validate_config(_config(ok | {"public_label_names": str(names)}, label_methods=["public-x10"]))
    with pytest.raises(ConfigError, match=r"'datasets.mine.root'.*is not a folder"):
        validate_config(_config(ok | {"root": str(tmp_path / "nope")}))
    with pytest.raises(ConfigError, match=r"'datasets.mine.test_fraction': .* already has train/ and test/"):
        validate_config(_config(ok | {"test_fraction": 0.2}))
    with pytest.raises(ConfigError, match=r"'datasets.mine.root': missing"):
        validate_config(_config({"format": "image_folder"}))
    with pytest.raises(ConfigError, match=r"'datasets.mine': unknown dataset 'mine'.*'format'"):
        validate_config(_config({"train_per_class": 3}))
    with pytest.raises(ConfigError, match=r"'datasets.fashion_mnist.root': only for your own data"):
        validate_config(_config(dict(ok), datasets={"mine": dict(ok), "fashion_mnist": {"root": "x"}}))
    with pytest.raises(ConfigError, match=r"more tasks than mine's 3 classes"):
        validate_config(
            _config(dict(ok), benchmarks={"b": {"dataset": "mine", "backbone": "tiny", "n_tasks": 4}})
        )
    x, y = _features(np.random.default_rng(0), 12)
    np.savez(tmp_path / "f.npz", x=x, y=y, names=np.array(["a", "b", "c"]))
    npz = {"format": "npz", "root": str(tmp_path / "f.npz"), "test_fraction": 0.5}
    with pytest.raises(ConfigError, match=r"\['peft_film'\] train on images"):
        validate_config(_config(npz, learners=["cosine", "peft_film"]))
    with pytest.raises(ConfigError, match="test_fraction"):
        validate_config(_config(npz | {"test_fraction": None}))


def test_tuning_needs_public_tuning_images_of_own_data(tmp_path):
    root = make_tree(tmp_path / "mine", per_class=1)
    ok = {"format": "image_folder", "root": str(root)}
    with pytest.raises(
        ConfigError, match=r"'datasets.mine.nominal_train_size'.*no published training-set size"
    ):
        validate_config(_config(dict(ok), tuning={"enabled": True}))
    ok["train_per_class"] = 20
    with pytest.raises(
        ConfigError, match=r"train_per_class 20 leaves no public tuning images of the nominal 10"
    ):
        validate_config(_config(ok | {"nominal_train_size": 30}, tuning={"enabled": True}))
    validate_config(_config(ok | {"nominal_train_size": 90}, tuning={"enabled": True}))


def test_registry_tables_come_from_the_entries():
    from dpcl.training import tuning_protocol

    assert registry.N_CLASSES == {k: e.n_classes for k, e in registry.BUILTIN.items()}
    assert tuning_protocol.OFFICIAL_TRAIN_SIZE is registry.OFFICIAL_TRAIN_SIZE
    assert registry.HIERARCHIES == ("cifar100",) and registry.base_name("imagenet_r__s1") == "imagenet_r"
    for e in registry.BUILTIN.values():
        assert e.classes is None or len(e.classes) == e.n_classes


def _write_yaml(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg))
    return path
