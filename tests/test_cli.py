import json
import math
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
    err = capsys.readouterr().err
    assert err.startswith("usage: dpcl privacy sigma")
    assert "dpcl privacy sigma: error: argument --epsilon: got '-1'; expected a positive finite number" in err


EPS = ["--epsilon", "1", "--delta", "1e-5"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["privacy", "sigma", "--epsilon", "abc", "--delta", "1e-5"],
            "dpcl privacy sigma: error: argument --epsilon: got 'abc'; expected a positive finite number",
        ),
        (
            ["privacy", "sigma", "--epsilon", "inf", "--delta", "1e-5"],
            "dpcl privacy sigma: error: argument --epsilon: got 'inf'; expected a positive finite number",
        ),
        (
            ["privacy", "sigma", "--epsilon", "nan", "--delta", "1e-5"],
            "dpcl privacy sigma: error: argument --epsilon: got 'nan'; expected a positive finite number",
        ),
        (
            ["privacy", "sigma", "--epsilon", "1", "--delta", "1"],
            "dpcl privacy sigma: error: argument --delta: got '1'; expected a number in (0, 1)",
        ),
        (
            ["privacy", "sigma", *EPS, "--sensitivity", "0"],
            "argument --sensitivity: got '0'; expected a positive finite number",
        ),
        (
            ["privacy", "noise-multiplier", *EPS, "--sample-rate", "1.5", "--steps", "5"],
            "dpcl privacy noise-multiplier: error: argument --sample-rate: got '1.5'; expected a number in (0, 1]",
        ),
        (
            ["privacy", "noise-multiplier", *EPS, "--sample-rate", "0.1", "--steps", "0"],
            "argument --steps: got '0'; expected an integer >= 1",
        ),
        (
            ["privacy", "noise-multiplier", *EPS, "--sample-rate", "0.1", "--steps", "2.5"],
            "argument --steps: got '2.5'; expected an integer >= 1",
        ),
        (
            [
                "privacy",
                "noise-multiplier",
                *EPS,
                "--sample-rate",
                "0.1",
                "--steps",
                "5",
                "--accountant",
                "x",
            ],
            "argument --accountant: got 'x'; expected one of prv, rdp",
        ),
        (
            ["labels", "keep-prob", *EPS, "--class-size", "-3"],
            "dpcl labels keep-prob: error: argument --class-size: got '-3'; expected an integer >= 0",
        ),
        (
            ["labels", "keep-prob", *EPS, "--class-size", "3", "--mechanism", "gauss"],
            "argument --mechanism: got 'gauss'; expected one of tsgd, laplace",
        ),
        (
            ["labels", "keep-prob", *EPS, "--class-size", "3", "--tau", "x", "--mechanism", "laplace"],
            "argument --tau: got 'x'; expected a finite number",
        ),
        (
            ["labels", "keep-prob", *EPS, "--class-size", "3", "--tau", "2"],
            "dpcl labels keep-prob: error: argument --tau: got '2' with --mechanism tsgd; "
            "expected it only with --mechanism laplace",
        ),
        (
            ["labels", "plan", *EPS, "--class-sizes", "5", "-1", "--fraction", "0.1"],
            "dpcl labels plan: error: argument --class-sizes: got '-1'; expected an integer >= 0",
        ),
        (
            ["labels", "plan", *EPS, "--class-sizes", "5", "--min-keep-prob", "1"],
            "argument --min-keep-prob: got '1'; expected a number in (0, 1)",
        ),
        (
            ["labels", "release", *EPS, "--class-counts", "3", "-2"],
            "dpcl labels release: error: argument --class-counts: got '-2'; expected an integer >= 0",
        ),
        (
            ["labels", "release", *EPS, "--class-counts", "3", "--repeat", "0"],
            "argument --repeat: got '0'; expected an integer >= 1",
        ),
        (
            ["labels", "release", *EPS, "--class-counts", "3", "--seed", "-1"],
            "argument --seed: got '-1'; expected an integer >= 0",
        ),
        (
            ["ledger", "verify", "p.json", "--epsilon", "zero", "--delta", "1e-5"],
            "dpcl ledger verify: error: argument --epsilon: got 'zero'; expected a positive number or inf",
        ),
        (
            ["ledger", "verify", "p.json", "--epsilon", "1"],
            "dpcl ledger verify: error: argument --delta: got --epsilon alone; expected --epsilon and "
            "--delta together (the config's target) or neither",
        ),
        (
            ["ledger", "verify", "p.json", "--tasks", "0"],
            "argument --tasks: got '0'; expected an integer >= 1",
        ),
        (
            ["fixtures", "paper-mini", "/nonexistent", "--seed", "x"],
            "dpcl fixtures paper-mini: error: argument --seed: got 'x'; expected an integer >= 0",
        ),
    ],
)
def test_every_argument_error_says_what_was_given_and_what_is_allowed(capsys, argv, message):
    """One style for every argument check, by the type or after parsing: 'argument --NAME: got
    VALUE; expected WHAT' after the subcommand's prog, usage first, exit 2; never a function name."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: dpcl {argv[0]} {argv[1]}")
    assert message in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"dpcl {argv[0]} {argv[1]}: error: argument --")
    assert "invalid" not in err and "_positive" not in err and "must" not in err


def test_infinite_epsilon_is_accepted_where_it_means_non_dp(capsys, tmp_path):
    """ledger verify --epsilon inf (a non-DP run's target) passes the type check."""
    from dpcl.cli import build_parser

    args = build_parser().parse_args(["ledger", "verify", "p.json", "--epsilon", "inf", "--delta", "1e-5"])
    assert math.isinf(args.epsilon)


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


def test_help_is_plain_text(capsys):
    """The top-level help is what a user reads first: no reStructuredText markup."""
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "plan privacy budgets" in out
    assert "``" not in out and ":func:" not in out
