"""`--config` overrides arrive typed as a config file's values, a
misspelled key is named with the closest known one, and `dpcl config validate` on a bad path
says so in one line."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.cli import parse_config
from snakemake.utils import update_config

from dpcl.cli import main
from dpcl.config import ConfigError, validate_config

REPO = Path(__file__).resolve().parents[2]
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def _override(*entries: str) -> dict:
    """The default config with ``--config`` entries applied exactly as Snakemake applies them."""
    cfg = copy.deepcopy(DEFAULT)
    update_config(cfg, parse_config(list(entries)))
    return validate_config(cfg)


@pytest.mark.parametrize(
    ("entry", "key", "want"),
    [
        ("seeds=[0]", "seeds", [0]),
        ("seeds=[0, 3]", "seeds", [0, 3]),
        ("epsilons=[0.5]", "epsilons", [0.5]),
        ("epsilons=[1,inf]", "epsilons", [1.0, float("inf")]),
        ("delta=1e-6", "delta", 1e-6),
        ("results=out/run1", "results", "out/run1"),
        ('tuning={"enabled": False}', ("tuning", "enabled"), False),
        ('tuning={"trials": 3}', ("tuning", "trials"), 3),
        ('dpsgd={"lr": 0.05}', ("dpsgd", "lr"), 0.05),
        (
            "datasets={fashion_mnist: {train_per_class: 50}}",
            ("datasets", "fashion_mnist", "train_per_class"),
            50,
        ),
        (
            "backbones={effnet_lite0: {interpolation: bicubic}}",
            ("backbones", "effnet_lite0", "interpolation"),
            "bicubic",
        ),
        ("label_methods=[oracle, base, release-f0.1]", "label_methods", ["oracle", "base", "release-f0.1"]),
    ],
)
def test_every_documented_override_form_arrives_typed(entry, key, want):
    cfg = _override(entry)
    for k in (key,) if isinstance(key, str) else key:
        cfg = cfg[k]
    assert cfg == want and type(cfg) is type(want)


def test_an_override_merges_into_its_block_and_keeps_the_rest():
    cfg = _override('tuning={"trials": 3}', "datasets={fashion_mnist: {train_per_class: 50}}")
    assert cfg["tuning"]["enabled"] is True and cfg["tuning"]["trials"] == 3
    fm = cfg["datasets"]["fashion_mnist"]
    assert (
        fm["train_per_class"] == 50
        and fm["test_per_class"] == DEFAULT["datasets"]["fashion_mnist"]["test_per_class"]
    )


def test_a_wrongly_typed_override_is_still_refused_with_its_key():
    with pytest.raises(ConfigError, match=r"config key 'seeds\[0\]': value 'x'"):
        _override("seeds=[x]")
    with pytest.raises(ConfigError, match=r"config key 'tuning.trials'"):
        _override('tuning={"trials": 0}')


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda c: c.update(epsilon=c.pop("epsilons")),
            "unknown key 'epsilon' at top level; did you mean 'epsilons'?",
        ),
        (
            lambda c: c["datasets"]["fashion_mnist"].update(train_per_clas=5),
            "unknown key 'train_per_clas' in 'datasets.fashion_mnist'; did you mean 'train_per_class'?",
        ),
        (lambda c: c.update(zzz=1), "unknown key 'zzz' at top level (allowed keys: "),
    ],
)
def test_a_misspelled_key_is_named_without_the_filled_in_config(edit, message):
    cfg = copy.deepcopy(DEFAULT)
    edit(cfg)
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    text = str(info.value)
    assert message in text
    assert "pool_per_class': 1000" not in text and len(text) < 600  # no whole config, no defaults


def test_snakemake_dry_run_takes_typed_overrides(tmp_path):
    """The override examples of docs/configuration.md through the real Snakefile (a dry run of the default)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "-n",
        "--config",
        "seeds=[0]",
        "epsilons=[1,inf]",
        'tuning={"trials": 3}',
        "datasets={fashion_mnist: {train_per_class: 50}}",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "runs/cosine/fashion_mnist/effnet_lite0/disjoint-t5/seed0/eps1/base" in out
    assert not re.search(r"runs/cosine/\S+/(seed1|eps8)/", out)  # seeds [0], epsilons [1, inf] only


@pytest.mark.parametrize("kind", ["missing", "directory", "not yaml", "a list"])
def test_config_validate_on_a_bad_path_prints_one_line(tmp_path, capsys, kind):
    path = {"missing": tmp_path / "nope.yaml", "directory": tmp_path}.get(kind, tmp_path / "c.yaml")
    if kind == "not yaml":
        path.write_text("a: [1, 2\nb: {")
    elif kind == "a list":
        path.write_text("- 1\n- 2\n")
    with pytest.raises(SystemExit) as info:
        main(["config", "validate", str(path)])
    assert info.value.code != 0
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "\n" not in err and "Traceback" not in err


def test_values_that_would_fail_inside_jobs_are_refused_at_validation(tmp_path):
    """A missing checkpoint, more tasks than classes, a -parent remapping on a data
    set without a hierarchy, 5-datasets' scenario on another data set — named before any job."""
    from dpcl.config import ConfigWarning

    def check(edit, match):
        cfg = copy.deepcopy(DEFAULT)
        edit(cfg)
        with pytest.raises(ConfigError, match=match):
            validate_config(cfg)

    bench = lambda c: c["benchmarks"]["split_fmnist"]  # noqa: E731
    check(
        lambda c: c["backbones"]["effnet_lite0"].update(weights=str(tmp_path / "nope.pth")),
        r"'backbones.effnet_lite0.weights': checkpoint file .*nope.pth' does not exist",
    )
    check(
        lambda c: bench(c).update(n_tasks=11),
        r"'benchmarks.split_fmnist.n_tasks': value 11 is more tasks than "
        r"fashion_mnist's 10 classes",
    )
    check(
        lambda c: c.update(label_methods=c["label_methods"] + ["public-x1-c50-parent"]),
        r"'benchmarks.split_fmnist.label_methods': \['public-x1-c50-parent'\] map labels to parents.*cifar100",
    )
    check(lambda c: bench(c).update(scenario="datasets"), r"scenario 'datasets' is 5-datasets'")
    (tmp_path / "w.pth").write_bytes(b"x")
    cfg = copy.deepcopy(DEFAULT)
    cfg["backbones"]["effnet_lite0"]["weights"] = str(tmp_path / "w.pth")
    validate_config(cfg)  # an existing file passes (its format is checked when it is loaded)
    cfg = copy.deepcopy(DEFAULT)
    bench(cfg)["n_tasks"] = 3
    with pytest.warns(
        ConfigWarning, match="10 classes of fashion_mnist do not split evenly into 3 tasks: 4/3/3"
    ):
        validate_config(cfg)
