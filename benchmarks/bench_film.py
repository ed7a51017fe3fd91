"""FiLM DP-SGD step time: private (opacus hooks per-sample gradients, clipping, noise)
against the non-private twin (plain backward, no clipping, no noise) on the same batches.

Default: ``vit_base_patch16_224`` at batch 64 on CUDA when available (the paper's setting,
App. D), else a tiny ViT (32 px, patch 8) at batch 32 on the CPU. Every step takes the whole
batch (sample rate 1), so a step is one logical batch of exactly ``--batch`` images; the
first run is a warm-up. Prints JSON with both step times and their ratio.

Run: ``python benchmarks/bench_film.py [--arch vit_base_patch16_224 --batch 64 --steps 10]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import numpy as np
import timm
import torch

from dpcl.backbones import Preprocessing
from dpcl.training.film import film_parameter_count, train_film
from dpcl.training.heads import DPSGDConfig


def main() -> None:
    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="vit_base_patch16_224" if cuda else "vit_tiny_patch16_224")
    ap.add_argument("--image-size", type=int, default=224 if cuda else 32)
    ap.add_argument(
        "--patch-size", type=int, default=None, help="default: the arch's (8 for the CPU tiny default)"
    )
    ap.add_argument("--batch", type=int, default=64 if cuda else 32)
    ap.add_argument("--physical-batch", type=int, default=None, help="default: the whole batch")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    patch = args.patch_size or (None if cuda else 8)
    kw = {"img_size": args.image_size} | ({"patch_size": patch} if patch else {})
    torch.manual_seed(0)
    backbone = timm.create_model(args.arch, pretrained=False, num_classes=0, **kw).eval()
    pre = Preprocessing(args.image_size, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), channels_last=False)
    g = np.random.default_rng(0)
    images = g.integers(0, 256, (args.batch, args.image_size, args.image_size, 3), dtype=np.uint8)
    labels = g.integers(0, args.classes, args.batch)
    private = DPSGDConfig(sample_rate=1.0, epochs=float(args.steps), clip=1.0)
    public = DPSGDConfig(sample_rate=1.0, epochs=float(args.steps), clip=math.inf)
    physical = args.physical_batch or args.batch

    def step_time(cfg: DPSGDConfig, sigma: float) -> float:
        t0 = time.perf_counter()
        train_film(
            backbone,
            images,
            labels,
            args.classes,
            cfg,
            sigma,
            np.random.default_rng(1),
            pre,
            physical_batch=physical,
            device=args.device,
        )
        return (time.perf_counter() - t0) / cfg.steps  # train_film copies the member to the CPU: synced

    step_time(private, 1.0)  # warm-up (allocations, kernels)
    step_time(public, 0.0)
    p, n = [], []
    for _ in range(args.repeats):
        p.append(step_time(private, 1.0))
        n.append(step_time(public, 0.0))
    dev = "cuda" if (args.device == "auto" and cuda) else ("cpu" if args.device == "auto" else args.device)
    out = {
        "arch": args.arch,
        "image_size": args.image_size,
        "batch": args.batch,
        "physical_batch": physical,
        "device": torch.cuda.get_device_name() if dev.startswith("cuda") else "cpu",
        "threads": torch.get_num_threads(),
        "film_parameters": film_parameter_count(backbone),
        "private_step_s": round(statistics.median(p), 4),
        "nonprivate_step_s": round(statistics.median(n), 4),
        "ratio": round(statistics.median(p) / statistics.median(n), 3),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
