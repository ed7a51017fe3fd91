"""Shared fixtures: small datasets written by the tests in the real on-disk formats."""

from __future__ import annotations

import numpy as np
import pytest

from dpcl.data.datasets import FASHION_MNIST_FILES, write_idx


def make_fake_fashion_mnist(root, n_train_per_class=40, n_test_per_class=10, n_classes=10, seed=0):
    """Write idx.gz files in Fashion-MNIST's layout with class-dependent 28×28 images.

    Each class is a distinct blurred blob pattern plus noise, so features separate the
    classes; returns the RemoteFile table with this data's content digests.
    """
    import gzip
    import hashlib

    from dpcl.data.datasets import RemoteFile

    gen = np.random.default_rng(seed)
    protos = gen.uniform(0, 255, size=(n_classes, 7, 7))
    for split, per in (("train", n_train_per_class), ("test", n_test_per_class)):
        labels = np.repeat(np.arange(n_classes), per).astype(np.uint8)
        gen.shuffle(labels)
        base = np.kron(protos[labels], np.ones((4, 4)))
        images = np.clip(base + gen.normal(0, 40, base.shape), 0, 255).astype(np.uint8)
        prefix = "train" if split == "train" else "t10k"
        write_idx(root / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", labels)
    files = {}
    for key, f in FASHION_MNIST_FILES.items():
        data = (root / f.name).read_bytes()
        files[key] = RemoteFile(
            f.name, hashlib.md5(data).hexdigest(), hashlib.sha256(gzip.decompress(data)).hexdigest()
        )
    return files


@pytest.fixture
def fake_fmnist(tmp_path):
    root = tmp_path / "raw"
    root.mkdir()
    files = make_fake_fashion_mnist(root)
    return root, files


def make_fake_cifar(root, variant="cifar100", n_train=60, n_test=20, seed=0):
    """Write an archive in the official CIFAR python layout (pickled dicts with bytes keys,
    rows of 3072 bytes = R, G, B planes of 32x32) and return (path, md5, images_by_split)."""
    import hashlib
    import io
    import pickle
    import tarfile

    gen = np.random.default_rng(seed)
    n_classes = 100 if variant == "cifar100" else 10
    top = "cifar-100-python" if variant == "cifar100" else "cifar-10-batches-py"
    files, images = {}, {}
    for split, n in (("train", n_train), ("test", n_test)):
        img = gen.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
        fine = gen.integers(0, n_classes, n)
        rows = img.transpose(0, 3, 1, 2).reshape(n, 3072)
        images[split] = (img, fine)
        if variant == "cifar100":
            files[split] = {b"data": rows, b"fine_labels": fine.tolist(), b"coarse_labels": (fine // 5).tolist(),
                            b"filenames": [f"{i}.png".encode() for i in range(n)]}  # fmt: skip
        else:
            parts = np.array_split(np.arange(n), 5) if split == "train" else [np.arange(n)]
            names = [f"data_batch_{i + 1}" for i in range(5)] if split == "train" else ["test_batch"]
            for name, p in zip(names, parts, strict=True):
                files[name] = {b"data": rows[p], b"labels": fine[p].tolist()}
    if variant == "cifar100":
        files["meta"] = {b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
                         b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)]}  # fmt: skip
        archive = root / "cifar-100-python.tar.gz"
    else:
        files["batches.meta"] = {b"label_names": [f"class{i}".encode() for i in range(10)]}
        archive = root / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, obj in files.items():
            data = pickle.dumps(obj, protocol=2)
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive, hashlib.md5(archive.read_bytes()).hexdigest(), images
