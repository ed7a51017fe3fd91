"""Helpers shared by the test modules (import: ``from helpers import ...``; pytest puts tests/ on the path)."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """The repository's Snakefile on ``workdir``/config.yaml with 2 cores; ``args`` (targets, flags) go
    before --configfile, which takes every word after it. ``env`` is added to the environment. With
    ``check`` a non-zero exit fails the test with the ends of snakemake's stdout and stderr."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        *args,
        "--cores",
        "2",
        "--configfile",
        str(Path(workdir) / "config.yaml"),
    ]
    res = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env=None if env is None else {**os.environ, **env}
    )
    if check and res.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res


def merge_configs(base: dict, over: dict) -> dict:
    """Snakemake's merge of several --configfile files: key by key, the later one winning (in place)."""
    for k, v in over.items():
        base[k] = merge_configs(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base


def noisy_head_sum(head, x, y, rate, clip, sigma, gen, active, *, clipped=True):
    """A copy of the memory learners' noisy clipped gradient sum of a linear head (same random draws in the
    same order: the Poisson sample, then the weight and bias noise), with clipping optional, for the
    white-box audits' broken variants."""
    import numpy as np

    from dpcl.training.heads import logit_grads, per_sample_grad_norms

    n = len(y)
    batch = np.flatnonzero(gen.random(n) < rate) if n else np.zeros(0, dtype=np.int64)
    g_w, g_b = np.zeros_like(head.w), np.zeros_like(head.b)
    if batch.size:
        xb = x[batch]
        d = logit_grads(head.w, head.b, xb, y[batch], active)
        if clipped:
            d *= np.minimum(1.0, clip / np.maximum(per_sample_grad_norms(xb, d), 1e-12))[:, None]
        g_w += d.T @ xb
        g_b += d.sum(axis=0)
    if sigma > 0:
        g_w += sigma * clip * gen.standard_normal(g_w.shape)
        g_b += sigma * clip * gen.standard_normal(g_b.shape)
    return g_w, g_b


def adam_step(head, grads, moments, cfg, step: int) -> None:
    """The memory learners' Adam step on the head (g / normaliser, bias-corrected) in place; ``moments`` is
    [m, v], each a [weight, bias] pair of arrays."""
    import numpy as np

    m, v = moments
    b1, b2 = cfg.betas
    for k, (p, g) in enumerate(((head.w, grads[0]), (head.b, grads[1]))):
        g = g / cfg.normaliser
        m[k] = b1 * m[k] + (1 - b1) * g
        v[k] = b2 * v[k] + (1 - b2) * g * g
        p -= cfg.lr * (m[k] / (1 - b1**step)) / (np.sqrt(v[k] / (1 - b2**step)) + cfg.adam_eps)


#: files never read as text (binary data, images, archives)
BINARY_SUFFIXES = {
    ".png", ".jpg", ".jpeg", ".gif", ".pdf", ".npz", ".npy", ".pt", ".pth", ".pkl", ".gz", ".tar",
    ".zip", ".mat", ".parquet", ".onnx", ".safetensors", ".ico", ".woff", ".woff2", ".ttf",
}  # fmt: skip


@cache
def tracked_texts() -> dict[str, str]:
    """Every git-tracked text file of the repository (path relative to its root -> content); symlinks once,
    at their target. Skips the test when the tree is not a git checkout."""
    import pytest

    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    texts = {}
    for rel in filter(None, out.split("\0")):
        path = root / rel
        if path.suffix.lower() in BINARY_SUFFIXES or path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts
