"""Head-only DP-SGD against its peers on identical work: dpcl's numpy step (:func:`dpcl.training.heads.train_head`),
opacus 1.x's ``make_private`` with per-sample gradients by hooks and by ghost clipping, and PyTorch's
non-private step.

The work: N × d float32 features (the cached features' type) and labels over ``--classes`` outputs,
one epoch of Poisson sampling at rate ``--batch``/N (opacus: its ``DPDataLoader``, the same rate), a
linear head, clipping to 1, noise σ = 1, Adam at lr 1e-3; everything on ``--threads`` CPU threads
(default 1, a job's share). PyTorch's twin takes the same expected batch from a shuffled loader without
clipping or noise. Shapes (``--shape``): ``default`` is the embedded default benchmark's (EfficientNet-
Lite0's 1,280 features, 10 outputs, expected batch 256, N 10,000), ``paper`` ViT-B/16's 768 features at
CIFAR-100's 100 outputs, ``paper-wide`` at 1,000 (Public Labels ×10). Each runs once untimed first; the
medians of ``--repeats`` epochs are reported with every peer's ratio to dpcl's private epoch.

Run: ``python benchmarks/bench_heads_peers.py [--shape default|paper|paper-wide] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from dpcl.training.heads import DPSGDConfig, LinearHead, train_head

SHAPES = {
    "default": {"n": 10_000, "dim": 1280, "classes": 10, "batch": 256},
    "paper": {"n": 10_000, "dim": 768, "classes": 100, "batch": 256},
    "paper-wide": {"n": 10_000, "dim": 768, "classes": 1000, "batch": 256},
}


def torch_epoch(x, y, classes, batch, *, mode: str | None) -> float:
    """Seconds for one epoch of PyTorch's step (``mode`` None) or opacus's ("hooks" or "ghost")."""
    data = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    model = torch.nn.Linear(x.shape[1], classes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = torch.nn.CrossEntropyLoss()
    if mode is None:
        loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True)
    else:
        from opacus import PrivacyEngine

        loader = torch.utils.data.DataLoader(data, batch_size=batch)
        engine = PrivacyEngine(accountant="rdp")
        kw = {"criterion": criterion} if mode == "ghost" else {}
        made = engine.make_private(
            module=model,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=1.0,
            max_grad_norm=1.0,
            poisson_sampling=True,
            grad_sample_mode=mode,
            **kw,
        )
        model, opt, loader = made[0], made[1], made[-1]
        if mode == "ghost":
            criterion = made[2]
    t0 = time.perf_counter()
    for xb, yb in loader:
        if not len(xb):
            continue
        loss = criterion(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="default")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    logging.getLogger("opacus").setLevel(logging.ERROR)
    s = SHAPES[args.shape]
    g = np.random.default_rng(0)
    x = g.normal(size=(s["n"], s["dim"])).astype(np.float32)
    y = g.integers(0, s["classes"], s["n"])
    cfg = DPSGDConfig(sample_rate=s["batch"] / s["n"], epochs=1.0, clip=1.0, lr=1e-3)

    def dpcl_epoch() -> float:
        t0 = time.perf_counter()
        train_head(LinearHead(s["dim"], s["classes"]), x, y, cfg, 1.0, np.random.default_rng(1))
        return time.perf_counter() - t0

    runs = {
        "dpcl_private": dpcl_epoch,
        "opacus_hooks": lambda: torch_epoch(x, y, s["classes"], s["batch"], mode="hooks"),
        "opacus_ghost": lambda: torch_epoch(x, y, s["classes"], s["batch"], mode="ghost"),
        "torch_nonprivate": lambda: torch_epoch(x, y, s["classes"], s["batch"], mode=None),
    }
    times = {}
    torch.manual_seed(0)
    with threadpool_limits(args.threads):
        torch.set_num_threads(args.threads)
        for name, fn in runs.items():
            fn()  # warm-up
            times[name] = statistics.median(fn() for _ in range(args.repeats))
    steps = cfg.steps
    base = times["dpcl_private"]
    out = {"shape": args.shape, **s, "steps": steps, "threads": args.threads}
    for name, t in times.items():
        out[f"{name}_ms_per_step"] = round(1000 * t / steps, 3)
        out[f"{name}_over_dpcl"] = round(t / base, 3)
    assert math.isclose(out["dpcl_private_over_dpcl"], 1.0)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
