"""The user's own data (config ``datasets.<name>.format``): a folder of images or precomputed features.

``format: image_folder``, ``root: DIR``: one sub-folder per class under ``DIR/train`` and
``DIR/test``, or one tree ``DIR/<class>/...`` split at random (seeded by ``split_seed``) with
``test_fraction``. Class names are the folder names, sorted. Images of any size and mode are
decoded once at obtain time (PIL) to RGB squares of ``image_size`` pixels (shorter side resized,
centre crop: :func:`dpcl.data.sources.decode_square`) and stored as memory-mappable arrays beside a
``dataset.json``; files PIL cannot read are skipped, counted in the log and listed there.

``format: npz``, ``root: FILE or DIR``: precomputed features, arrays ``x`` (N, D) and ``y`` (N,)
with optional ``names`` (class names, ``y`` indexing them); ``DIR/train.npz`` and ``DIR/test.npz``,
or one file split with ``test_fraction``. No backbone runs: the features stage copies the subsets
into the feature-cache format.

The class names (folder names, ``names``) are treated as public, as a published data set's class
list is; an npz needs ``names`` or ``public_label_names`` (its largest label is not public). ``public_label_names:
FILE`` (one name per line) declares a public label universe: class ids are positions in that file,
every class of the data must be in it, and Public Labels (``public-x...``) draw from it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..io import atomic_path, log, write_json
from .datasets import DatasetError, ImageDataset
from .manifest import file_sha256
from .sources import _load_split, _write_split, decode_square, random_split, read_dataset_meta

FORMATS = ("image_folder", "npz")
DEFAULT_IMAGE_SIZE = 224


def read_public_label_names(path: str | Path, name: str = "") -> tuple[str, ...]:
    """The public label universe: one class name per line (blank lines ignored), unique."""
    key = f"datasets.{name}.public_label_names" if name else "public_label_names"
    path = Path(path).expanduser()
    try:
        names = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(
            f"{key}: cannot read {path} ({exc}); give a text file, one name per line"
        ) from None
    if not names:
        raise DatasetError(f"{key}: {path} holds no class names (one name per line)")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DatasetError(f"{key}: {path} lists {dup} more than once; every name once")
    return tuple(names)


def _visible(p: Path) -> bool:
    return not p.name.startswith(".")


def _trees(name: str, cfg: dict) -> dict[str, Path]:
    """The class trees of an image folder: ``{"train": DIR/train, "test": DIR/test}`` or ``{"all": DIR}``."""
    root = Path(cfg.get("root") or "").expanduser()
    if not cfg.get("root") or not root.is_dir():
        raise DatasetError(f"datasets.{name}.root: {str(root)!r} is not a folder (format image_folder)")
    if cfg.get("test_fraction") is not None:
        if (root / "train").is_dir() and (root / "test").is_dir():
            raise DatasetError(
                f"datasets.{name}.test_fraction: {root} already has train/ and test/ folders; "
                f"drop test_fraction (it splits one tree {root}/<class>/)"
            )
        return {"all": root}
    if (root / "train").is_dir() and (root / "test").is_dir():
        return {"train": root / "train", "test": root / "test"}
    raise DatasetError(
        f"datasets.{name}.root: {root} has no train/ and test/ folders; give one sub-folder per class "
        f"under {root}/train and {root}/test, or set datasets.{name}.test_fraction to split {root}/<class>/ "
        "at random"
    )


def _class_dirs(tree: Path) -> list[Path]:
    dirs = sorted((p for p in tree.iterdir() if p.is_dir() and _visible(p)), key=lambda p: p.name)
    if not dirs:
        raise DatasetError(f"{tree}: no class folders (expected one sub-folder per class holding its images)")
    return dirs


def _npz_files(name: str, cfg: dict) -> dict[str, Path]:
    root = Path(cfg.get("root") or "").expanduser()
    if cfg.get("root") and root.is_file():
        if cfg.get("test_fraction") is None:
            raise DatasetError(
                f"datasets.{name}.test_fraction: {root} is one file; set test_fraction to split it, "
                "or give a folder with train.npz and test.npz"
            )
        return {"all": root}
    if cfg.get("root") and (root / "train.npz").is_file() and (root / "test.npz").is_file():
        return {"train": root / "train.npz", "test": root / "test.npz"}
    raise DatasetError(
        f"datasets.{name}.root: {str(root)!r} is neither an .npz file nor a folder with train.npz and "
        "test.npz (format npz: arrays x, y and optional names)"
    )


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[str, ...] | None]:
    try:
        with np.load(path, allow_pickle=False) as z:
            if "x" not in z or "y" not in z:
                raise DatasetError(f"{path}: needs arrays 'x' (N, D) and 'y' (N,); has {sorted(z.files)}")
            x, y = np.asarray(z["x"]), np.asarray(z["y"])
            names = tuple(str(n) for n in z["names"]) if "names" in z else None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: not a readable .npz file ({exc})") from None
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y) or not len(y):
        raise DatasetError(f"{path}: x must be (N, D) and y (N,) with N >= 1; got {x.shape} and {y.shape}")
    if x.dtype.kind not in "fiu" or y.dtype.kind not in "iu":
        raise DatasetError(f"{path}: x must be numeric and y integer; got {x.dtype} and {y.dtype}")
    if y.min() < 0 or (names is not None and y.max() >= len(names)):
        raise DatasetError(f"{path}: labels must lie in 0..{len(names) - 1 if names else 'K-1'}")
    if not np.isfinite(x).all():
        raise DatasetError(f"{path}: x has NaN or inf entries; every feature must be finite")
    return x, y.astype(np.int64), names


def _read_names(path: Path) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Labels and names of an npz without reading its features (config validation reads only these)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "y" not in z:
                raise DatasetError(f"{path}: needs arrays 'x' (N, D) and 'y' (N,); has {sorted(z.files)}")
            y = np.asarray(z["y"])
            names = tuple(str(n) for n in z["names"]) if "names" in z else None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: not a readable .npz file ({exc})") from None
    if y.ndim != 1 or not len(y) or y.dtype.kind not in "iu" or y.min() < 0:
        raise DatasetError(
            f"{path}: y must be a non-empty (N,) integer array of labels >= 0; got {y.shape} {y.dtype}"
        )
    return y, names


def class_names(name: str, cfg: dict) -> tuple[str, ...]:
    """The public classes of own data set ``name``, read from its config block without decoding any
    image: the public label universe if given, else the class folders' names (sorted) or the
    npz's ``names``."""
    fmt = cfg.get("format")
    if fmt not in FORMATS:
        raise DatasetError(f"datasets.{name}.format: {fmt!r} is not one of {list(FORMATS)}")
    universe = (
        read_public_label_names(cfg["public_label_names"], name) if cfg.get("public_label_names") else None
    )
    if fmt == "image_folder":
        found = []
        for tree in _trees(name, cfg).values():
            found += [d for d in _class_dirs(tree) if d.name not in {f.name for f in found}]
        if universe is None:
            return tuple(sorted(d.name for d in found))
        for d in found:
            _label_of(d.name, universe, d, name)
        return universe
    if universe is not None:
        for path in _npz_files(name, cfg).values():
            for n in _read_names(path)[1] or ():
                _label_of(n, universe, path, name)
        return universe
    found = None
    for path in _npz_files(name, cfg).values():
        _, names = _read_names(path)
        if names is None:  # 0..max(y) would make the label universe a statistic of the private labels
            raise DatasetError(
                f"{path}: no 'names' array; the class list must be declared, not read off the labels "
                f"(the largest label is a fact of the private data): add names (one per class, y indexing "
                f"them) or set datasets.{name}.public_label_names"
            )
        if found is not None and names != found:
            raise DatasetError(f"{path}: its names differ from those of the other split")
        found = names
    return found


def _label_of(cls: str, universe: tuple[str, ...], where: Path, name: str) -> int:
    if cls not in universe:
        raise DatasetError(
            f"{where}: class {cls!r} is not in the public label universe of datasets.{name} "
            f"({len(universe)} names); add it to public_label_names or remove the folder"
        )
    return universe.index(cls)


def _image_files(name: str, cfg: dict, universe: tuple[str, ...]) -> dict[str, list[tuple[Path, int]]]:
    """(file, label) per split in canonical order (class, then path), before any file is decoded."""
    out: dict[str, list[tuple[Path, int]]] = {}
    for split, tree in _trees(name, cfg).items():
        files = []
        for d in _class_dirs(tree):
            label = _label_of(d.name, universe, d, name)
            found = sorted(p for p in d.rglob("*") if p.is_file() and _visible(p))
            if not found:
                raise DatasetError(f"{d}: class folder holds no files (every class needs images)")
            files += [(p, label) for p in found]
        out[split] = files
    if "all" in out:
        files = out.pop("all")
        train, test = random_split(
            len(files), float(cfg["test_fraction"]), int(cfg.get("split_seed", 0)), name
        )
        out = {"train": [files[i] for i in train], "test": [files[i] for i in test]}
    return out


def _decode_split(files: list[tuple[Path, int]], size: int, dest: Path, split: str, skipped: list) -> int:
    """Decode ``files`` to (N, size, size, 3) RGB in a memory map; unreadable files are skipped."""
    ok = np.zeros(len(files), bool)
    with atomic_path(dest / f"{split}_images.npy", suffix=".npy") as tmp:
        arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(len(files), size, size, 3))
        for i, (path, _) in enumerate(files):
            try:
                arr[i] = decode_square(path.read_bytes(), size)
                ok[i] = True
            except Exception:  # PIL raises many kinds on non-image, truncated or corrupt files
                skipped.append(str(path))
        arr.flush()
        del arr
    labels = np.array([lab for _, lab in files], dtype=np.int64)
    if not ok.all():  # rewrite the split without the skipped files
        full = np.load(dest / f"{split}_images.npy", mmap_mode="r")
        compact = np.asarray(full[ok])
        del full
        _write_split(dest, split, compact, labels[ok])
    else:
        with atomic_path(dest / f"{split}_labels.npy", suffix=".npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, labels)
    return int(ok.sum())


def obtain_image_folder(name: str, dest: Path, cfg: dict) -> dict:
    """Decode the image tree of ``cfg["root"]`` into ``dest`` (arrays, dataset.json)."""
    universe = class_names(name, cfg)
    size = int(cfg.get("image_size") or DEFAULT_IMAGE_SIZE)
    per_split = _image_files(name, cfg, universe)
    skipped: list[str] = []
    counts = {s: _decode_split(files, size, dest, s, skipped) for s, files in per_split.items()}
    if skipped:
        log(f"{name}: skipped {len(skipped)} file(s) that are not readable images: {', '.join(skipped[:5])}")
    bad = set(skipped)
    for split, files in per_split.items():
        have = {lab for (p, lab) in files if str(p) not in bad}
        if split == "train" and len(have) < len({lab for _, lab in files}):
            empty = sorted({str(p.parent) for p, lab in files if lab not in have})
            raise DatasetError(f"{', '.join(empty)}: no readable image in the class folder")
    root = Path(cfg["root"]).expanduser()
    write_json(
        dest / "dataset.json",
        {
            "dataset": "image_folder",
            "name": name,
            "classes": list(universe),
            "counts": counts,
            "skipped": skipped,
            "source_sha256": {
                p.relative_to(root).as_posix(): file_sha256(p) for fs in per_split.values() for p, _ in fs
            },
            "options": _options(cfg),
        },
    )
    return {"format": "image_folder", "counts": counts, "skipped": len(skipped)}


def _options(cfg: dict) -> dict:
    """The obtain-time options a later read must agree with (:func:`sources.check_obtained_options`)."""
    out = {"split_seed": int(cfg.get("split_seed", 0))}
    if cfg.get("format") == "image_folder":
        out["image_size"] = int(cfg.get("image_size") or DEFAULT_IMAGE_SIZE)
    if cfg.get("test_fraction") is not None:
        out["test_fraction"] = float(cfg["test_fraction"])
    return out


def obtain_npz(name: str, dest: Path, cfg: dict) -> dict:
    """Copy the features of ``cfg["root"]`` into ``dest`` as float32 arrays (labels per universe)."""
    universe = class_names(name, cfg)
    parts = {}
    for split, path in _npz_files(name, cfg).items():
        x, y, names = _read_npz(path)
        if names is not None:  # map the file's names to the universe (identity without public names)
            y = np.array([_label_of(names[v], universe, path, name) for v in y], dtype=np.int64)
        elif y.max() >= len(universe):
            raise DatasetError(f"{path}: labels beyond the {len(universe)} classes of datasets.{name}")
        parts[split] = (x, y, path)
    if "all" in parts:
        x, y, _ = parts.pop("all")
        tr, te = random_split(len(y), float(cfg["test_fraction"]), int(cfg.get("split_seed", 0)), name)
        parts = {"train": (x[tr], y[tr], None), "test": (x[te], y[te], None)}
    dims = {s: p[0].shape[1] for s, p in parts.items()}
    if len(set(dims.values())) != 1:
        raise DatasetError(f"datasets.{name}: train and test features differ in dimension ({dims})")
    for split, (x, y, _) in parts.items():
        with atomic_path(dest / f"{split}_features.npy", suffix=".npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(x, dtype=np.float32))
        with atomic_path(dest / f"{split}_labels.npy", suffix=".npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, y)
    counts = {s: len(p[1]) for s, p in parts.items()}
    root = Path(cfg["root"]).expanduser()
    sources = [root] if root.is_file() else [root / "train.npz", root / "test.npz"]
    write_json(
        dest / "dataset.json",
        {
            "dataset": "npz",
            "name": name,
            "classes": list(universe),
            "counts": counts,
            "dim": int(next(iter(dims.values()))),
            "source_sha256": {p.name: file_sha256(p) for p in sources},
            "options": _options(cfg),
        },
    )
    return {"format": "npz", "counts": counts}


def obtain(name: str, dest: Path, cfg: dict) -> dict:
    """Obtain own data set ``name`` (its config block ``cfg``) into ``dest``; the manifest's listing."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    fmt = cfg.get("format")
    if fmt == "image_folder":
        return obtain_image_folder(name, dest, cfg)
    if fmt == "npz":
        return obtain_npz(name, dest, cfg)
    raise DatasetError(f"datasets.{name}.format: {fmt!r} is not one of {list(FORMATS)}")


def load_image_folder(root: str | Path, split: str) -> ImageDataset:
    """An obtained image folder's split: (N, S, S, 3) RGB (memory-mapped), labels, class names."""
    return _load_split(root, split, "image_folder")


def load_npz(root: str | Path, split: str) -> ImageDataset:
    """An obtained npz data set's split; ``images`` holds the (N, D) float32 features."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = Path(root)
    meta = read_dataset_meta(root)
    if meta.get("dataset") != "npz":
        raise DatasetError(f"{root}/dataset.json describes {meta.get('dataset')!r}, not 'npz'")
    x = np.load(root / f"{split}_features.npy", mmap_mode="r")
    y = np.load(root / f"{split}_labels.npy").astype(np.int64)
    if len(x) != len(y) or len(y) != meta["counts"][split]:
        raise DatasetError(
            f"{root}: {split} arrays do not match dataset.json's count {meta['counts'][split]}"
        )
    return ImageDataset(images=x, labels=y, classes=tuple(meta["classes"]))


LOADERS = {"image_folder": load_image_folder, "npz": load_npz}


def obtained_format(root: str | Path) -> str | None:
    """The own-data format ``root`` was obtained in (its dataset.json), or None."""
    path = Path(root) / "dataset.json"
    if not path.is_file():
        return None
    kind = json.loads(path.read_text()).get("dataset")
    return kind if kind in LOADERS else None
