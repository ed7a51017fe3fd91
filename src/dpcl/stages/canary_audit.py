"""The canary part of the privacy audit (rule ``privacy_audit_part``, part ``canaries``): a statistical
audit of every registered learner on cached features, a user's included, that needs no audit code from
its author.

Each of ``canary_runs`` runs of the learner's own code (:mod:`.audit_runs`, every DP-SGD rate 1) gets
``canaries`` "Dirac" canaries [Steinke2023] in task 0, each a large value on a feature coordinate of
its own and included by a fair coin, beside the audit's base records. The mechanism primitives report
every release with the rows it read and an attribution (:mod:`dpcl.privacy.releases`). A canary's
statistic sums, over every private release that read any present canary (seen in the reports, not
taken from the ledger), the release's projection on what that canary would add there, divided by the
noise: N(0, 1) per release without the canary, shifted by about 1/σ per read with it. Every canary,
present or absent, is scored on the same releases, so each is an independent trial (the noise of its
coordinate is its own, and every run draws fresh noise).

The claim tested is the run's: (ε, δ) for every individual (task-wise parallel composition). In this
setting every release is a Gaussian mechanism at rate 1, so the claim allows at most the μ of
:func:`dpcl.audits.gdp.claim_mu`; the row is refuted when its ε bound exceeds ε or its μ bound exceeds
that μ (each test at α/2). A learner whose releases carry no attribution, or do not read the canaries
as they were given (a learner that transforms its features first), gets a row that says so.

**FiLM learners** train on images with the backbone in the loop, so a canary is an image
(:func:`~.audit_runs.canary_images`) and its clipped gradient depends on the model at each release. Each
canary gets a class of its own (task 0 and the label universe gain them; "Dirac" in the output space:
its own row of the head), the recording carries the canaries, and the FiLM primitive attributes them at
release time (:func:`dpcl.training.film.film_attribution`: the head-weight block of each canary's clipped
gradient at that state, projected on the release). The canaries still share the backbone's features and
the FiLM values, so their statistics are not independent trials: the row's bound is the one-run audit's
([Steinke2023], :func:`dpcl.audits.one_run.audit_scores`, valid whatever the dependence) over the
canaries of :func:`film_runs` runs at once, with no μ bound.
"""

from __future__ import annotations

import math

import numpy as np

from ..audits.audit import audit_verdict
from ..audits.gdp import claim_mu, gdp_epsilon
from ..audits.whitebox import bound_coin_trials
from ..seeding import rng
from .audit_runs import (
    DIM,
    AuditSetting,
    audit_data,
    audit_target,
    audited,
    canary_images,
    canary_labels,
    canary_rows,
    job_inputs,
    on_images,
    row_head,
    run_audited,
)
from .exposure import THREADED

#: a FiLM learner's canary runs are this share of ``canary_runs`` (at least one): a FiLM run trains the
#: audit's backbone, about fifty times a head run's cost, and its one-run bound pools every run's canaries
FILM_RUN_SHARE = 16


def film_runs(runs: int) -> int:
    """The canary runs of a FiLM learner for ``runs`` of the others (:data:`FILM_RUN_SHARE`)."""
    return max(1, runs // FILM_RUN_SHARE)


def canary_audit_rows(
    epsilons,
    delta: float,
    *,
    seed: int,
    runs: int,
    canaries: int,
    alpha: float = 0.05,
    learners=None,
    setting: AuditSetting | None = None,
) -> list[dict]:
    """One row per registered learner (or per name in ``learners``) per finite ε in ``epsilons``, each
    run in the pipeline's ``setting`` (default: :meth:`AuditSetting.defaults`) with every DP-SGD rate 1
    (:meth:`AuditSetting.at_rate_one`)."""
    if runs < 2 or canaries < 2:
        raise ValueError(f"the canary audit needs runs >= 2 and canaries >= 2, got {runs} and {canaries}")
    at_one = (setting or AuditSetting.defaults()).at_rate_one()
    rows = []
    for eps in [e for e in epsilons if math.isfinite(e)]:
        for spec in audited(learners):
            row = row_head(spec, "canaries", eps, delta, alpha)
            film = on_images(spec)
            one_run = film or spec.job == "projected"  # their canaries' trials share terms
            n = film_runs(runs) if film else runs
            trials = _trials(spec, eps, delta, seed=seed, runs=n, canaries=canaries, setting=at_one)
            if isinstance(trials, str):
                rows.append(row | {"verdict": f"not auditable: {trials}", "setting": ""})
                continue
            z_in, z_out, scores, coins, read_counts = trials
            counts = "/".join(map(str, sorted(read_counts)))
            if one_run:
                rows.append(row | _one_run_row(spec, eps, delta, scores, coins, alpha, n, canaries, counts))
                continue
            b = bound_coin_trials(z_out, z_in, runs=runs, per_run=canaries, delta=delta, alpha=alpha)
            allowed = claim_mu(eps, delta)
            mu = float(b["mu_lower_bound"])
            lower = max(float(b["epsilon_lower_bound"]), 0.0)
            rows.append(
                row
                | {
                    "epsilon_lower_bound": lower,
                    "trials": min(b["trials_per_world"]),
                    "claimed_mu": allowed,
                    "mu_lower_bound": mu,
                    "epsilon_gdp": gdp_epsilon(mu, delta),
                    "verdict": audit_verdict(eps, lower, claimed_mu=allowed, mu_lower=mu),
                    "setting": f"{canaries} Dirac canaries in task 0 per run x {runs} runs, fair coins; "
                    f"its own code, every rate 1, Base Dataset; a canary scored on the "
                    f"{counts} releases that read canaries",
                }
            )
    return rows


def _trials(spec, eps: float, delta: float, *, seed: int, runs: int, canaries: int, setting: AuditSetting):
    """The canary trials of ``spec`` at claimed (``eps``, δ): (z of the present canaries, z of the absent
    ones, every canary's z in run order, their coins, the numbers of releases that read canaries), or why
    the learner cannot be audited this way (a string)."""
    from ..privacy import releases

    film, projected = on_images(spec), spec.job == "projected"
    own = film or projected  # canaries with a class of their own: "Dirac" in the output space
    cx, cy = canary_rows(canaries)
    if own:
        cy = canary_labels(canaries, own_classes=True)
    if film:  # an image per canary, attributed at release time (the model changes)
        cx = canary_images(canaries, seed=seed)
    z_in: list[float] = []
    z_out: list[float] = []
    scores: list[np.ndarray] = []
    all_coins: list[np.ndarray] = []
    read_counts = set()
    for r in range(runs):
        key = (seed, "audit", "canaries", spec.name, float(eps), r)
        coins = rng(*key, "coins").random(canaries) < 0.5
        data = audit_data(seed, coins, own_classes=own)
        labels = data.labels(eps, delta, stream=f"audit-canaries-{r}")
        try:
            with releases.recording(keep_values=True, canaries=(cx, cy) if film else None) as rec:
                privacy = run_audited(spec.name, data, labels, audit_target(eps, delta), setting).privacy
        except releases.OutsideRecording:
            return THREADED
        if not spec.dp or not privacy.get("private", True):  # (a tuning provenance flag is no reason)
            return "a method reproduced as published, whose ledger claims no DP guarantee"
        read_rows = cx  # the canaries as the release reads them: a projected job's through its projection
        if projected and "dim" in (given := job_inputs(spec, data, setting)).options:
            read_rows = given.job.projection(int(given.options["dim"])).apply(cx)
        known = {np.ascontiguousarray(z).tobytes() for z in read_rows} if own else set()
        private = [x for x in rec.releases if x.rows is not None and 0 < x.noise_multiplier < math.inf]
        if not private:
            return "releases outside the mechanism primitives"
        if own:
            read = [
                x
                for x in private
                if x.rows.shape[1:] == read_rows.shape[1:]
                and any(np.ascontiguousarray(i).tobytes() in known for i in x.rows)
            ]
        else:
            read = [
                x
                for x in private
                if x.rows.ndim == 2 and x.rows.shape[1] == DIM + canaries and np.any(x.rows[:, DIM:] != 0)
            ]
        if not read:
            return "no release reads the canaries as given (its features transformed first)"
        if any(x.attribution is None or x.noise != "gaussian" for x in read):
            return "a release that read the canaries has no attribution"
        stat = np.zeros(canaries)
        for x in read:
            dots, norms = x.attribute(read_rows, cy)
            stat += dots / (x.noise_scale * np.maximum(norms, 1e-12))
        read_counts.add(len(read))
        z_in.extend(stat[coins].tolist())
        z_out.extend(stat[~coins].tolist())
        scores.append(stat)
        all_coins.append(coins)
    return z_in, z_out, np.concatenate(scores), np.concatenate(all_coins), read_counts


def _one_run_row(spec, eps, delta, scores, coins, alpha, runs, canaries, counts) -> dict:
    """The row of a learner whose canaries' statistics share terms (a FiLM learner's: the backbone's
    features and FiLM values; a projected learner's: every record's share of every row of b_t), so that
    they are not independent trials: the bound is the one-run audit's ([Steinke2023], valid whatever the
    dependence, :func:`dpcl.audits.one_run.audit_scores`) over every run's canaries at once (each canary
    is in one run only, included by its own coin), with the guesses of
    :data:`dpcl.audits.film.GUESS_FRACTIONS` (Bonferroni); no μ bound."""
    from ..audits.film import GUESS_FRACTIONS
    from ..audits.one_run import audit_scores

    m = len(scores)
    k = [(min(max(1, round(f * m)), m // 2),) * 2 for f in GUESS_FRACTIONS]  # fixed by m alone
    res = audit_scores(scores, coins, guesses=k, delta=delta, alpha=alpha)
    lower = float(res["epsilon_lower_bound"])
    return {
        "epsilon_lower_bound": lower,
        "trials": int(res["r"]),
        "claimed_mu": claim_mu(eps, delta),
        "mu_lower_bound": None,
        "verdict": audit_verdict(eps, lower),
        "setting": f"{canaries} canaries in task 0 per run x {runs} runs, "
        + (
            "random images, "
            if on_images(spec)
            else "Dirac features (the same after the public projection), "
        )
        + f"each with a class of its own, fair coins; its own code, every rate 1, Base Dataset; a canary "
        f"scored on its own output's row in the {counts} releases that read canaries; one-run bound over "
        f"all {m} canaries, top/bottom {', '.join(f'{f:g}' for f in GUESS_FRACTIONS)} guessed "
        f"(Bonferroni): {res['v']} of {res['r']} right",
    }
