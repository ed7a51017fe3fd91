"""Stage of ``workflow/rules/paper_tables.smk``: paper 000 Tables A3-A10 beside the published numbers."""

from __future__ import annotations

from pathlib import Path

from .common import (
    log,
    read_records,
)


def build_paper_tables(
    metrics_paths: dict[str, list[str | Path]], benchmarks: dict[str, dict], out_dir: str | Path
) -> list[Path]:
    """Paper 000 Tables A3-A10 (App. E.2, F.2-F.4) from every run of every benchmark, beside the
    published numbers: ``out_dir/table_<ID>.{csv,md,tex}``; ``metrics_paths``: benchmark -> its metrics.json."""
    from ..report import paper_tables

    records = {name: read_records(paths) for name, paths in metrics_paths.items()}
    written = paper_tables.write_paper_tables(paper_tables.build_paper_tables(records, benchmarks), out_dir)
    log(f"paper tables: wrote {len(written)} files to {out_dir}")
    return written
