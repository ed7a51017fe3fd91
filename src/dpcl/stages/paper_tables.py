"""Stage of ``workflow/rules/paper_tables.smk``: [LabelSpace] Tables A3-A10 and [Tobaben2024] Tables F.1, F.2
beside the published numbers."""

from __future__ import annotations

from pathlib import Path

from ..io import log
from .common import (
    read_records,
)


def build_paper_tables(
    metrics_paths: dict[str, list[str | Path]],
    benchmarks: dict[str, dict],
    out_dir: str | Path,
    tuning: dict | None = None,
    miniature: bool = False,
) -> list[Path]:
    """[LabelSpace] Tables A3-A10 (App. E.2, F.2-F.4) and [Tobaben2024] F.1, F.2 from every run of every
    benchmark, beside the published numbers: ``out_dir/table_<ID>.{csv,md,tex}``; ``metrics_paths``:
    benchmark -> its metrics.json; ``tuning``: the config's block (a note says how the runs were tuned);
    ``miniature``: every table's first note says the run is a miniature (config key ``miniature``)."""
    from ..report import paper_tables
    from ..training.tuning_protocol import protocol_note

    records = {name: read_records(paths) for name, paths in metrics_paths.items()}
    tables = paper_tables.build_paper_tables(records, benchmarks, notes=[protocol_note(tuning)])
    if miniature:
        for t in tables:
            t.notes.insert(0, paper_tables.MINIATURE_NOTE)
    written = paper_tables.write_paper_tables(tables, out_dir)
    log(f"paper tables: wrote {len(written)} files to {out_dir}")
    return written
