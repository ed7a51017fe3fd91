"""``dpcl`` command line: plan privacy budgets without data, and check configs.

Every command takes ``--json`` and then prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from . import __version__


def _emit(args: argparse.Namespace, obj: dict, text: str) -> None:
    print(json.dumps(obj) if args.json else text)


def _sigma(args: argparse.Namespace) -> None:
    from .privacy.gaussian import gaussian_sigma

    s = gaussian_sigma(args.epsilon, args.delta, args.sensitivity)
    _emit(args, {"sigma": s}, f"sigma = {s:.6g} (analytic Gaussian, sensitivity {args.sensitivity:g})")


def _noise_multiplier(args: argparse.Namespace) -> None:
    from .privacy.sgd_accounting import noise_multiplier_info

    info = noise_multiplier_info(args.epsilon, args.delta, args.sample_rate, args.steps, args.accountant)
    _emit(
        args,
        info,
        f"noise multiplier = {info['noise_multiplier']:.6g} ({info['accountant']} accountant, "
        f"ε = {info['epsilon_achieved']:.4g} at δ = {args.delta:g})",
    )


def _threshold(args: argparse.Namespace) -> None:
    from .privacy.label_release import tsgd_delta, tsgd_threshold

    k = tsgd_threshold(args.epsilon, args.delta)
    _emit(
        args,
        {"k": k, "delta_achieved": tsgd_delta(k, args.epsilon)},
        f"k = {k} (k-TSGD label release; a class is kept iff count + Z > k)",
    )


def _keep_prob(args: argparse.Namespace) -> None:
    from .privacy.label_release import drop_lower_bound, keep_probabilities

    if args.class_size < 0:
        raise ValueError(f"--class-size must be >= 0, got {args.class_size}")
    if args.tau is not None and args.mechanism != "laplace":
        raise ValueError("--tau applies to --mechanism laplace only")
    p = float(keep_probabilities(args.class_size, args.epsilon, args.delta, args.mechanism, args.tau))
    lb = float(drop_lower_bound(args.class_size, args.epsilon, args.delta))
    _emit(
        args,
        {"keep_probability": p, "drop_lower_bound": lb, "mechanism": args.mechanism},
        f"Pr[class of size {args.class_size} released] = {p:.6g} ({args.mechanism}); any (ε, δ)-DP "
        f"release drops it with probability >= {lb:.6g}",
    )


def _plan(args: argparse.Namespace) -> None:
    from .privacy.label_release import min_fraction, plan_fraction

    if args.fraction is not None:
        res = plan_fraction(args.class_sizes, args.epsilon, args.delta, args.fraction, args.mechanism)
        text = (
            f"fraction {args.fraction:g}: expected {res['expected_released']:.4g} of "
            f"{len(args.class_sizes)} labels released"
        )
    else:
        res = min_fraction(args.class_sizes, args.epsilon, args.delta, args.min_keep_prob, args.mechanism)
        text = (
            f"smallest fraction releasing every class with probability >= {args.min_keep_prob:g}: "
            f"{res['fraction']:.6g}"
        )
    _emit(args, res, text)


def _release(args: argparse.Namespace) -> None:
    from .privacy.label_release import release_labels
    from .seeding import rng

    counts = dict(enumerate(args.class_counts))
    if any(c < 0 for c in args.class_counts):
        raise ValueError(f"--class-counts must be >= 0, got {args.class_counts}")
    if args.repeat < 1:
        raise ValueError(f"--repeat must be >= 1, got {args.repeat}")
    gen = rng(args.seed, "cli", "labels-release", args.mechanism)
    kept = [0] * len(counts)
    for _ in range(args.repeat):
        released, _rec = release_labels(counts, len(counts), args.epsilon, args.delta, gen, args.mechanism)
        for y in released:
            kept[y] += 1
    _emit(
        args,
        {"kept_counts": kept, "repeat": args.repeat, "mechanism": args.mechanism},
        "kept counts per label: " + " ".join(map(str, kept)) + f" (of {args.repeat} releases)",
    )


def _validate(args: argparse.Namespace) -> None:
    from .config import ConfigError, load_config

    try:
        cfg = load_config(args.path)
    except ConfigError as err:
        print(err, file=sys.stderr)
        raise SystemExit(2) from None
    cfg["epsilons"] = ["inf" if math.isinf(e) else e for e in cfg["epsilons"]]
    _emit(args, {"valid": True, "config": cfg}, f"{args.path}: valid")


def _ledger_verify(args: argparse.Namespace) -> None:
    """Re-verify written privacy.json files from their parameters alone; exit 1 on the first failure."""
    import json

    from .privacy.accounting import Budget, PrivacyBudgetExceeded
    from .privacy.ledger import LedgerError, verify_privacy

    target = None
    if args.epsilon is not None or args.delta is not None:
        if args.epsilon is None or args.delta is None:
            raise ValueError("--epsilon and --delta go together (the config's target)")
        target = Budget(args.epsilon, 0.0 if math.isinf(args.epsilon) else args.delta)
    results, failed = [], None
    for path in args.paths:
        try:
            data = json.loads(Path(path).read_text())
            summary = verify_privacy(data, target=target, n_tasks=args.tasks)
            results.append({"path": str(path), "verified": True, **summary})
        except (OSError, json.JSONDecodeError) as e:
            failed = {"path": str(path), "verified": False, "error": f"cannot read a ledger: {e}"}
        except (LedgerError, PrivacyBudgetExceeded) as e:
            failed = {"path": str(path), "verified": False, "error": str(e)}
        if failed:
            results.append(failed)
            break

    def why(r: dict) -> str:
        if r.get("why_not"):
            return "does NOT hold: " + "; ".join(r["why_not"])
        if r["leaky_baseline"]:
            return "does NOT hold: a mechanism that is not DP by construction (leaky baseline)"
        if r["published_claim"]:
            return "does NOT hold: the accounted composition exceeds the target (a published claim, see the file)"
        return "does NOT hold"

    if args.json:
        print(json.dumps(results if len(args.paths) > 1 else results[0], default=str))
    else:
        for r in results:
            if r["verified"]:
                o = r["overall"]
                print(
                    f"{r['path']}: verified ({r['entries']} entries over {r['n_tasks']} tasks; overall "
                    f"ε = {o['epsilon']:.6g}, δ = {o['delta']:.3g}; guarantee "
                    f"{'holds' if r['guarantee_holds'] else why(r)})"
                )
            else:
                print(f"{r['path']}: REJECTED: {r['error']}", file=sys.stderr)
    if failed:
        raise SystemExit(1)


def _positive(x: str) -> float:
    v = float(x)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {x}")
    return v


def _eps_or_inf(x: str) -> float:
    return math.inf if x.lower() in ("inf", ".inf") else _positive(x)


def _probability(x: str) -> float:
    v = float(x)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {x}")
    return v


def _rate(x: str) -> float:
    v = float(x)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1], got {x}")
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
    nm = priv.add_parser(
        "noise-multiplier", help="DP-SGD noise multiplier for (epsilon, delta), rate and steps"
    )
    common(nm)
    nm.add_argument("--sample-rate", type=_rate, required=True, help="Poisson sampling rate q in (0, 1]")
    nm.add_argument("--steps", type=int, required=True)
    nm.add_argument("--accountant", choices=["prv", "rdp"], default="prv")
    nm.set_defaults(func=_noise_multiplier)

    lab = sub.add_parser("labels", help="label-release planning").add_subparsers(dest="cmd", required=True)
    t = lab.add_parser("threshold", help="k-TSGD threshold k for (epsilon, delta)")
    common(t)
    t.set_defaults(func=_threshold)
    k = lab.add_parser("keep-prob", help="probability that a class of size N is released")
    common(k)
    k.add_argument("--class-size", type=int, required=True)
    k.add_argument("--mechanism", choices=["tsgd", "laplace"], default="tsgd")
    k.add_argument(
        "--tau", type=float, default=None, help="Laplace threshold (default: smallest (ε, δ)-DP one)"
    )
    k.set_defaults(func=_keep_prob)
    pl = lab.add_parser("plan", help="expected released labels, or the smallest budget fraction")
    common(pl)
    pl.add_argument("--class-sizes", type=int, nargs="+", required=True)
    pl.add_argument("--mechanism", choices=["tsgd", "laplace"], default="tsgd")
    how = pl.add_mutually_exclusive_group(required=True)
    how.add_argument("--fraction", type=_probability, help="budget fraction f for label release")
    how.add_argument(
        "--min-keep-prob", type=_probability, help="keep every class with at least this probability"
    )
    pl.set_defaults(func=_plan)
    r = lab.add_parser("release", help="simulate R independent label releases on given class counts")
    common(r)
    r.add_argument("--class-counts", type=int, nargs="+", required=True)
    r.add_argument("--mechanism", choices=["tsgd", "laplace"], default="tsgd")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--seed", type=int, default=0)
    r.set_defaults(func=_release)

    led = sub.add_parser("ledger", help="privacy ledgers").add_subparsers(dest="cmd", required=True)
    lv = led.add_parser(
        "verify",
        help="re-verify privacy.json files from their parameters alone "
        "(exit 1 naming the first entry whose claim does not hold)",
    )
    lv.add_argument("paths", nargs="+", metavar="PATH", help="privacy.json files")
    lv.add_argument(
        "--epsilon", type=_eps_or_inf, default=None, help="the config's target ε (default: the file's)"
    )
    lv.add_argument(
        "--delta", type=_probability, default=None, help="the config's target δ (default: the file's)"
    )
    lv.add_argument("--tasks", type=int, default=None, help="the run's task count (default: the file's)")
    lv.add_argument("--json", action="store_true")
    lv.set_defaults(func=_ledger_verify)

    cfg = sub.add_parser("config", help="configuration files").add_subparsers(dest="cmd", required=True)
    v = cfg.add_parser("validate", help="validate a workflow config against the schema")
    v.add_argument("path")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=_validate)

    fx = sub.add_parser("fixtures", help="synthetic data in the real file formats").add_subparsers(
        dest="cmd", required=True
    )
    pm = fx.add_parser(
        "paper-mini",
        help="every data set of config/paper.yaml, in miniature, where config/paper_mini.yaml reads them",
    )
    pm.add_argument(
        "dir",
        nargs="?",
        default="resources/paper_mini_raw",
        help="folder to write (default: resources/paper_mini_raw, the overlay's local_dir)",
    )
    pm.add_argument("--seed", type=int, default=0)
    pm.set_defaults(func=_fixtures_paper_mini)

    mini = sub.add_parser("miniature", help="checks of a miniature paper run").add_subparsers(
        dest="cmd", required=True
    )
    mc = mini.add_parser(
        "check",
        help="every rule of the paper DAG ran, every published table cell has "
        "ours, tables and report say 'miniature' (exit 1 otherwise)",
    )
    mc.add_argument("results", help="the run's results folder (results/paper_mini)")
    mc.add_argument("--log", required=True, help="the run's Snakemake output")
    mc.add_argument(
        "--paper-dryrun",
        required=True,
        help="output of: snakemake -n --quiet rules --configfile config/paper.yaml",
    )
    mc.set_defaults(func=_miniature_check)
    return p


def _miniature_check(args: argparse.Namespace) -> None:
    from pathlib import Path

    from .miniature import check_miniature

    rep = check_miniature(
        args.results,
        Path(args.log).read_text(errors="replace"),
        Path(args.paper_dryrun).read_text(errors="replace"),
    )
    print(rep.summary())
    if not rep.ok:
        raise SystemExit(1)


def _fixtures_paper_mini(args: argparse.Namespace) -> None:
    from .fixtures import write_paper_mini

    for name, folder in write_paper_mini(args.dir, seed=args.seed).items():
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in files)
        print(f"{name}: {len(files)} files, {size / 1e6:.1f} MB in {folder}")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except ValueError as err:
        print(f"dpcl: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":  # pragma: no cover
    main()
