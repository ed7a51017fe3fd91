"""Helpers shared by the test modules (import: ``from helpers import ...``; pytest puts tests/ on the path)."""

from __future__ import annotations

import os
import subprocess
import sys
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
