"""config/audit.yaml, the strong audits' overlay on the default config: it validates, keeps its own
results directory, only touches the audit block, and audits more than the default (ε up to 8, more
trainings) without switching any audit off."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from helpers import merge_configs

from dpcl.config import validate_config

ROOT = Path(__file__).resolve().parents[2]
AUDIT = yaml.safe_load((ROOT / "config" / "audit.yaml").read_text())
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_the_audit_overlay_only_strengthens_the_audit_block():
    default = validate_config(copy.deepcopy(DEFAULT))
    strong = validate_config(merge_configs(copy.deepcopy(DEFAULT), AUDIT))
    assert set(AUDIT) == {"results", "audit"} and strong["results"] != default["results"]
    for key in set(default) - {"results", "audit"}:
        assert strong[key] == default[key], key
    a, d = strong["audit"], default["audit"]
    assert set(a["epsilons"]) >= set(d["epsilons"]) | {1, 2, 4, 8}
    for key in ("trials", "learner_trials", "whitebox_runs", "whitebox_canaries", "whitebox_bias_trials"):
        assert a[key] >= d[key] > 0, key
    assert a["whitebox_runs"] > d["whitebox_runs"]
