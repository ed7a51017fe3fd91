"""Stage of ``workflow/rules/data.smk``: obtain a data set once, and the fixed per-class subsets
(train / test / public tuning split) every later stage reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.datasets import load_dataset, obtain_fashion_mnist, select_per_class
from ..data.manifest import write_manifest


def obtain_dataset(name: str, manifest: str | Path, cfg: dict) -> None:
    """Put the raw files of dataset ``name`` beside ``manifest`` (verified), then write the manifest."""
    from ..data.datasets import base_name

    dest = Path(manifest).parent
    kind = base_name(name)  # a variant key such as imagenet_r__seed1 is obtained like imagenet_r
    if kind in ("mnist", "svhn", "notmnist", "imagenet_r", "five_datasets"):
        listing = _obtain_paper_dataset(name, kind, dest, cfg)
    elif kind == "fashion_mnist":
        files = obtain_fashion_mnist(
            dest,
            source=cfg.get("source", "auto"),
            local_dir=cfg.get("local_dir"),
            verify=cfg.get("verify", True),
        )
        listing = {k: Path(v).name for k, v in files.items()}
    elif kind in ("cifar10", "cifar100"):
        from ..data.datasets import obtain_cifar

        if cfg.get("source", "auto") == "local" and not cfg.get("local_dir"):
            raise ValueError(
                f"dataset {name}: source 'local' needs local_dir (the folder holding the archive)"
            )
        folder = obtain_cifar(kind, dest, local_dir=cfg.get("local_dir"), verify=cfg.get("verify", True))
        listing = {"folder": folder.name}
    else:
        raise ValueError(f"unknown dataset {name!r}")
    write_manifest(dest, name, listing)  # with the sha256 of every file, checked on every read


def _obtain_paper_dataset(name: str, kind: str, dest: Path, cfg: dict) -> dict:
    """MNIST, SVHN, notMNIST, ImageNet-R and 5-datasets (dpcl.data.sources), config keys applied."""
    from ..data import sources

    source, local_dir = cfg.get("source", "auto"), cfg.get("local_dir")
    if source == "local" and not local_dir:
        raise ValueError(f"dataset {name}: source 'local' needs local_dir (the folder holding the files)")
    local_dir = None if source == "download" else local_dir
    kw = {"local_dir": local_dir, "verify": cfg.get("verify", True)}
    if kind == "imagenet_r":
        out = sources.obtain_imagenet_r(
            dest, split_seed=int(cfg.get("split_seed", 0)), image_size=int(cfg.get("image_size") or 224), **kw
        )
    else:
        fn = {
            "mnist": sources.obtain_mnist,
            "svhn": sources.obtain_svhn,
            "notmnist": sources.obtain_notmnist,
            "five_datasets": sources.obtain_five_datasets,
        }[kind]
        out = fn(dest, **kw)
    return {k: (Path(v).name if isinstance(v, Path) else v) for k, v in out.items()}


def dataset_subset(name: str, root: str | Path, split: str, cfg: dict):
    """The split restricted to its fixed per-class subset, and the original indices.

    ``tune`` is a held-out part of the training split, disjoint from the ``train`` subset
    that runs use, so hyperparameter tuning touches no private task data. ``pool`` (DP active
    learning, paper 004) is a further part of the training split disjoint from both.
    """
    from ..data.manifest import verify_manifest
    from ..data.sources import check_obtained_options

    verify_manifest(root, name)  # the files are those obtain_dataset hashed
    check_obtained_options(name, root, cfg)  # e.g. ImageNet-R's split_seed and image_size
    seed = int(cfg.get("subset_seed", 0))
    ds = load_dataset(name, root, "train" if split in ("tune", "pool") else split)
    if split == "test":
        return ds, select_per_class(ds.labels, cfg.get("test_per_class"), seed)
    pool = np.arange(len(ds.labels))
    holdout = float(cfg.get("holdout_fraction") or 0.0)
    if holdout > 0:  # a fixed public tuning share of every class, set aside before the train subset
        held = holdout_per_class(ds.labels, holdout, seed)
        if split == "tune":
            return ds, held[select_per_class(ds.labels[held], cfg.get("tune_per_class", 300), seed + 1)]
        pool = np.setdiff1d(pool, held)
    train_idx = pool[select_per_class(ds.labels[pool], cfg.get("train_per_class"), seed)]
    if split == "train":
        return ds, train_idx
    if split == "pool":  # DP active learning's unlabelled pool: training images no other split uses
        used = np.union1d(train_idx, dataset_subset(name, root, "tune", cfg)[1])
        rest = np.setdiff1d(np.arange(len(ds.labels)), used)
        if rest.size == 0:
            raise ValueError(f"dataset {name}: no training images left for an active-learning pool")
        return ds, rest[select_per_class(ds.labels[rest], cfg.get("pool_per_class", 1000), seed + 2)]
    rest = np.setdiff1d(np.arange(len(ds.labels)), train_idx)
    if rest.size == 0:
        raise ValueError(f"dataset {name}: no training images left for a tuning split; lower train_per_class")
    return ds, rest[select_per_class(ds.labels[rest], cfg.get("tune_per_class", 300), seed + 1)]


def holdout_per_class(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of round(fraction × n_c) images of every class c (seeded), the public tuning share."""
    if not 0 < fraction < 1:
        raise ValueError(f"holdout_fraction must lie in (0, 1), got {fraction}")
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x70E5])))
    out = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        out.append(gen.permutation(idx)[: int(round(fraction * len(idx)))])
    return np.sort(np.concatenate(out))
