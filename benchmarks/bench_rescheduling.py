"""Snakemake's re-scheduling timers coalesced (``dpcl.rescheduling``, config key
``coalesce_rescheduling``) against Snakemake's own, on a workflow shaped like the miniature paper run:
``--jobs`` independent jobs, each a CPU-bound shell loop of about ``--work`` seconds with ``--inputs``
input files of its own, run on ``--cores`` cores so that most jobs wait for a core.

Each setting runs the same workflow in a fresh folder (alternating, ``--repeats`` times); reported per
setting: the median wall time, the CPU seconds of Snakemake and its jobs together (the jobs' loops are
the same work in both, so the difference is Snakemake's main process) and the number of scheduling
rounds (calls of Snakemake's job selector, each of which stats every input of every ready job).
Prints JSON. Run: ``python benchmarks/bench_rescheduling.py [--jobs 200 --work 0.3 --inputs 20
--cores 2 --repeats 2]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WORKFLOW = textwrap.dedent("""
    from dpcl.rescheduling import coalesce_for_workflow, count_rounds

    coalesce_for_workflow(config["coalesce"])
    count_rounds("rounds.json")

    rule all:
        input: expand("out/{i}.txt", i=range(JOBS))

    rule job:
        input: lambda w: [f"in/{w.i}_{k}.txt" for k in range(INPUTS)]
        output: "out/{i}.txt"
        shell: "i=0; while [ $i -lt LOOPS ]; do i=$((i+1)); done; touch {output}"
""")


def _loops_per_second() -> float:
    """How many iterations of the shell loop this machine runs per second."""
    n = 200_000
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"], check=True)
    return n / (time.perf_counter() - t0)


def _run(folder: Path, coalesce: bool, cores: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", str(cores), "-q", "--config", f"coalesce={coalesce}"],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "rounds": int((folder / "rounds.json").read_text())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--work", type=float, default=0.3, help="seconds of CPU per job")
    ap.add_argument("--inputs", type=int, default=20, help="input files per job")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    loops = max(1, int(args.work * _loops_per_second()))
    results: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for coalesce in (False, True):
                folder = Path(tmp) / f"{coalesce}_{r}"
                (folder / "in").mkdir(parents=True)
                for i in range(args.jobs):
                    for k in range(args.inputs):
                        (folder / "in" / f"{i}_{k}.txt").write_text("x")
                snakefile = WORKFLOW.replace("LOOPS", str(loops))
                (folder / "Snakefile").write_text(f"JOBS = {args.jobs}\nINPUTS = {args.inputs}\n" + snakefile)
                results[coalesce].append(_run(folder, coalesce, args.cores))

    def summary(runs: list[dict]) -> dict:
        return {k: round(statistics.median(r[k] for r in runs), 2) for k in ("wall_s", "cpu_s", "rounds")}

    own, coalesced = summary(results[False]), summary(results[True])
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "work_s": args.work,
                "inputs": args.inputs,
                "cores": args.cores,
                "snakemake_timers": own,
                "coalesced": coalesced,
                "wall_ratio": round(coalesced["wall_s"] / own["wall_s"], 3),
                "cpu_saved_s": round(own["cpu_s"] - coalesced["cpu_s"], 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
