"""Batched feature extraction with an on-disk cache (DESIGN §3: one job per
dataset × backbone × split; every run reads the cache, none recomputes features).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from .backbones import Preprocessing
from .io import write_npz


def preprocess_batch(images_u8, pre: Preprocessing):
    """uint8 images (B, H, W) or (B, H, W, C) → normalised float (B, 3, R, R) tensor."""
    import torch
    import torch.nn.functional as F

    x = torch.as_tensor(images_u8)
    if x.ndim == 3:
        x = x.unsqueeze(1)
    else:
        x = x.permute(0, 3, 1, 2)
    x = x.float().div_(255.0)
    if x.shape[-1] != pre.image_size or x.shape[-2] != pre.image_size:
        x = F.interpolate(
            x, size=(pre.image_size, pre.image_size), mode=pre.interpolation, align_corners=False
        )
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    mean = torch.tensor(pre.mean, dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(pre.std, dtype=x.dtype).view(1, 3, 1, 1)
    x = (x - mean) / std
    if pre.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def extract_features(
    model,
    images: np.ndarray,
    pre: Preprocessing,
    batch_size: int = 256,
    threads: int | None = None,
    progress: bool = True,
    desc: str = "features",
    device: str = "auto",
) -> np.ndarray:
    """Global-pooled features of ``images`` (float32, one row per image), batch by batch.

    ``device="auto"`` uses the first CUDA GPU when torch sees one (e.g. a SLURM job with
    ``gpu: 1``), else the CPU; images are decoded and resized on the CPU either way.
    """
    import torch
    from tqdm.auto import tqdm

    if threads:
        torch.set_num_threads(int(threads))
    dev = torch.device(
        "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)
    )
    model = model.to(dev)
    if pre.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.eval()
    out = None
    n = len(images)
    with (
        torch.inference_mode(),
        tqdm(total=n, desc=desc, unit="img", disable=not progress, file=sys.stderr) as bar,
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
    write_npz(path, features=features, labels=labels.astype(np.int64), index=index.astype(np.int64),
              meta=np.array(json.dumps(meta, sort_keys=True)))  # fmt: skip
    return meta


def load_feature_cache(
    path: str | Path, verify: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Features, labels, original indices and metadata; ``verify`` re-checks the content hash."""
    with np.load(path, allow_pickle=False) as z:
        feats, labels, index = z["features"], z["labels"], z["index"]
        meta = json.loads(str(z["meta"]))
    if verify and content_hash(feats, labels, index) != meta["sha256"]:
        raise ValueError(f"feature cache {path} is corrupt: content hash mismatch")
    return feats, labels, index, meta
