"""Stages of ``workflow/rules/privacy.smk``: the data-free privacy figures (Figs. 2, A1), the
label-space attack game (Fig. 1) and the empirical audit table."""

from __future__ import annotations

import math
import re
from pathlib import Path


def privacy_figures(cfg: dict, fig2: list[str | Path], figA1: list[str | Path]) -> None:
    """Fig. 2 (k-TSGD drop probability by class size) and Fig. A1 (the lower bound for any DP release)."""
    from ..report.figures import plot_label_drop

    plot_label_drop(cfg["epsilons"], cfg["deltas"], cfg["max_class_size"], list(fig2))
    plot_label_drop(cfg["epsilons"], cfg["deltas"], cfg["max_class_size"], list(figA1), lower_bound=True)


def label_space_attack(cfg: dict, delta: float, out_csv: str | Path, out_md: str | Path) -> None:
    """Fig. 1's attack table: the optimal attacker's accuracy against each label method."""
    from ..audits.attack import attack_table
    from ..io import write_text
    from ..report.privacy_tables import attack_table_markdown

    df = attack_table(cfg["epsilons"], delta, cfg["trials"], cfg["seed"], methods=tuple(cfg["methods"]))
    write_text(out_csv, df.to_csv(index=False))
    write_text(out_md, attack_table_markdown(df))


#: the audit table's parts that are not white-box audits (:func:`audit_parts`)
MECHANISMS_PART = "mechanisms"
LEARNERS_PART = "learners"
EXPOSURE_PART = "exposure"
ACTIVE_EXPOSURE_PART = "exposure-active"
CANARY_PART = "canaries"
#: the parts that are not a white-box audit of the registry
FIXED_PARTS = (MECHANISMS_PART, LEARNERS_PART, EXPOSURE_PART, ACTIVE_EXPOSURE_PART, CANARY_PART)


#: the threat model columns of the release part's rows (dpcl.stages.exposure)
EXPOSURE_THREAT = "exposure: every release's reads and every sample counted against the ledger"
POST_PROCESSING_THREAT = (
    "post-processing: every released byte replayed from the primitives' releases on neighbouring data"
)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def audit_parts(cfg: dict) -> list[str]:
    """The independent parts of the audit table, one job each in the workflow (``privacy_audit_part``),
    in table order: the mechanisms, the learners' canary audits (``learner_trials`` > 0) and one part per
    white-box audit of the registry (``whitebox_runs`` > 0, and the audit's own size key, if it names one,
    > 0) over every claimed ε, named by its audit's name (an audit's ε-independent setting, such as FiLM's canary gradients, is computed once per part)."""
    from ..learners import registry

    parts = [MECHANISMS_PART]
    if cfg.get("learner_trials", 0):
        parts.append(LEARNERS_PART)
    if cfg.get("exposure", True):
        parts += [EXPOSURE_PART, ACTIVE_EXPOSURE_PART]
    if cfg.get("canary_runs", 16):
        parts.append(CANARY_PART)
    if cfg.get("whitebox_runs", 0):
        names = [
            _slug(audit.name)
            for audit, _, _ in registry.whitebox_audits()
            if not audit.requires or cfg.get(audit.requires, 0)
        ]
        clash = sorted({n for n in names if names.count(n) > 1 or n in FIXED_PARTS})
        if clash:
            raise ValueError(f"white-box audits whose names give the same part name: {clash}; rename one")
        parts += names
    return parts


def audit_setting(config: dict, label_methods: dict) -> dict:
    """The pipeline's setting the learners are audited in (:class:`dpcl.stages.audit_runs.AuditSetting`,
    as plain values for a rule's params): the validated ``config``'s blocks and ``label_methods``, each
    learner's list of the label methods its jobs run."""
    from .audit_runs import AuditSetting

    return AuditSetting.from_config(config, label_methods).to_dict()


def audit_part(
    cfg: dict, delta: float, part: str, out_json: str | Path, *, setting: dict | None = None
) -> None:
    """Compute part ``part`` of the audit table (:func:`audit_parts`) in the pipeline's ``setting``
    (:func:`audit_setting`; None: every block's defaults) and write its rows to ``out_json`` (an
    intermediate file of :func:`privacy_audit`: Python's JSON with NaN and Infinity, so that every float
    reads back exactly)."""
    from ..io import write_json_exact

    write_json_exact(out_json, _part_rows(cfg, delta, part, setting))


def _part_rows(cfg: dict, delta: float, part: str, setting: dict | None = None):
    """Part ``part``'s rows: a list of row dicts, or for a white-box audit, per claimed ε (in the config's
    order, the infinite skipped) its list of rows."""
    from ..learners import registry
    from .audit_runs import AuditSetting

    run_setting = AuditSetting.from_dict(setting)

    if part == MECHANISMS_PART:
        from ..audits.audit import audit_table

        return audit_table(cfg["epsilons"], delta, cfg["trials"], cfg["seed"]).to_dict(orient="records")
    if part == LEARNERS_PART:
        from ..audits.learners import learner_audit_table

        return learner_audit_table(cfg["epsilons"], delta, int(cfg["learner_trials"]), cfg["seed"])
    if part == EXPOSURE_PART:
        from .exposure import exposure_rows

        return exposure_rows(cfg["epsilons"], delta, seed=cfg["seed"], setting=run_setting)
    if part == CANARY_PART:
        from .canary_audit import canary_audit_rows

        return canary_audit_rows(
            cfg["epsilons"],
            delta,
            seed=cfg["seed"],
            runs=int(cfg.get("canary_runs", 16)),
            canaries=int(cfg.get("canary_count", 1000)),
            setting=run_setting,
        )
    if part == ACTIVE_EXPOSURE_PART:
        from .exposure import active_exposure_rows

        return active_exposure_rows(seed=cfg["seed"])
    for audit, function, learners in registry.whitebox_audits():
        if _slug(audit.name) == part:
            return [
                _whitebox_rows(audit, function, learners, eps, delta, cfg) for eps in _finite(cfg["epsilons"])
            ]
    raise ValueError(f"unknown audit part {part!r}; known: {audit_parts(cfg)}")


def _finite(epsilons) -> list:
    import math

    return [e for e in epsilons if math.isfinite(e)]


def privacy_audit(
    cfg: dict,
    delta: float,
    out_csv: str | Path,
    out_md: str | Path,
    *,
    out_figures: list[str | Path] = (),
    parts: dict[str, str | Path] | None = None,
    setting: dict | None = None,
) -> None:
    """The empirical audit table: Clopper-Pearson lower bounds on ε against the claimed ε, for the
    mechanisms, (``learner_trials`` > 0) for whole learners (their canary audits) and (``whitebox_runs`` > 0)
    the learners' white-box audits (the registry's ``whitebox``, :mod:`dpcl.audits.whitebox`); with
    ``out_figures`` also the figure of claims against lower bounds (:func:`dpcl.report.fig_audit.plot_audit_claims`).
    ``parts`` maps every part of :func:`audit_parts` to the file :func:`audit_part` wrote for it (the
    workflow computes them in parallel jobs); without it every part is computed here. Either way the
    table is the same, byte for byte."""
    import pandas as pd

    from ..audits.audit import audit_verdict
    from ..io import read_json, write_text
    from ..learners import registry
    from ..report.privacy_tables import audit_table_markdown

    names = audit_parts(cfg)
    if parts is not None and set(parts) != set(names):
        raise ValueError(f"audit parts given {sorted(parts)}, expected {sorted(names)}")
    rows = {
        name: read_json(parts[name]) if parts is not None else _part_rows(cfg, delta, name, setting)
        for name in names
    }
    df = pd.DataFrame(rows[MECHANISMS_PART])
    df["threat_model"] = "black-box: the mechanism's output, independent runs per world"
    # each mechanism row names the learners whose runs release through its primitive (the release part
    # records which primitives every learner's runs used)
    users = _primitive_users(rows[EXPOSURE_PART] if cfg.get("exposure", True) else [])
    df["used_by"] = [", ".join(users.get(p, [])) if isinstance(p, str) else "" for p in df.pop("primitive")]
    if cfg.get("learner_trials", 0):
        learners = pd.DataFrame(
            [
                {
                    "mechanism": registry.get(r["learner"]).audit.name,
                    # a method reproduced as published whose claim does not hold (registry: dp False)
                    "broken": not registry.get(r["learner"]).dp,
                    "tag": registry.get(r["learner"]).audit.tag,
                    "claimed_epsilon": r["claimed_epsilon"],
                    "epsilon_lower_bound": r["epsilon_lower_bound"],
                    "trials": r["trials"],
                    "setting": r["attack"],
                    "threat_model": "black-box: the released model only, independent trainings per world",
                    "delta": delta,
                    "alpha": r["alpha"],
                }
                for r in rows[LEARNERS_PART]
            ]
        )
        learners["verdict"] = [
            audit_verdict(c, lb)
            for lb, c in zip(learners["epsilon_lower_bound"], learners["claimed_epsilon"], strict=True)
        ]
        df = pd.concat([df.assign(tag=""), learners], ignore_index=True)
    if cfg.get("exposure", True):
        exposure = pd.DataFrame(rows[EXPOSURE_PART] + rows[ACTIVE_EXPOSURE_PART])
        df = pd.concat(
            [
                df,
                exposure.assign(
                    broken=False,
                    tag="",
                    epsilon_lower_bound=math.nan,
                    trials=math.nan,
                    threat_model=[
                        POST_PROCESSING_THREAT if m.endswith("(post-processing)") else EXPOSURE_THREAT
                        for m in exposure["mechanism"]
                    ],
                ).drop(columns=["learner", "primitives"]),
            ],
            ignore_index=True,
        )
    if cfg.get("canary_runs", 16):
        canary = pd.DataFrame(rows[CANARY_PART])
        df = pd.concat(
            [
                df,
                canary.assign(
                    broken=False,
                    tag="",
                    threat_model="white-box: every release the primitives report; canaries in the private data",
                ).drop(columns=["learner"]),
            ],
            ignore_index=True,
        )
    if cfg.get("whitebox_runs", 0):
        # the table's order: per claimed ε, every white-box audit in registry order
        whitebox = [n for n in names if n not in FIXED_PARTS]
        ordered = [
            row for i in range(len(_finite(cfg["epsilons"]))) for name in whitebox for row in rows[name][i]
        ]
        df = pd.concat([df, pd.DataFrame(ordered)], ignore_index=True)
    notes = []
    if cfg.get("exposure", True):
        notes.append(
            "Exposure (dpcl.stages.exposure, dpcl.audits.exposure): every registered learner runs its own "
            "code on a small audit data set (distinct feature rows; the FiLM learners get each record as an "
            "image of its own and a tiny random-init ViT) in the pipeline's setting (its DP-SGD rates, "
            "config blocks, options and label methods but the Label Oracle) while the mechanism primitives "
            "report every release with the rows it read and the sampling primitive every Poisson sample "
            "with its population and rate; each record's samples (exactly: every stated rate an entry's, at "
            "most its steps) and reads (exactly at rate 1; at lower rates binomially, per record and per "
            "task's total) must be covered by the ledger entries of one part of its task. It sees reads "
            "the ledger does not expect (a record in two parts, an extra release, one reread too many, a "
            "release at noise 0 in a private run, a sampler at another rate) without canaries; it does not "
            "test the noise (the other rows do). Post-processing (dpcl.audits.postprocessing): the same "
            "runs again on a D' with the same public inputs and other private values and on D with one "
            "record more per task, every primitive replaying its release on D (the label release "
            "included): every released byte (label files, predictions, metrics, model, members, "
            "privacy.json) must be the same, or the release depends on the private data outside the "
            "mechanisms (exact, no statistics). A learner whose releases do not go through the primitives "
            "is marked not auditable. DP active learning (one run of the sound per-record selection under the "
            "step-amplification schedule at ε = 8, ε_Sel = 2): a row per group of its ledger; each record is "
            "placed in the group its count of Laplace selection reads names and checked against that "
            "group's phases, record by record and in total (per-record Poisson rates: binomial tests)."
        )
    if cfg.get("canary_runs", 16):
        notes.append(
            "Canaries (dpcl.stages.canary_audit): every registered learner runs its own code, with no "
            "audit code of its author's, on the audit data set plus canaries in task 0 (included by fair "
            "coins, fresh noise every run); each canary is scored on every release that read canaries, as "
            "the primitives report them, and the run's claim (ε, δ) is tested. Learners on cached features: "
            "Dirac canaries (a coordinate of their own each, independent trials), the ε bound and the μ "
            "bound against the μ the claim allows, each at α/2. FiLM learners: random-image canaries with a "
            "class of their own each, attributed by the FiLM primitive at each release's state (the "
            "head-weight block of their clipped gradients), over canary_runs / 16 runs (at least one); "
            "FM-A-GEM: Dirac canaries with a class of their own each, scored on their own row of the "
            "released Taylor coefficients; both with the one-run bound ([Steinke2023]), valid for trials "
            "that share terms, and no μ bound. A learner whose releases carry no attribution is marked not "
            "auditable."
        )
    if cfg.get("whitebox_runs", 0):
        notes.append(
            "White-box audits (the registry's LearnerSpec.whitebox; each learner's own training or release "
            "function, instrumented only to hand the adversary what it releases): the adversary sees every "
            "privatized release and chooses the canaries. DP-SGD heads (dpcl.audits.whitebox): the pipeline's "
            "train_head at q = 1 and one step (σ from the accountant for the claim at that setting, C = 0.1); "
            "weights: Dirac canaries on coordinates of their own, each included by a fair coin, so one "
            "training gives thousands of independent trials; bias: a zero-feature canary, one trial per "
            "training. DP-A-GEM and Desai et al. as published (dpcl.audits.agem_whitebox): their own "
            "run_*_head at T = 2 tasks, q = q_ref = 1, one step per task, Dirac canaries in task 0's train "
            "part and in its reference part (reread through the buffer by task 1's step); Desai's claim is "
            "its ledger's for one individual of a part (one Gaussian read with Lemma 2's σ), the published "
            "claim is in the setting. FM-A-GEM: unit-vector canaries in its per-task coefficient release. "
            "The threshold is "
            "fitted on the first quarter of the trials and the bounds computed on the rest. These audits show "
            "that the code adds the noise and clipping its ledger states at this setting; "
            + (
                "the Poisson rows (train_head at q = 1/4 over 16 steps, σ from the accountant for them; "
                "DP-A-GEM's and Desai's buffer rereads over T = 3 tasks at q = q_ref = 1/2, Desai's block "
                "drawn uniformly; statistic: the subsampled Gaussian's log likelihood ratio summed over the "
                "releases, so no μ) also test the sampling, the step count, the block choice and the "
                "composition the accountant charges for."
                if cfg.get("whitebox_poisson_runs", 0)
                else "they do not test Poisson sampling, the step count or the composition over many steps "
                "(the heads' Poisson audit, audit.whitebox_poisson_runs, does; config/audit.yaml runs it)."
            )
        )
    if cfg.get("whitebox_runs", 0) and cfg.get("film_canaries", 0):
        notes.append(
            "FiLM (dpcl.audits.film): the pipeline's train_film on the embedded EfficientNet-Lite0 at q = 1 "
            "and one step, audited in ONE training with many canaries ([Steinke2023], "
            "dpcl.audits.one_run): random images, each with an output of its own and included by a fair "
            "coin, a random initial head so that the FiLM branch carries gradient; the adversary decodes "
            "the release by least squares on the canaries' clipped gradients (and on their FiLM block alone), "
            "guesses the top and bottom scores in fractions of m fixed in advance (Bonferroni over them and "
            "the two decodings), and the bound is the "
            "largest ε whose one-run p-value is below α. Its trials are not independent, so it has no μ "
            "bound (—), and the one-run bound is far from tight for the Gaussian mechanism: it refutes "
            "gross errors (noise far below σ, a branch escaping clipping), not small ones."
        )
    if cfg.get("learner_trials", 0):
        notes.append(
            "L2DP-ML ([Lai2022]): the claimed ε is Theorem 2 without its γ term (γ needs the trained θ₁; "
            "with it the formula is data-dependent and much larger). Under substitution (x_e vs x′_e, the "
            "adjacency of [Lai2022]'s proof) its claim is not certified: no upper bound exists (the noise "
            "is drawn once and reused) and no audit under substitution has been run."
        )
    df["trials"] = df["trials"].astype("Int64")  # whole numbers, empty for the exposure rows
    md = audit_table_markdown(df, notes)
    write_text(out_csv, df.to_csv(index=False))
    write_text(out_md, md)
    if out_figures:
        from ..report.fig_audit import plot_audit_claims

        plot_audit_claims(df, list(out_figures))


def _primitive_users(exposure_rows: list[dict]) -> dict[str, list[str]]:
    """{primitive ("mechanism/noise"): the display names of the learners whose audited runs used it, in
    registry order} from the release part's rows."""
    from ..learners import registry

    users: dict[str, list[str]] = {}
    for r in exposure_rows:
        if not r["mechanism"].endswith("(exposure)"):
            continue
        name = registry.get(r["learner"]).display if r["learner"] in registry.names() else r["learner"]
        for p in r.get("primitives", []):
            if name not in users.setdefault(p, []):
                users[p].append(name)
    return users


def _whitebox_rows(audit, function, learners, eps: float, delta: float, cfg: dict) -> list[dict]:
    """The rows of one white-box audit (:func:`dpcl.learners.registry.whitebox_audits`) at claimed ε
    ``eps``, tagged with the learners that share it. The verdict is refuted where either lower bound
    exceeds what the claim allows: ε at δ (Clopper-Pearson, or the one-run bound of
    :mod:`dpcl.audits.one_run`) or μ (the f-DP route, :mod:`dpcl.audits.gdp`; NaN, shown "—", where the
    row has none). The μ a claim allows is derived from the claimed (ε, δ) alone
    (:func:`dpcl.audits.gdp.claim_mu`); the μ of the noise the code used is kept beside it
    (``noise_mu``), for the reader, never for the verdict."""
    import math

    from ..audits.audit import audit_verdict
    from ..audits.gdp import claim_mu, gdp_epsilon

    rows = []
    tag = audit.tag or ", ".join(s.display for s in learners)
    for r in function(eps, delta, audit=cfg, seed=cfg["seed"]):
        lower = max(r["epsilon_lower_bound"], 0.0)
        # a one-run audit (dpcl.audits.film) has no μ bound: its trials are not independent
        mu = r["mu_lower_bound"] if r["mu_lower_bound"] is not None else math.nan
        allowed = claim_mu(r["claimed_epsilon"], delta) if math.isfinite(mu) else math.nan
        noise_mu = r.get("claimed_mu")
        rows.append(
            {
                "mechanism": f"{audit.name}, {r['part']} (white-box)",
                "broken": False,
                "tag": tag,
                "claimed_epsilon": r["claimed_epsilon"],
                "epsilon_lower_bound": lower,
                "trials": min(r["trials_per_world"]),
                "setting": r["setting"],
                "threat_model": r["threat_model"],
                "delta": delta,
                "alpha": r["alpha"],
                "claimed_mu": allowed,
                "noise_mu": noise_mu if noise_mu is not None else math.nan,
                "mu_lower_bound": mu,
                "epsilon_gdp": gdp_epsilon(mu, delta) if math.isfinite(mu) else math.nan,
                "verdict": audit_verdict(
                    r["claimed_epsilon"],
                    lower,
                    claimed_mu=allowed if math.isfinite(mu) else None,
                    mu_lower=mu if math.isfinite(mu) else None,
                ),
            }
        )
    return rows
