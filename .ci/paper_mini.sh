#!/usr/bin/env bash
# The paper's whole DAG in miniature (config/paper_mini.yaml over config/paper.yaml): every rule
# of the paper grid executes on synthetic data in the real file formats, then `dpcl miniature
# check` compares the run with the full paper DAG (docs/reproducing.md: "The paper's whole DAG in miniature").
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p results/paper_mini
start=$SECONDS
dpcl fixtures paper-mini resources/paper_mini_raw
if ! snakemake --cores all --configfile config/paper.yaml config/paper_mini.yaml > results/paper_mini/snakemake.log 2>&1; then
    tail -n 80 results/paper_mini/snakemake.log
    exit 1
fi
tail -n 3 results/paper_mini/snakemake.log
echo "miniature paper run: $((SECONDS - start)) s"
snakemake -n --quiet rules --configfile config/paper.yaml > results/paper_mini/paper_dryrun.txt 2>&1
dpcl miniature check results/paper_mini --log results/paper_mini/snakemake.log \
    --paper-dryrun results/paper_mini/paper_dryrun.txt
head -n 14 results/paper_mini/tables/paper/table_A3.md
