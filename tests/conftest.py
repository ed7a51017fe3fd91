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
