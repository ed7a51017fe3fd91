import json
import subprocess
import sys
from pathlib import Path

import pytest

from dpcl.cli import main


def _run(capsys, *argv):
    main(list(argv))
    return json.loads(capsys.readouterr().out)


def test_sigma_threshold_keep_prob_json(capsys):
    assert _run(capsys, "privacy", "sigma", "--epsilon", "1", "--delta", "1e-5", "--json")[
        "sigma"
    ] == pytest.approx(3.7306, abs=5e-5)
    assert _run(capsys, "labels", "threshold", "--epsilon", "1", "--delta", "1e-5", "--json")["k"] == 11
    p = _run(
        capsys,
        "labels",
        "keep-prob",
        "--class-size",
        "500",
        "--epsilon",
        "0.025",
        "--delta",
        "2.5e-7",
        "--json",
    )
    assert p["keep_probability"] == pytest.approx(0.905, abs=5e-4)


def test_bad_arguments_exit_with_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["privacy", "sigma", "--epsilon", "-1", "--delta", "1e-5"])
    assert exc.value.code == 2
    assert "must be > 0" in capsys.readouterr().err


def test_console_script_validates_default_config():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpcl.cli",
            "config",
            "validate",
            str(Path(__file__).resolve().parents[1] / "config" / "config.yaml"),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    cfg = json.loads(out.stdout)["config"]
    assert cfg["epsilons"] == [1.0, 8.0, "inf"] and "split_fmnist" in cfg["benchmarks"]


def test_noise_multiplier_json(capsys):
    from dpcl.privacy.sgd_accounting import epsilon

    out = _run(
        capsys,
        "privacy",
        "noise-multiplier",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.01",
        "--steps",
        "1000",
        "--json",
    )
    assert out["accountant"] == "prv"
    assert epsilon(out["noise_multiplier"], 0.01, 1000, 1e-5) <= 1.0
    for bad in (["--sample-rate", "0", "--steps", "5"], ["--sample-rate", "0.1", "--steps", "0"]):
        with pytest.raises(SystemExit):
            main(["privacy", "noise-multiplier", "--epsilon", "1", "--delta", "1e-5", *bad])
