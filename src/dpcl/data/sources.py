"""The paper's other datasets ([LabelSpace] App. E "Datasets" and "Licenses"): MNIST, SVHN,
notMNIST, ImageNet-R and the composite 5-datasets. (One concept in one module: the acquisition
and loaders of the paper's data sets beyond Fashion-MNIST and CIFAR, which share its helpers.)

Every ``obtain_*`` places the official file(s) in a resources folder (copied from
``local_dir`` when the user put them there by hand, else downloaded from the official
mirrors with retries and an md5 check where a checksum is published), and every
``load_*`` returns an :class:`~dpcl.data.datasets.ImageDataset` of uint8 images.

Datasets whose raw form is a folder of image files (notMNIST, ImageNet-R) are decoded
once at obtain time into ``{split}_images.npy`` / ``{split}_labels.npy`` beside a
``dataset.json`` (classes, options, counts, skipped files); the loaders memory-map the
arrays, so reading the labels costs nothing and the images are paged in only when the
feature extractor reads them. The 5-datasets composite is written the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from ..io import atomic_path, log, progress_stream, write_json
from ..seeding import rng
from .datasets import (
    DatasetError,
    ImageDataset,
    RemoteFile,
    _digest,
    _download,
    read_idx,
)

_NO_CHECK = "no-check"


def _log(msg: str) -> None:
    log(msg)


def fetch(
    f: RemoteFile,
    dest: str | Path,
    urls: tuple[str, ...],
    local_dir: str | Path | None = None,
    *,
    verify: bool = True,
    retries: int = 3,
    dataset: str = "",
) -> Path:
    """Put ``f.name`` in ``dest``: a copy from ``local_dir`` if it holds the file, else a
    verified copy already in ``dest``, else a download; md5-checked when ``f.md5`` is known."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / f.name
    check = verify and bool(f.md5)
    if local_dir is not None and (Path(local_dir) / f.name).is_file():
        with atomic_path(target) as tmp:
            shutil.copyfile(Path(local_dir) / f.name, tmp)
        got = _digest(target, "md5") if check else f.md5
        if got != f.md5:
            target.unlink()
            raise DatasetError(
                f"{f.name} in {local_dir}: md5 {got} does not match the official {f.md5} "
                f"(set datasets.{dataset}.verify: false only for your own test copies)"
            )
    elif not target.is_file() or (check and _digest(target, "md5") != f.md5):
        hint = (
            f"If this machine is offline, download {urls[0]}{f.name} on a machine with internet and "
            f"place it by hand in {dest} (or in the folder given by datasets.{dataset}.local_dir)."
        )
        _download(urls, f.name, target, f.md5 if check else _NO_CHECK, retries=retries, hint=hint)
    if not f.md5:
        _log(
            f"{f.name}: no published checksum; sha256 {_digest(target, 'sha256')} (recorded in the manifest)"
        )
    return target


# --- decoded-array storage ----------------------------------------------------------------


def _write_split(dest: Path, split: str, images: np.ndarray, labels: np.ndarray) -> None:
    with atomic_path(dest / f"{split}_images.npy", suffix=".npy") as tmp, open(tmp, "wb") as fh:
        np.save(fh, np.ascontiguousarray(images, dtype=np.uint8))
    with atomic_path(dest / f"{split}_labels.npy", suffix=".npy") as tmp, open(tmp, "wb") as fh:
        np.save(fh, np.asarray(labels, dtype=np.int64))


def read_dataset_meta(root: str | Path) -> dict:
    """The ``dataset.json`` written at obtain time (classes, options, counts, skipped files)."""
    path = Path(root) / "dataset.json"
    if not path.is_file():
        raise DatasetError(f"{path} is missing: obtain the dataset first (rule obtain_dataset)")
    return json.loads(path.read_text())


def _load_split(root: str | Path, split: str, kind: str) -> ImageDataset:
    """Memory-mapped images and labels of a decoded split, checked against dataset.json."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = Path(root)
    meta = read_dataset_meta(root)
    if meta.get("dataset") != kind:
        raise DatasetError(f"{root}/dataset.json describes {meta.get('dataset')!r}, not {kind!r}")
    try:
        images = np.load(root / f"{split}_images.npy", mmap_mode="r")
        labels = np.load(root / f"{split}_labels.npy").astype(np.int64)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read the {split} arrays of {kind} in {root}: {exc}") from exc
    if len(images) != len(labels) or len(labels) != meta["counts"][split]:
        raise DatasetError(
            f"{root}: {split} has {len(images)} images and {len(labels)} labels; "
            f"dataset.json says {meta['counts'][split]}"
        )
    return ImageDataset(images=images, labels=labels, classes=tuple(meta["classes"]))


def check_obtained_options(name: str, root: str | Path, cfg: dict) -> None:
    """Refuse a config whose split/decoding options differ from those the data was obtained with."""
    path = Path(root) / "dataset.json"
    if not path.is_file():
        return
    have = json.loads(path.read_text()).get("options", {})
    for key, value in have.items():
        if key in cfg and cfg[key] is not None and cfg[key] != value:
            raise ValueError(
                f"config key 'datasets.{name}.{key}': value {cfg[key]!r} differs from {value!r}, "
                f"with which {root} was obtained; rerun obtain_dataset (snakemake reruns it when "
                "the dataset's config changes) or declare a variant, e.g. "
                f"datasets.{name.split('__')[0]}__{key}{cfg[key]}"
            )


def random_split(n: int, test_fraction: float, seed: int, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, test) indices of a uniformly random split of n samples (not stratified)."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    perm = rng(seed, key, "train_test_split").permutation(n)
    n_test = int(round(test_fraction * n))
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


# --- MNIST ([LeCun2010]): idx.gz, the same format as Fashion-MNIST -------------------

MNIST_URLS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
MNIST_FILES = {
    # md5 of the official archives (as used by torchvision.datasets.MNIST)
    "train_images": RemoteFile("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", ""),
    "train_labels": RemoteFile("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432", ""),
    "test_images": RemoteFile("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3", ""),
    "test_labels": RemoteFile("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c", ""),
}
MNIST_CLASSES = tuple(str(d) for d in range(10))


def obtain_mnist(
    dest: str | Path,
    local_dir: str | Path | None = None,
    urls: tuple[str, ...] = MNIST_URLS,
    files: dict[str, RemoteFile] | None = None,
    retries: int = 3,
    verify: bool = True,
) -> dict[str, Path]:
    """Place the four MNIST idx.gz files in ``dest`` (local copy or md5-checked download)."""
    files = MNIST_FILES if files is None else files
    return {
        k: fetch(f, dest, urls, local_dir, verify=verify, retries=retries, dataset="mnist")
        for k, f in files.items()
    }


def load_idx_split(
    root: str | Path, split: str, files: dict[str, RemoteFile], classes: tuple[str, ...]
) -> ImageDataset:
    """A ``train``/``test`` split stored as idx(.gz) image and label files (MNIST layout)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = Path(root)
    images = read_idx(root / files[f"{split}_images"].name)
    labels = read_idx(root / files[f"{split}_labels"].name).astype(np.int64)
    if images.ndim != 3 or len(images) != len(labels):
        raise DatasetError(f"{root}: {split} images {images.shape} do not match labels {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= len(classes)):
        raise DatasetError(f"{root}: {split} labels outside 0..{len(classes) - 1}")
    return ImageDataset(images=images.astype(np.uint8), labels=labels, classes=classes)


def load_mnist(root: str | Path, split: str) -> ImageDataset:
    """MNIST ``train`` (60,000) or ``test`` (10,000): 28×28 grey digits."""
    return load_idx_split(root, split, MNIST_FILES, MNIST_CLASSES)


# --- SVHN ([Netzer2011]): cropped digits, MATLAB v5 .mat files ---------------------

SVHN_URLS = ("http://ufldl.stanford.edu/housenumbers/",)
SVHN_FILES = {
    # md5 as used by torchvision.datasets.SVHN
    "train": RemoteFile("train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373", ""),
    "test": RemoteFile("test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3", ""),
}
SVHN_CLASSES = MNIST_CLASSES


def obtain_svhn(
    dest: str | Path,
    local_dir: str | Path | None = None,
    urls: tuple[str, ...] = SVHN_URLS,
    files: dict[str, RemoteFile] | None = None,
    retries: int = 3,
    verify: bool = True,
) -> dict[str, Path]:
    """Place train_32x32.mat and test_32x32.mat in ``dest`` (local copy or md5-checked download)."""
    files = SVHN_FILES if files is None else files
    return {
        k: fetch(f, dest, urls, local_dir, verify=verify, retries=retries, dataset="svhn")
        for k, f in files.items()
    }


def load_svhn(root: str | Path, split: str) -> ImageDataset:
    """SVHN ``train`` (73,257) or ``test`` (26,032) as (N, 32, 32, 3) RGB; label 10 (digit 0) -> 0."""
    import scipy.io

    if split not in SVHN_FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    path = Path(root) / SVHN_FILES[split].name
    try:
        mat = scipy.io.loadmat(path, variable_names=["X", "y"])
    except Exception as exc:  # scipy raises several types here (MatReadError, NotImplementedError for v7.3)
        raise DatasetError(f"cannot read {path} as a MATLAB v5 file: {exc!r}") from exc
    if "X" not in mat or "y" not in mat:
        raise DatasetError(f"{path} lacks the variables X and y")
    x, y = mat["X"], np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != len(y):
        raise DatasetError(f"{path}: X has shape {x.shape}, expected (32, 32, 3, {len(y)})")
    if y.size and (y.min() < 1 or y.max() > 10):
        raise DatasetError(f"{path}: labels outside 1..10 (SVHN stores digit 0 as 10)")
    y[y == 10] = 0
    return ImageDataset(
        images=np.ascontiguousarray(x.transpose(3, 0, 1, 2), dtype=np.uint8), labels=y, classes=SVHN_CLASSES
    )


# --- notMNIST ([Bulatov2011]), the paper's copy from Adversarial-Continual-Learning ----------

# [LabelSpace] App. E: "notMNIST ... the version at git hash 339df59 found at
# github.com/facebookresearch/Adversarial-Continual-Learning/blob/main/data/notMNIST.zip",
# the 5-datasets copy of [Ebrahimi2020]: notMNIST/{Train,Test}/{A..J}/*.png (28x28 grey),
# a fixed train/test split. No checksum is published; the manifest records its sha256.
NOTMNIST_URLS = (
    "https://github.com/facebookresearch/Adversarial-Continual-Learning/raw/"
    "339df592ea502f811685f1810a9e618f5e08c132/data/",
    "https://github.com/facebookresearch/Adversarial-Continual-Learning/raw/main/data/",
)
NOTMNIST_FILE = RemoteFile("notMNIST.zip", "", "")
NOTMNIST_CLASSES = tuple("ABCDEFGHIJ")
_NOTMNIST_MEMBER = re.compile(r"(?:^|/)(train|test)/([A-J])/[^/]+\.png$", re.IGNORECASE)


def _decode(data: bytes, mode: str):
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        im.load()
        return im.convert(mode)


def obtain_notmnist(
    dest: str | Path,
    local_dir: str | Path | None = None,
    urls: tuple[str, ...] = NOTMNIST_URLS,
    file: RemoteFile = NOTMNIST_FILE,
    retries: int = 3,
    verify: bool = True,
) -> dict[str, str]:
    """Fetch notMNIST.zip and decode its Train/Test PNGs into uint8 arrays (N, 28, 28).

    Unreadable or non-28×28 files (the notMNIST folders hold a few) are skipped; their
    count and names are logged and recorded in dataset.json.
    """
    dest = Path(dest)
    archive = fetch(file, dest, urls, local_dir, verify=verify, retries=retries, dataset="notmnist")
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as exc:
        raise DatasetError(f"{archive} is not a zip archive: {exc}") from exc
    per_split: dict[str, tuple[list, list]] = {"train": ([], []), "test": ([], [])}
    skipped: list[str] = []
    with zf:
        for name in sorted(zf.namelist()):
            m = _NOTMNIST_MEMBER.search(name)
            if not m:
                continue
            try:
                img = np.asarray(_decode(zf.read(name), "L"), dtype=np.uint8)
            except Exception:  # PIL raises many kinds on truncated/corrupt files
                skipped.append(name)
                continue
            if img.shape != (28, 28):
                skipped.append(name)
                continue
            images, labels = per_split[m.group(1).lower()]
            images.append(img)
            labels.append(ord(m.group(2).upper()) - ord("A"))
    if not per_split["train"][0] or not per_split["test"][0]:
        raise DatasetError(
            f"{archive} has no notMNIST/Train/<A-J>/*.png and notMNIST/Test/<A-J>/*.png images"
        )
    if skipped:
        _log(f"notMNIST: skipped {len(skipped)} unreadable image(s): {', '.join(skipped[:5])}")
    for split, (images, labels) in per_split.items():
        _write_split(dest, split, np.stack(images), np.asarray(labels))
    counts = {s: len(v[1]) for s, v in per_split.items()}
    write_json(
        dest / "dataset.json",
        {
            "dataset": "notmnist",
            "classes": NOTMNIST_CLASSES,
            "counts": counts,
            "skipped": skipped,
            "archive_sha256": _digest(archive, "sha256"),
            "options": {},
        },
    )
    return {"archive": archive.name, "counts": counts, "skipped": len(skipped)}


def load_notmnist(root: str | Path, split: str) -> ImageDataset:
    """notMNIST letters A-J, the fixed Train/Test split of the paper's archive (28×28 grey)."""
    return _load_split(root, split, "notmnist")


# --- ImageNet-R ([Hendrycks2021]) ----------------------------------------------------

IMAGENET_R_URLS = ("https://people.eecs.berkeley.edu/~hendrycks/",)
# md5 of imagenet-r.tar as recorded when this loader was written; not yet confirmed against a
# checksum the authors publish (none could be fetched offline).
IMAGENET_R_FILE = RemoteFile("imagenet-r.tar", "a61312130a589d0ca1a8fca1f2bd5337", "")
_IMAGENET_R_MEMBER = re.compile(r"(?:^|/)(n\d{8})/([^/]+\.(?:jpe?g|png))$", re.IGNORECASE)


def decode_square(data: bytes, size: int) -> np.ndarray:
    """Decode an image to RGB, resize its shorter side to ``size`` (bicubic), centre-crop a square.

    ImageNet-R images vary in size and aspect; a square centre crop at the backbone's
    input resolution keeps the full extent of the shorter side.
    """
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        im.draft("RGB", (size, size))  # JPEG: decode at a reduced scale that is still >= size
        im = im.convert("RGB")
        w, h = im.size
        scale = size / min(w, h)
        nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
        im = im.resize((nw, nh), Image.BICUBIC)
        left, top = (nw - size) // 2, (nh - size) // 2
        return np.asarray(im.crop((left, top, left + size, top + size)), dtype=np.uint8)


def obtain_imagenet_r(
    dest: str | Path,
    local_dir: str | Path | None = None,
    *,
    split_seed: int = 0,
    image_size: int = 224,
    test_fraction: float = 0.2,
    urls: tuple[str, ...] = IMAGENET_R_URLS,
    file: RemoteFile = IMAGENET_R_FILE,
    retries: int = 3,
    verify: bool = True,
    progress: bool = True,
) -> dict:
    """Fetch imagenet-r.tar, split it 80/20 at random with ``split_seed`` and decode both splits.

    The split is uniform over all 30,000 images ([LabelSpace] App. E: "a random 80/20%
    train/test split across the whole dataset"; train classes then hold 41-334 images).
    Images are read straight from the tar (no 30,000-file extraction), resized to
    ``image_size`` squares (:func:`decode_square`) and written to memory-mappable .npy
    files: 30,000 × 224² × 3 bytes = 4.5 GB on disk; loading the labels reads none of it.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    archive = fetch(file, dest, urls, local_dir, verify=verify, retries=retries, dataset="imagenet_r")
    try:
        tar = tarfile.open(archive, "r:*")
    except tarfile.TarError as exc:
        raise DatasetError(f"{archive} is not a tar archive: {exc}") from exc
    with tar:
        members = {}
        for m in tar.getmembers():
            hit = _IMAGENET_R_MEMBER.search(m.name)
            if hit and m.isfile():
                members[(hit.group(1), hit.group(2))] = m
        if not members:
            raise DatasetError(f"{archive} holds no imagenet-r/<wnid>/<image> files")
        keys = sorted(members)  # canonical order: (WordNet id, file name), independent of the tar's
        classes = sorted({wnid for wnid, _ in keys})
        labels = np.array([classes.index(wnid) for wnid, _ in keys], dtype=np.int64)
        train, test = random_split(len(keys), test_fraction, split_seed, "imagenet_r")
        where = {}
        for split, idx in (("train", train), ("test", test)):
            for pos, i in enumerate(idx):
                where[members[keys[i]].name] = (split, pos)
        with contextlib.ExitStack() as stack:
            arrays, ok, skipped = {}, {}, []
            for split, idx in (("train", train), ("test", test)):
                tmp = stack.enter_context(atomic_path(dest / f"{split}_images.npy", suffix=".npy"))
                arrays[split] = np.lib.format.open_memmap(
                    tmp, mode="w+", dtype=np.uint8, shape=(len(idx), image_size, image_size, 3)
                )  # written in place: the decoded splits never sit in memory whole
                ok[split] = np.zeros(len(idx), bool)
            bar_out = progress_stream()
            with tqdm(
                total=len(keys),
                desc="imagenet_r decode",
                unit="img",
                disable=not progress or bar_out is None,
                file=bar_out,
            ) as bar:
                for m in tar:  # stream in tar order: one sequential read of the archive
                    if m.name not in where:
                        continue
                    split, pos = where[m.name]
                    try:
                        arrays[split][pos] = decode_square(tar.extractfile(m).read(), image_size)
                        ok[split][pos] = True
                    except Exception:  # truncated or corrupt image files
                        skipped.append(m.name)
                    bar.update(1)
            for a in arrays.values():
                a.flush()
            if skipped:  # rare: rewrite the affected split without the unreadable images
                _log(f"ImageNet-R: skipped {len(skipped)} unreadable image(s): {', '.join(skipped[:5])}")
                compact = {s: np.asarray(a[ok[s]]) for s, a in arrays.items() if not ok[s].all()}
            else:
                compact = {}
            arrays.clear()
    counts = {}
    for split, idx in (("train", train), ("test", test)):
        if split in compact:
            _write_split(dest, split, compact[split], labels[idx][ok[split]])
        else:
            with atomic_path(dest / f"{split}_labels.npy", suffix=".npy") as tmp, open(tmp, "wb") as fh:
                np.save(fh, labels[idx])
        counts[split] = int(ok[split].sum())
    options = {"split_seed": int(split_seed), "image_size": int(image_size)}
    write_json(
        dest / "dataset.json",
        {
            "dataset": "imagenet_r",
            "classes": classes,
            "counts": counts,
            "skipped": skipped,
            "options": options,
            "test_fraction": test_fraction,
        },
    )
    return {"archive": archive.name, "counts": counts, "skipped": len(skipped), **options}


def load_imagenet_r(root: str | Path, split: str) -> ImageDataset:
    """ImageNet-R ``train``/``test`` as obtained (split seed and image size in dataset.json);
    images are a read-only memory map (N, S, S, 3)."""
    return _load_split(root, split, "imagenet_r")


# --- 5-datasets ([Ebrahimi2020]; [LabelSpace] App. F.5) ----------------------------------

FIVE_DATASETS = ("mnist", "svhn", "notmnist", "fashion_mnist", "cifar10")


def to_rgb32(images: np.ndarray) -> np.ndarray:
    """uint8 (N, 28, 28) grey -> (N, 32, 32, 3): zero-pad 2 pixels per side (the 5-datasets
    convention, e.g. GPM's Pad(2)) and repeat the channel; (N, 32, 32, 3) is kept."""
    images = np.asarray(images, dtype=np.uint8)
    if images.ndim == 3 and images.shape[1:] == (28, 28):
        padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
        return np.repeat(padded[..., None], 3, axis=3)
    if images.ndim == 4 and images.shape[1:] == (32, 32, 3):
        return images
    raise DatasetError(f"cannot convert images of shape {images.shape} to 32x32 RGB")


def obtain_five_datasets(
    dest: str | Path,
    local_dir: str | Path | None = None,
    verify: bool = True,
    retries: int = 3,
    overrides: dict[str, dict] | None = None,
) -> dict:
    """Obtain the five source datasets into ``dest/raw/<name>`` and write the 50-class composite.

    ``local_dir``, if given, may hold one sub-folder per source named as in
    :data:`FIVE_DATASETS` with that dataset's official files (sources without one are
    downloaded; Fashion-MNIST also comes from Debian's package). Label of a sample =
    10 · position of its source in :data:`FIVE_DATASETS` + its class; images are 32×32 RGB.
    ``overrides`` passes extra arguments (mirrors, file tables) to a source's obtain function.
    """
    from .datasets import load_cifar10, load_fashion_mnist, obtain_cifar, obtain_fashion_mnist

    loaders = {
        "mnist": load_mnist,
        "svhn": load_svhn,
        "notmnist": load_notmnist,
        "fashion_mnist": load_fashion_mnist,
        "cifar10": load_cifar10,
    }
    dest = Path(dest)
    overrides = overrides or {}
    listing = {}
    for name in FIVE_DATASETS:
        sub = dest / "raw" / name
        own = Path(local_dir) / name if local_dir is not None and (Path(local_dir) / name).is_dir() else None
        kw = dict(overrides.get(name, {}))
        if name == "fashion_mnist":
            obtain_fashion_mnist(
                sub, source="local" if own else "auto", local_dir=own, verify=verify, retries=retries, **kw
            )
        elif name == "cifar10":
            obtain_cifar("cifar10", sub, local_dir=own, verify=verify, retries=retries, **kw)
        else:
            {"mnist": obtain_mnist, "svhn": obtain_svhn, "notmnist": obtain_notmnist}[name](
                sub, local_dir=own, verify=verify, retries=retries, **kw
            )
        listing[name] = str(sub.relative_to(dest))
    counts: dict[str, int] = {}
    per_source: dict[str, dict[str, int]] = {}
    classes: list[str] = []
    for split in ("train", "test"):
        images, labels = [], []
        for pos, name in enumerate(FIVE_DATASETS):
            ds = loaders[name](dest / "raw" / name, split)
            if len(ds.classes) != 10:
                raise DatasetError(f"5-datasets: {name} has {len(ds.classes)} classes, expected 10")
            images.append(to_rgb32(ds.images))
            labels.append(10 * pos + ds.labels)
            per_source.setdefault(name, {})[split] = len(ds.labels)
            if split == "train":
                classes += [f"{name}:{c}" for c in ds.classes]
        _write_split(dest, split, np.concatenate(images), np.concatenate(labels))
        counts[split] = int(sum(len(v) for v in labels))
    write_json(
        dest / "dataset.json",
        {
            "dataset": "five_datasets",
            "classes": classes,
            "counts": counts,
            "sources": list(FIVE_DATASETS),
            "per_source": per_source,
            "options": {},
        },
    )
    return {"sources": listing, "counts": counts}


def load_five_datasets(root: str | Path, split: str) -> ImageDataset:
    """The 50-class composite (label // 10 = source position in FIVE_DATASETS), 32×32 RGB."""
    return _load_split(root, split, "five_datasets")


__all__ = [
    "FIVE_DATASETS",
    "MNIST_FILES",
    "SVHN_FILES",
    "check_obtained_options",
    "decode_square",
    "fetch",
    "load_five_datasets",
    "load_imagenet_r",
    "load_mnist",
    "load_notmnist",
    "load_svhn",
    "obtain_five_datasets",
    "obtain_imagenet_r",
    "obtain_mnist",
    "obtain_notmnist",
    "obtain_svhn",
    "random_split",
    "read_dataset_meta",
    "to_rgb32",
]
