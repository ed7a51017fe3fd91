"""The workflow's software environment and its layering: the rule environment
(workflow/envs/dpcl.yaml) carries exactly pyproject.toml's runtime dependencies, every rule with a
script names it, the library holds no scheduling or allocator plumbing, and the Snakefile's
warm-worker switch behaves as documented."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from helpers import warm_worker

worker = warm_worker()

ROOT = Path(__file__).resolve().parents[2]


def _requirements(items) -> set[str]:
    return {re.sub(r"\s+", "", str(i)).lower() for i in items}


def test_rule_environment_mirrors_pyproject_runtime_dependencies():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "workflow/envs/dpcl.yaml").read_text())
    listed = []
    for d in env["dependencies"]:
        if isinstance(d, dict):
            listed += d["pip"]
        elif not re.match(r"^(python|pip)\b", d):
            listed.append(d)
    assert _requirements(listed) == _requirements(deps)
    assert "python>=3.11" in env["dependencies"]
    deploy = ROOT / "workflow/envs/dpcl.post-deploy.sh"
    assert deploy.stat().st_mode & 0o111, "the post-deploy script must be executable"
    assert "pip install --no-deps -e ." in deploy.read_text()


def test_every_rule_with_a_script_names_the_environment():
    for smk in sorted((ROOT / "workflow/rules").glob("*.smk")):
        text = smk.read_text()
        scripts = len(re.findall(r"^\s+script:\s*$", text, re.M))
        envs = len(re.findall(r'^\s+conda:\s*\n\s+"\.\./envs/dpcl\.yaml"', text, re.M))
        assert scripts == envs, f"{smk.name}: {scripts} rules with a script, {envs} naming the environment"


def test_the_library_holds_no_process_scheduling_or_allocator_plumbing():
    """src/dpcl/ holds no patched scheduler, no allocator settings and no process management (no fork,
    no socket server): the workflow layer does that (the Snakefile sets the jobs' environment; the warm
    worker is workflow/scripts/warm_worker.py)."""
    banned = re.compile(
        r"snakemake\.scheduling|JobScheduler|MALLOC_MMAP_MAX_|MALLOC_TRIM_THRESHOLD_|os\.fork\b|"
        r"\bimport socket\b|send_fds|DPCL_WARM_WORKER"
    )
    hits = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "src/dpcl").rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if banned.search(line)
    ]
    assert not hits, hits


@pytest.mark.parametrize(
    ("user", "config_on", "local", "slurm", "expected"),
    [
        (None, True, True, False, "1"),
        (None, False, True, False, "0"),
        (None, True, False, False, "0"),  # cluster executor
        (None, True, True, True, "0"),  # inside a SLURM allocation
        ("0", True, True, False, "0"),  # the user's DPCL_WARM_WORKER=0 wins
    ],
)
def test_configure_for_workflow(monkeypatch, user, config_on, local, slurm, expected):
    monkeypatch.delenv(worker.ENV_ENABLE, raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    if user is not None:
        monkeypatch.setenv(worker.ENV_ENABLE, user)
    if slurm:
        monkeypatch.setenv("SLURM_JOB_ID", "17")
    on = worker.configure_for_workflow(config_on, local)
    assert on == (expected == "1")
    assert os.environ[worker.ENV_ENABLE] == expected
