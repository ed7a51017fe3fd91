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


def _learners(args: argparse.Namespace) -> None:
    """List the registered learners (dpcl.learners.registry), with a user's learner modules if given."""
    from .learners import registry

    try:
        registry.load_modules(args.modules)
    except ValueError as err:
        print(f"dpcl learners: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    rows = [
        {
            "name": spec.name,
            "display": spec.display,
            "adapter": spec.adapter,
            "job": spec.job,
            "label_methods": spec.methods,
            "published_claim": spec.published_claim,
            "module": spec.module,
        }
        for spec in registry.specs()
    ]
    width = max(len(r["name"]) for r in rows)
    text = "\n".join(
        f"{r['name']:<{width}}  {r['adapter']:<10} job {r['job']:<13} {r['display']}"
        + (f"  [claim: {r['published_claim']}]" if r["published_claim"] else "")
        for r in rows
    )
    _emit(args, {"learners": rows}, text)


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


def _ledger_plan(args: argparse.Namespace, config: dict | None, path: str, data: dict, target):
    """The public plan a task ledger is checked against: from --config and the run's path, or from
    --learner/--label-method/--nominal-size with the target and task count (else the file's)."""
    from .privacy.ledger_fields import budget, integer
    from .privacy.verify import Plan

    if data.get("accounting") == "per_record_groups":
        return None
    if config is not None:
        from .stages.common import ledger_plan

        return ledger_plan(config, path)
    if args.learner is None and args.label_method is None and args.nominal_size is None:
        return None
    from .learners import ledger_spec

    return Plan(
        target=target or budget(data.get("target"), "target"),
        n_tasks=args.tasks or integer(data.get("n_tasks"), "n_tasks", minimum=1),
        spec=ledger_spec(args.learner) if args.learner else None,
        label_method=args.label_method,
        nominal_size=args.nominal_size,
    )


def _active_plan(args: argparse.Namespace, config: dict | None, path: str) -> dict:
    """What a DP active-learning ledger is checked against beyond its own plan: the run's target,
    the pool's planned size and the data set's classes, from --config and the run's path, or from
    --nominal-size/--classes (else the file's)."""
    if config is not None:
        from .stages.active import active_ledger_plan

        return active_ledger_plan(config, path)
    size = args.nominal_size
    if size is not None and not float(size).is_integer():
        raise ValueError(f"--nominal-size: a pool size is an integer, got {size}")
    return {"nominal_size": None if size is None else int(size), "n_classes": args.classes}


def _ledger_verify(args: argparse.Namespace) -> None:
    """Re-verify written privacy.json files from their parameters alone; exit 1 on the first failure."""
    import json

    from .privacy.accounting import Budget, PrivacyBudgetExceeded
    from .privacy.ledger import LedgerError
    from .privacy.verify import verify_privacy

    target = None
    if args.epsilon is not None:  # with --delta (``_check``)
        target = Budget(args.epsilon, 0.0 if math.isinf(args.epsilon) else args.delta)
    config = None
    if args.config is not None:
        from .config import ConfigError, load_config

        try:
            config = load_config(args.config)
        except (ConfigError, OSError) as err:
            print(f"dpcl ledger verify: {err}", file=sys.stderr)
            raise SystemExit(2) from None
    results, failed = [], None
    for path in args.paths:
        try:
            data = json.loads(Path(path).read_text())
            plan = _ledger_plan(args, config, path, data, target)
            if data.get("accounting") == "per_record_groups":
                # a DP active-learning run's per-record group ledger: its own verifier (dpcl.active)
                from .active.group_ledger import verify_group_ledger

                active = _active_plan(args, config, path)
                summary = verify_group_ledger(data, target=active.pop("target", target), **active)
            else:
                summary = verify_privacy(data, target=target, n_tasks=args.tasks, plan=plan)
            results.append({"path": str(path), "verified": True, **summary})
        except (OSError, json.JSONDecodeError) as e:
            failed = {"path": str(path), "verified": False, "error": f"cannot read a ledger: {e}"}
        except (LedgerError, PrivacyBudgetExceeded, ValueError) as e:
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


# Argument types. Every argument error reads "argument --NAME: got 'VALUE'; expected WHAT" (argparse
# prefixes "dpcl GROUP CMD: error: "), whether the type or a check after parsing (``_check``) finds it.


def _bad(given: object, expected: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"got {str(given)!r}; expected {expected}")


def _number(parse, ok, expected: str):
    """An argparse type: ``parse(x)`` where ``ok`` holds, else the one-style error naming ``expected``
    (never argparse's 'invalid <function name> value')."""

    def convert(x: str):
        try:
            v = parse(x)
        except (TypeError, ValueError, OverflowError):
            raise _bad(x, expected) from None
        if not ok(v):
            raise _bad(x, expected)
        return v

    convert.__name__ = expected
    return convert


_positive = _number(float, lambda v: 0 < v < math.inf, "a positive finite number")
_eps_or_inf = _number(
    lambda x: math.inf if x.strip().lower() in ("inf", ".inf") else float(x),
    lambda v: v > 0,
    "a positive number or inf",
)
_probability = _number(float, lambda v: 0 < v < 1, "a number in (0, 1)")
_rate = _number(float, lambda v: 0 < v <= 1, "a number in (0, 1]")
_finite = _number(float, math.isfinite, "a finite number")
_count = _number(int, lambda v: v >= 0, "an integer >= 0")
_positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")


def _one_of(*choices: str):
    """An argparse type for a fixed set of names (argparse's ``choices`` words its error differently)."""
    return _number(str, lambda v: v in choices, "one of " + ", ".join(choices))


def _check(args: argparse.Namespace) -> str | None:
    """Checks across arguments after parsing: the error message (one style with the types) or None."""
    if getattr(args, "tau", None) is not None and args.mechanism != "laplace":
        return (
            f"argument --tau: got '{args.tau:g}' with --mechanism {args.mechanism}; "
            "expected it only with --mechanism laplace"
        )
    if args.group == "ledger" and (args.epsilon is None) != (args.delta is None):
        given, missing = ("--epsilon", "--delta") if args.delta is None else ("--delta", "--epsilon")
        return (
            f"argument {missing}: got {given} alone; expected --epsilon and --delta together "
            "(the config's target) or neither"
        )
    return None


#: the top-level help text, plain (the module docstring's markup is for the API docs)
DESCRIPTION = (
    "dpcl command line: plan privacy budgets without data, and check configs.\n"
    "Every command takes --json and then prints one JSON object."
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpcl", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"dpcl {__version__}")
    sub = p.add_subparsers(dest="group", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--epsilon", type=_positive, required=True, help="target ε > 0 (finite)")
        sp.add_argument("--delta", type=_probability, required=True, help="target δ in (0, 1)")
        sp.add_argument("--json", action="store_true", help="print one JSON object")

    ls = sub.add_parser("learners", help="list the registered learners (name, adapter, job, display name)")
    ls.add_argument(
        "--modules", nargs="*", default=[], metavar="MODULE", help="a config's learner_modules to include"
    )
    ls.add_argument("--json", action="store_true", help="print one JSON object")
    ls.set_defaults(func=_learners, _parser=ls)

    priv = sub.add_parser("privacy", help="noise calibration").add_subparsers(dest="cmd", required=True)
    s = priv.add_parser("sigma", help="analytic Gaussian sigma for (epsilon, delta)")
    common(s)
    s.add_argument("--sensitivity", type=_positive, default=1.0)
    s.set_defaults(func=_sigma, _parser=s)
    nm = priv.add_parser(
        "noise-multiplier", help="DP-SGD noise multiplier for (epsilon, delta), rate and steps"
    )
    common(nm)
    nm.add_argument("--sample-rate", type=_rate, required=True, help="Poisson sampling rate q in (0, 1]")
    nm.add_argument("--steps", type=_positive_int, required=True, help="DP-SGD steps (>= 1)")
    nm.add_argument("--accountant", type=_one_of("prv", "rdp"), metavar="{prv,rdp}", default="prv")
    nm.set_defaults(func=_noise_multiplier, _parser=nm)

    lab = sub.add_parser("labels", help="label-release planning").add_subparsers(dest="cmd", required=True)
    t = lab.add_parser("threshold", help="k-TSGD threshold k for (epsilon, delta)")
    common(t)
    t.set_defaults(func=_threshold, _parser=t)
    k = lab.add_parser("keep-prob", help="probability that a class of size N is released")
    common(k)
    k.add_argument("--class-size", type=_count, required=True)
    k.add_argument("--mechanism", type=_one_of("tsgd", "laplace"), metavar="{tsgd,laplace}", default="tsgd")
    k.add_argument(
        "--tau", type=_finite, default=None, help="Laplace threshold (default: smallest (ε, δ)-DP one)"
    )
    k.set_defaults(func=_keep_prob, _parser=k)
    pl = lab.add_parser("plan", help="expected released labels, or the smallest budget fraction")
    common(pl)
    pl.add_argument("--class-sizes", type=_count, nargs="+", required=True)
    pl.add_argument("--mechanism", type=_one_of("tsgd", "laplace"), metavar="{tsgd,laplace}", default="tsgd")
    how = pl.add_mutually_exclusive_group(required=True)
    how.add_argument("--fraction", type=_probability, help="budget fraction f for label release")
    how.add_argument(
        "--min-keep-prob", type=_probability, help="keep every class with at least this probability"
    )
    pl.set_defaults(func=_plan, _parser=pl)
    r = lab.add_parser("release", help="simulate R independent label releases on given class counts")
    common(r)
    r.add_argument("--class-counts", type=_count, nargs="+", required=True)
    r.add_argument("--mechanism", type=_one_of("tsgd", "laplace"), metavar="{tsgd,laplace}", default="tsgd")
    r.add_argument("--repeat", type=_positive_int, default=1)
    r.add_argument("--seed", type=_count, default=0)
    r.set_defaults(func=_release, _parser=r)

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
    lv.add_argument(
        "--tasks", type=_positive_int, default=None, help="the run's task count (default: the file's)"
    )
    lv.add_argument(
        "--config",
        default=None,
        metavar="CONFIG",
        help="the workflow config that planned the runs: target, task count, learner, label method and "
        "nominal data-set size come from it and from each file's path in the results layout (recommended)",
    )
    lv.add_argument(
        "--learner", default=None, help="the learner that wrote the file (its declared entries are checked)"
    )
    lv.add_argument(
        "--label-method",
        default=None,
        help="the run's label method, e.g. release-f0.1 (its mechanism is checked)",
    )
    lv.add_argument(
        "--nominal-size",
        type=_positive,
        default=None,
        help="the data set's nominal training-set size N (δ must lie below 1/N); for a DP active-learning "
        "run, the pool's planned size",
    )
    lv.add_argument(
        "--classes",
        type=_positive_int,
        default=None,
        help="a DP active-learning run's number of classes K (default: the file's)",
    )
    lv.add_argument("--json", action="store_true")
    lv.set_defaults(func=_ledger_verify, _parser=lv)

    cfg = sub.add_parser("config", help="configuration files").add_subparsers(dest="cmd", required=True)
    v = cfg.add_parser("validate", help="validate a workflow config against the schema")
    v.add_argument("path")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=_validate, _parser=v)

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
    pm.add_argument("--seed", type=_count, default=0)
    pm.set_defaults(func=_fixtures_paper_mini, _parser=pm)

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
    mc.set_defaults(func=_miniature_check, _parser=mc)
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
    parser = build_parser()
    args = parser.parse_args(argv)
    command = getattr(args, "_parser", parser)  # the subcommand's parser: its prog and usage
    problem = _check(args)
    if problem:
        command.error(problem)  # usage and "dpcl GROUP CMD: error: argument ...", exit 2
    try:
        args.func(args)
    except ValueError as err:  # a library check the argument types do not repeat
        print(f"{command.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":  # pragma: no cover
    main()
