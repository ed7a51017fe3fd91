"""Write the measured numbers the docs and the README show, from a run's output files.

    python docs/update_numbers.py [--results results]

Reads (each optional; a missing input leaves its outputs as they are and says so):

* ``<results>/tables/split_fmnist.md``: the embedded default benchmark's table, written by the
  pipeline (``snakemake --cores all``);
* ``<results>/ci/timings.tsv``: one ``step<TAB>seconds[<TAB>core-seconds]`` line per step of ``.ci/run``,
  which writes it: the step's wall time and the CPU time the machine spent during it (every process, so a
  step that runs beside another counts the other's work too);
* ``<results>/ci/pytest.xml``: the test suite's JUnit report, which ``.ci/run`` asks pytest for;
* ``<results>/ci/machine.json``: ``benchmarks/bench_roofline.py``'s report, which ``.ci/run`` writes
  first: the machine's roofs and the head DP-SGD step's distance from them in the same run.

Writes ``docs/_numbers/default_table.md`` and ``docs/_numbers/timings.md`` (included by the docs pages)
and the blocks of ``README.md`` between ``<!-- numbers:NAME -->`` and ``<!-- /numbers:NAME -->``.
``tests/test_docs.py`` checks that the README's blocks equal what this script writes from the files in
``docs/_numbers/``, so no number in them is edited by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = ROOT / "docs" / "_numbers"
README = ROOT / "README.md"

# what .ci/run names its steps, in the order the table lists them
STEPS = {
    "install": "install (apt, pip)",
    "machine": "machine index (`benchmarks/bench_roofline.py`)",
    "lint": "linters (snakefmt, snakemake --lint, ruff)",
    "docs": "docs (sphinx-build -W)",
    "default": "embedded default pipeline, clean `results/`",
    "paper_mini": "miniature paper run (`.ci/paper_mini.sh`)",
    "audit": "strong privacy audits (`.ci/audit.sh`), the FiLM CPU slice beside them",
    "film_cpu": "FiLM CPU slice (`.ci/film_cpu.sh`, beside the audits)",
    "pytest": "test suite (`python -m pytest -n auto`)",
    "slurm": "SLURM integration test (runs beside the audits and the test suite)",
    "total": "all of `.ci/run`",
}


def minutes(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60} s"


def default_table(results: Path) -> str | None:
    path = results / "tables" / "split_fmnist.md"
    if not path.exists():
        return None
    rows = [line for line in path.read_text().splitlines() if line.startswith("|")]
    if len(rows) < 3:
        raise SystemExit(f"{path}: no table found")
    return "\n".join(rows) + "\n"


def _timing_rows(results: Path) -> list[list[str]] | None:
    path = results / "ci" / "timings.tsv"
    if not path.exists():
        return None
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("\t")
        if fields[0] not in STEPS:
            raise SystemExit(f"{path}:{n}: unknown step {fields[0]!r}; known: {', '.join(STEPS)}")
        if len(fields) not in (2, 3):
            raise SystemExit(f"{path}:{n}: expected step, seconds and optionally core-seconds, got {line!r}")
        rows.append(fields)
    return rows


def read_timings(results: Path) -> dict[str, float] | None:
    """Wall seconds per step of ``.ci/run``."""
    rows = _timing_rows(results)
    return None if rows is None else {f[0]: float(f[1]) for f in rows}


def read_cpu(results: Path) -> dict[str, float]:
    """Core-seconds the machine spent during each step that has them (the third column)."""
    return {f[0]: float(f[2]) for f in _timing_rows(results) or [] if len(f) == 3}


def read_machine(results: Path) -> dict | None:
    path = results / "ci" / "machine.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


def machine_sentence(machine: dict) -> str:
    """The roofs and the head step's distance from them, from ``bench_roofline.py``'s report."""
    r = machine["roofs"]
    steps = sorted(machine["steps"], key=lambda s: s["outputs"])
    outs = " / ".join(str(s["outputs"]) for s in steps)
    over = " / ".join(f"{s['private_over_bound']:.2f}×" for s in steps)
    ratio = " / ".join(f"{s['private_over_nonprivate']:.2f}" for s in steps)
    return (
        f"The machine in that run (`benchmarks/bench_roofline.py`): float32 matrix product {r['gflops']:.0f} GFLOP/s, "
        f"copy {r['gbytes_per_s']:.1f} GB/s, {r['mnormals_per_s']:.0f} M normals/s; the head DP-SGD step "
        f"({machine['expected_batch']} × {machine['dim']} expected batch, {outs} outputs) took {over} its roofline "
        f"bound, private/non-private {ratio}.\n"
    )


def read_tests(results: Path) -> tuple[int, float] | None:
    path = results / "ci" / "pytest.xml"
    if not path.exists():
        return None
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return int(suite.get("tests")), float(suite.get("time"))


def timings_page(
    timings: dict[str, float], tests: tuple[int, float] | None, cpu: dict[str, float] | None = None
) -> str:
    """The steps' table; with ``cpu`` (:func:`read_cpu`) also each step's CPU time and how many cores it
    kept busy on average (CPU time / wall time)."""
    cpu = cpu or {}
    if cpu:
        lines = ["| step of `.ci/run` | wall time | CPU time | cores busy |", "|---|---|---|---|"]
    else:
        lines = ["| step of `.ci/run` | wall time |", "|---|---|"]
    for key, label in STEPS.items():
        if key in timings:
            extra = f" ({tests[0]} tests)" if key == "pytest" and tests else ""
            row = f"| {label} | {minutes(timings[key])}{extra} |"
            if cpu:
                busy = f"{cpu[key] / timings[key]:.2f}" if key in cpu and timings[key] > 0 else "–"
                row += f" {minutes(cpu[key]) if key in cpu else '–'} | {busy} |"
            lines.append(row)
    text = "\n".join(lines) + "\n"
    if cpu:
        text += (
            "\nCPU time: the time the machine's cores spent busy during the step, all processes together "
            "(the SLURM test's and the FiLM slice's count in the steps they run beside); the step's wall time "
            "on these cores is at least its CPU time divided by their number.\n"
        )
    return text


def timings_summary(
    timings: dict[str, float],
    tests: tuple[int, float] | None,
    machine: dict | None = None,
    cpu: dict[str, float] | None = None,
) -> str:
    parts = []
    if "default" in timings:
        parts.append(f"the default pipeline {minutes(timings['default'])}")
    if "pytest" in timings:
        count = f"{tests[0]} tests" if tests else "the tests"
        parts.append(f"{count} {minutes(timings['pytest'])}")
    if "total" in timings:
        busy = f" ({minutes(cpu['total'])} of CPU time)" if cpu and "total" in cpu else ""
        parts.append(f"all of `.ci/run` {minutes(timings['total'])}{busy}")
    text = "Measured in the last CI rehearsal on 2 cores: " + "; ".join(parts) + ".\n"
    return text + (machine_sentence(machine) if machine else "")


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- numbers:{name} -->\n).*?(<!-- /numbers:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no block <!-- numbers:{name} --> ... <!-- /numbers:{name} -->")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def readme_blocks() -> dict[str, str]:
    """The README's generated blocks, from the files in docs/_numbers/."""
    return {
        "default-table": (NUMBERS / "default_table.md").read_text(),
        "timings": (NUMBERS / "timings_summary.md").read_text(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results", help="a run's results folder")
    args = parser.parse_args(argv)
    NUMBERS.mkdir(exist_ok=True)
    table = default_table(args.results)
    if table is None:
        print(f"{args.results}/tables/split_fmnist.md missing: default table unchanged", file=sys.stderr)
    else:
        (NUMBERS / "default_table.md").write_text(table)
    timings = read_timings(args.results)
    if timings is None:
        print(f"{args.results}/ci/timings.tsv missing: timings unchanged", file=sys.stderr)
    else:
        tests, machine, cpu = read_tests(args.results), read_machine(args.results), read_cpu(args.results)
        page = timings_page(timings, tests, cpu) + ("\n" + machine_sentence(machine) if machine else "")
        (NUMBERS / "timings.md").write_text(page)
        (NUMBERS / "timings_summary.md").write_text(timings_summary(timings, tests, machine, cpu))
    text = README.read_text()
    for name, body in readme_blocks().items():
        text = replace_block(text, name, body)
    README.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
