"""Stage of ``workflow/rules/data.smk``: obtain a data set once, and read the fixed per-class subsets
(train / test / public tuning split / active-learning pool) every later stage reads. I/O only: which
data set does what is the registry's (:mod:`dpcl.data.registry`), which samples a subset holds the
library's (:mod:`dpcl.data.subsets`)."""

from __future__ import annotations

from pathlib import Path

from ..data.manifest import verify_manifest, write_manifest
from ..data.registry import load_dataset, spec
from ..data.sources import check_obtained_options
from ..data.subsets import SubsetParams, holdout_per_class, source_split, subset_indices

__all__ = ["dataset_subset", "holdout_per_class", "obtain_dataset"]


def obtain_dataset(name: str, manifest: str | Path, cfg: dict) -> None:
    """Put the raw files of dataset ``name`` beside ``manifest`` (verified), then write the manifest."""
    dest = Path(manifest).parent
    listing = spec(name, cfg).obtain(name, dest, cfg)  # a variant key is obtained like its data set
    write_manifest(dest, name, listing)  # with the sha256 of every file, checked on every read


def dataset_subset(name: str, root: str | Path, split: str, cfg: dict):
    """The split's data set and the original indices of its fixed subset
    (:func:`dpcl.data.subsets.subset_indices` with the ``datasets`` block ``cfg``)."""
    verify_manifest(root, name)  # the files are those obtain_dataset hashed
    check_obtained_options(name, root, cfg)  # e.g. ImageNet-R's split_seed and image_size
    ds = load_dataset(name, root, source_split(split))
    return ds, subset_indices(ds.labels, split, SubsetParams.from_config(cfg), name=name)
