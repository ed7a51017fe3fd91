"""The exposure part of the privacy audit (rule ``privacy_audit_part``, part ``exposure``): every
registered learner on cached features runs its ordinary code on a small audit data set while the mechanism
primitives report every release (:mod:`dpcl.privacy.releases`); each record's reads are counted and
compared with the run's own verified ledger (:func:`dpcl.audits.exposure.check_exposure`).

The audit data set: :data:`N_TASKS` disjoint tasks of two classes, :data:`PER_CLASS` records per class
with distinct random feature rows, so that a read identifies its record by content. Every DP-SGD rate
is 1 (:data:`AUDIT_DPSGD`, :data:`AUDIT_AGEM`), so the count is exact: a read the ledger does not account
for fails the row outright. The label method is Base Dataset (a data-independent label space), so the
training budget is the whole ε. A learner's run is made by the function its registry job names
(:data:`RUNNERS`); a job the harness cannot run yet gets a row that says so, never a silent skip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import eps_tag
from ..data.label_space import output_label_spaces, parse_label_method
from ..data.scenarios import Scenario
from ..privacy.accounting import Budget
from ..seeding import rng

N_TASKS, CLASSES_PER_TASK, PER_CLASS, TEST_PER_CLASS, DIM = 3, 2, 10, 4, 8
#: every rate 1 (the check is exact), two epochs (each record read twice by its own task's training)
AUDIT_DPSGD = {"sample_rate": 1.0, "epochs": 2.0, "lr": 0.05, "clip": 1.0, "normaliser": 16.0}
AUDIT_AGEM = {"buffer_fraction": 0.5, "buffer_sample_rate": 1.0}
#: the projected job's blocks: small, fixed (no tuning), the PCA fitted on the audit's public split
PROJECTED_BLOCKS = {
    "l2dpml": {"input_dim": DIM, "hidden": 4, "batch_size": 8, "epochs": 1},
    "fm_agem": {"dim": 4, "lr": 0.4, "steps": 2},
}
METHOD = "base"


@dataclass(frozen=True)
class AuditData:
    """The exposure audit's data: cached-feature arrays as the jobs read them, the scenario, the labels
    and the public split the projected job fits its PCA on."""

    train: tuple[np.ndarray, np.ndarray, np.ndarray]  #: features, labels, sample ids (ascending)
    test: tuple[np.ndarray, np.ndarray]
    public: np.ndarray
    scenario: Scenario

    def labels(self, epsilon: float, delta: float) -> dict:
        """The label file of a Base Dataset run at (ε, δ), as the labels stage writes it."""
        budget = Budget(epsilon, delta) if math.isfinite(epsilon) else Budget(math.inf, 0.0)
        task_labels = [
            self.train[1][np.searchsorted(self.train[2], ids)] for ids in self.scenario.train_indices
        ]
        res = output_label_spaces(
            parse_label_method(METHOD),
            task_labels,
            N_TASKS * CLASSES_PER_TASK,
            budget,
            self.scenario.seed,
            run_key=("release", "audit", self.scenario.name, eps_tag(epsilon)),
        )
        return res | {
            "seed": self.scenario.seed,
            "scenario": self.scenario.name,
            "epsilon_tag": eps_tag(epsilon),
            "stream": {"dataset": "audit", "scenario": self.scenario.name},
        }


def audit_data(seed: int) -> AuditData:
    """The audit's records: class means on a sphere of radius 2 plus unit Gaussian noise, float32."""
    gen = rng(seed, "audit", "exposure", "data")
    n_classes = N_TASKS * CLASSES_PER_TASK
    means = gen.normal(0.0, 1.0, (n_classes, DIM))
    means *= 2.0 / np.linalg.norm(means, axis=1, keepdims=True)

    def draw(per: int) -> tuple[np.ndarray, np.ndarray]:
        y = np.repeat(np.arange(n_classes), per)
        return (means[y] + gen.normal(0.0, 1.0, (len(y), DIM))).astype(np.float32), y

    x, y = draw(PER_CLASS)
    xt, yt = draw(TEST_PER_CLASS)
    public, _ = draw(PER_CLASS)
    ids = np.arange(len(y))
    classes = [list(range(t * CLASSES_PER_TASK, (t + 1) * CLASSES_PER_TASK)) for t in range(N_TASKS)]
    scenario = Scenario(
        name="exposure-audit",
        seed=int(seed),
        class_order=list(range(n_classes)),
        task_classes=classes,
        train_indices=[ids[np.isin(y, c)] for c in classes],
    )
    return AuditData(train=(x, y, ids), test=(xt, yt), public=public, scenario=scenario)


def _target(epsilon: float, delta: float) -> Budget:
    return Budget(epsilon, delta) if math.isfinite(epsilon) else Budget(math.inf, 0.0)


def _prototypes(learner: str, data: AuditData, labels: dict, target: Budget) -> dict:
    from .prototypes import run_prototype_learner

    return run_prototype_learner(
        data.train, data.test, data.scenario, labels, learner=learner, target=target
    )[1]


def _heads(learner: str, data: AuditData, labels: dict, target: Budget) -> dict:
    from .heads import run_head_learners

    out = run_head_learners(
        data.train,
        data.test,
        data.scenario,
        labels,
        data.scenario.seed,
        [learner],
        dpsgd_cfg=AUDIT_DPSGD,
        target=target,
    )
    return out[learner][1]


def _memory(learner: str, data: AuditData, labels: dict, target: Budget) -> dict:
    from .agem import run_memory_learner

    return run_memory_learner(
        data.train,
        data.test,
        data.scenario,
        labels,
        learner=learner,
        dpsgd_cfg=AUDIT_DPSGD,
        agem_cfg=AUDIT_AGEM,
        target=target,
    )[1]


def _projected(learner: str, data: AuditData, labels: dict, target: Budget) -> dict:
    from ..learners import registry
    from .common import LearnerRun
    from .projected import ProjectedJob

    (block,) = registry.get(learner).config_blocks
    run = LearnerRun(
        learner=learner,
        labels=labels,
        scenario=data.scenario,
        train=data.train,
        test=data.test,
        target=target,
        block=PROJECTED_BLOCKS.get(block, {}),
        job=ProjectedJob(tune_x=data.public, seed=data.scenario.seed),
    )
    return registry.stage_function(learner, "projected")(run)[1]


def _features(learner: str, data: AuditData, labels: dict, target: Budget) -> dict:
    from .learner import run_learner

    return run_learner(
        learner,
        train=data.train,
        test=data.test,
        scenario=data.scenario,
        labels=labels,
        options={},
        target=target,
        backbone="features",
    )[1]


#: how the harness makes one run of a learner, by its registry job (jobs on images are not run here yet)
RUNNERS: dict[str, Callable[[str, AuditData, dict, Budget], dict]] = {
    "prototypes": _prototypes,
    "heads": _heads,
    "agem": _memory,
    "projected": _projected,
    "features": _features,
}


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
        for dim in sorted({b["dim"] for b in PROJECTED_BLOCKS.values() if "dim" in b}):
            index.add(pca.projection(dim).apply(x[rows]), task_ids, t)
    return index


def exposure_rows(epsilons, delta: float, *, seed: int, alpha: float = 0.05, learners=None) -> list[dict]:
    """One row per registered learner (or per name in ``learners``) per finite ε in ``epsilons``: the
    exposure check of one Base Dataset run on the audit data (module docstring)."""
    from ..audits.exposure import check_exposure
    from ..learners import registry
    from ..privacy import releases

    data = audit_data(seed)
    index = _index(data)
    rows = []
    for eps in [e for e in epsilons if math.isfinite(e)]:
        labels = data.labels(eps, delta)
        for spec in registry.specs() if learners is None else [registry.get(n) for n in learners]:
            row = {
                "learner": spec.name,
                "mechanism": f"{spec.display}: exposure",
                "claimed_epsilon": float(eps),
                "delta": float(delta),
                "alpha": float(alpha),
            }
            runner = RUNNERS.get(spec.job)
            if runner is None:
                rows.append(
                    row
                    | {
                        "verdict": f"not auditable: job {spec.job!r} is not run by the exposure audit yet",
                        "setting": "",
                    }
                )
                continue
            with releases.recording() as rec:
                privacy = runner(spec.name, data, labels, _target(eps, delta))
            if not privacy.get("private", True) or not privacy.get("guarantee_holds", True):
                verdict, summary = "not auditable: its ledger claims no DP guarantee", ""
            else:
                result = check_exposure(rec.releases, privacy, index, alpha=alpha)
                verdict, summary = result.verdict, result.summary()
                if not result.releases and verdict.startswith("not auditable"):
                    verdict = "not auditable: releases outside the mechanism primitives"
            rows.append(
                row
                | {
                    "verdict": verdict,
                    "setting": f"{N_TASKS} tasks x {CLASSES_PER_TASK * PER_CLASS} records, every rate 1, "
                    f"Base Dataset; {summary}",
                }
            )
    return rows


#: the DP active-learning run the exposure audit makes: the authors' step amplification, solved for
#: ε = 8 with ε_Sel = 2 (the default's DP selection) on a pool of 1,200, two selection phases
ACTIVE_PLAN = {"epsilon": 8.0, "delta": 1e-5, "selection_epsilon": 2.0, "initial": 120, "queries": (120, 60)}
ACTIVE_POOL, ACTIVE_CLASSES, ACTIVE_DIM, ACTIVE_BATCH, ACTIVE_EPOCHS = 1200, 5, 16, 32, 3


def active_exposure_rows(*, seed: int, alpha: float = 0.05) -> list[dict]:
    """One row per group of a DP active-learning run (entropy acquisition, the sound per-record
    selection, the step-amplification schedule; :data:`ACTIVE_PLAN`): every record of the pool is placed
    in the group its selection reads name and its reads checked against that group's ledger entries
    (:func:`dpcl.audits.exposure.check_group_exposure`)."""
    from ..active.run import ActiveMethod, run_active
    from ..active.schedules import ALPlan, build_schedule
    from ..audits.exposure import RecordIndex, check_group_exposure
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

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = gen.integers(0, ACTIVE_CLASSES, n)
        x = means[y] + gen.normal(0.0, 1.0, (n, ACTIVE_DIM))
        return x / np.linalg.norm(x, axis=1, keepdims=True), y

    pool, test, public = draw(ACTIVE_POOL), draw(300), draw(400)[0]
    index = RecordIndex()
    index.add(pool[0], np.arange(ACTIVE_POOL), 0)
    index.add_public(public)
    method = ActiveMethod("entropy", "dp", "sound")
    with releases.recording() as rec:
        _, privacy, _, _ = run_active(
            pool,
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
    checks = check_group_exposure(rec.releases, privacy, index, alpha=alpha)
    rows = []
    for group, res in checks.items():
        if group == "none" and not res.unaccounted:
            continue
        rows.append(
            {
                "learner": "dp_active_learning",
                "mechanism": f"DP active learning, group {group}: exposure",
                "claimed_epsilon": float(p["epsilon"]),
                "delta": float(p["delta"]),
                "alpha": float(alpha),
                "verdict": res.verdict if res.records_read or res.unaccounted else "not refuted",
                "setting": f"entropy, sound selection, step amplification (eps_Sel = {p['selection_epsilon']:g}), "
                f"pool {ACTIVE_POOL}; group {group}: {res.records_read} records, at most {res.max_reads} reads "
                f"of one; {len(res.unaccounted)} unaccounted (selection reads exact, training reads binomial, "
                f"alpha {alpha:g})",
            }
        )
    return rows
