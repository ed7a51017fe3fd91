"""The SLURM profile without a cluster: `--profile slurm` resolves from the repository root,
plans every job with the profile's resources, and names only rules that exist.

The run on a real SLURM cluster is tests/slurm/run_slurm_test.sh (needs root; run by .ci/run).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpcl.fixtures import make_fake_fashion_mnist

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
pytestmark = pytest.mark.slow

pytest.importorskip("snakemake_executor_plugin_slurm")  # a dependency of dpcl


def _dry_run(tmp_path, *args):
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    make_fake_fashion_mnist(raw, n_train_per_class=12, n_test_per_class=4)
    cfg = {
        "seeds": [0],
        "epsilons": [1],
        "label_methods": ["oracle"],
        "datasets": {
            "fashion_mnist": {
                "source": "local",
                "local_dir": str(raw),
                "verify": False,
                "train_per_class": 10,
                "test_per_class": 4,
            }
        },
        "backbones": {"tiny": {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32}},
        "benchmarks": {"tiny_bench": {"dataset": "fashion_mnist", "backbone": "tiny", "n_tasks": 5}},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        *args,
    ]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


def _jobs(out):
    """(rule, resources dict) of every planned job."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block)
        r = re.search(r"^\s+resources: (.*)$", block, re.M)
        if m and r:
            jobs.append((m.group(1), dict(kv.split("=", 1) for kv in r.group(1).split(", "))))
    return jobs


def test_profile_slurm_resolves_from_the_repository_root_and_sets_resources(tmp_path):
    assert (REPO / "slurm").resolve() == PROFILE.parent
    out = _dry_run(tmp_path, "--profile", "slurm")
    assert "Using profiles slurm and workflow specific profile" in out
    jobs = dict(_jobs(out))
    prof = yaml.safe_load(PROFILE.read_text())
    feat = jobs["features"]
    assert feat["gpu"] == str(prof["set-resources"]["features"]["gpu"])
    assert feat["cpus_per_task"] == str(prof["set-resources"]["features"]["cpus_per_task"])
    assert int(feat["mem_mb"]) == eval(prof["set-resources"]["features"]["mem_mb"], {"attempt": 1})  # noqa: S307
    for rule, res in jobs.items():
        assert "runtime" in res and "mem_mb" in res, rule  # every job tells SLURM its wall time and memory


def test_every_rule_declares_threads_memory_and_runtime(tmp_path):
    """The workstation run plans the same jobs with the rules' own resources."""
    out = _dry_run(tmp_path, "--cores", "2")
    jobs = _jobs(out)
    core = {"obtain_dataset", "features", "scenario", "label_spaces", "prototypes", "report"}
    assert {r for r, _ in jobs} >= core
    for rule, res in jobs:
        if rule != "all":
            assert int(res["mem_mb"]) >= 1000 and int(res["runtime"]) >= 1, (rule, res)
    assert "gpu" not in dict(jobs)["features"]  # GPU requests are the cluster profile's business


def test_profile_names_only_existing_rules_and_keeps_cluster_keys():
    prof = yaml.safe_load(PROFILE.read_text())
    rules = set(
        subprocess.run(
            [sys.executable, "-m", "snakemake", "--list-rules"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    )
    assert set(prof["set-resources"]) <= rules, set(prof["set-resources"]) - rules
    assert prof["executor"] == "slurm" and prof["retries"] >= 1 and prof["slurm-requeue"] is True
    # profiles/default is read as the workflow profile of every run and wins over --profile:
    # it must not set what the cluster profile sets differently.
    default = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    clash = {k for k in set(default) & set(prof) if default[k] != prof[k]}
    assert not clash, clash


def test_film_and_feature_jobs_use_every_cpu_they_are_given():
    """On the cluster a FiLM or feature job's torch threads are its whole SLURM allocation: set-threads
    equals cpus_per_task for each (the rules' own threads are the local film.threads)."""
    prof = yaml.safe_load(PROFILE.read_text())
    for rule in ("features", "tune_film", "film_ensemble", "film_baseline"):
        assert prof["set-threads"][rule] == prof["set-resources"][rule]["cpus_per_task"], rule
