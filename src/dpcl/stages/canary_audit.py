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
"""

from __future__ import annotations

import math

import numpy as np

from ..seeding import rng
from .audit_runs import (
    DIM,
    NOT_RUNNABLE,
    AuditSetting,
    audit_data,
    audit_target,
    audited,
    canary_rows,
    on_images,
    row_head,
    run_audited,
)
from .exposure import THREADED


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
    from ..audits.audit import audit_verdict
    from ..audits.gdp import claim_mu, gdp_epsilon
    from ..audits.whitebox import bound_coin_trials
    from ..privacy import releases

    if runs < 2 or canaries < 2:
        raise ValueError(f"the canary audit needs runs >= 2 and canaries >= 2, got {runs} and {canaries}")
    cx, cy = canary_rows(canaries)
    at_one = (setting or AuditSetting.defaults()).at_rate_one()
    rows = []
    for eps in [e for e in epsilons if math.isfinite(e)]:
        for spec in audited(learners):
            row = row_head(spec, "canaries", eps, delta, alpha)
            why = NOT_RUNNABLE if on_images(spec) else None
            z_in: list[float] = []
            z_out: list[float] = []
            read_counts = set()
            for r in range(runs if why is None else 0):
                key = (seed, "audit", "canaries", spec.name, float(eps), r)
                coins = rng(*key, "coins").random(canaries) < 0.5
                data = audit_data(seed, coins)
                labels = data.labels(eps, delta, stream=f"audit-canaries-{r}")
                try:
                    with releases.recording(keep_values=True) as rec:
                        privacy = run_audited(
                            spec.name, data, labels, audit_target(eps, delta), at_one
                        ).privacy
                except releases.OutsideRecording:
                    why = THREADED
                    break
                if not spec.dp or not privacy.get("private", True):  # (a tuning provenance flag is no reason)
                    why = "a method reproduced as published, whose ledger claims no DP guarantee"
                    break
                private = [
                    x for x in rec.releases if x.rows is not None and 0 < x.noise_multiplier < math.inf
                ]
                if not private:
                    why = "releases outside the mechanism primitives"
                    break
                read = [
                    x
                    for x in private
                    if x.rows.ndim == 2 and x.rows.shape[1] == DIM + canaries and np.any(x.rows[:, DIM:] != 0)
                ]
                if not read:
                    why = "no release reads the canaries as given (its features transformed first)"
                    break
                if any(x.attribution is None or x.noise != "gaussian" for x in read):
                    why = "a release that read the canaries has no attribution"
                    break
                stat = np.zeros(canaries)
                for x in read:
                    dots, norms = x.attribute(cx, cy)
                    stat += dots / (x.noise_scale * np.maximum(norms, 1e-12))
                read_counts.add(len(read))
                z_in.extend(stat[coins].tolist())
                z_out.extend(stat[~coins].tolist())
            if why is not None:
                rows.append(row | {"verdict": f"not auditable: {why}", "setting": ""})
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
                    f"{'/'.join(map(str, sorted(read_counts)))} releases that read canaries",
                }
            )
    return rows
