"""Stage of ``workflow/rules/l2dpml.smk``: L2DP-ML as published (paper 001; its claim is violated under add/remove) and
the sound functional-mechanism variant ``fm_agem``, on cached features projected by a PCA fitted on the
public tuning split, over every (ε, label method) of one seed."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ..data.scenarios import Scenario
from ..io import log, read_json
from ..privacy.accounting import Budget
from .common import (
    config_target,
    finish_run,
    hyperparameters_note,
    parse_eps,
    release_rng,
    task_inputs,
    write_run,
)

LEARNERS = ("l2dpml", "fm_agem")
#: how FM-A-GEM's tuned values are chosen (privacy.json "hyperparameters"; dpcl.learners.fm_agem.tune_fm_agem)
FM_SEARCH = (
    "grid search over (dim, lr, steps) of FM-A-GEM's two-task loop in the run's label space at its "
    "training budget"
)
#: how FMConfig's defaults were chosen: with private data (an untuned run with them says so)
FM_DEFAULTS_CHOSEN = (
    "fm_agem's defaults (dim 32, lr 0.5, steps 5) were chosen by measuring final accuracy on the "
    "embedded default benchmark's training and test data (Split-Fashion-MNIST; dpcl.learners.fm_agem."
    "FMConfig), outside the accountant"
)


def l2dpml_claim(epsilon: float, cfg, delta: float, audit: dict | None = None) -> dict:
    """privacy.json's "published_claim" of L2DP-ML: Theorem 2's budget, its public parts, why it cannot be
    certified, and the three-valued verdicts (:func:`l2dpml_verdicts`; ``audit`` from :func:`claim_audit`).

    The γ term needs the trained θ₁ (and, in Thm 2, |D_τ|), so only the part without it is evaluated
    here; the full value per task is in the run's non-private diagnostics."""
    from ..learners.l2dpml import WHY_NOT_DP, budgets, claimed_epsilon

    e1, e2 = budgets(epsilon, cfg)
    d_r, d_l = cfg.sensitivities()
    return {
        "source": "paper 001 (Lai et al. 2022), Theorem 2 and Alg. 2",
        "formula": "eps_1 + eps_1/gamma_x + eps_1/gamma + eps_2, gamma_x = Delta_R/lambda, "
        "gamma = 2 Delta_R/(lambda ||theta_1||_{1,1}); 'regardless of the number of tasks'",
        "epsilon_1": e1,
        "epsilon_2": e2,
        "Delta_R": d_r,
        "Delta_L": d_l,
        "batch_size": cfg.batch_size,
        "claimed_epsilon_without_gamma_term": claimed_epsilon(epsilon, cfg, None),
        "gamma_term": "grows with the trained theta_1; per task in diagnostics.json (claimed_epsilon_full)",
        "holds": False,
        "reasons": WHY_NOT_DP,
        "audit": "results/tables/privacy_audit.md: empirical lower bound above the claim",
    } | l2dpml_verdicts(claimed_epsilon(epsilon, cfg, None), delta, audit)


#: trainings per world the run's own claim audit may take (the canary world: public, no data); a claim
#: whose refutation would need more is left not certified (the audit table may still run it)
RUN_AUDIT_TRIALS, RUN_AUDIT_MAX_TRIALS, RUN_AUDIT_SEED = 400, 2000, 0


def claim_audit(epsilon: float, delta: float, cfg, cache: dict | None = None) -> dict | None:
    """The add/remove audit of this configuration's claim (:func:`dpcl.audits.learners.audit_l2dpml`:
    canary world, no private data), or None where a refutation would need more than
    ``RUN_AUDIT_MAX_TRIALS`` trainings per world. Cached per (ε, δ, config) in ``cache``."""
    from ..audits.learners import audit_l2dpml, trials_to_refute
    from ..learners.l2dpml import claimed_epsilon

    key = ("l2dpml_audit", float(epsilon), float(delta), repr(cfg))
    if cache is not None and key in cache:
        return cache[key]
    claim = claimed_epsilon(epsilon, cfg, None)
    out = None
    if 2 * trials_to_refute(claim + 1.0, delta) <= RUN_AUDIT_MAX_TRIALS:
        out = audit_l2dpml(epsilon, delta, RUN_AUDIT_TRIALS, RUN_AUDIT_SEED, cfg)
    if cache is not None:
        cache[key] = out
    return out


def l2dpml_verdicts(claimed: float, delta: float, audit: dict | None = None) -> dict:
    """Three-valued verdicts (:mod:`dpcl.privacy.verdict`) on Theorem 2's data-independent part.

    No upper bound exists under either adjacency: the functional mechanism's noise is drawn once and
    reused (paper 001 Alg. 2; :data:`dpcl.learners.l2dpml.WHY_NOT_DP`). Under add/remove the lower
    bound is an empirical audit's Clopper-Pearson bound (``audit``: a row of
    :func:`dpcl.audits.learners.audit_l2dpml` for this mechanism, setting and claim) when one is
    given; under substitution (paper 001's proof: x_e vs x'_e) no audit has been run yet.
    """
    from ..privacy.verdict import Verdict, overall_verdict

    lower = method = None
    note = (
        f"no audit: refuting ε = {claimed:.4g} would take more than {RUN_AUDIT_MAX_TRIALS} trainings per "
        "world; results/tables/privacy_audit.md audits the configured audit budgets"
    )
    if audit is not None:
        if not math.isclose(float(audit["claimed_epsilon"]), claimed, rel_tol=1e-9):
            raise ValueError(
                f"the audit judged claimed ε {audit['claimed_epsilon']}, this run claims {claimed}"
            )
        lower = float(audit["epsilon_lower_bound"])
        method = (
            f"empirical audit, Clopper-Pearson at confidence {1 - float(audit['alpha']):g}, "
            f"{audit['trials']} trainings per world"
        )
        note = f"audit setting: {audit['attack']}"
    note += (
        "; claimed ε = Theorem 2 without its γ term. With γ from the trained θ₁ the formula is data-dependent "
        "(in the audit's canary world about 60-430, median ≈ 170, with the canary; ≈ 1.04 without it): "
        "no audit here refutes that full value"
    )
    verdicts = [
        Verdict("add/remove one individual", claimed, delta, None, None, lower, method, note),
        Verdict(
            "substitution (x_e vs x'_e, paper 001's proof)",
            claimed,
            delta,
            None,
            None,
            None,
            None,
            "no upper bound exists (the noise is drawn once and reused); no audit under substitution yet",
        ),
    ]
    return {
        "claimed_epsilon": claimed,
        "delta": delta,
        "verdict": overall_verdict(verdicts),
        "verdicts": [v.to_dict() for v in verdicts],
    }


def run_l2dpml_learners(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    tune_x: np.ndarray,
    scenario: Scenario,
    labels: dict,
    seed: int,
    *,
    learners: list[str],
    l2dpml_cfg: dict,
    fm_cfg: dict,
    backbone: str = "features",
    target: Budget | None = None,
    projections: dict | None = None,
    fm_tuning=None,
    fm_protocol: str | None = None,
) -> dict[str, tuple[dict, dict, dict]]:
    """Every listed learner for one (ε, label method): {learner: (metrics, privacy, diagnostics)}.
    ``projections`` caches the public PCA per dimension across runs of a sweep. ``fm_tuning(ε, δ,
    label space)`` (with the tuning protocol ``fm_protocol``) gives FM-A-GEM's tuning result for the
    run's training budget and label space (:func:`dpcl.learners.fm_agem.tune_fm_agem`), whose values
    replace the ``fm_cfg`` block's; None runs the block as is."""
    from ..learners.fm_agem import FMConfig, PublicPCA, run_fm_agem
    from ..learners.l2dpml import L2DPMLConfig, run_l2dpml, to_unit_box
    from ..training.tuning_protocol import tuning_label_space

    unknown = sorted(set(learners) - set(LEARNERS))
    if unknown:
        raise ValueError(f"unknown learners {unknown}; this stage runs {list(LEARNERS)}")
    projections = {} if projections is None else projections

    def projection(dim: int):
        if dim not in projections:
            if "pca" not in projections:  # one SVD of the PUBLIC features for every dim
                projections["pca"] = PublicPCA(tune_x)
            projections[dim] = projections["pca"].projection(dim)
        return projections[dim]

    tb = labels["training_budget"]
    eps, delta = parse_eps(tb["epsilon"]), float(tb["delta"])
    spaces, task_data, test_sets = task_inputs(train, test, scenario, labels)
    test_y_sets = [y for _, y in test_sets]
    n_universe = int(labels["label_universe"])
    out = {}
    for learner in learners:

        def rng_for(t, part, _l=learner):
            return release_rng(labels, backbone, _l, t, part)

        if learner == "l2dpml":
            cfg = L2DPMLConfig.from_config(l2dpml_cfg)
            proj = projection(cfg.input_dim)
            data = [(to_unit_box(proj.apply(x)), y) for x, y in task_data]
            tests = [(to_unit_box(proj.apply(x)), y) for x, y in test_sets]
            preds, records, stats, _ = run_l2dpml(data, tests, spaces, n_universe, cfg, eps, rng_for=rng_for)
            claim = (
                l2dpml_claim(eps, cfg, delta, claim_audit(eps, delta, cfg, projections))
                if math.isfinite(eps)
                else None
            )
            extra = {"l2dpml": l2dpml_cfg}
            if claim is not None:
                from .agem import claim_summary

                extra["published_claim"] = claim_summary(claim)
            res = finish_run(
                learner,
                labels,
                seed,
                preds,
                records,
                test_y_sets,
                extra=extra,
                target=target,
                hyperparameters=hyperparameters_note(l2dpml_cfg, None),
                diagnostics={"l2dpml_tasks": stats},
                claim=claim,
            )
        else:
            tuned = None
            if fm_tuning is not None:
                space = tuning_label_space(labels["method"])
                tuned = fm_tuning(eps, delta, space)
                block = {**fm_cfg, **tuned["best"]}
                values = {
                    **tuned["best"],
                    "label_space": space,
                    "grid": tuned["grid"],
                    "repeats": tuned["repeats"],
                }
                note = hyperparameters_note(values, fm_protocol, FM_SEARCH)
            else:
                block = dict(fm_cfg)
                fixed, measured = FMConfig.from_config(block), FMConfig()
                # any value left at (or set to) a measured default was chosen with private data
                private = (
                    FM_DEFAULTS_CHOSEN
                    if any(getattr(fixed, k) == getattr(measured, k) for k in ("dim", "lr", "steps"))
                    else None
                )
                note = hyperparameters_note(block, None, fixed_with_private_data=private)
            cfg = FMConfig.from_config(block)
            preds, records, stats = run_fm_agem(
                task_data,
                test_sets,
                spaces,
                n_universe,
                projection(cfg.dim),
                cfg,
                epsilon=eps,
                delta=delta,
                rng_for=rng_for,
            )
            res = finish_run(
                learner,
                labels,
                seed,
                preds,
                records,
                test_y_sets,
                extra={"fm_agem": block},
                target=target,
                hyperparameters=note,
                diagnostics={"fm_agem_tasks": stats, **({"fm_agem_tuning": tuned} if tuned else {})},
            )
        out[learner] = res
    return out


def l2dpml_sweep(
    train_path: str | Path,
    test_path: str | Path,
    tune_path: str | Path,
    scenario_path: str | Path,
    runs: list[dict],
    learners: list[str],
    *,
    l2dpml_cfg: dict,
    fm_cfg: dict,
    threads: int | None = None,
    targets: dict | None = None,
    tuning: dict | None = None,
    dataset: str | None = None,
    dataset_cfg: dict | None = None,
) -> None:
    """All (ε, label method) runs of one seed; ``runs`` items: {labels, outputs: {learner: (metrics, privacy,
    diagnostics)}}; ``targets`` are the config's (ε tag -> {epsilon, delta}).

    ``tuning`` (the config's block; with ``dataset`` and its ``dataset_cfg``): when enabled, FM-A-GEM's
    (dim, lr, steps) are tuned per (training budget, label space) on the tuning set of
    ``tuning.protocol`` (:func:`dpcl.training.tuning_protocol.tuning_plan` over the first two tasks:
    the public tuning split, or as the paper private training data) by
    :func:`dpcl.learners.fm_agem.tune_fm_agem`; otherwise the ``fm_cfg`` block is used as is."""
    from threadpoolctl import threadpool_limits

    from ..features import load_feature_cache
    from ..learners.fm_agem import PublicPCA, tune_fm_agem
    from ..training.tuning_protocol import tuning_plan, tuning_rows

    with threadpool_limits(limits=threads):
        tx, ty, tidx, meta = load_feature_cache(train_path)
        ex, ey, _, _ = load_feature_cache(test_path)
        ux, uy, _, _ = load_feature_cache(tune_path)
        sc = Scenario.from_dict(read_json(scenario_path))
        projections: dict = {}
        fm_tuning, protocol = None, None
        if tuning and tuning.get("enabled", True) and "fm_agem" in learners:
            if dataset is None or dataset_cfg is None:
                raise ValueError("tuning FM-A-GEM needs the dataset's name and config (dataset, dataset_cfg)")
            protocol = tuning.get("protocol", "public")
            plan = tuning_plan(dataset, dataset_cfg, sc.task_classes, protocol, 2)
            xs, ys = (tx, ty) if plan.private else (ux, uy)
            rows = tuning_rows(ys, plan, int(sc.seed))
            results: dict = {}

            def projection_for(dim):
                if dim not in projections:
                    if "pca" not in projections:  # one SVD of the PUBLIC features for every dim
                        projections["pca"] = PublicPCA(ux)
                    projections[dim] = projections["pca"].projection(dim)
                return projections[dim]

            def fm_tuning(eps, delta, space):
                key = (eps, delta, space)
                if key not in results:
                    t0 = time.perf_counter()
                    results[key] = tune_fm_agem(
                        xs[rows],
                        ys[rows],
                        plan.tasks,
                        space,
                        eps,
                        delta,
                        seed=int(sc.seed),
                        projection_for=projection_for,
                        max_dim=min(ux.shape[1], len(ux) - 1),  # the public PCA's axes
                    )
                    r = results[key]
                    log(
                        f"tuned fm_agem seed {sc.seed} eps {eps:g} ({space} label space, {protocol} protocol): "
                        f"{r['best']}, validation accuracy {100 * r['best_validation_accuracy']:.1f} % "
                        f"({time.perf_counter() - t0:.1f} s)"
                    )
                return results[key]

        for run in runs:
            labels = read_json(run["labels"])
            t0 = time.perf_counter()
            res = run_l2dpml_learners(
                (tx, ty, tidx),
                (ex, ey),
                ux,
                sc,
                labels,
                int(sc.seed),
                learners=learners,
                l2dpml_cfg=l2dpml_cfg,
                fm_cfg=fm_cfg,
                backbone=meta["backbone"],
                target=config_target(labels, targets),
                projections=projections,
                fm_tuning=fm_tuning,
                fm_protocol=protocol,
            )
            for learner, (metrics, privacy, diag) in res.items():
                paths = run["outputs"][learner]
                write_run(
                    {"metrics": paths[0], "privacy": paths[1], "diagnostics": paths[2]},
                    metrics,
                    privacy,
                    diag,
                )
            accs = ", ".join(f"{k} {100 * v[0]['final_accuracy']:.1f} %" for k, v in res.items())
            log(
                f"l2dpml seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: {accs} "
                f"({time.perf_counter() - t0:.1f} s)"
            )
