"""Helpers shared by the test modules (import: ``from helpers import ...``; pytest puts tests/ on the path)."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the audit block of the workflow tests' configs: every part of the audit table at one ε and small sizes
#: (the default sizes cost a tiny workflow run about 45 job-seconds, more than its learners; the audits'
#: power is tested in tests/audits/test_whitebox_audit.py and friends, and in CI by .ci/audit.sh)
SMALL_AUDIT = {
    "epsilons": [1],
    "trials": 2000,
    "learner_trials": 8,
    "whitebox_runs": 4,
    "whitebox_canaries": 200,
    "whitebox_bias_trials": 50,
    "canary_runs": 2,
    "canary_count": 50,
}


def run_snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """The repository's Snakefile on ``workdir``/config.yaml with 2 cores; ``args`` (targets, flags) go
    before --configfile, which takes every word after it. ``env`` is added to the environment. With
    ``check`` a non-zero exit fails the test with the ends of snakemake's stdout and stderr.

    Under ``pytest -n`` every job runs one thread (``--max-threads 1``), as the workers do: the other
    workers keep the cores busy, and a job's torch threads then wait on each other (measured on 2 cores
    beside another worker: the FiLM workflow fixture of tests/workflow/test_workflow_film.py 80-84 s with the
    FiLM jobs' default two threads, 20 s with one)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        args = ("--max-threads", "1", *args)
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
    """A copy of the head learners' noisy clipped gradient sum (dpcl.training.clipped_sum.noisy_clipped_sum:
    same random draws in the same order, the Poisson sample, then the weight and bias noise, and the same
    arithmetic), with clipping optional, for the white-box audits' broken variants."""
    import numpy as np

    from dpcl.privacy import releases, sampling
    from dpcl.training.clipped_sum import (
        HeadData,
        clip_factors,
        head_attribution,
        logit_grads32,
    )

    data = HeadData(x, y)
    batch = sampling.by_gaps(gen, len(data), rate, population=data.x)
    s_w, s_b = np.zeros(head.w.shape, dtype=np.float32), np.zeros_like(head.b)
    if batch.size:
        xb = data.x[batch]
        d = logit_grads32(head.w, head.b, xb, data.y[batch], active)
        if clipped:
            d *= clip_factors(data.sq1[batch], d, clip).astype(np.float32)[:, None]
        s_w, s_b = d.T @ xb, d.sum(axis=0, dtype=np.float64)
    if sigma > 0:
        g_w = sigma * clip * gen.standard_normal(head.w.shape) + s_w
        g_b = sigma * clip * gen.standard_normal(head.b.shape) + s_b
    else:
        g_w, g_b = s_w.astype(np.float64), s_b
    # a copy of the primitive reports its release as the primitive does (what it read, its noise, the
    # attribution a correct implementation's adversary computes), so that the audits see the bug
    releases.publish(
        "clipped_gradient_sum",
        np.r_[g_w.ravel(), g_b],
        rows=data.x[batch],
        sensitivity=clip,
        noise_scale=sigma * clip,
        attribution=head_attribution(head.w, head.b, clip=clip, active=active),
        state=(head.w, head.b),
    )
    return g_w, g_b


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


def broken_copy(module, function: str, *changes: tuple[str, str]):
    """A broken copy of ``module.function`` for a test: its source with each (old, new) of ``changes``
    applied (each ``old`` occurring exactly once), compiled in the module's namespace, so that everything
    but the changed lines is the code the pipeline runs. The caller monkeypatches it where it is called."""
    import inspect
    import textwrap

    src = textwrap.dedent(inspect.getsource(getattr(module, function)))
    for old, new in changes:
        assert src.count(old) == 1, f"{old!r} must occur once in {function}"
        src = src.replace(old, new)
    namespace = dict(vars(module))
    exec(compile(src, f"<broken {function}>", "exec"), namespace)  # noqa: S102
    return namespace[function]


def check_memory_update_integrity(monkeypatch, module, task_fn: str, task, whitebox, *, delta: float) -> None:
    """A memory-buffer learner's white-box audit (``whitebox``: its module, with ``audit_whitebox`` and
    ``buffer_poisson_rows``) with ``module.task_fn`` replaced by ``task()``, the learner's loop copied in
    its test: the correct loop passes the update-integrity replay (both parts and the Poisson row), the
    loop whose head moves by g plus an un-noised statistic (``task(leak=True)``) fails it in both."""
    import pytest

    from dpcl.audits.whitebox import UpdateIntegrityError

    small = {"whitebox_runs": 2, "whitebox_canaries": 80, "whitebox_poisson_runs": 2}
    monkeypatch.setattr(module, task_fn, task())
    assert len(whitebox.audit_whitebox(1.0, delta, audit=small, seed=0)) == 3  # both parts, the Poisson row
    monkeypatch.setattr(module, task_fn, task(leak=True))
    with pytest.raises(UpdateIntegrityError, match="not the optimiser"):
        whitebox.audit_whitebox(1.0, delta, audit=small, seed=0)
    with pytest.raises(UpdateIntegrityError):
        whitebox.buffer_poisson_rows(1.0, delta, audit=small, seed=0, alpha=0.05)


@cache
def warm_worker():
    """The workflow's warm worker module (workflow/scripts/warm_worker.py: workflow plumbing, not dpcl)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "warm_worker", REPO / "workflow" / "scripts" / "warm_worker.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("warm_worker", mod)
    spec.loader.exec_module(mod)
    return mod
