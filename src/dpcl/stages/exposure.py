"""The release part of the privacy audit (rule ``privacy_audit_part``, parts ``exposure`` and
``exposure-active``): every registered learner runs its ordinary code on the audit's data set
(:mod:`.audit_runs`) in the pipeline's setting (its DP-SGD rates, config blocks, options and label
methods; the learners on images, FiLM, get each record as an image of its own and a tiny public
backbone) while the mechanism and sampling primitives report every release and sample
(:mod:`dpcl.privacy.releases`). Two rows per learner and claimed ε:

- **exposure**: each record's reads and samples are counted and compared with the run's own verified
  ledger (:func:`dpcl.audits.exposure.check_exposure`): a read identifies its record by content
  (distinct feature rows or images), samples are checked exactly, reads at rate 1 exactly and at lower
  rates by binomial tests, one per record and one per task's total;
- **post-processing**: the learner runs again on a D′ with the same public inputs and other private
  values, and on D with one more record in every task, every primitive replaying what it released on D
  (its label release included); every released byte must be the same
  (:mod:`dpcl.audits.postprocessing`).

Each runs every label method the learner's jobs run but the Label Oracle (whose label spaces are no DP
release), at α split over them. DP active learning gets a row per group of one run's ledger
(:func:`active_exposure_rows`) and a post-processing row of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..privacy.releases import OutsideRecording
from ..seeding import rng
from .audit_runs import (
    CLASSES_PER_TASK,
    IMAGE_SIZE,
    N_TASKS,
    PER_CLASS,
    VARIANTS,
    AuditData,
    AuditSetting,
    audit_data,
    audit_images,
    audit_target,
    audited,
    on_images,
    projected_dims,
    row_head,
    run_audited,
)


def _index(data: AuditData):
    """The records in every public representation a primitive may read them in: the features, and
    their public projections at the projected job's dimensions."""
    from ..audits.exposure import RecordIndex
    from ..public_pca import PublicPCA

    index = RecordIndex()
    x, _, ids = data.train
    pca = PublicPCA(data.public)
    for t, task_ids in enumerate(data.scenario.train_indices):
        rows = np.searchsorted(ids, task_ids)
        index.add(x[rows], task_ids, t)
        for dim in projected_dims():
            index.add(pca.projection(dim).apply(x[rows]), task_ids, t)
    return index


#: how the setting column names the learners on images' variant of the audit data
IMAGES_NOTE = f" (each an image of its own, {IMAGE_SIZE} px, a random-init ViT of one block)"


def _image_index(data: AuditData):
    """The records as the learners on images (FiLM) read them: each its own image (:func:`audit_images`)."""
    from ..audits.exposure import RecordIndex

    index = RecordIndex()
    images, _ = audit_images(data)
    ids = data.train[2]
    for t, task_ids in enumerate(data.scenario.train_indices):
        rows = np.searchsorted(ids, task_ids)
        index.add(images[rows].reshape(len(rows), -1), task_ids, t)
    return index


def exposure_rows(
    epsilons,
    delta: float,
    *,
    seed: int,
    alpha: float = 0.05,
    learners=None,
    setting: AuditSetting | None = None,
) -> list[dict]:
    """Two rows per registered learner (or per name in ``learners``) per finite ε in ``epsilons``: its
    exposure check and its post-processing check (module docstring) in ``setting`` (default:
    :meth:`AuditSetting.defaults`)."""
    from ..audits.exposure import Exposure, check_exposure
    from ..audits.postprocessing import PostProcessing

    setting = setting or AuditSetting.defaults()
    data = {v: audit_data(seed, variant=v) for v in VARIANTS}
    index = _index(data["D"])
    image_index = _image_index(data["D"])
    rows = []
    for eps in [e for e in epsilons if math.isfinite(e)]:
        for spec in audited(learners):
            methods = setting.methods(spec.name)
            exposure, post, why = Exposure(alpha=alpha), PostProcessing(), None
            used: set[str] = set()  # the primitives its runs released through ("mechanism/noise")
            if not spec.dp:  # reproduced as published: its ledger claims no guarantee to test
                why = PUBLISHED
            for method in methods if why is None else ():
                try:
                    run = _learner_run(spec.name, data, method, eps, delta, setting)
                except OutsideRecording:
                    why = THREADED
                    break
                if not run.privacy.get("private", True):  # (a tuning provenance flag is no reason)
                    why = PUBLISHED
                    break
                exposure.merge(
                    check_exposure(
                        run.releases,
                        run.privacy,
                        image_index if on_images(spec) else index,
                        alpha=alpha / len(methods),
                        samples=run.samples,
                    )
                )
                post.releases += len(run.releases)
                used |= {f"{r.mechanism}/{r.noise}" for r in run.releases}
                try:
                    for variant in ("other", "plus_one"):
                        replayed, diverged = _replayed_run(
                            spec.name, data[variant], method, eps, delta, setting, run
                        )
                        post.compare(f"{method}, {VARIANT_NAMES[variant]}", run.files, replayed, diverged)
                except OutsideRecording:
                    why = THREADED
                    break
            setting_text = (
                f"{N_TASKS} tasks x {CLASSES_PER_TASK * PER_CLASS} records"
                f"{IMAGES_NOTE if on_images(spec) else ''}, {_rates(spec, setting)}, {', '.join(methods)}; "
            )
            for kind, check in (("exposure", exposure), ("post-processing", post)):
                verdict = f"not auditable: {why}" if why else check.verdict
                rows.append(
                    row_head(spec, kind, eps, delta, alpha)
                    | {
                        "verdict": verdict,
                        "setting": setting_text + ("" if why else check.summary()),
                        "primitives": sorted(used),
                    }
                )
    return rows


#: why a method reproduced as published gets no verdict from these checks
PUBLISHED = "a method reproduced as published, whose ledger claims no DP guarantee"
#: why a learner whose primitives ran outside the audit's recording (in a thread of its own) gets no verdict
THREADED = "a mechanism primitive ran outside the audit's recording (in another thread), so its releases are not seen"

#: how a post-processing finding names the neighbour it was found on
VARIANT_NAMES = {"other": "D' (other private values)", "plus_one": "D + 1 record per task"}


def _rates(spec, setting: AuditSetting) -> str:
    """The setting column's account of the rates the learner ran at."""
    if on_images(spec):
        d = setting.film_dpsgd
    elif spec.job in ("heads", "agem"):
        d = setting.dpsgd
    elif spec.config_blocks:
        return f"its {', '.join(spec.config_blocks)} block"
    else:
        return "its own code's rates"
    return f"q = {d['sample_rate']:g}, {d['epochs']:g} epochs"


@dataclass(frozen=True, kw_only=True)
class _Recorded:
    """A learner's run on D, recorded: its release (files), ledger, releases (with payloads) and samples."""

    files: dict
    privacy: dict
    releases: list
    samples: list


def _release(labels: dict, run) -> dict:
    from ..audits.postprocessing import release_files

    return release_files(
        labels=labels,
        metrics=run.metrics,
        privacy=run.privacy,
        predictions=run.result.predictions,
        model=run.result.model,
        members=run.result.members,
    )


def _learner_run(learner: str, data: dict, method: str, eps: float, delta: float, setting) -> _Recorded:
    """One recorded run on D: the label release, then the learner, as the pipeline's jobs make them."""
    from ..privacy import releases

    with releases.recording(keep_payloads=True, keep_samples=True) as rec:
        labels = data["D"].labels(eps, delta, method=method)
        run = run_audited(learner, data["D"], labels, audit_target(eps, delta), setting)
    return _Recorded(
        files=_release(labels, run), privacy=run.privacy, releases=rec.releases, samples=rec.samples
    )


def _replayed_run(learner: str, variant, method, eps, delta, setting, recorded: _Recorded):
    """The same run on a neighbouring variant with every primitive replaying the recorded releases:
    (its release, None) or (None, why the replay left the recorded run)."""
    from ..audits.postprocessing import replayed

    def run() -> dict:
        labels = variant.labels(eps, delta, method=method)
        return _release(labels, run_audited(learner, variant, labels, audit_target(eps, delta), setting))

    return replayed(run, recorded.releases)


#: the DP active-learning run the exposure audit makes: step amplification with each group's ε from its
#: own history (dpcl.active.schedules), solved for ε = 8 with ε_Sel = 2 (the default's DP selection) on a
#: pool of 1,200, two selection phases
ACTIVE_PLAN = {"epsilon": 8.0, "delta": 1e-5, "selection_epsilon": 2.0, "initial": 120, "queries": (120, 60)}
ACTIVE_POOL, ACTIVE_CLASSES, ACTIVE_DIM, ACTIVE_BATCH, ACTIVE_EPOCHS = 1200, 5, 16, 32, 3


def active_exposure_rows(*, seed: int, alpha: float = 0.05) -> list[dict]:
    """One row per group of a DP active-learning run (entropy acquisition, the sound per-record
    selection, the step-amplification schedule; :data:`ACTIVE_PLAN`): every record of the pool is placed
    in the group its selection reads name and its reads checked against that group's ledger entries
    (:func:`dpcl.audits.exposure.check_group_exposure`); and the run's post-processing row: the same run
    on a pool of other private values and on the pool with one record more, every primitive (the
    Laplace selection, the training's clipped sums) replaying its release, must release the same bytes
    (the final head, the metrics, privacy.json)."""
    from ..active.run import ActiveMethod, run_active
    from ..active.schedules import ALPlan, build_schedule
    from ..audits.exposure import RecordIndex, check_group_exposure
    from ..audits.postprocessing import PostProcessing, replayed
    from ..privacy import releases

    p = ACTIVE_PLAN
    plan = ALPlan(
        p["epsilon"],
        p["delta"],
        p["selection_epsilon"],
        p["initial"],
        p["queries"],
        ACTIVE_BATCH,
        ACTIVE_EPOCHS,
    )
    schedule = build_schedule("step_amplification", plan)
    gen = rng(seed, "audit", "exposure", "active")
    means = gen.normal(0.0, 2.0, (ACTIVE_CLASSES, ACTIVE_DIM))

    def draw(n: int, g=gen) -> tuple[np.ndarray, np.ndarray]:
        y = g.integers(0, ACTIVE_CLASSES, n)
        x = means[y] + g.normal(0.0, 1.0, (n, ACTIVE_DIM))
        return x / np.linalg.norm(x, axis=1, keepdims=True), y

    pool, test, public = draw(ACTIVE_POOL), draw(300), draw(400)[0]
    other = draw(ACTIVE_POOL, rng(seed, "audit", "exposure", "active", "other"))  # D': other private values
    extra = draw(1, rng(seed, "audit", "exposure", "active", "plus_one"))
    plus_one = (np.vstack([pool[0], extra[0]]), np.concatenate([pool[1], extra[1]]))
    index = RecordIndex()
    index.add(pool[0], np.arange(ACTIVE_POOL), 0)
    index.add_public(public)
    method = ActiveMethod("entropy", "dp", "sound")

    def run(data):  # the pool's planned size stays the plan's (public), whatever the data's
        metrics, privacy, _, head = run_active(
            data,
            test,
            public,
            ACTIVE_CLASSES,
            ACTIVE_POOL,
            method,
            schedule=schedule,
            lr=0.05,
            clip=1.0,
            stream=lambda *k: rng(seed, "audit", "exposure", "active", *k),
            mc_passes=4,
        )
        return privacy, {
            "metrics.json": metrics,
            "privacy.json": privacy,
            "model.npz": {"weight": np.array(head.w), "bias": np.array(head.b)},
        }

    with releases.recording(keep_payloads=True, keep_samples=True) as rec:
        privacy, files = run(pool)
    checks = check_group_exposure(rec.releases, privacy, index, alpha=alpha, samples=rec.samples)
    post = PostProcessing(releases=len(rec.releases))
    for name, data in (("other", other), ("plus_one", plus_one)):
        again, diverged = replayed(lambda d=data: run(d)[1], rec.releases)
        post.compare(VARIANT_NAMES[name].replace(" per task", ""), files, again, diverged)
    head = {
        "learner": "dp_active_learning",
        "claimed_epsilon": float(p["epsilon"]),
        "delta": float(p["delta"]),
        "alpha": float(alpha),
    }
    about = f"entropy, sound selection, step amplification (eps_Sel = {p['selection_epsilon']:g}), pool {ACTIVE_POOL}"
    rows = []
    for group, res in checks.items():
        if group == "none" and not res.unaccounted:
            continue
        rows.append(
            head
            | {
                "mechanism": f"DP active learning, group {group} (exposure)",
                "verdict": res.verdict if res.records_read or res.unaccounted else "not refuted",
                "setting": f"{about}; group {group}: {res.records_read} records, at most {res.max_reads} reads "
                f"of one; {len(res.unaccounted)} unaccounted (samples and selection reads exact, training "
                f"reads binomial, alpha {alpha:g})",
            }
        )
    rows.append(
        head
        | {
            "mechanism": "DP active learning (post-processing)",
            "verdict": post.verdict,
            "setting": f"{about}; {post.summary()}",
        }
    )
    return rows
