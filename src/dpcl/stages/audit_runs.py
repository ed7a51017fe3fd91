"""Runs of a registered learner for the privacy audits: a small data set in the cached-feature layout
(:class:`AuditData`), a Base Dataset label file for it, and the function that makes one run of a learner
through its ``run`` function (:func:`run_audited`, the learner contract every learner on cached features
implements) with the inputs its registry job would give it, so that the learner runs the code the
pipeline runs, with its config block's defaults; a learner on images (FiLM) gets each record as an image
of its own and a tiny public backbone. Every DP-SGD rate is 1 (:data:`AUDIT_DPSGD`, :data:`AUDIT_AGEM`), so that every
record of a task is read at every step: exact counts for the exposure check (:mod:`.exposure`) and
Gaussian releases for the canary audit (:mod:`.canary_audit`).

The data: :data:`N_TASKS` disjoint tasks of two classes, :data:`PER_CLASS` records per class with
distinct random feature rows, optionally followed by "Dirac" canaries in task 0 (a large value on a
feature coordinate of their own), each included by its coin.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass

import numpy as np

from ..config import block_defaults, eps_tag
from ..data.label_space import output_label_spaces, parse_label_method
from ..data.scenarios import Scenario
from ..privacy.accounting import Budget
from ..seeding import rng

N_TASKS, CLASSES_PER_TASK, PER_CLASS, TEST_PER_CLASS, DIM = 3, 2, 10, 4, 32
#: every rate 1 (the check is exact), two epochs (each record read twice by its own task's training)
AUDIT_DPSGD = {"sample_rate": 1.0, "epochs": 2.0, "lr": 0.05, "clip": 1.0, "normaliser": 16.0}
AUDIT_AGEM = {"buffer_fraction": 0.5, "buffer_sample_rate": 1.0}
METHOD = "base"


@dataclass(frozen=True)
class AuditData:
    """The exposure audit's data: cached-feature arrays as the jobs read them, the scenario, the labels
    and the public split the projected job fits its PCA on."""

    train: tuple[np.ndarray, np.ndarray, np.ndarray]  #: features, labels, sample ids (ascending)
    test: tuple[np.ndarray, np.ndarray]
    public: np.ndarray
    scenario: Scenario

    def labels(self, epsilon: float, delta: float, *, stream: str = "audit") -> dict:
        """The label file of a Base Dataset run at (ε, δ), as the labels stage writes it; ``stream``
        names the data in the runs' noise streams (independent runs of one data set take distinct ones)."""
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
            "stream": {"dataset": stream, "scenario": self.scenario.name},
        }


def audit_data(seed: int, coins: np.ndarray | None = None) -> AuditData:
    """The audit's records: class means on a sphere of radius 2 plus unit Gaussian noise, float32; with
    ``coins`` (one bool per canary) the features gain a coordinate per canary and task 0 the canaries
    whose coin is set (:func:`canary_rows`: ids after the base records', task 0's classes in turn)."""
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
    if coins is not None:  # canaries: a coordinate each, in task 0, ids after the base records'
        k = len(coins)
        pad = lambda a: np.hstack([a, np.zeros((len(a), k), dtype=np.float32)])  # noqa: E731
        cx, cy = canary_rows(k)
        chosen = np.flatnonzero(coins)
        x, y = np.vstack([pad(x), cx[chosen]]), np.concatenate([y, cy[chosen]])
        ids = np.concatenate([ids, len(ids) + chosen])
        xt, public = pad(xt), pad(public)
    scenario = Scenario(
        name="exposure-audit",
        seed=int(seed),
        class_order=list(range(n_classes)),
        task_classes=classes,
        train_indices=[ids[np.isin(y, c)] for c in classes],
    )
    return AuditData(train=(x, y, ids), test=(xt, yt), public=public, scenario=scenario)


@functools.cache
def _block_defaults(block: str) -> str:
    return json.dumps(block_defaults(block))  # (the schema is parsed once per process, not once per run)


def _defaults(block: str) -> dict:
    """Config block ``block``'s defaults (a fresh copy each call)."""
    return json.loads(_block_defaults(block))


@dataclass(frozen=True, kw_only=True)
class JobInputs:
    """What a learner's job gives its run in the audit setting: its config block (``options``) and the
    job's context (:attr:`dpcl.learners.api.RunInputs.job`)."""

    options: dict
    job: object = None


def _job_inputs(spec, data: AuditData) -> JobInputs:
    """The audit setting's job inputs of ``spec``'s registry job: the rates of :data:`AUDIT_DPSGD` and
    :data:`AUDIT_AGEM`, the public split's PCA, every other value its config blocks' defaults."""
    if spec.job == "heads":
        from .heads import HeadJob

        return JobInputs(options={}, job=HeadJob(dpsgd_cfg=AUDIT_DPSGD))
    if spec.job == "agem":
        from .agem import MemoryJob

        return JobInputs(options=AUDIT_AGEM, job=MemoryJob(dpsgd_cfg=AUDIT_DPSGD, agem_cfg=AUDIT_AGEM))
    if spec.job == "projected":
        from .projected import ProjectedJob

        (block,) = spec.config_blocks
        return JobInputs(
            options=_defaults(block), job=ProjectedJob(tune_x=data.public, seed=data.scenario.seed)
        )
    if on_images(spec):
        from .film import FilmJob

        backbone, pre = _film_backbone()
        agem = "agem" in spec.config_blocks
        return JobInputs(
            options={},
            job=FilmJob(
                backbone=backbone,
                pre=pre,
                dpsgd_cfg=AUDIT_DPSGD,
                agem_cfg=AUDIT_AGEM if agem else {},
                physical_batch=64,
                device="cpu",
            ),
        )
    return JobInputs(options={})  # prototypes, and a user's learner (job "features"): its run needs no job


#: why the canary audit gives a FiLM learner no row of its own
NOT_RUNNABLE = (
    "a FiLM learner, trained on images: its canaries would be images, whose clipped gradients at every "
    "release's state this harness does not attribute (the FiLM white-box audit does, for train_film's releases)"
)

#: the FiLM learners' backbone in the audit setting: a tiny random-init ViT on :data:`IMAGE_SIZE` px images
#: (the backbone is public, so any serves to count reads; its LayerNorms carry the FiLM values, as ViT-B/16's)
FILM_BACKBONE = {
    "arch": "vit_tiny_patch16_224",
    "weights": "random",
    "image_size": 16,
    "crop_pct": 1.0,
    "model_kwargs": {"depth": 1, "embed_dim": 8, "num_heads": 2, "patch_size": 8},
}
IMAGE_SIZE = FILM_BACKBONE["image_size"]


@functools.cache
def _film_backbone():
    """(backbone, preprocessing) of :data:`FILM_BACKBONE`, built once per process (a FiLM run restores the
    backbone's FiLM values when it ends, so runs share it)."""
    from .film import load_film_backbone

    return load_film_backbone(FILM_BACKBONE)


def audit_images(data: AuditData) -> tuple[np.ndarray, np.ndarray]:
    """The audit's records as images, for the learners that train on images (FiLM): one distinct random
    uint8 image per training record, drawn by its sample id (so that a record's image does not depend on
    which others are present), and one per test record; (train images, test images), in the rows' order."""
    gen = rng(data.scenario.seed, "audit", "exposure", "images")
    shape = (IMAGE_SIZE, IMAGE_SIZE, 3)
    ids = data.train[2]
    train = gen.integers(0, 256, (int(ids.max()) + 1, *shape), dtype=np.uint8)[ids]
    test = gen.integers(0, 256, (len(data.test[1]), *shape), dtype=np.uint8)
    return train, test


def run_audited(learner: str, data: AuditData, labels: dict, target: Budget) -> dict:
    """One run of a registered learner on the audit's data through its ``run`` function (the learner
    contract, :func:`dpcl.stages.learner.run_learner`), as its job would make it: its verified privacy
    ledger. A learner on images (FiLM) gets the records as images (:func:`audit_images`) and the audit's
    backbone (:data:`FILM_BACKBONE`)."""
    from ..learners import registry
    from .learner import run_learner

    spec = registry.get(learner)
    given = _job_inputs(spec, data)
    train, test = data.train, data.test
    if on_images(spec):
        images, test_images = audit_images(data)
        train, test = (images, *data.train[1:]), (test_images, data.test[1])
    return run_learner(
        learner,
        train=train,
        test=test,
        scenario=data.scenario,
        labels=labels,
        options=given.options,
        target=target,
        job=given.job,
    )[1]


def on_images(spec) -> bool:
    """Whether ``spec``'s learner trains on images (a FiLM job's): the harness gives it the records as
    images (:func:`audit_images`)."""
    from ..learners.registry import FILM_JOBS

    return spec.job in FILM_JOBS


#: a canary's value on its own coordinate: large, so that every clipped gradient it gives is clipped
DIRAC_SCALE = 10.0


def canary_rows(k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` canaries' feature rows (width ``DIM + k``: DIRAC_SCALE on coordinate DIM + i) and labels
    (task 0's classes in turn)."""
    x = np.zeros((k, DIM + k), dtype=np.float32)
    x[np.arange(k), DIM + np.arange(k)] = DIRAC_SCALE
    return x, np.arange(k) % CLASSES_PER_TASK


def audit_target(epsilon: float, delta: float) -> Budget:
    return Budget(epsilon, delta) if math.isfinite(epsilon) else Budget(math.inf, 0.0)


def projected_dims() -> list[int]:
    """The dimensions of the public projections the registered projected learners train on (their
    blocks' default ``dim``): the representations their releases read."""
    from ..learners import registry

    dims = set()
    for spec in registry.specs():
        if spec.job == "projected":
            for block in spec.config_blocks:
                if "dim" in (d := _defaults(block)):
                    dims.add(int(d["dim"]))
    return sorted(dims)


def audited(learners=None) -> list:
    """The learners an audit part gives rows to: every registered one, or those named in ``learners``."""
    from ..learners import registry

    return list(registry.specs()) if learners is None else [registry.get(n) for n in learners]


def row_head(spec, kind: str, epsilon: float, delta: float, alpha: float) -> dict:
    """The first columns of a learner's row of audit ``kind`` ("exposure", "canaries")."""
    return {
        "learner": spec.name,
        "mechanism": f"{spec.display} ({kind})",
        "claimed_epsilon": float(epsilon),
        "delta": float(delta),
        "alpha": float(alpha),
    }
