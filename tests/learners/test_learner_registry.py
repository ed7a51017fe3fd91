"""The learner registry: every learner declared once, in its own module, light enough for the Snakefile;
the config schema's list of learners, the workflow's wildcard and the verifier read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpcl.config import ConfigError, load_schema, validate_config
from dpcl.learners import registry
from dpcl.learners.registry import LearnerSpec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "my_learner.py"


def test_every_learner_is_declared_once_with_a_ledger():
    names = registry.names()
    assert len(names) == len(set(names)) >= 12
    for name in names:
        spec = registry.get(name)
        assert spec.name == name and spec.display and spec.label
        assert spec.ledger.training, f"{name} declares no training entries"
        assert spec.resources["mem_mb"] > 0 and spec.resources["runtime"] > 0


def test_unknown_learner_is_named():
    with pytest.raises(ValueError, match="unknown learner 'nope'.*cosine"):
        registry.get("nope")


def test_spec_vocabulary_is_closed():
    with pytest.raises(ValueError, match="job must be one of"):
        LearnerSpec(name="x", display="X", adapter="head", job="gpu", methods="label_methods", module="x")
    with pytest.raises(ValueError, match="needs its run function"):
        LearnerSpec(
            name="x", display="X", adapter="head", job="features", methods="label_methods", module="x"
        )


def test_every_learner_implements_the_one_contract():
    """One learner contract: every learner, built-in or a user's, on cached features or on images (FiLM),
    has a ``run`` function (``run(RunInputs) -> RunResult``) that its job, the audits and library users
    call; a spec without one is refused."""
    for spec in registry.specs():
        assert callable(registry.run_function(spec.name, spec.job))
    assert {s.job for s in registry.specs()} >= set(registry.FILM_JOBS)
    with pytest.raises(ValueError, match="is run by job 'heads', not 'agem'"):
        registry.run_function("peft_head", "agem")
    kw = dict(display="X", adapter="head", methods="label_methods", module="x")
    with pytest.raises(ValueError, match="needs its run function"):
        LearnerSpec(name="x", job="heads", run="no_colon", **kw)
    with pytest.raises(ValueError, match="needs its run function"):
        LearnerSpec(name="x", job="film_baseline", **kw)


def test_the_registry_imports_neither_torch_nor_opacus():
    # the Snakefile imports it; opacus configures the root logger, torch takes seconds
    code = "import sys; from dpcl.learners import registry; registry.names(); print(sorted({'torch', 'opacus'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_schema_lists_exactly_the_registered_learners():
    schema = load_schema()
    assert schema["properties"]["learners"]["items"]["enum"] == list(registry.names())
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["learners"] = ["cosine", "not_a_learner"]
    with pytest.raises(ConfigError, match="learners\\[1\\].*not_a_learner"):
        validate_config(cfg)


def test_jobs_partition_the_learners():
    by_job = {job: registry.job_learners(registry.names(), job) for job in registry.JOBS}
    assert sorted(n for ns in by_job.values() for n in ns) == sorted(registry.names())
    assert registry.wildcard("heads") == "|".join(by_job["heads"])
    with pytest.raises(ValueError, match="unknown job"):
        registry.job_learners(["cosine"], "nope")


@pytest.fixture
def restore_registry():
    """Undo what a test registers (the registry is process-wide)."""
    before = dict(registry._EXTERNAL)
    yield
    registry._EXTERNAL.clear()
    registry._EXTERNAL.update(before)
    registry._REGISTRY = None


def test_a_users_module_joins_the_registry(tmp_path, restore_registry):
    registry.load_modules([str(EXAMPLE)])
    spec = registry.get("my_sums")
    assert spec.job == "features" and callable(spec.run)
    assert spec.ledger.training[0].kind == "gaussian"
    schema = load_schema()
    assert "my_sums" in schema["properties"]["learners"]["items"]["enum"]
    with pytest.raises(ValueError, match="is not a file"):
        registry.load_modules([str(tmp_path / "missing.py")])
    with pytest.raises(ValueError, match="cannot import"):
        registry.load_modules(["no_such_module_xyz"])
    bad = tmp_path / "bad_learner.py"
    bad.write_text("SPECS = ['not a spec']\n")
    registry.load_modules([str(bad)])
    with pytest.raises(ValueError, match="must declare SPECS"):
        registry.names()
    registry._EXTERNAL.pop(str(bad.resolve()))
    registry._REGISTRY = None
    # a relative entry and its absolute path (what the Snakefile exports to jobs) are one module
    registry.load_modules([EXAMPLE.name], base=EXAMPLE.parent)
    registry.load_modules([str(EXAMPLE)])
    assert registry.names().count("my_sums") == 1


def test_jobs_inherit_the_workflows_learner_modules(monkeypatch, restore_registry):
    monkeypatch.setenv(registry.ENV_MODULES, "")
    registry.export_modules([EXAMPLE.name], base=EXAMPLE.parent)
    assert registry.ENV_MODULES in __import__("os").environ
    code = "from dpcl.learners import registry; print(registry.get('my_sums').display)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "Noisy class sums (example)"
    registry.export_modules([])


def test_cli_lists_the_registered_learners(capsys, restore_registry):
    import json

    from dpcl.cli import main

    main(["learners", "--json"])
    listed = [r["name"] for r in json.loads(capsys.readouterr().out)["learners"]]
    assert listed == list(registry.names())
    main(["learners", "--modules", str(EXAMPLE)])
    assert "my_sums" in capsys.readouterr().out
