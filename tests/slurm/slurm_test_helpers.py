"""Helpers of the SLURM integration test (tests/slurm/run_slurm_test.sh); not a pytest module.

    prepare WORK                      fake Fashion-MNIST + tiny configs (a passing and a failing one)
    test-profile WORK CPUS MEM PART   profile overrides for the one-node test cluster
    check-run WORK JOBCOMP SLURMD     the SLURM run really went through SLURM and equals the local run
    check-failure LOG RC JOBCOMP      a failing job failed the run, with its rule and SLURM job named

Every check prints what it verified and exits non-zero with the reason on the first failure.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))

# Compute rules of the tiny config that must have run as SLURM jobs (more may).
MUST_RUN_ON_SLURM = {
    "features",
    "scenario",
    "label_spaces",
    "prototypes",
    "label_space_attack",
    "privacy_audit_part",
    "privacy_audit",
}
# Files compared byte for byte between the local and the SLURM run (the pipeline is
# bit-reproducible: noise streams are derived from named keys, never from scheduling).
COMPARED = (
    "runs/**/metrics.json",
    "runs/**/privacy.json",
    "labels/**/*.json",
    "scenarios/**/*.json",
    "tables/*.csv",
    "tables/*.md",
)


class CheckFailed(AssertionError):
    pass


def ensure(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def tiny_config(raw: Path, weights: str = "random") -> dict:
    return {
        "seeds": [0, 1],
        "epsilons": [1, "inf"],
        "delta": 1e-5,
        "label_methods": ["oracle", "base", "public-x10", "release-f0.1"],
        "datasets": {
            "fashion_mnist": {
                "source": "local",
                "local_dir": str(raw),
                "verify": False,
                "train_per_class": 25,
                "test_per_class": 10,
            }
        },
        "backbones": {
            "tiny": {"arch": "tf_efficientnet_lite0", "weights": weights, "image_size": 32, "batch_size": 64}
        },
        "benchmarks": {"tiny_bench": {"dataset": "fashion_mnist", "backbone": "tiny", "n_tasks": 5}},
        "privacy_figures": {"epsilons": [1], "deltas": [1e-5], "max_class_size": 10},
        "attack": {"epsilons": [1], "methods": ["oracle", "release-f0.1"], "trials": 1000},
        # the audit table's mechanisms part alone: one privacy_audit_part job through SLURM is what this test
        # checks. The other parts (canary, exposure and white-box audits) are more jobs of the same rule,
        # each a fresh interpreter; the test suite and CI's strong-audit step compute them
        "audit": {
            "epsilons": [1],
            "trials": 1000,
            "learner_trials": 0,
            "whitebox_runs": 0,
            "exposure": False,
            "canary_runs": 0,
        },
        "active": {"enabled": False},  # DP active learning has its own workflow test (test_workflow.py)
    }


def prepare(work: Path) -> None:
    from dpcl.fixtures import make_fake_fashion_mnist

    raw = work / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    make_fake_fashion_mnist(raw, n_train_per_class=30, n_test_per_class=12)
    (work / "config.yaml").write_text(yaml.safe_dump(tiny_config(raw)))
    # A user error that only shows inside the job: a checkpoint file that is not a checkpoint (a
    # missing one is refused when the config is validated, before any job).
    (work / "damaged-checkpoint.pth").write_bytes(b"not a torch checkpoint" * 40)
    bad = tiny_config(raw, weights=str(work / "damaged-checkpoint.pth"))
    (work / "config_fail.yaml").write_text(yaml.safe_dump(bad))
    print(f"prepared fake Fashion-MNIST and tiny configs in {work}")


def _capped(value, cap: int) -> str:
    """A set-resources value limited to what the one test node has (expressions stay expressions)."""
    return f"min({value}, {cap})"


def test_profile(work: Path, cpus: int, mem_mb: int, partition: str) -> None:
    """Overrides for profiles/slurm on the test cluster, given as a second --profile.

    Everything else (executor, jobs, retries, requeue, latency-wait, rule resources and their
    growth with `attempt`) comes from the real profile. Changed here, and why:
    - status command squeue: there is no accounting database, so sacct fails (MinJobAge is
      an hour, so squeue still reports finished jobs);
    - first status check after 3 s instead of 40 s;
    - SLURM logs of successful jobs are kept, to check what ran inside each job;
    - the node has no GPU (gpu/gres dropped), `cpus` CPUs and `mem_mb` MB (values capped);
    - the test cluster's partition.
    """
    real = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    ensure(real.get("executor") == "slurm", "profiles/slurm/config.yaml: executor is not slurm")
    defaults = dict(real.get("default-resources") or {})
    defaults["slurm_partition"] = partition
    defaults.pop("slurm_account", None)
    for key, cap in (("mem_mb", mem_mb), ("cpus_per_task", cpus)):
        if key in defaults:
            defaults[key] = _capped(defaults[key], cap)
    rules = {}
    for rule, res in (real.get("set-resources") or {}).items():
        res = {k: v for k, v in res.items() if k not in ("gpu", "gres", "gpu_model", "slurm_partition")}
        for key, cap in (("mem_mb", mem_mb), ("cpus_per_task", cpus)):
            if key in res:
                res[key] = _capped(res[key], cap)
        rules[rule] = res
    prof = {
        "slurm-status-command": "squeue",
        "slurm-init-seconds-before-status-checks": 3,
        "slurm-keep-successful-logs": True,
        "default-resources": defaults,
        "set-resources": rules,
    }
    out = work / "test-profile"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
    print(f"test profile overrides in {out / 'config.yaml'}")


# --- evidence that jobs ran under SLURM --------------------------------------------------

SUBMIT_RE = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")
RULE_RE = re.compile(r"^(localrule|rule) (\w+):\s*$")
JOBID_RE = re.compile(r"^\s+jobid: (\d+)\s*$")


def parse_snakemake_log(text: str):
    """Snakemake job id -> (rule, local?) and Snakemake job id -> [(SLURM id, SLURM log)]."""
    jobs, submitted = {}, {}
    current = None
    for line in text.splitlines():
        m = RULE_RE.match(line)
        if m:
            current = (m.group(2), m.group(1) == "localrule")
            continue
        m = JOBID_RE.match(line)
        if m and current is not None:
            jobs[int(m.group(1))] = current
            current = None
            continue
        m = SUBMIT_RE.search(line)
        if m:
            submitted.setdefault(int(m.group(1)), []).append((m.group(2), m.group(3)))
    return jobs, submitted


def parse_jobcomp(path: Path) -> dict:
    """SLURM's job completion log (jobcomp/filetxt): job id -> fields."""
    out = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" in fields:
            out[fields["JobId"]] = fields
    return out


def declared_local_rules() -> set[str]:
    """Rules named in the Snakefile's `localrules:` (plus `all`, which runs nothing)."""
    text = (REPO / "Snakefile").read_text()
    m = re.search(r"^localrules:(.*?)(?=^\S|\Z)", text, re.M | re.S)
    ensure(m, "the Snakefile declares no localrules")
    return set(re.findall(r"\w+", re.sub(r"#.*", "", m.group(1)))) | {"all"}


def check_run(work: Path, jobcomp_path: Path, slurmd_log: Path) -> None:
    log = (work / "slurm.log").read_text()
    jobs, submitted = parse_snakemake_log(log)
    ensure(jobs, "no job of the SLURM run appears in its log")
    ensure(
        re.search(r"SLURM run ID: (\S+)", log), "the run did not use the SLURM executor (no 'SLURM run ID')"
    )
    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)
    jobcomp = parse_jobcomp(jobcomp_path)
    slurmd = slurmd_log.read_text()
    remote = {j: r for j, (r, local) in jobs.items() if not local}
    local_rules = declared_local_rules()
    ran_locally = {r for r, local in jobs.values() if local}
    ensure(
        ran_locally <= local_rules,
        f"rules {sorted(ran_locally - local_rules)} ran on the submitting machine, not under SLURM",
    )
    missing = MUST_RUN_ON_SLURM - set(remote.values())
    ensure(not missing, f"no SLURM job for rules {sorted(missing)}")
    per_rule: dict[str, int] = {}
    for jid, rule in sorted(remote.items()):
        ensure(jid in submitted, f"job {jid} (rule {rule}) was never submitted to SLURM")
        ensure(len(submitted[jid]) == 1, f"job {jid} (rule {rule}) was submitted {len(submitted[jid])} times")
        sid, slog = submitted[jid][0]
        rec = jobcomp.get(sid)
        ensure(rec is not None, f"SLURM job {sid} (rule {rule}) is not in SLURM's job completion log")
        ensure(
            rec.get("JobState") == "COMPLETED", f"SLURM job {sid} (rule {rule}) ended {rec.get('JobState')}"
        )
        ensure(
            rec.get("Name") == run_id, f"SLURM job {sid} has name {rec.get('Name')}, not the run id {run_id}"
        )
        ensure(
            f"Launching batch job {sid} " in slurmd, f"slurmd never launched SLURM job {sid} (rule {rule})"
        )
        slog = Path(slog)
        ensure(slog.is_file(), f"SLURM log {slog} of job {sid} is missing")
        inner = slog.read_text()
        ensure(
            re.search(rf"^rule {rule}:", inner, re.M),
            f"SLURM job {sid}'s log does not show rule {rule} running",
        )
        ensure(
            "Finished job" in inner or "Finished jobid" in inner,
            f"SLURM job {sid}'s log does not show rule {rule} finishing",
        )
        per_rule[rule] = per_rule.get(rule, 0) + 1
    ids = [s for subs in submitted.values() for s, _ in subs]
    mine = {k: v for k, v in jobcomp.items() if v.get("Name") == run_id}
    ensure(
        sorted(mine, key=int) == sorted(ids, key=int),
        f"SLURM ran jobs {sorted(mine, key=int)} for this run but Snakemake submitted {sorted(ids, key=int)}",
    )
    print(
        f"  {len(ids)} SLURM jobs, one per non-local job, all COMPLETED on node(s) "
        f"{sorted({mine[i]['NodeList'] for i in ids})}: "
        + ", ".join(f"{r} x{n}" for r, n in sorted(per_rule.items()))
    )

    # Outputs: the same files as a local run, byte for byte for the deterministic ones.
    local, slurm = work / "local" / "results", work / "slurm" / "results"

    def listing(root):
        return sorted(
            str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "logs" not in p.parts
        )

    ensure(
        listing(local) == listing(slurm),
        f"output files differ: only local {sorted(set(listing(local)) - set(listing(slurm)))}, "
        f"only SLURM {sorted(set(listing(slurm)) - set(listing(local)))}",
    )
    n = 0
    for pattern in COMPARED:
        for f in sorted(local.glob(pattern)):
            g = slurm / f.relative_to(local)
            ensure(
                f.read_bytes() == g.read_bytes(),
                f"{f.relative_to(local)} differs between the local and the SLURM run",
            )
            n += 1
    ensure(n >= 20, f"only {n} deterministic files compared")
    print(
        f"  {len(listing(local))} output files, the same as the local run; {n} deterministic files byte-identical"
    )
    (work / "n_slurm_jobs").write_text(str(len(ids)))


def check_failure(log_path: Path, rc: int, jobcomp_path: Path, retries: int) -> None:
    log = log_path.read_text()
    ensure(
        rc not in (0, 124, 137),
        f"the failing run exited {rc} (0 = success, 124/137 = hung until the timeout)",
    )
    ensure(
        re.search(r"Error in rule features:", log), "the failing rule (features) is not named in the error"
    )
    _, submitted = parse_snakemake_log(log)
    ids = [s for subs in submitted.values() for s, _ in subs]
    ensure(
        len(ids) == retries + 1,
        f"the failing job was submitted {len(ids)} times, expected {retries + 1} (1 + retries: {retries})",
    )
    jobcomp = parse_jobcomp(jobcomp_path)
    for sid in ids:
        state = jobcomp.get(sid, {}).get("JobState")
        ensure(state == "FAILED", f"SLURM job {sid} of the failing rule ended {state}, not FAILED")
        ensure(f"SLURM-job '{sid}' failed" in log, f"Snakemake does not report SLURM job {sid} as failed")
    ensure(
        "damaged-checkpoint.pth" in log
        or any(
            "damaged-checkpoint.pth" in Path(p).read_text()
            for subs in submitted.values()
            for _, p in subs
            if Path(p).exists()
        ),
        "the job's own error (damaged checkpoint) is in neither Snakemake's output nor the kept SLURM log",
    )
    print(
        f"  failing job: exit code {rc}, 'Error in rule features' named, {len(ids)} SLURM attempts "
        f"({', '.join(ids)}) all FAILED, SLURM log kept"
    )


def main(argv):
    cmd, args = argv[1], argv[2:]
    try:
        if cmd == "prepare":
            prepare(Path(args[0]))
        elif cmd == "test-profile":
            test_profile(Path(args[0]), int(args[1]), int(args[2]), args[3])
        elif cmd == "check-run":
            check_run(Path(args[0]), Path(args[1]), Path(args[2]))
        elif cmd == "check-failure":
            check_failure(Path(args[0]), int(args[1]), Path(args[2]), int(args[3]))
        else:
            raise SystemExit(f"unknown command {cmd}")
    except CheckFailed as err:
        print(f"CHECK FAILED: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
