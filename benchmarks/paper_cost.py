"""The paper grid's FiLM compute, on paper: GPU-hours on a named GPU from the grid's job list, the images
each job pushes through ViT-B/16 and the FLOPs per image, beside the paper's own figure.

1. **Job list**: ``snakemake -n --configfile config/paper.yaml`` (run here, or ``--dryrun FILE`` with its
   saved output): every ``tune_film``, ``film_ensemble`` and ``film_baseline`` job with its wildcards.
2. **Images per job** from the config (``dpcl.config.load_config``, schema defaults applied) and the data
   sets' published sizes (:data:`SIZES`): a FiLM training pass over a task's data is ``epochs`` epochs of
   its images (steps × expected batch); the PEFT ensemble, Naive and Non-CL train on each image ``epochs``
   times in all, DP-A-GEM twice as often (its reference gradient draws a second expected batch every
   step); a tuning job runs ``tuning.trials`` trainings on a task-sized set per ε. Evaluation is a forward
   pass per test image and trained model (each PEFT member scores every test image once).
3. **FLOPs per image**: counted by ``torch.utils.flop_counter`` on ViT-B/16 at 224 px (meta tensors, no
   data): the forward, and the forward plus a backward that reaches every FiLM parameter (input gradients
   through every block, no weight gradients of the frozen layers). The per-sample gradients, clipping
   and noise add below 1 % of that (38,400 FiLM parameters per sample).
4. **GPU-hours** = FLOPs / (the GPU's published dense float32 peak × ``--utilisation``, stated, default
   0.4). dpcl trains in float32 (TF32 and bf16 are not used), so the float32 peak is the roof.

The paper: "one NVIDIA V100 ... The runtime for one repeat is around 16 hours ... All experiments together
consumed of the order of 30 GPU days" ([LabelSpace] App. D.3). When a GPU is lent,
``benchmarks/bench_film.py`` at ViT-B/16, batch 64 measures the utilisation this assumes.

Run: ``python benchmarks/paper_cost.py [--gpu V100 A100 H100] [--utilisation 0.4] [--dryrun FILE]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: published dense float32 peak (TFLOP/s, no tensor cores): NVIDIA's data sheets (SXM parts)
GPUS = {"V100": 15.7, "A100": 19.5, "H100": 67.0}
#: (training images, test images) of the paper's data sets: CIFAR-100's official splits; ImageNet-R's
#: 30,000 images split 80/20 per seed ([LabelSpace] App. E); 5-datasets' training size as config/paper.yaml
#: states it (``nominal_train_size``) and its test size as the five official test sets' (MNIST 10,000,
#: SVHN 26,032, Fashion-MNIST 10,000, CIFAR-10 10,000) plus notMNIST's (about 1,900; an estimate)
SIZES = {"cifar100": (50_000, 10_000), "imagenet_r": (24_000, 6_000), "five_datasets": (260_110, 57_932)}
FILM_RULES = ("tune_film", "film_ensemble", "film_baseline")


def vit_b16_flops() -> tuple[float, float]:
    """(forward, forward + FiLM backward) FLOPs of one 224 px image through ViT-B/16, counted on meta tensors."""
    import timm
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0)
    for name, p in model.named_parameters():
        p.requires_grad_("norm" in name)  # the FiLM parameters: every LayerNorm's scale and shift
    x = torch.empty(1, 3, 224, 224, device="meta")
    with FlopCounterMode(display=False) as fwd:
        model(x)
    with FlopCounterMode(display=False) as both:
        model(x).sum().backward()
    return float(fwd.get_total_flops()), float(both.get_total_flops())


def film_jobs(text: str) -> list[tuple[str, dict]]:
    """(rule, wildcards) of every FiLM job in a dry run's output."""
    jobs = []
    for rule, body in re.findall(r"^(?:local)?rule (\w+):\n((?:    .*\n)*)", text, re.M):
        if rule in FILM_RULES:
            m = re.search(r"wildcards: (.*)", body)
            jobs.append((rule, dict(kv.split("=", 1) for kv in m.group(1).split(", ")) if m else {}))
    return jobs


def job_images(rule: str, w: dict, cfg: dict) -> tuple[float, float]:
    """(training images, evaluation forwards) of one FiLM job (module docstring, step 2)."""
    dataset = "imagenet_r" if w["dataset"].startswith("imagenet_r") else w["dataset"]
    n_train, n_test = SIZES[dataset]
    tasks = int(re.search(r"-t(\d+)$", w["scenario"]).group(1))
    film = cfg["dpsgd"] | ((cfg.get("film") or {}).get("dpsgd") or {})
    epochs = float(film["epochs"])
    if rule == "tune_film":
        n_eps = len(cfg["epsilons"])
        return n_eps * cfg["tuning"]["trials"] * epochs * n_train / tasks, n_eps * cfg["tuning"][
            "trials"
        ] * n_test / tasks
    learner = w["learner"]
    train = epochs * n_train * (2 if learner == "agem_film" else 1)
    evals = tasks * n_test if learner == "peft_film" else (tasks + 1) / 2 * n_test
    return train, evals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dryrun", type=Path, help="saved output of snakemake -n --configfile config/paper.yaml")
    ap.add_argument("--gpu", nargs="+", choices=sorted(GPUS), default=sorted(GPUS))
    ap.add_argument("--utilisation", type=float, default=0.4, help="share of the float32 peak reached")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    args = ap.parse_args()
    from dpcl.config import load_config

    if args.dryrun:
        text = args.dryrun.read_text()
    else:
        text = subprocess.run(
            ["snakemake", "-n", "--configfile", "config/paper.yaml"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    cfg = load_config(REPO / "config" / "paper.yaml")
    fwd, train_flops = vit_b16_flops()
    per_rule = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for rule, w in film_jobs(text):
        tr, ev = job_images(rule, w, cfg)
        key = (rule, "imagenet_r" if w["dataset"].startswith("imagenet_r") else w["dataset"])
        per_rule[key][0] += 1
        per_rule[key][1] += tr
        per_rule[key][2] += ev
    total = sum(r[1] * train_flops + r[2] * fwd for r in per_rule.values())
    hours = {g: total / (GPUS[g] * 1e12 * args.utilisation) / 3600 for g in args.gpu}
    out = {
        "flops_per_image": {"forward": fwd, "forward_and_film_backward": train_flops},
        "jobs": {
            r: {"count": v[0], "training_images": v[1], "evaluation_forwards": v[2]}
            for r, v in per_rule.items()
        },
        "total_pflop": total / 1e15,
        "utilisation": args.utilisation,
        "gpu_hours": hours,
        "paper": "one V100, about 16 h per repeat; of the order of 30 GPU days in all ([LabelSpace] App. D.3)",
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(
        f"ViT-B/16 at 224 px: {fwd / 1e9:.1f} GFLOP forward, {train_flops / 1e9:.1f} GFLOP forward + FiLM backward\n"
    )
    print("| rule | data set | jobs | training images | evaluation forwards | share of the FLOPs |")
    print("|---|---|---|---|---|---|")
    for (r, d), (n, tr, ev) in sorted(per_rule.items()):
        share = (tr * train_flops + ev * fwd) / total
        print(f"| `{r}` | {d} | {n:,} | {tr / 1e6:,.1f} M | {ev / 1e6:,.1f} M | {share:.1%} |")
    print(f"\n{total / 1e15:,.0f} PFLOP in all. At {args.utilisation:.0%} of the float32 peak:\n")
    print("| GPU | float32 peak | GPU-hours | GPU-days |\n|---|---|---|---|")
    for g, h in hours.items():
        print(f"| {g} | {GPUS[g]} TFLOP/s | {h:,.0f} | {h / 24:,.1f} |")
    print(f"\nThe paper: {out['paper']}.")


if __name__ == "__main__":
    main()
