"""A user's own learner through the whole workflow: the documented example (docs/examples/my_learner.py)
named in a config runs end to end — DAG, verified ledgers, a table row and a figure. Its neighbour
invariance is tested with every other learner's (tests/privacy/test_release_boundary.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import SMALL_AUDIT, run_snakemake

from dpcl.fixtures import make_fake_fashion_mnist

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "my_learner.py"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("own")
    raw = work / "raw"
    raw.mkdir()
    make_fake_fashion_mnist(raw, n_train_per_class=30, n_test_per_class=8)
    shutil.copy(EXAMPLE, work / "my_learner.py")  # the user's file, beside their config
    cfg = {
        "seeds": [0, 1],
        "epsilons": [1, "inf"],
        "label_methods": ["oracle", "base", "release-f0.1"],
        "learner_modules": ["my_learner.py"],
        "learners": ["cosine", "my_sums"],
        "datasets": {
            "fashion_mnist": {
                "source": "local",
                "local_dir": str(raw),
                "verify": False,
                "train_per_class": 20,
                "test_per_class": 8,
                "tune_per_class": 10,
            }
        },
        "backbones": {
            "tiny": {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32, "batch_size": 64}
        },
        "benchmarks": {"tiny_bench": {"dataset": "fashion_mnist", "backbone": "tiny", "n_tasks": 5}},
        "active": {"enabled": False},
        "audit": SMALL_AUDIT,
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    dry = run_snakemake(work, "-n")
    run_snakemake(work)
    return work, dry.stdout


def test_the_dag_has_a_job_of_the_own_learner_per_seed(own_run):
    _, dry = own_run
    assert dry.count("rule learner_my_sums:") == 2  # one job per seed


def test_every_run_is_written_and_its_ledger_verifies_from_the_config(own_run):
    work, _ = own_run
    files = sorted((work / "results" / "runs" / "my_sums").rglob("privacy.json"))
    assert len(files) == 2 * 2 * 3  # seeds × ε × label methods
    res = subprocess.run(
        [sys.executable, "-m", "dpcl.cli", "ledger", "verify", "--config", "config.yaml", "--json"]
        + [str(f.relative_to(work)) for f in files],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    privacy = json.loads(files[0].read_text())
    assert privacy["guarantee_holds"] is True and privacy["hyperparameters"]["private_data_used"] is False
    metrics = json.loads(files[0].with_name("metrics.json").read_text())
    assert metrics["learner"] == "my_sums" and 0.0 <= metrics["final_accuracy"] <= 1.0


def test_the_own_learner_has_its_table_row_and_figure(own_run):
    work, _ = own_run
    table = (work / "results" / "tables" / "tiny_bench_my_sums.md").read_text()
    assert "Noisy class sums (example)" in table
    summary = (work / "results" / "tables" / "tiny_bench.md").read_text()
    assert "Noisy class sums (example)" in summary
    png = work / "results" / "figures" / "tiny_bench_my_sums_avg_acc.png"
    assert png.stat().st_size > 1000
