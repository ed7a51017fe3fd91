"""``dpcl`` command line: plan privacy budgets without data, and check configs.

Every command takes ``--json`` and then prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from . import __version__


def _emit(args: argparse.Namespace, obj: dict, text: str) -> None:
    print(json.dumps(obj) if args.json else text)


def _sigma(args: argparse.Namespace) -> None:
    from .privacy.gaussian import gaussian_sigma

    s = gaussian_sigma(args.epsilon, args.delta, args.sensitivity)
    _emit(args, {"sigma": s}, f"sigma = {s:.6g} (analytic Gaussian, sensitivity {args.sensitivity:g})")


def _threshold(args: argparse.Namespace) -> None:
    from .privacy.label_release import tsgd_delta, tsgd_threshold

    k = tsgd_threshold(args.epsilon, args.delta)
    _emit(args, {"k": k, "delta_achieved": tsgd_delta(k, args.epsilon)},
          f"k = {k} (k-TSGD label release; a class is kept iff count + Z > k)")  # fmt: skip


def _keep_prob(args: argparse.Namespace) -> None:
    from .privacy.label_release import keep_probability

    p = float(keep_probability(args.class_size, args.epsilon, args.delta))
    _emit(args, {"keep_probability": p}, f"Pr[class of size {args.class_size} released] = {p:.6g}")


def _validate(args: argparse.Namespace) -> None:
    from .config import ConfigError, load_config

    try:
        cfg = load_config(args.path)
    except ConfigError as err:
        print(err, file=sys.stderr)
        raise SystemExit(2) from None
    cfg["epsilons"] = ["inf" if math.isinf(e) else e for e in cfg["epsilons"]]
    _emit(args, {"valid": True, "config": cfg}, f"{args.path}: valid")


def _positive(x: str) -> float:
    v = float(x)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {x}")
    return v


def _probability(x: str) -> float:
    v = float(x)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {x}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpcl", description=__doc__)
    p.add_argument("--version", action="version", version=f"dpcl {__version__}")
    sub = p.add_subparsers(dest="group", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--epsilon", type=_positive, required=True)
        sp.add_argument("--delta", type=_probability, required=True)
        sp.add_argument("--json", action="store_true", help="print one JSON object")

    priv = sub.add_parser("privacy", help="noise calibration").add_subparsers(dest="cmd", required=True)
    s = priv.add_parser("sigma", help="analytic Gaussian sigma for (epsilon, delta)")
    common(s)
    s.add_argument("--sensitivity", type=_positive, default=1.0)
    s.set_defaults(func=_sigma)

    lab = sub.add_parser("labels", help="label-release planning").add_subparsers(dest="cmd", required=True)
    t = lab.add_parser("threshold", help="k-TSGD threshold k for (epsilon, delta)")
    common(t)
    t.set_defaults(func=_threshold)
    k = lab.add_parser("keep-prob", help="probability that a class of size N is released")
    common(k)
    k.add_argument("--class-size", type=int, required=True)
    k.set_defaults(func=_keep_prob)

    cfg = sub.add_parser("config", help="configuration files").add_subparsers(dest="cmd", required=True)
    v = cfg.add_parser("validate", help="validate a workflow config against the schema")
    v.add_argument("path")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=_validate)
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except ValueError as err:
        print(f"dpcl: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":  # pragma: no cover
    main()
