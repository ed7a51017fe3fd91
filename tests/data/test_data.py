import gzip

import numpy as np
import pytest

from dpcl.data.datasets import (
    DatasetError,
    load_fashion_mnist,
    obtain_fashion_mnist,
    read_idx,
    select_per_class,
    write_idx,
)
from dpcl.data.label_space import keep_mask, output_label_spaces, parse_label_method
from dpcl.data.scenarios import disjoint, disjoint_scenario
from dpcl.privacy.accounting import Budget


def test_idx_roundtrip_and_byte_layout(tmp_path):
    imgs = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "x-idx3-ubyte.gz", imgs)
    raw = gzip.decompress((tmp_path / "x-idx3-ubyte.gz").read_bytes())
    # magic 0x00000803, then big-endian dims 2, 3, 4, then the bytes row-major
    assert raw[:4] == bytes([0, 0, 8, 3])
    assert raw[4:16] == (2).to_bytes(4, "big") + (3).to_bytes(4, "big") + (4).to_bytes(4, "big")
    assert raw[16:] == imgs.tobytes()
    assert np.array_equal(read_idx(tmp_path / "x-idx3-ubyte.gz"), imgs)
    ints = np.array([1, -2, 70000], dtype=np.int32)
    write_idx(tmp_path / "i-idx1", ints)
    assert np.array_equal(read_idx(tmp_path / "i-idx1"), ints)


def test_idx_rejects_corrupt_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01\x00\x00\x00\x05abc")
    with pytest.raises(DatasetError, match="magic"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5]) + b"abc")
    with pytest.raises(DatasetError, match="payload"):
        read_idx(tmp_path / "short")


def test_obtain_local_copy_verifies_content(fake_fmnist, tmp_path):
    root, files = fake_fmnist
    out = obtain_fashion_mnist(tmp_path / "dest", source="local", local_dir=root, files=files)
    assert set(out) == {"train_images", "train_labels", "test_images", "test_labels"}
    ds = load_fashion_mnist(tmp_path / "dest", "train")
    assert ds.images.shape == (400, 28, 28) and ds.labels.shape == (400,)
    # the real Fashion-MNIST digests reject this (fake) content
    with pytest.raises(DatasetError, match="sha256"):
        obtain_fashion_mnist(tmp_path / "dest2", source="local", local_dir=root)


def test_obtain_downloads_with_checksums(fake_fmnist, tmp_path):
    root, files = fake_fmnist
    url = root.as_uri() + "/"
    obtain_fashion_mnist(
        tmp_path / "dl", source="download", urls=("file:///nonexistent/", url), files=files, retries=1
    )
    assert (tmp_path / "dl" / files["train_images"].name).is_file()
    bad = {k: type(f)(f.name, "0" * 32, f.content_sha256) for k, f in files.items()}
    with pytest.raises(DatasetError, match="checksum mismatch"):
        obtain_fashion_mnist(tmp_path / "dl2", source="download", urls=(url,), files=bad, retries=1)
    assert not any((tmp_path / "dl2").iterdir())  # nothing half-written left behind


def test_obtain_offline_error_says_what_to_do(tmp_path):
    with pytest.raises(DatasetError, match="place the official"):
        obtain_fashion_mnist(tmp_path / "x", source="download", urls=("file:///nonexistent/",), retries=1)


def test_select_per_class_fixed_subset():
    labels = np.repeat(np.arange(4), 50)
    a = select_per_class(labels, 10, seed=0)
    assert np.array_equal(a, select_per_class(labels, 10, seed=0))
    assert np.array_equal(np.bincount(labels[a]), [10] * 4)
    assert not np.array_equal(a, select_per_class(labels, 10, seed=1))
    assert len(select_per_class(labels, None, 0)) == 200


def test_disjoint_split_each_class_in_one_task():
    labels = np.repeat(np.arange(10), 7)
    sc = disjoint_scenario(labels, 5, seed=3)
    all_idx = np.concatenate(sc.train_indices)
    assert np.array_equal(np.sort(all_idx), np.arange(len(labels)))  # every sample exactly once
    classes_per_task = [set(labels[i]) for i in sc.train_indices]
    assert all(len(c) == 2 for c in classes_per_task)
    assert [sorted(c) for c in classes_per_task] == sc.task_classes
    assert set().union(*classes_per_task) == set(range(10))
    # deterministic per seed, permuted across seeds
    assert all(np.array_equal(a, b) for a, b in zip(disjoint(labels, 5, 3), sc.train_indices, strict=True))
    orders = {tuple(disjoint_scenario(labels, 5, s).class_order) for s in range(6)}
    assert len(orders) == 6


def test_label_methods_spaces_and_budgets():
    task_labels = [np.array([0] * 30 + [1] * 2), np.array([2] * 40 + [3] * 40)]
    budget = Budget(1.0, 1e-5)
    oracle = output_label_spaces(parse_label_method("oracle"), task_labels, 4, budget, seed=0)
    assert [t["labels"] for t in oracle["tasks"]] == [[0, 1], [2, 3]]
    assert oracle["training_budget"] == {"epsilon": 1.0, "delta": 1e-5}
    assert oracle["ledger"][0]["mechanism"] == "label_oracle"
    base = output_label_spaces(parse_label_method("base"), task_labels, 4, budget, seed=0)
    assert all(t["labels"] == [0, 1, 2, 3] for t in base["tasks"])
    pub = output_label_spaces(parse_label_method("public-x10"), task_labels, 4, budget, seed=0)
    assert pub["label_universe"] == 40 and all(t["labels"] == list(range(40)) for t in pub["tasks"])
    assert pub["ledger"][0]["epsilon"] == 0.0
    rel = output_label_spaces(parse_label_method("release-f0.5"), task_labels, 4, budget, seed=0)
    assert rel["training_budget"]["epsilon"] == pytest.approx(0.5)
    assert rel["training_budget"]["delta"] == pytest.approx(5e-6)
    # class of size 2 is below k(0.5, 5e-6) and always dropped; 30 and 40 exceed 2k and always kept
    assert rel["tasks"][0]["labels"] == [0] and rel["tasks"][1]["labels"] == [2, 3]
    assert rel["ledger"][0]["mechanism"] == "ktsgd_label_release"
    lap = output_label_spaces(parse_label_method("release-laplace-f0.5"), task_labels, 4, budget, seed=0)
    assert lap["ledger"][0]["mechanism"] == "laplace_label_release"
    assert lap["tasks"][1]["labels"] == [2, 3]  # 40 >> tau(0.5, 5e-6) ~ 24.7
    # Released labels are data-dependent and reproducible per seed
    again = output_label_spaces(parse_label_method("release-f0.5"), task_labels, 4, budget, seed=0)
    assert again == rel


def test_label_method_parsing_and_drop_mask():
    assert parse_label_method("release-f0.1").fraction == 0.1
    assert parse_label_method("public-x1000").multiplier == 1000
    lap = parse_label_method("release-laplace-f0.25")
    assert lap.mechanism == "laplace" and lap.fraction == 0.25 and lap.tag == "release-laplace-f0.25"
    for bad in ("release-f1.5", "public-x0", "foo", "release-f0"):
        with pytest.raises(ValueError, match="label method"):
            parse_label_method(bad)
    assert keep_mask(np.array([0, 1, 2, 1]), [1, 2]).tolist() == [False, True, True, True]


def test_iblurry_properties():
    from dpcl.data.scenarios import iblurry, iblurry_scenario

    labels = np.repeat(np.arange(20), 30)
    for m in (0, 10, 50, 100):
        sc = iblurry_scenario(labels, 5, 50, m, seed=4)
        all_idx = np.concatenate(sc.train_indices)
        assert np.array_equal(np.sort(all_idx), np.arange(len(labels)))  # every sample in exactly one task
        tasks_of = {
            c: {t for t, idx in enumerate(sc.train_indices) if np.any(labels[idx] == c)} for c in range(20)
        }
        disjoint = sc.class_order[:10]
        assert all(len(tasks_of[c]) == 1 for c in disjoint)  # disjoint classes: one task each
        blurry = sc.class_order[10:]
        owner = {c: t for t in range(5) for c in blurry[2 * t : 2 * t + 2]}  # 2 blurry classes per task
        outside = sum(
            int(np.sum(labels[idx] == c))
            for t, idx in enumerate(sc.train_indices)
            for c in blurry
            if owner[c] != t
        )
        # M % of each task's 60 blurry samples are pooled and dealt evenly over 5 tasks, so about
        # 1/5 of the pool returns to its owner: outside ~ 0.8 * pool, hypergeometric spread
        pool = 5 * round(m / 100 * 60)
        assert abs(outside - 0.8 * pool) <= 4 * np.sqrt(pool * 0.16) + 1
        assert all(np.isin(labels[idx], blurry).sum() == 60 for idx in sc.train_indices)  # dealt evenly
        if m == 0:
            assert all(len(tasks_of[c]) == 1 for c in blurry)  # M = 0: a disjoint split
        if m == 100:
            assert all(len(tasks_of[c]) > 1 for c in blurry)
        assert sorted(c for cs in sc.task_classes for c in cs) == list(range(20))  # first appearances
        assert sc.name == f"iblurry-n50-m{m}-t5"
    a = iblurry(labels, 5, 50, 25, seed=1)
    b = iblurry(labels, 5, 50, 25, seed=1)
    c = iblurry(labels, 5, 50, 25, seed=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    with pytest.raises(ValueError, match="blurry_pct"):
        iblurry(labels, 5, 50, 120, seed=0)


@pytest.mark.parametrize("variant", ["cifar100", "cifar10"])
def test_cifar_download_extract_and_load(tmp_path, variant):
    from dpcl.data.datasets import CIFAR_ARCHIVES, RemoteFile, obtain_cifar
    from dpcl.data.registry import load_dataset
    from dpcl.fixtures import make_fake_cifar

    src = tmp_path / "mirror"
    src.mkdir()
    archive, md5, images = make_fake_cifar(src, variant)
    table = {variant: RemoteFile(CIFAR_ARCHIVES[variant].name, md5, "")}
    folder = obtain_cifar(variant, tmp_path / "res", urls=(src.as_uri() + "/",), archives=table, retries=1)
    assert folder.is_dir()
    for split in ("train", "test"):
        ds = load_dataset(variant, tmp_path / "res", split)
        img, fine = images[split]
        assert ds.images.shape == img.shape and np.array_equal(ds.images, img)  # byte layout: RGB planes
        assert np.array_equal(ds.labels, fine)
        if variant == "cifar100":
            assert np.array_equal(ds.coarse_labels, fine // 5) and len(ds.coarse_classes) == 20
    # the same archive placed by hand (offline users) is verified too
    obtain_cifar(variant, tmp_path / "res2", local_dir=src, archives=table)
    bad = {variant: RemoteFile(table[variant].name, "0" * 32, "")}
    with pytest.raises(DatasetError, match="md5"):
        obtain_cifar(variant, tmp_path / "res3", local_dir=src, archives=bad)
    with pytest.raises(DatasetError, match="by hand"):
        obtain_cifar(variant, tmp_path / "res4", urls=("file:///nonexistent/",), archives=bad, retries=1)


def test_remap_task_is_exactly_eq8():
    from dpcl.data.label_space import remap_task

    labels = np.array([0, 1, 2, 3, 4, 5, 1, 7])
    space = [0, 1, 10, 11, 99]
    parent = {0: 10, 1: 10, 2: 10, 3: 11, 4: 11, 5: 12, 7: 13}  # 12, 13 not public
    for rule, kw in (("drop", {}), ("hierarchy", {"parent": parent}), ("unknown", {"unknown": 99})):
        keep, new = remap_task(labels, space, rule, **kw)

        def r_label(y, rule=rule):  # Eq. 8's R_t^label, written out
            if y in space:
                return y
            if rule == "hierarchy":
                return parent[y] if parent[y] in space else None
            return 99 if rule == "unknown" else None

        expected = [(i, r_label(int(y))) for i, y in enumerate(labels) if r_label(int(y)) is not None]
        assert list(zip(np.flatnonzero(keep).tolist(), new.tolist(), strict=True)) == expected
        assert set(new.tolist()) <= set(space)
    with pytest.raises(ValueError, match="unknown"):
        remap_task(labels, space, "unknown", unknown=5)
    with pytest.raises(ValueError, match="rule"):
        remap_task(labels, space, "merge")


def test_blurry_samples_figure_numbers(tmp_path):
    from dpcl.report.figures import blurry_samples_per_task, plot_blurry_samples

    labels = np.repeat(np.arange(20), 30)
    # M = 0: each task holds its 2 owned blurry classes whole: 30 samples per class
    assert np.allclose(blurry_samples_per_task(labels, 5, 50, 0, seed=0), 30.0)
    # M = 100: the 300 blurry samples are dealt evenly (60 per task) over all 10 blurry classes,
    # each of which appears in every task with overwhelming probability -> about 6 per class
    assert np.allclose(blurry_samples_per_task(labels, 5, 50, 100, seed=0), 6.0, atol=0.7)
    mid = blurry_samples_per_task(labels, 5, 50, 50, seed=0)
    assert np.all((mid > 6.0 - 0.7) & (mid < 30.0))
    plot_blurry_samples(
        labels,
        n_tasks=5,
        disjoint_pct=50,
        blurry_pcts=[10, 50, 100],
        seed=0,
        title="toy",
        outputs=[tmp_path / "f.png"],
    )
    assert (tmp_path / "f.png").stat().st_size > 1000


def test_holdout_fraction_sets_aside_a_public_tuning_share(fake_fmnist, tmp_path):
    from dpcl.stages.data import dataset_subset, obtain_dataset

    root, _ = fake_fmnist
    manifest = tmp_path / "fm" / "MANIFEST.json"
    obtain_dataset("fashion_mnist", manifest, {"source": "local", "local_dir": str(root), "verify": False})
    base = {"train_per_class": None, "tune_per_class": 1000}
    ds, train0 = dataset_subset("fashion_mnist", manifest.parent, "train", base)
    assert len(train0) == len(ds.labels)  # no holdout, all kept: nothing left to tune on
    with pytest.raises(ValueError, match="tuning split"):
        dataset_subset("fashion_mnist", manifest.parent, "tune", base)
    cfg = {**base, "holdout_fraction": 0.1}
    _, train = dataset_subset("fashion_mnist", manifest.parent, "train", cfg)
    _, tune = dataset_subset("fashion_mnist", manifest.parent, "tune", cfg)
    assert len(np.intersect1d(train, tune)) == 0 and len(train) + len(tune) == len(ds.labels)
    assert np.all(np.bincount(ds.labels[tune], minlength=10) == 4)  # round(0.1 x 40) per class
    _, again = dataset_subset("fashion_mnist", manifest.parent, "tune", cfg)
    assert np.array_equal(tune, again)


def test_obtained_files_are_hashed_and_checked_on_every_read(tmp_path):
    """MANIFEST.json records every file's sha256; a file changed after it was
    obtained (another valid gzip), a missing one or a garbage manifest is refused by name."""
    import gzip
    import json
    import shutil

    from dpcl.data.manifest import ManifestError
    from dpcl.fixtures import make_fake_fashion_mnist
    from dpcl.stages.data import dataset_subset, obtain_dataset

    raw, other = tmp_path / "raw", tmp_path / "other"
    make_fake_fashion_mnist(raw, n_train_per_class=6, n_test_per_class=2)
    make_fake_fashion_mnist(other, n_train_per_class=6, n_test_per_class=2, seed=9)
    cfg = {"source": "local", "local_dir": str(raw), "verify": False, "train_per_class": 4}
    root = tmp_path / "resources" / "fashion_mnist"
    obtain_dataset("fashion_mnist", root / "MANIFEST.json", cfg)
    manifest = json.loads((root / "MANIFEST.json").read_text())
    assert manifest["format"] == 2 and sorted(manifest["sha256"]) == sorted(p.name for p in raw.iterdir())
    ds, idx = dataset_subset("fashion_mnist", root, "train", cfg)
    assert len(idx) == 40
    images = "train-images-idx3-ubyte.gz"
    shutil.copy(other / images, root / images)  # a valid gzip of other images
    with gzip.open(root / images) as f:
        assert f.read(4) == b"\x00\x00\x08\x03"  # still a well-formed idx file: only the hash can tell
    with pytest.raises(ManifestError, match=rf"{images} changed after it was obtained.*restore it or delete"):
        dataset_subset("fashion_mnist", root, "train", cfg)
    (root / images).unlink()
    with pytest.raises(ManifestError, match=rf"{images}, obtained with .*MANIFEST.json, is missing"):
        dataset_subset("fashion_mnist", root, "test", cfg)
    (root / "MANIFEST.json").write_text("garbage {")
    with pytest.raises(
        ManifestError, match=r"MANIFEST.json is not a dpcl manifest.*delete .*MANIFEST.json and rerun"
    ):
        dataset_subset("fashion_mnist", root, "train", cfg)
    (root / "MANIFEST.json").write_text(json.dumps({"dataset": "mnist", "files": {}}))
    with pytest.raises(ManifestError, match="written for data set 'mnist', not 'fashion_mnist'"):
        dataset_subset("fashion_mnist", root, "train", cfg)
    shutil.copy(raw / images, root / images)
    (root / "MANIFEST.json").write_text(json.dumps({"dataset": "fashion_mnist", "files": manifest["files"]}))
    with pytest.warns(UserWarning, match="no file hashes"):  # an older dpcl's manifest: read, not verified
        dataset_subset("fashion_mnist", root, "train", cfg)
