"""The data-set registry: one entry per data set the pipeline knows, and the user's own data.

Every place that needs something about a data set — how to obtain it, how to load a split, its
(published) classes, its class hierarchy, its published training-set size — reads it here, so
adding a data set is one entry in :data:`BUILTIN`. A config key names a built-in data set (with
an optional variant suffix, ``imagenet_r__seed1``) or, with a ``format`` key, the user's own data
(:mod:`dpcl.data.own`: ``image_folder`` or precomputed-feature ``npz``), whose entry is built from
its config block by :func:`spec`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import own, sources
from .datasets import (
    FASHION_MNIST_CLASSES,
    ImageDataset,
    load_cifar10,
    load_cifar100,
    load_fashion_mnist,
    obtain_cifar,
    obtain_fashion_mnist,
)

VARIANT_SEPARATOR = "__"


@dataclass(frozen=True)
class DatasetSpec:
    """What the pipeline knows about one data set before reading any of its (private) images.

    ``obtain(name, dest, cfg)`` puts the verified files in ``dest`` and returns the manifest's
    listing; ``load(root, split)`` reads the ``train`` or ``test`` split. ``classes`` are the
    published class names where known here (else ``None``: the loader reads them from the
    files, e.g. CIFAR's meta file); ``n_classes`` is always public. ``hierarchy`` describes a
    published class hierarchy (label methods ``...-parent``), ``nominal_train_size`` is the
    published size of the training split (None: none published), ``paper_tuning_classes`` the
    classes the paper's own tuning protocol draws from where it is not the first task's
    (5-datasets, App. D.1), ``composite`` the source data sets of a composite (one task each in
    scenario ``datasets``), ``precomputed`` whether the data are features (no backbone runs).
    """

    name: str
    obtain: Callable[[str, Path, dict], dict]
    load: Callable[[str | Path, str], ImageDataset]
    n_classes: int
    classes: tuple[str, ...] | None = None
    hierarchy: str | None = None
    nominal_train_size: int | None = None
    paper_tuning_classes: tuple[int, ...] | None = None
    composite: tuple[str, ...] = ()
    precomputed: bool = False
    own: bool = False
    display: str | None = None  #: its name in tables and figures (default: the config key)


# --- obtain functions: config keys applied ------------------------------------------------------


def _local(name: str, cfg: dict) -> str | None:
    source, local_dir = cfg.get("source", "auto"), cfg.get("local_dir")
    if source == "local" and not local_dir:
        raise ValueError(f"dataset {name}: source 'local' needs local_dir (the folder holding the files)")
    return None if source == "download" else local_dir


def _listing(out: dict) -> dict:
    return {k: (Path(v).name if isinstance(v, Path) else v) for k, v in out.items()}


def _obtain_fashion_mnist(name: str, dest: Path, cfg: dict) -> dict:
    files = obtain_fashion_mnist(
        dest, source=cfg.get("source", "auto"), local_dir=cfg.get("local_dir"), verify=cfg.get("verify", True)
    )
    return {k: Path(v).name for k, v in files.items()}


def _obtain_cifar(kind: str) -> Callable[[str, Path, dict], dict]:
    def obtain(name: str, dest: Path, cfg: dict) -> dict:
        if cfg.get("source", "auto") == "local" and not cfg.get("local_dir"):
            raise ValueError(
                f"dataset {name}: source 'local' needs local_dir (the folder holding the archive)"
            )
        folder = obtain_cifar(kind, dest, local_dir=cfg.get("local_dir"), verify=cfg.get("verify", True))
        return {"folder": folder.name}

    return obtain


def _obtain_with(fn: Callable) -> Callable[[str, Path, dict], dict]:
    def obtain(name: str, dest: Path, cfg: dict) -> dict:
        return _listing(fn(dest, local_dir=_local(name, cfg), verify=cfg.get("verify", True)))

    return obtain


def _obtain_imagenet_r(name: str, dest: Path, cfg: dict) -> dict:
    out = sources.obtain_imagenet_r(
        dest,
        local_dir=_local(name, cfg),
        verify=cfg.get("verify", True),
        split_seed=int(cfg.get("split_seed", 0)),
        image_size=int(cfg.get("image_size") or 224),
    )
    return _listing(out)


# --- the built-in data sets ---------------------------------------------------------------------

#: 5-datasets (App. D.1): the paper tunes on CIFAR-10 (labels 40-49: source 4 of FIVE_DATASETS)
FIVE_DATASETS_TUNING_CLASSES = tuple(range(40, 50))

_ENTRIES = (
    DatasetSpec(
        "fashion_mnist",
        _obtain_fashion_mnist,
        load_fashion_mnist,
        10,
        FASHION_MNIST_CLASSES,
        nominal_train_size=60_000,
        display="Fashion-MNIST",
    ),
    DatasetSpec(
        "cifar10", _obtain_cifar("cifar10"), load_cifar10, 10, nominal_train_size=50_000, display="CIFAR-10"
    ),
    DatasetSpec(
        "cifar100",
        _obtain_cifar("cifar100"),
        load_cifar100,
        100,
        hierarchy="CIFAR-100: 100 fine classes in 20 coarse superclasses",
        nominal_train_size=50_000,
        display="CIFAR-100",
    ),
    DatasetSpec(
        "mnist",
        _obtain_with(sources.obtain_mnist),
        sources.load_mnist,
        10,
        sources.MNIST_CLASSES,
        nominal_train_size=60_000,
        display="MNIST",
    ),
    DatasetSpec(
        "svhn",
        _obtain_with(sources.obtain_svhn),
        sources.load_svhn,
        10,
        sources.SVHN_CLASSES,
        nominal_train_size=73_257,
        display="SVHN",
    ),
    DatasetSpec(
        "notmnist",
        _obtain_with(sources.obtain_notmnist),
        sources.load_notmnist,
        10,
        sources.NOTMNIST_CLASSES,
        display="notMNIST",
    ),
    # ImageNet-R: 80 % of its 30,000 images ([LabelSpace] App. E)
    DatasetSpec(
        "imagenet_r",
        _obtain_imagenet_r,
        sources.load_imagenet_r,
        200,
        nominal_train_size=24_000,
        display="ImageNet-R",
    ),
    DatasetSpec(
        "five_datasets",
        _obtain_with(sources.obtain_five_datasets),
        sources.load_five_datasets,
        50,
        paper_tuning_classes=FIVE_DATASETS_TUNING_CLASSES,
        composite=sources.FIVE_DATASETS,
        display="5-datasets",
    ),
)
BUILTIN: dict[str, DatasetSpec] = {e.name: e for e in _ENTRIES}

#: names of the built-in data sets (config keys may add a variant suffix)
DATASETS = tuple(BUILTIN)
#: classes of every built-in data set (published; the config is checked against them before any job)
N_CLASSES = {k: e.n_classes for k, e in BUILTIN.items()}
#: built-in data sets with a published class hierarchy (label methods ``...-parent``)
HIERARCHIES = tuple(k for k, e in BUILTIN.items() if e.hierarchy)
#: published training-set sizes (the official train splits); a data set without one (notMNIST,
#: hence 5-datasets, and the user's own data) needs ``nominal_train_size`` when tuning
OFFICIAL_TRAIN_SIZE = {k: e.nominal_train_size for k, e in BUILTIN.items() if e.nominal_train_size}


def is_own(cfg: dict | None) -> bool:
    """Whether a ``datasets`` config block declares the user's own data (it has a ``format``)."""
    return bool(cfg) and cfg.get("format") is not None


def base_name(name: str) -> str:
    """The built-in data set of a config key: ``imagenet_r__seed1`` is a variant of ``imagenet_r``.

    Variants let a config declare one dataset several times with different options (e.g.
    ImageNet-R's ``split_seed``, which the paper re-draws per seed); each variant is
    obtained into its own resources folder.
    """
    base = name.split(VARIANT_SEPARATOR, 1)[0]
    if base not in BUILTIN:
        raise ValueError(
            f"unknown dataset {name!r}; known: {sorted(BUILTIN)} "
            f"(optionally with a variant suffix, e.g. imagenet_r{VARIANT_SEPARATOR}seed1), "
            "or your own data with a 'format' key (image_folder or npz)"
        )
    return base


def display_name(kind: str) -> str:
    """The name of data set ``kind`` (a built-in's name without variant suffix) in tables and figures."""
    entry = BUILTIN.get(kind)
    return entry.display if entry is not None and entry.display else kind


def spec(name: str, cfg: dict | None = None) -> DatasetSpec:
    """The registry entry of config key ``name`` (its ``datasets`` block ``cfg``): a built-in data
    set's, or for the user's own data (a block with ``format``) one built from the block."""
    if is_own(cfg):
        fmt = cfg["format"]
        classes = own.class_names(name, cfg)
        return DatasetSpec(
            name,
            own.obtain,
            own.LOADERS[fmt],
            len(classes),
            classes,
            precomputed=fmt == "npz",
            own=True,
        )
    return BUILTIN[base_name(name)]


def n_classes(name: str, cfg: dict | None = None) -> int:
    """The public number of classes of data set ``name``."""
    return spec(name, cfg).n_classes


def load_dataset(name: str, root: str | Path, split: str) -> ImageDataset:
    """The ``train`` or ``test`` split of data set ``name`` obtained into ``root``.

    A built-in data set is read by its entry's loader; the user's own data by its format's
    (recorded in ``root/dataset.json`` when it was obtained)."""
    kind = own.obtained_format(root)
    if kind is not None:
        return own.LOADERS[kind](root, split)
    return BUILTIN[base_name(name)].load(root, split)
