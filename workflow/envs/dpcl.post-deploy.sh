#!/usr/bin/env bash
# Snakemake runs this once in the freshly created rule environment (workflow/envs/dpcl.yaml),
# from its working directory: install the dpcl library of this checkout into it.
set -euo pipefail
if [ ! -f pyproject.toml ] || ! grep -q '^name = "dpcl"' pyproject.toml; then
    echo "dpcl post-deploy: run snakemake from the dpcl repository root ($PWD has no dpcl pyproject.toml)" >&2
    exit 1
fi
python -m pip install --no-deps -e .
