"""The paper's datasets (MNIST, SVHN, notMNIST, ImageNet-R, 5-datasets) on small files written
in the real on-disk formats, downloaded through file:// mirrors like the real ones."""

import itertools
import json

import numpy as np
import pytest

from dpcl.data.datasets import CIFAR_ARCHIVES, DatasetError, RemoteFile
from dpcl.data.registry import base_name, load_dataset
from dpcl.data.scenarios import make_scenario
from dpcl.data.sources import (
    FIVE_DATASETS,
    IMAGENET_R_FILE,
    NOTMNIST_FILE,
    check_obtained_options,
    obtain_five_datasets,
    obtain_imagenet_r,
    obtain_mnist,
    obtain_notmnist,
    obtain_svhn,
    to_rgb32,
)
from dpcl.fixtures import (
    make_fake_cifar,
    make_fake_fashion_mnist,
    make_fake_imagenet_r,
    make_fake_mnist,
    make_fake_notmnist,
    make_fake_svhn,
)

OFFLINE = "file:///nonexistent/"


def _mirror(tmp_path, name="mirror"):
    path = tmp_path / name
    path.mkdir()
    return path


def test_mnist_download_verify_and_load(tmp_path):
    src = _mirror(tmp_path)
    table, arrays = make_fake_mnist(src)
    obtain_mnist(tmp_path / "res", urls=(OFFLINE, src.as_uri() + "/"), files=table, retries=1)
    for split in ("train", "test"):
        ds = load_dataset("mnist", tmp_path / "res", split)
        assert np.array_equal(ds.images, arrays[split][0]) and np.array_equal(ds.labels, arrays[split][1])
        assert ds.classes == tuple("0123456789")
    bad = {k: RemoteFile(f.name, "0" * 32, "") for k, f in table.items()}
    with pytest.raises(DatasetError, match="checksum mismatch"):
        obtain_mnist(tmp_path / "res2", urls=(src.as_uri() + "/",), files=bad, retries=1)
    with pytest.raises(DatasetError, match="place it by hand"):
        obtain_mnist(tmp_path / "res3", urls=(OFFLINE,), files=table, retries=1)
    with pytest.raises(DatasetError, match="md5"):  # a hand-placed copy is verified too
        obtain_mnist(tmp_path / "res4", local_dir=src, files=bad)


def test_svhn_mat_layout_and_label_ten_is_zero(tmp_path):
    src = _mirror(tmp_path)
    table, arrays = make_fake_svhn(src)
    obtain_svhn(tmp_path / "res", local_dir=src, files=table)
    for split in ("train", "test"):
        ds = load_dataset("svhn", tmp_path / "res", split)
        x, digits = arrays[split]
        assert ds.images.shape == (x.shape[3], 32, 32, 3) and ds.images.dtype == np.uint8
        # sample i is X[:, :, :, i] with rows, columns, RGB in that order
        assert np.array_equal(ds.images[3], x[:, :, :, 3]) and np.array_equal(
            ds.images, x.transpose(3, 0, 1, 2)
        )
        assert np.array_equal(ds.labels, digits) and ds.labels.min() == 0 and ds.labels.max() == 9
    obtain_svhn(tmp_path / "dl", urls=(src.as_uri() + "/",), files=table, retries=1)  # download path
    (tmp_path / "dl" / "test_32x32.mat").write_bytes(b"MATLAB 7.3 MAT-file, not a v5 file")
    with pytest.raises(DatasetError, match="MATLAB v5"):
        load_dataset("svhn", tmp_path / "dl", "test")


def test_notmnist_zip_decodes_and_skips_corrupt_files(tmp_path, capsys):
    src = _mirror(tmp_path)
    archive, md5, written = make_fake_notmnist(src, n_corrupt=2)
    out = obtain_notmnist(tmp_path / "res", urls=(src.as_uri() + "/",), retries=1)
    assert out["counts"] == {"train": 40, "test": 20} and out["skipped"] == 2
    assert "skipped 2 unreadable" in capsys.readouterr().err
    meta = json.loads((tmp_path / "res" / "dataset.json").read_text())
    assert len(meta["skipped"]) == 2 and all("broken" in s for s in meta["skipped"])
    for split in ("train", "test"):
        ds = load_dataset("notmnist", tmp_path / "res", split)
        assert ds.images.shape == (len(written[split]), 28, 28) and ds.classes == tuple("ABCDEFGHIJ")
        # PNG is lossless: every decoded image equals the written one of its letter
        got = {tuple(img.ravel()): int(y) for img, y in zip(ds.images, ds.labels, strict=True)}
        for (letter, _), img in written[split].items():
            assert got[tuple(img.ravel())] == ord(letter) - ord("A")
    # no checksum is published for this archive: a wrong one given by a user is still enforced
    with pytest.raises(DatasetError, match="checksum mismatch"):
        obtain_notmnist(
            tmp_path / "r2",
            urls=(src.as_uri() + "/",),
            file=RemoteFile(NOTMNIST_FILE.name, "0" * 32, ""),
            retries=1,
        )
    obtain_notmnist(tmp_path / "r3", local_dir=src, file=RemoteFile(NOTMNIST_FILE.name, md5, ""))


@pytest.fixture
def imagenet_r(tmp_path):
    src = _mirror(tmp_path, "imr_mirror")
    archive, md5, wnids, colours = make_fake_imagenet_r(src)
    return src, RemoteFile(IMAGENET_R_FILE.name, md5, ""), wnids, colours


def test_imagenet_r_split_decode_and_crop(tmp_path, imagenet_r, capsys):
    src, f, wnids, colours = imagenet_r
    res = tmp_path / "res"
    out = obtain_imagenet_r(
        res, urls=(src.as_uri() + "/",), file=f, split_seed=3, image_size=24, retries=1, progress=False
    )
    n = 6 + 9 + 5 + 10 + 1  # readable images (one corrupt file skipped)
    assert out["skipped"] == 1 and "skipped 1 unreadable" in capsys.readouterr().err
    assert out["counts"]["test"] in (6, 5)  # round(0.2 * 32) members, less the corrupt one if drawn there
    assert out["counts"]["train"] + out["counts"]["test"] == n
    train, test = (load_dataset("imagenet_r", res, s) for s in ("train", "test"))
    assert isinstance(train.images, np.memmap) and train.images.shape[1:] == (24, 24, 3)
    assert train.classes == tuple(wnids)
    assert np.array_equal(
        np.bincount(np.concatenate([train.labels, test.labels]), minlength=4), [7, 9, 5, 10]
    )
    # every image is its class's flat colour after JPEG + bicubic resize (tolerance: JPEG error)
    for ds in (train, test):
        for img, y in zip(ds.images, ds.labels, strict=True):
            if y != 0 or abs(img.astype(int) - colours[0]).max() <= 12:
                assert np.abs(img.reshape(-1, 3).mean(0) - colours[y]).max() <= 12
    # the wide red-centred image: its square centre crop is all red
    wide = [
        img
        for ds in (train, test)
        for img, y in zip(ds.images, ds.labels, strict=True)
        if y == 0 and abs(img.astype(int) - colours[0]).max() > 12
    ]
    assert len(wide) == 1
    centre = wide[0][4:20, 4:20].reshape(-1, 3).astype(int)
    assert (centre[:, 0] > 200).all() and (centre[:, 2] < 60).all()
    # the split is a function of split_seed alone; another seed gives another split
    again = obtain_imagenet_r(
        tmp_path / "again", local_dir=src, file=f, split_seed=3, image_size=24, progress=False
    )
    assert again["counts"] == out["counts"]
    assert np.array_equal(load_dataset("imagenet_r", tmp_path / "again", "test").images, test.images)
    obtain_imagenet_r(tmp_path / "other", local_dir=src, file=f, split_seed=4, image_size=24, progress=False)
    other = load_dataset("imagenet_r", tmp_path / "other", "test")
    assert not (len(other) == len(test) and np.array_equal(other.images, test.images))
    # a config whose options differ from the obtained copy is refused with the key named
    check_obtained_options("imagenet_r", res, {"split_seed": 3, "image_size": 24})
    with pytest.raises(ValueError, match=r"datasets\.imagenet_r\.split_seed"):
        check_obtained_options("imagenet_r", res, {"split_seed": 0})
    with pytest.raises(DatasetError, match="md5"):
        obtain_imagenet_r(
            tmp_path / "bad", local_dir=src, file=RemoteFile(f.name, "0" * 32, ""), progress=False
        )


def test_imagenet_r_split_fraction_is_uniform_over_seeds():
    """The 80/20 split is uniform: over many seeds, each image is in the test split with
    probability 0.2; with 300 seeds the count of one image is Binomial(300, 0.2), sd 6.9."""
    from dpcl.data.sources import random_split

    hits = np.zeros(50)
    for s in range(300):
        train, test = random_split(50, 0.2, s, "imagenet_r")
        assert len(test) == 10 and len(np.intersect1d(train, test)) == 0 and len(train) + len(test) == 50
        hits[test] += 1
    assert np.abs(hits - 60).max() <= 4.5 * np.sqrt(300 * 0.2 * 0.8)  # union bound over 50 images


def _five_sources(tmp_path):
    """One local folder per source in the real formats, and file tables for their md5s."""
    local = tmp_path / "five"
    for name in FIVE_DATASETS:
        (local / name).mkdir(parents=True)
    mnist_table, mnist = make_fake_mnist(local / "mnist", n_train=20, n_test=10, seed=1)
    svhn_table, svhn = make_fake_svhn(local / "svhn", n_train=20, n_test=10, seed=2)
    make_fake_notmnist(local / "notmnist", n_train_per_class=2, n_test_per_class=1, n_corrupt=1)
    fm_table = make_fake_fashion_mnist(local / "fashion_mnist", n_train_per_class=2, n_test_per_class=1)
    _, cifar_md5, cifar = make_fake_cifar(local / "cifar10", "cifar10", n_train=20, n_test=10)
    overrides = {
        "mnist": {"files": mnist_table},
        "svhn": {"files": svhn_table},
        "fashion_mnist": {"files": fm_table},
        "cifar10": {"archives": {"cifar10": RemoteFile(CIFAR_ARCHIVES["cifar10"].name, cifar_md5, "")}},
    }
    return local, overrides, mnist, svhn, cifar


def test_five_datasets_composite_and_all_task_orders(tmp_path):
    local, overrides, mnist, svhn, cifar = _five_sources(tmp_path)
    out = obtain_five_datasets(tmp_path / "res", local_dir=local, overrides=overrides)
    sizes = {"train": [20, 20, 20, 20, 20], "test": [10, 10, 10, 10, 10]}
    assert out["counts"] == {s: sum(v) for s, v in sizes.items()}
    for split in ("train", "test"):
        ds = load_dataset("five_datasets", tmp_path / "res", split)
        assert ds.images.shape == (sum(sizes[split]), 32, 32, 3) and ds.images.dtype == np.uint8
        assert len(ds.classes) == 50 and ds.classes[0] == "mnist:0" and ds.classes[49].startswith("cifar10:")
        bounds = np.cumsum([0] + sizes[split])
        for pos in range(5):  # label = 10 * source position + class, sources in FIVE_DATASETS order
            block = ds.labels[bounds[pos] : bounds[pos + 1]]
            assert block.min() >= 10 * pos and block.max() < 10 * pos + 10
        # MNIST: 28x28 grey zero-padded to 32x32 and repeated over RGB; SVHN and CIFAR-10 unchanged
        assert np.array_equal(ds.images[: bounds[1]], to_rgb32(mnist[split][0]))
        assert np.array_equal(ds.images[bounds[0] + 5, 2:30, 2:30, 1], mnist[split][0][5])
        assert ds.images[: bounds[1], :2].max() == 0
        assert np.array_equal(ds.images[bounds[1] : bounds[2]], svhn[split][0].transpose(3, 0, 1, 2))
        assert np.array_equal(ds.labels[bounds[1] : bounds[2]] - 10, svhn[split][1])
        assert np.array_equal(ds.images[bounds[4] :], cifar[split][0])
    # scenario 'datasets': each task one whole source; seeds 0..119 are the 120 orders
    labels = load_dataset("five_datasets", tmp_path / "res", "train").labels
    orders = []
    for seed in range(120):
        sc = make_scenario("datasets", labels, 5, seed)
        order = tuple(int(idx_cls[0]) // 10 for idx_cls in sc.task_classes)
        orders.append(order)
        for t, idx in enumerate(sc.train_indices):
            assert set(labels[idx] // 10) == {order[t]} and len(idx) == int(np.sum(labels // 10 == order[t]))
    assert orders == list(itertools.permutations(range(5)))
    assert (
        make_scenario("datasets", labels, 5, 120).task_classes
        == make_scenario("datasets", labels, 5, 0).task_classes
    )
    with pytest.raises(ValueError, match="n_tasks must be 5"):
        make_scenario("datasets", labels, 10, 0)


def test_pipeline_stages_with_a_variant_name(tmp_path, imagenet_r):
    """obtain_dataset -> dataset_subset -> build_scenario for ``imagenet_r__s1`` (a variant key)."""
    from dpcl.stages.data import dataset_subset, obtain_dataset
    from dpcl.stages.scenarios import build_scenario

    src, f, wnids, _ = imagenet_r
    assert base_name("imagenet_r__s1") == "imagenet_r"
    with pytest.raises(ValueError, match="unknown dataset"):
        base_name("imagenet_q")
    manifest = tmp_path / "resources" / "imagenet_r__s1" / "MANIFEST.json"
    cfg = {"source": "local", "local_dir": str(src), "verify": False, "split_seed": 1, "image_size": 16}
    obtain_dataset("imagenet_r__s1", manifest, cfg)
    assert json.loads(manifest.read_text())["files"]["split_seed"] == 1
    ds, idx = dataset_subset("imagenet_r__s1", manifest.parent, "train", cfg)
    assert ds.images.shape[1:] == (16, 16, 3) and len(idx) == len(ds)
    sc = build_scenario("imagenet_r__s1", manifest.parent, cfg, "disjoint", 2, 0, out=tmp_path / "sc.json")
    assert sorted(c for cs in sc.task_classes for c in cs) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="split_seed"):
        dataset_subset("imagenet_r__s1", manifest.parent, "train", dict(cfg, split_seed=2))
    with pytest.raises(ValueError, match="local_dir"):
        obtain_dataset("svhn", tmp_path / "resources" / "svhn" / "MANIFEST.json", {"source": "local"})
