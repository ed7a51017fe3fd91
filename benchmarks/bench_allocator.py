"""The jobs' allocator settings (the Snakefile's ``KEEP_FREED_MEMORY``, config key ``keep_freed_memory``) against glibc's
defaults, on the work of Public Labels ×1000, each in a fresh process (glibc reads the settings
when a process starts), the results asserted equal bit for bit:

- ``film``: a FiLM member's DP-SGD (``train_film``) on the miniature paper run's backbone (a random
  ViT of 2 blocks, width 8, 32 px) with ``--outputs`` outputs (default 200,000: ImageNet-R ×1000),
  130 images at sample rate 0.66, ``--steps`` steps;
- ``head``: a head's DP-SGD (``train_head``) over ``--outputs`` outputs on 64-dim features;
- ``votes``: one member joining the PEFT ensemble's votes (``EnsembleVotes.add``, every
  aggregation rule) over ``--outputs`` outputs × 200 test rows.

Prints JSON: per workload the median seconds with glibc's defaults and with the settings, their
ratio and whether the results are the same. Run: ``python benchmarks/bench_allocator.py
[--outputs 200000 --steps 4 --repeats 3]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

from _timing import median_time

#: the Snakefile's KEEP_FREED_MEMORY: glibc's mallopt(3) environment variables that keep freed memory
KEEP_FREED = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}

WORKLOADS = ("film", "head", "votes")


def _digest(*arrays) -> str:
    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _child(workload: str, outputs: int, steps: int, repeats: int) -> dict:
    """Run one workload ``repeats`` times in this process (after a warm-up): median seconds and digest."""
    import numpy as np
    import torch

    torch.set_num_threads(1)  # as the pipeline's jobs run
    g = np.random.default_rng(0)
    out: dict = {}
    if workload == "film":
        import timm

        from dpcl.backbones import Preprocessing
        from dpcl.training.film import train_film
        from dpcl.training.heads import DPSGDConfig

        torch.manual_seed(0)
        backbone = timm.create_model(
            "vit_tiny_patch16_224",
            pretrained=False,
            num_classes=0,
            img_size=32,
            depth=2,
            embed_dim=8,
            num_heads=2,
            patch_size=8,
        ).eval()
        pre = Preprocessing(32, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), channels_last=False)
        images = g.integers(0, 256, (130, 32, 32, 3), dtype=np.uint8)
        rows = g.integers(0, outputs, 130)
        cfg = DPSGDConfig(sample_rate=0.66, epochs=0.66 * steps, clip=0.5)

        def run():
            member, _ = train_film(
                backbone,
                images,
                rows,
                outputs,
                cfg,
                noise_multiplier=0.76,
                rng=np.random.default_rng(1),
                pre=pre,
                physical_batch=64,
                device="cpu",
            )
            arrays = member.to_arrays()
            out["digest"] = _digest(*(arrays[k] for k in sorted(arrays)))

    elif workload == "head":
        from dpcl.training.heads import DPSGDConfig, LinearHead, train_head

        x = g.standard_normal((130, 64)).astype(np.float32)
        y = g.integers(0, outputs, 130)
        cfg = DPSGDConfig(sample_rate=0.66, epochs=0.66 * steps, clip=0.5)

        def run():
            head = LinearHead(64, outputs)
            train_head(head, x, y, cfg, 0.76, np.random.default_rng(1))
            out["digest"] = _digest(head.w, head.b)

    else:
        from dpcl.learners.aggregation import RULES, EnsembleVotes

        z = g.standard_normal((200, outputs))
        labels = np.arange(outputs, dtype=np.int64)

        def run():
            votes = EnsembleVotes(200)
            votes.add(z, labels)
            out["digest"] = _digest(*(votes.predict(r) for r in RULES))

    out["seconds"] = median_time(run, repeats)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outputs", type=int, default=200_000)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.outputs, args.steps, args.repeats)))
        return
    plain = {k: v for k, v in os.environ.items() if k not in KEEP_FREED}
    report: dict = {"outputs": args.outputs, "steps": args.steps, "settings": KEEP_FREED}
    for workload in WORKLOADS:
        res = {}
        for name, env in (("default", plain), ("keep_freed", {**plain, **KEEP_FREED})):
            cmd = [sys.executable, __file__, "--child", workload, *sys.argv[1:]]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            res[name] = json.loads(done.stdout.strip().splitlines()[-1])
        same = res["default"]["digest"] == res["keep_freed"]["digest"]
        report[workload] = {
            "default_s": round(res["default"]["seconds"], 4),
            "keep_freed_s": round(res["keep_freed"]["seconds"], 4),
            "ratio": round(res["keep_freed"]["seconds"] / res["default"]["seconds"], 3),
            "same_results": same,
        }
        assert same, f"{workload}: the results differ between the allocator settings"
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
