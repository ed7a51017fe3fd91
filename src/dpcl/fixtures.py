"""Small data sets in the real on-disk formats, for the tests and the miniature paper run.

Every writer produces the files an official source ships (Fashion-MNIST and MNIST idx.gz,
the CIFAR python pickles in their .tar.gz, SVHN's MATLAB .mat files, notMNIST.zip of PNGs,
imagenet-r.tar of JPEGs), so the real obtain and load code reads them: only the content
is synthetic. :func:`write_paper_mini` lays out every data set of ``config/paper.yaml`` as
``config/paper_mini.yaml`` expects (command: ``dpcl fixtures paper-mini DIR``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .data.datasets import FASHION_MNIST_FILES, write_idx


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


def make_fake_cifar(root, variant="cifar100", n_train=60, n_test=20, seed=0, balanced=False):
    """Write an archive in the official CIFAR python layout (pickled dicts with bytes keys,
    rows of 3072 bytes = R, G, B planes of 32x32) and return (path, md5, images_by_split).

    Labels are drawn at random, or with ``balanced`` n // classes per class (shuffled) and
    class-dependent images (a colour pattern per class plus noise), as in the real sets."""
    import hashlib
    import io
    import pickle
    import tarfile

    gen = np.random.default_rng(seed)
    n_classes = 100 if variant == "cifar100" else 10
    top = "cifar-100-python" if variant == "cifar100" else "cifar-10-batches-py"
    files, images = {}, {}
    for split, n in (("train", n_train), ("test", n_test)):
        if balanced:
            fine = gen.permutation(np.repeat(np.arange(n_classes), n // n_classes))
            n = len(fine)
            protos = np.random.default_rng(seed + 1).uniform(0, 255, size=(n_classes, 4, 4, 3))
            base = np.kron(protos[fine], np.ones((1, 8, 8, 1)))
            img = np.clip(base + gen.normal(0, 30, base.shape), 0, 255).astype(np.uint8)
        else:
            img = gen.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
            fine = gen.integers(0, n_classes, n)
        rows = img.transpose(0, 3, 1, 2).reshape(n, 3072)
        images[split] = (img, fine)
        if variant == "cifar100":
            files[split] = {
                b"data": rows,
                b"fine_labels": fine.tolist(),
                b"coarse_labels": (fine // 5).tolist(),
                b"filenames": [f"{i}.png".encode() for i in range(n)],
            }
        else:
            parts = np.array_split(np.arange(n), 5) if split == "train" else [np.arange(n)]
            names = [f"data_batch_{i + 1}" for i in range(5)] if split == "train" else ["test_batch"]
            for name, p in zip(names, parts, strict=True):
                files[name] = {b"data": rows[p], b"labels": fine[p].tolist()}
    if variant == "cifar100":
        files["meta"] = {
            b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
            b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)],
        }
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


# --- the paper's other datasets (tests/data/test_datasets_paper.py) ------------------------------


def _md5(path) -> str:
    import hashlib

    return hashlib.md5(path.read_bytes()).hexdigest()


def make_fake_mnist(root, n_train=30, n_test=10, seed=0):
    """Write MNIST's four idx.gz files; return (RemoteFile table with their md5s, arrays by split)."""
    from dpcl.data.datasets import RemoteFile
    from dpcl.data.sources import MNIST_FILES

    gen = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images = gen.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        write_idx(root / MNIST_FILES[f"{split}_images"].name, images)
        write_idx(root / MNIST_FILES[f"{split}_labels"].name, labels)
        arrays[split] = (images, labels)
    table = {k: RemoteFile(f.name, _md5(root / f.name), "") for k, f in MNIST_FILES.items()}
    return table, arrays


def make_fake_svhn(root, n_train=30, n_test=10, seed=0):
    """Write train_32x32.mat / test_32x32.mat as MATLAB v5 files in SVHN's layout
    (X: 32x32x3xN uint8, y: Nx1 with digit 0 stored as 10); return (md5 table, arrays)."""
    import scipy.io

    from dpcl.data.datasets import RemoteFile
    from dpcl.data.sources import SVHN_FILES

    gen = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x = gen.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
        digits = np.arange(n) % 10
        y = np.where(digits == 0, 10, digits).astype(np.uint8).reshape(n, 1)
        scipy.io.savemat(root / SVHN_FILES[split].name, {"X": x, "y": y}, format="5")
        arrays[split] = (x, digits)
    table = {k: RemoteFile(f.name, _md5(root / f.name), "") for k, f in SVHN_FILES.items()}
    return table, arrays


def _png_bytes(img: np.ndarray) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()


def make_fake_notmnist(root, n_train_per_class=4, n_test_per_class=2, n_corrupt=2, seed=0):
    """Write notMNIST.zip as in the paper's copy: notMNIST/{Train,Test}/{A..J}/*.png (28x28 grey),
    plus ``n_corrupt`` unreadable .png files; return (path, md5, {split: {(letter, name): image}})."""
    import zipfile

    gen = np.random.default_rng(seed)
    archive = root / "notMNIST.zip"
    written: dict[str, dict] = {"train": {}, "test": {}}
    with zipfile.ZipFile(archive, "w") as zf:
        for split, folder, per in (("train", "Train", n_train_per_class), ("test", "Test", n_test_per_class)):
            for letter in "ABCDEFGHIJ":
                for i in range(per):
                    img = gen.integers(0, 256, size=(28, 28), dtype=np.uint8)
                    name = f"img{i}.png"
                    zf.writestr(f"notMNIST/{folder}/{letter}/{name}", _png_bytes(img))
                    written[split][(letter, name)] = img
        for i in range(n_corrupt):
            zf.writestr(f"notMNIST/Train/{'AF'[i % 2]}/broken{i}.png", b"\x89PNG\r\n\x1a\n truncated")
    return archive, _md5(archive), written


def make_fake_imagenet_r(root, per_class=(6, 9, 5, 10), n_corrupt=1, seed=0):
    """Write imagenet-r.tar: imagenet-r/<wnid>/*.jpg of varying sizes and aspect ratios, each
    class one flat colour, plus a README and ``n_corrupt`` unreadable JPEGs; also one wide image
    (class 0) whose centre third is red and whose sides are blue, to check the centre crop.
    Returns (path, md5, wnids, colours)."""
    import io
    import tarfile

    from PIL import Image

    gen = np.random.default_rng(seed)
    wnids = [f"n{1440764 + 1000 * c:08d}" for c in range(len(per_class))]
    colours = gen.integers(30, 226, size=(len(per_class), 3)).astype(np.uint8)
    archive = root / "imagenet-r.tar"

    def add(tar, name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(archive, "w") as tar:
        add(tar, "imagenet-r/README.txt", b"ImageNet-R renditions\n")
        for c, (wnid, n) in enumerate(zip(wnids, per_class, strict=True)):
            for i in range(n):
                w, h = int(gen.integers(20, 90)), int(gen.integers(20, 90))
                img = np.broadcast_to(colours[c], (h, w, 3)).copy()
                buf = io.BytesIO()
                Image.fromarray(img).save(buf, format="JPEG", quality=95)
                add(tar, f"imagenet-r/{wnid}/art_{i}.jpg", buf.getvalue())
        wide = np.zeros((40, 120, 3), np.uint8)
        wide[:, :] = (0, 0, 255)
        wide[:, 40:80] = (255, 0, 0)
        buf = io.BytesIO()
        Image.fromarray(wide).save(buf, format="JPEG", quality=95)
        add(tar, f"imagenet-r/{wnids[0]}/wide.jpg", buf.getvalue())
        for i in range(n_corrupt):
            add(tar, f"imagenet-r/{wnids[1]}/broken_{i}.jpg", b"\xff\xd8\xff\xe0 not really a jpeg")
    return archive, _md5(archive), wnids, colours


# --- the miniature paper run (config/paper_mini.yaml) -----------------------------------------

#: Images per class (train, test) of each miniature data set: every class of the real set,
#: a handful of images each (ImageNet-R: images per class before its random 80/20 split).
PAPER_MINI_SIZES = {"cifar100": (8, 4), "imagenet_r": 8, "five_datasets": (24, 4)}


def write_paper_mini(root: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write every data set of ``config/paper.yaml`` in its official format, in miniature,
    where ``config/paper_mini.yaml`` reads them (``local_dir``):

    - ``cifar100/cifar-100-python.tar.gz``: 100 classes, 8 train and 4 test images each;
    - ``imagenet_r/imagenet-r.tar``: 200 classes (WordNet-style ids) of 8 JPEGs of varied
      sizes and aspect ratios, plus one unreadable JPEG, as in the real archive's quirks;
    - ``five_datasets/{mnist,svhn,notmnist,fashion_mnist,cifar10}/``: each source's official
      files (idx.gz, .mat, notMNIST.zip with two broken PNGs, idx.gz, python .tar.gz), 10
      classes of 24 train and 4 test images (App. D.1's tuning subset of CIFAR-10, 14.28 % of
      a task's nominal size, then holds 3 images per class).

    The content is synthetic (seeded noise and colour patterns), so a run on it checks that
    the whole workflow executes, not the published accuracies. Returns {data set: folder}.
    """
    root = Path(root)
    out = {name: root / name for name in ("cifar100", "imagenet_r", "five_datasets")}
    for d in out.values():
        d.mkdir(parents=True, exist_ok=True)
    tr, te = PAPER_MINI_SIZES["cifar100"]
    make_fake_cifar(out["cifar100"], "cifar100", n_train=100 * tr, n_test=100 * te, seed=seed, balanced=True)
    make_fake_imagenet_r(
        out["imagenet_r"], per_class=(PAPER_MINI_SIZES["imagenet_r"],) * 200, n_corrupt=1, seed=seed
    )
    tr, te = PAPER_MINI_SIZES["five_datasets"]
    five = out["five_datasets"]
    for i, name in enumerate(("mnist", "svhn", "notmnist", "fashion_mnist", "cifar10")):
        d = five / name
        d.mkdir(exist_ok=True)
        s = seed + 10 * (i + 1)
        if name == "mnist":
            make_fake_mnist(d, n_train=10 * tr, n_test=10 * te, seed=s)
        elif name == "svhn":
            make_fake_svhn(d, n_train=10 * tr, n_test=10 * te, seed=s)
        elif name == "notmnist":
            make_fake_notmnist(d, n_train_per_class=tr, n_test_per_class=te, n_corrupt=2, seed=s)
        elif name == "fashion_mnist":
            make_fake_fashion_mnist(d, n_train_per_class=tr, n_test_per_class=te, seed=s)
        else:
            make_fake_cifar(d, "cifar10", n_train=10 * tr, n_test=10 * te, seed=s, balanced=True)
    (root / "README.txt").write_text(
        "Synthetic data sets in the official file formats, written by `dpcl fixtures paper-mini`\n"
        "for the miniature paper run (config/paper_mini.yaml). Not real data: accuracies on them\n"
        "mean nothing.\n"
    )
    return out
