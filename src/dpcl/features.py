"""Batched feature extraction with an on-disk cache (one job per
dataset × backbone × split; every run reads the cache, none recomputes features).

Images become model inputs as timm's eval transform
(``timm.data.create_transform(**resolve_data_config(...), is_training=False)``) makes
them from PIL images (:func:`transform_plan`, :func:`preprocess_batch`):

1. resize: the shorter side to ``floor(image_size / crop_pct)`` (the longer side keeps the
   aspect ratio, truncated as torchvision does; ``crop_mode`` "squash": both sides), with
   the backbone's interpolation. Downsizing is antialiased and runs as PIL does, one axis at
   a time (width, then height), clipping to the pixel range after each pass; upsampling
   (e.g. 28 px Fashion-MNIST to 96 px) is one plain ``interpolate`` without antialiasing;
2. centre crop of ``image_size`` × ``image_size`` (torchvision's offsets);
3. scale to [0, 1], normalise with the checkpoint's mean and std.

``crop_pct`` 1.0 on square images is a plain resize to ``image_size``. The feature cache
records the plan (metadata key ``transform``, :func:`describe_transform`).

The frozen backbone runs with every BatchNorm that directly follows a convolution folded into
that convolution (:func:`fold_batchnorms`; one layer fewer for each folded BatchNorm):
the same affine map, so features change only by float32 rounding (≤ 3e-5 absolute on Lite0's
features, whose largest entries are ~6). Folding follows the modules' registration order, so
every extraction checks the folded copy against the model on its first images and keeps the
model unfolded if they disagree (:func:`inference_model`). ``backbones.<name>.fold_batchnorm:
false`` turns it off; the feature cache records how many BatchNorms were folded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .backbones import Preprocessing
from .devices import device_record, resolve_device
from .io import progress_stream, write_npz


def transform_plan(height: int, width: int, pre: Preprocessing) -> dict:
    """Sizes of the resize and the crop for ``height`` × ``width`` images (timm's eval
    transform, torchvision's integer rounding): ``resize_to`` (h, w), ``crop`` (top, left,
    h, w) in the resized image, ``antialias`` per axis (h, w): whether that axis shrinks."""
    height, width = int(height), int(width)
    if height < 1 or width < 1:
        raise ValueError(f"images must be at least 1x1 pixels, got {height}x{width}")
    target = pre.resize_size
    if pre.crop_mode == "squash":
        size = (target, target)
    elif height <= width:  # torchvision Resize(int): the shorter side to target
        size = (target, int(target * width / height))
    else:
        size = (int(target * height / width), target)
    crop = pre.image_size
    top, left = int(round((size[0] - crop) / 2.0)), int(round((size[1] - crop) / 2.0))
    return {
        "resize_to": size,
        "crop": (top, left, crop, crop),
        "antialias": (size[0] < height, size[1] < width),
    }


def describe_transform(height: int, width: int, pre: Preprocessing) -> dict:
    """The applied transform of ``height`` × ``width`` uint8 images, JSON-ready (the feature
    cache's ``transform`` metadata)."""
    plan = transform_plan(height, width, pre)
    return {
        "input_size": [int(height), int(width)],
        "resize_shorter_to": pre.resize_size,
        "resize_to": list(plan["resize_to"]),
        "interpolation": pre.interpolation,
        "antialias": any(plan["antialias"]),
        "crop_pct": pre.crop_pct,
        "crop_mode": pre.crop_mode,
        "crop": list(plan["crop"]),
        "mean": list(pre.mean),
        "std": list(pre.std),
    }


def _resize(x, size: tuple[int, int], antialias: tuple[bool, bool], mode: str):
    import torch.nn.functional as F

    if tuple(x.shape[-2:]) == tuple(size):
        return x
    if not any(antialias):  # upsampling: one plain pass (the embedded default: 28 -> 96 px)
        return F.interpolate(x, size=size, mode=mode, align_corners=False)
    # downsizing: PIL's resample (timm's eval transform on PIL images) filters one axis at a
    # time, width first, and clips each pass to the pixel range (bicubic overshoots)
    for step, aa in (((x.shape[-2], size[1]), antialias[1]), (size, antialias[0])):
        if tuple(x.shape[-2:]) != step:
            x = F.interpolate(x, size=step, mode=mode, align_corners=False, antialias=aa).clamp_(0.0, 1.0)
    return x


def preprocess_batch(images_u8, pre: Preprocessing):
    """uint8 images (B, H, W) or (B, H, W, C) → normalised float (B, 3, S, S) tensor
    (resize, centre crop, normalisation of :func:`transform_plan`)."""
    import torch

    x = torch.as_tensor(images_u8)
    if x.ndim == 3:
        x = x.unsqueeze(1)
    else:
        x = x.permute(0, 3, 1, 2)
    x = x.float().div_(255.0)
    plan = transform_plan(x.shape[-2], x.shape[-1], pre)
    x = _resize(x, plan["resize_to"], plan["antialias"], pre.interpolation)
    top, left, h, w = plan["crop"]
    x = x[..., top : top + h, left : left + w]
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    mean = torch.tensor(pre.mean, dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(pre.std, dtype=x.dtype).view(1, 3, 1, 1)
    x = (x - mean) / std
    if pre.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


#: how far the folded model's outputs may lie from the model's on the check images, relative to
#: their largest magnitude (float32 rounding of the folded weights: ~5e-6 on Lite0; a fold of a
#: BatchNorm into a convolution it does not follow changes the outputs by O(1))
FOLD_TOLERANCE = 1e-3
#: images the folded model is checked on
FOLD_CHECK_IMAGES = 8


def fold_batchnorms(model):
    """A copy of ``model`` in eval mode with every BatchNorm2d folded into the Conv2d registered
    just before it, and how many were folded.

    A BatchNorm in eval mode is the affine map y = γ (x − μ) / √(σ² + ε) + β with its running
    statistics, so after a convolution it folds into the convolution's weight and bias
    (``torch.nn.utils.fusion.fuse_conv_bn_eval``); timm's ``BatchNormAct2d`` keeps its dropout and
    activation. Only a BatchNorm whose predecessor in registration order is a Conv2d is folded;
    registration order is usually, not always, the order of computation: check the result
    (:func:`inference_model` does). ``model`` is not changed.
    """
    import copy

    import torch.nn as nn
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    folded = copy.deepcopy(model).eval()
    pairs, prev, inside_bn = [], None, None
    for name, mod in folded.named_modules():
        if inside_bn is not None and name.startswith(inside_bn + "."):
            continue  # a BatchNormAct2d's dropout and activation
        inside_bn = None
        if isinstance(mod, nn.Conv2d):
            prev = (name, mod)
        elif isinstance(mod, nn.BatchNorm2d):
            if prev is not None and mod.track_running_stats and mod.running_mean is not None:
                pairs.append((prev, (name, mod)))
            prev, inside_bn = None, name
        elif not list(mod.children()):  # any other computing module breaks the chain
            prev = None
    for (conv_name, conv), (bn_name, bn) in pairs:
        _set_submodule(folded, conv_name, fuse_conv_bn_eval(conv, bn))
        rest = [m for m in (getattr(bn, "drop", None), getattr(bn, "act", None)) if m is not None]
        _set_submodule(folded, bn_name, nn.Sequential(*rest) if rest else nn.Identity())
    return folded, len(pairs)


def _set_submodule(root, name: str, module) -> None:
    parent, _, attr = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, attr, module)


def inference_model(model, probe, *, fold_batchnorm: bool = True) -> tuple[object, int]:
    """The model to extract features with, and how many BatchNorms it has folded: the folded copy
    of ``model`` (:func:`fold_batchnorms`) when its outputs on the input batch ``probe`` agree with
    the model's (within :data:`FOLD_TOLERANCE` of their largest magnitude), else ``model`` itself
    (logged). ``model`` must be in eval mode on the probe's device."""
    import torch

    from .io import log

    if not fold_batchnorm:
        return model, 0
    folded, n = fold_batchnorms(model)
    if n == 0:
        return model, 0
    with torch.inference_mode():
        ref, got = model(probe), folded(probe)
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    diff = float((got - ref).abs().max()) if ref.numel() else 0.0
    if not (diff <= FOLD_TOLERANCE * max(scale, 1e-12)):
        log(
            f"  BatchNorm folding changed the outputs by {diff:.3g} (largest output {scale:.3g}): "
            "features from the unfolded model"
        )
        return model, 0
    return folded, n


def extract_features(
    model,
    images: np.ndarray,
    pre: Preprocessing,
    *,
    batch_size: int = 256,
    threads: int | None = None,
    progress: bool = True,
    desc: str = "features",
    device: str = "auto",
    fold_batchnorm: bool = True,
    info: dict | None = None,
) -> np.ndarray:
    """Global-pooled features of ``images`` (float32, one row per image), batch by batch.

    ``device="auto"`` uses the first CUDA GPU when torch sees one (e.g. a SLURM job with
    ``gpu: 1``), else the CPU (:func:`dpcl.devices.resolve_device`); images are decoded and resized on
    the CPU either way. ``info``, if given, also receives ``device``: :func:`dpcl.devices.device_record`.
    ``fold_batchnorm``: run a copy with the BatchNorms folded into their convolutions
    (:func:`inference_model`; ``model`` itself is left as it is); ``info``, if given, receives
    ``batchnorms_folded``.
    """
    import torch
    from tqdm.auto import tqdm

    if threads:
        torch.set_num_threads(int(threads))
    dev = resolve_device(device, key="device")
    model = model.to(dev)
    if pre.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.eval()
    n_folded = 0
    if fold_batchnorm and len(images):
        probe = preprocess_batch(images[:FOLD_CHECK_IMAGES], pre).to(dev)
        model, n_folded = inference_model(model, probe)
        if n_folded and pre.channels_last:
            model = model.to(memory_format=torch.channels_last)
    if info is not None:
        info["batchnorms_folded"] = n_folded
        info["device"] = device_record(dev)
    out = None
    n = len(images)
    bar_out = progress_stream()  # the terminal only, never a job's log file
    with (
        torch.inference_mode(),
        tqdm(
            total=n,
            desc=desc,
            unit="img",
            disable=not progress or bar_out is None,
            file=bar_out,
        ) as bar,
    ):
        for start in range(0, n, batch_size):
            feats = model(
                preprocess_batch(images[start : start + batch_size], pre).to(dev, non_blocking=True)
            )
            if feats.ndim != 2:
                raise ValueError(f"backbone returned shape {tuple(feats.shape)}; expected (batch, features)")
            if out is None:
                out = np.empty((n, feats.shape[1]), dtype=np.float32)
            out[start : start + len(feats)] = feats.float().cpu().numpy()
            bar.update(len(feats))
    return out if out is not None else np.empty((0, 0), dtype=np.float32)


def content_hash(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_feature_cache(
    path: str | Path, features: np.ndarray, labels: np.ndarray, index: np.ndarray, meta: dict
) -> dict:
    """Write features, labels, original sample indices and metadata (with a content hash)."""
    meta = dict(
        meta, n=int(len(labels)), dim=int(features.shape[1]), sha256=content_hash(features, labels, index)
    )
    write_npz(
        path,
        features=features,
        labels=labels.astype(np.int64),
        index=index.astype(np.int64),
        meta=np.array(json.dumps(meta, sort_keys=True)),
    )
    return meta


class FeatureCacheError(ValueError):
    """A feature cache is unreadable, incomplete or not what its metadata says; the message
    names the file and how to recover."""


def load_feature_cache(
    path: str | Path, verify: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Features, labels, original indices and metadata; ``verify`` (default) re-checks the content
    hash recorded when the cache was written (one sha256 over the arrays),
    so a cache changed or truncated after it was written is refused by name, never used."""
    import zipfile

    fix = f"delete {path} (Snakemake rewrites it) or rerun with --forcerun features"
    try:
        with np.load(path, allow_pickle=False) as z:
            feats, labels, index = z["features"], z["labels"], z["index"]
            meta = json.loads(str(z["meta"]))
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError) as e:
        raise FeatureCacheError(
            f"feature cache {path} is unreadable or incomplete ({type(e).__name__}: {e}); {fix}"
        ) from None
    if verify and content_hash(feats, labels, index) != meta.get("sha256"):
        raise FeatureCacheError(
            f"feature cache {path} does not match the content hash written with it (changed "
            f"or damaged after it was written); {fix}"
        )
    check_finite(feats, path)
    return feats, labels, index, meta


def check_finite(feats: np.ndarray, path: str | Path) -> None:
    """Refuse features with a NaN or ±inf entry, naming ``path``: every learner reads its features
    through :func:`load_feature_cache`, and a non-finite value would pass norm checks (NaN compares
    false) and clipping (NaN · c is NaN) and turn a release into NaN. A cache is written from a
    backbone's outputs, so such a row means a broken backbone or image, never data to train on."""
    if feats.dtype.kind not in "fc":
        raise FeatureCacheError(f"feature cache {path}: features must be floating point, got {feats.dtype}")
    finite = np.isfinite(feats)
    if not finite.all():
        rows = np.flatnonzero(~finite.reshape(len(feats), -1).all(axis=1))
        raise FeatureCacheError(
            f"feature cache {path}: {len(rows)} row(s) with NaN or inf features (first: row {int(rows[0])}); "
            "every feature must be finite. Rebuild it (delete the file or rerun with --forcerun features) "
            "and check the backbone and images if it recurs"
        )
