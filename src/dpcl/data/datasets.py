"""Dataset acquisition and loading: the idx format, Fashion-MNIST and CIFAR-10/100, and the helpers
(download, digests) the other data sets share (:mod:`dpcl.data.sources`). Which data sets exist and
how each is obtained and loaded is the registry's (:mod:`dpcl.data.registry`).

Fashion-MNIST ([Xiao2017]) is the embedded default's dataset: taken from the
Debian package ``dataset-fashion-mnist`` (idx files under
/usr/share/datasets/fashion-mnist) when present, else downloaded from the official
location with checksum verification.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import struct
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io import atomic_path

# idx type codes (LeCun's format): 0x08 unsigned byte, 0x09 signed byte, 0x0B short,
# 0x0C int, 0x0D float, 0x0E double. Multi-byte values are big-endian.
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_IDX_CODES = {np.dtype(v).newbyteorder(">"): k for k, v in _IDX_DTYPES.items()}


class DatasetError(RuntimeError):
    """A dataset file is missing, corrupt, or could not be obtained."""


def read_idx(path: str | Path) -> np.ndarray:
    """Read an idx file (optionally gzip-compressed) into a native-endian array."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError) as exc:
        raise DatasetError(f"cannot read idx file {path}: {exc}") from exc
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DatasetError(f"{path} is not an idx file (bad magic number)")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise DatasetError(f"{path}: unknown idx type code 0x{code:02x}")
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(dims)) * dtype.itemsize
    payload = data[4 + 4 * ndim :]
    if len(payload) != expected:
        raise DatasetError(
            f"{path}: header says {dims} ({expected} bytes) but payload has {len(payload)} bytes"
        )
    return np.frombuffer(payload, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


def write_idx(path: str | Path, array: np.ndarray) -> None:
    """Write ``array`` as an idx file (gzip-compressed if the name ends in .gz), atomically."""
    array = np.asarray(array)
    be = array.dtype.newbyteorder(">")
    if be not in _IDX_CODES:
        raise ValueError(f"dtype {array.dtype} has no idx type code")
    header = bytes([0, 0, _IDX_CODES[be], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(be).tobytes()
    path = Path(path)
    with atomic_path(path) as tmp:
        if path.suffix == ".gz":
            with gzip.GzipFile(tmp, "wb", mtime=0) as fh:
                fh.write(payload)
        else:
            tmp.write_bytes(payload)


@dataclass(frozen=True)
class RemoteFile:
    name: str
    md5: str  # of the file as served (the official .gz)
    content_sha256: str  # of the decompressed idx payload


FASHION_MNIST_URLS = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
)
FASHION_MNIST_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_FILES = {
    # md5 of the official archives (zalandoresearch/fashion-mnist README); content sha256
    # measured on the decompressed idx files of Debian's dataset-fashion-mnist package.
    "train_images": RemoteFile(
        "train-images-idx3-ubyte.gz",
        "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    ),
    "train_labels": RemoteFile(
        "train-labels-idx1-ubyte.gz",
        "25c81989df183df01b3e8a0aad5dffbe",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    ),
    "test_images": RemoteFile(
        "t10k-images-idx3-ubyte.gz",
        "bef4ecab320f06d8554ea6380940ec79",
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    ),
    "test_labels": RemoteFile(
        "t10k-labels-idx1-ubyte.gz",
        "bb300cfdad3c16e7a12a480ee83cd310",
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    ),
}
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def _digest(path: Path, algo: str, decompress: bool = False) -> str:
    h = hashlib.new(algo)
    opener = gzip.open if decompress else open
    with opener(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(
    urls: tuple[str, ...], name: str, dest: Path, md5: str, retries: int = 3, hint: str | None = None
) -> None:
    """Fetch ``name`` from the first mirror that serves it, retrying with back-off; check its md5.

    ``hint`` replaces the default advice (Fashion-MNIST's) on how to place the file by hand.
    """
    errors = []
    for base in urls:
        url = base + name
        for attempt in range(retries):
            try:
                with atomic_path(dest) as tmp:
                    with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
                        shutil.copyfileobj(resp, out)
                    got = _digest(tmp, "md5")
                    if md5 != "no-check" and got != md5:
                        raise DatasetError(f"checksum mismatch for {url}: md5 {got}, expected {md5}")
                return
            except (urllib.error.URLError, OSError, DatasetError) as exc:
                errors.append(f"{url} (try {attempt + 1}): {exc}")
                if isinstance(exc, DatasetError):
                    break
                time.sleep(min(2**attempt, 10) if attempt + 1 < retries else 0)
    advice = hint or (
        "If this machine is offline, install Debian's "
        f"dataset-fashion-mnist package, or place the official {name} in {dest.parent} by hand."
    )
    raise DatasetError(f"could not download {name}:\n  " + "\n  ".join(errors) + "\n" + advice)


def obtain_fashion_mnist(
    dest: str | Path,
    source: str = "auto",
    local_dir: str | Path | None = None,
    *,
    urls: tuple[str, ...] = FASHION_MNIST_URLS,
    files: dict[str, RemoteFile] | None = None,
    retries: int = 3,
    verify: bool = True,
) -> dict[str, Path]:
    """Place the four Fashion-MNIST idx.gz files in ``dest`` and verify them.

    ``source``: ``"local"`` copies from ``local_dir`` (default: Debian's package folder),
    ``"download"`` fetches from ``urls`` and checks the official md5, ``"auto"`` uses the
    local folder when it has all files and downloads otherwise. The decompressed
    content is checked against known SHA-256 digests unless ``verify`` is False (for
    users' own test copies in the same format).
    """
    files = FASHION_MNIST_FILES if files is None else files
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    local = Path(local_dir) if local_dir is not None else FASHION_MNIST_DEBIAN_DIR
    if source not in ("auto", "local", "download"):
        raise ValueError(f"source must be 'auto', 'local' or 'download', got {source!r}")
    have_local = all((local / f.name).is_file() for f in files.values())
    if source == "local" and not have_local:
        missing = [f.name for f in files.values() if not (local / f.name).is_file()]
        raise DatasetError(f"source 'local': {local} lacks {', '.join(missing)}")
    use_local = source == "local" or (source == "auto" and have_local)
    out = {}
    for key, f in files.items():
        target = dest / f.name
        if use_local:
            with atomic_path(target) as tmp:
                shutil.copyfile(local / f.name, tmp)
        else:
            _download(urls, f.name, target, f.md5, retries=retries)
        got = _digest(target, "sha256", decompress=True) if verify else f.content_sha256
        if got != f.content_sha256:
            target.unlink()
            raise DatasetError(
                f"{f.name}: decompressed content sha256 {got} does not match the known {f.content_sha256}"
            )
        out[key] = target
    return out


@dataclass
class ImageDataset:
    """Images as uint8 (N, H, W) or (N, H, W, C), integer labels, class names."""

    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.labels)


def load_fashion_mnist(root: str | Path, split: str) -> ImageDataset:
    """Load the ``train`` or ``test`` split from the idx.gz files in ``root``."""
    root = Path(root)
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    images = read_idx(root / FASHION_MNIST_FILES[f"{split}_images"].name)
    labels = read_idx(root / FASHION_MNIST_FILES[f"{split}_labels"].name).astype(np.int64)
    if images.ndim != 3 or len(images) != len(labels):
        raise DatasetError(f"{root}: {split} images {images.shape} do not match labels {labels.shape}")
    return ImageDataset(images=images, labels=labels, classes=FASHION_MNIST_CLASSES)


def select_per_class(labels: np.ndarray, per_class: int | None, seed: int) -> np.ndarray:
    """Sorted indices of a fixed random subset with at most ``per_class`` samples per class.

    The subset defines the benchmark (it is the same for every run seed), so cached
    features can be shared by all runs. ``None`` keeps everything.
    """
    labels = np.asarray(labels)
    if per_class is None:
        return np.arange(len(labels))
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1 or None, got {per_class}")
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x5EB5E7])))
    keep = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        keep.append(np.sort(gen.permutation(idx)[:per_class]))
    return np.sort(np.concatenate(keep))


# --- CIFAR-10 / CIFAR-100 ([Krizhevsky2009]), the official python-pickle archives --------

CIFAR_URLS = ("https://www.cs.toronto.edu/~kriz/",)
CIFAR_ARCHIVES = {
    # md5 of the official archives (as published on the CIFAR page and used by torchvision)
    "cifar10": RemoteFile("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a", ""),
    "cifar100": RemoteFile("cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85", ""),
}
_CIFAR_DIRS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}


def obtain_cifar(
    name: str,
    dest: str | Path,
    local_dir: str | Path | None = None,
    *,
    urls: tuple[str, ...] = CIFAR_URLS,
    archives: dict[str, RemoteFile] | None = None,
    retries: int = 3,
    verify: bool = True,
) -> Path:
    """Download (or copy from ``local_dir``) the official CIFAR archive, check its md5 and
    extract it into ``dest``; returns the extracted folder."""
    import tarfile

    archives = CIFAR_ARCHIVES if archives is None else archives
    if name not in archives:
        raise ValueError(f"unknown CIFAR variant {name!r}; known: {sorted(archives)}")
    f = archives[name]
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / f.name
    if local_dir is not None and (Path(local_dir) / f.name).is_file():
        with atomic_path(archive) as tmp:
            shutil.copyfile(Path(local_dir) / f.name, tmp)
        if verify and _digest(archive, "md5") != f.md5:
            archive.unlink()
            raise DatasetError(f"{f.name} in {local_dir}: md5 does not match the official {f.md5}")
    elif not archive.is_file() or (verify and _digest(archive, "md5") != f.md5):
        hint = (
            f"If this machine is offline, download {urls[0]}{f.name} elsewhere and place it by hand "
            f"in {dest} or in a folder named by the config key datasets.{name}.local_dir."
        )
        _download(urls, f.name, archive, f.md5 if verify else _NO_CHECK, retries=retries, hint=hint)
    out = dest / _CIFAR_DIRS[name]
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(_CIFAR_DIRS[name])]
        if not members:
            raise DatasetError(f"{archive} does not contain {_CIFAR_DIRS[name]}/")
        for m in members:  # refuse path tricks even where tarfile's "data" filter is missing
            if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                raise DatasetError(f"{archive}: unsafe archive member {m.name!r}")
        tar.extractall(dest, members=members)
    return out


_NO_CHECK = "no-check"


def _unpickle(path: Path) -> dict:
    import pickle

    try:
        with open(path, "rb") as fh:
            return pickle.load(fh, encoding="bytes")
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise DatasetError(f"cannot read CIFAR batch {path}: {exc}") from exc


def _cifar_images(batch: dict, path: Path) -> np.ndarray:
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DatasetError(f"{path}: expected rows of 3072 bytes (3 x 32 x 32), got {data.shape}")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()  # (N, 32, 32, 3) RGB


@dataclass
class CifarDataset(ImageDataset):
    """CIFAR images (N, 32, 32, 3); for CIFAR-100 also the 20 coarse labels (for remapping)."""

    coarse_labels: np.ndarray | None = None
    coarse_classes: tuple[str, ...] = ()


def load_cifar100(root: str | Path, split: str) -> CifarDataset:
    """The ``train`` (50,000) or ``test`` (10,000) split of the extracted cifar-100-python folder."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = (
        Path(root) / _CIFAR_DIRS["cifar100"]
        if (Path(root) / _CIFAR_DIRS["cifar100"]).is_dir()
        else Path(root)
    )
    batch = _unpickle(root / split)
    meta = _unpickle(root / "meta")
    return CifarDataset(
        images=_cifar_images(batch, root / split),
        labels=np.asarray(batch[b"fine_labels"], dtype=np.int64),
        classes=tuple(n.decode() for n in meta[b"fine_label_names"]),
        coarse_labels=np.asarray(batch[b"coarse_labels"], dtype=np.int64),
        coarse_classes=tuple(n.decode() for n in meta[b"coarse_label_names"]),
    )


def load_cifar10(root: str | Path, split: str) -> CifarDataset:
    """The ``train`` (data_batch_1..5) or ``test`` (test_batch) split of cifar-10-batches-py."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = (
        Path(root) / _CIFAR_DIRS["cifar10"] if (Path(root) / _CIFAR_DIRS["cifar10"]).is_dir() else Path(root)
    )
    names = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    batches = [_unpickle(root / n) for n in names]
    meta = _unpickle(root / "batches.meta")
    return CifarDataset(
        images=np.concatenate([_cifar_images(b, root / n) for b, n in zip(batches, names, strict=True)]),
        labels=np.concatenate([np.asarray(b[b"labels"], dtype=np.int64) for b in batches]),
        classes=tuple(n.decode() for n in meta[b"label_names"]),
    )
