"""Runs of a registered learner for the privacy audits: a small data set in the cached-feature layout
(:class:`AuditData`, in three variants: D, a D′ with the same public inputs and other private values, and
D plus one record in every task), its label files, and the function that makes one run of a learner
through its ``run`` function (:func:`run_audited`, the learner contract) with the inputs its registry job
would give it in the pipeline's setting (:class:`AuditSetting`: the config's DP-SGD, memory-buffer and
learner blocks, a user's ``learner_options``, the label methods its jobs run), so that the learner runs
the code the pipeline runs, at the rates the pipeline runs it. A learner on images (FiLM) gets each
record as an image of its own and a tiny public backbone. The canary audit (:mod:`.canary_audit`) runs
the same setting with every DP-SGD rate 1 (:meth:`AuditSetting.at_rate_one`), where every release is a
Gaussian mechanism.

The data: :data:`N_TASKS` disjoint tasks of two classes, :data:`PER_CLASS` records per class with
distinct random feature rows, optionally followed by "Dirac" canaries in task 0 (a large value on a
feature coordinate of their own), each included by its coin.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field

import numpy as np

from ..config import block_defaults, eps_tag
from ..data.label_space import output_label_spaces, parse_label_method
from ..data.scenarios import Scenario
from ..privacy.accounting import Budget
from ..seeding import rng

N_TASKS, CLASSES_PER_TASK, PER_CLASS, TEST_PER_CLASS, DIM = 3, 2, 10, 4, 32
#: the canary audit's rates: every rate 1, two epochs (each record read twice by its own task's training)
RATE_ONE_DPSGD = {"sample_rate": 1.0, "epochs": 2.0, "lr": 0.05, "clip": 1.0, "normaliser": 16.0}
RATE_ONE_AGEM = {"buffer_sample_rate": 1.0}
#: the FiLM learners' epochs in the audit (their rate is the pipeline's): a few steps per task, each a
#: training step of the backbone; enough for the exposure check's binomial tests to see a sampler at twice
#: its rate (the rate each sample states is compared with the ledger's exactly)
FILM_EPOCHS = 1.0
METHOD = "base"
#: the data variants of :func:`audit_data`
VARIANTS = ("D", "other", "plus_one")


@dataclass(frozen=True, kw_only=True)
class AuditSetting:
    """What the pipeline's jobs give each learner, from the validated config: the DP-SGD block of the
    heads and memory-buffer learners (``dpsgd``: the configured values; with tuning on, the pipeline's
    runs use the tuning result's, whose sampler and accounting are the same code), the FiLM learners'
    (``film.dpsgd`` over it; epochs :data:`FILM_EPOCHS`), every learner config block (``agem``,
    ``l2dpml``, ``fm_agem`` …), a user's ``learner_options`` and the label methods each learner's jobs
    run (:meth:`methods`)."""

    dpsgd: dict
    film_dpsgd: dict
    blocks: dict  #: config block name -> the block, as the config has it
    learner_options: dict = field(default_factory=dict)
    label_methods: dict = field(default_factory=dict)  #: learner -> the label methods its jobs run

    @classmethod
    def from_config(cls, config: dict, label_methods: dict | None = None) -> AuditSetting:
        """The setting of a validated ``config``; ``label_methods`` maps each learner to the label methods
        its jobs run (the workflow's ``methods_for``; default: none given, :meth:`methods` then Base Dataset)."""
        dpsgd = {k: v for k, v in config["dpsgd"].items() if k != "chosen_with_private_data"}
        film = {
            k: v
            for k, v in (config.get("film", {}).get("dpsgd") or {}).items()
            if k != "chosen_with_private_data"
        }
        blocks = {b: config[b] for b in _learner_blocks() if b in config}
        return cls(
            dpsgd=dpsgd,
            film_dpsgd=dpsgd | film | {"epochs": FILM_EPOCHS},
            blocks=blocks,
            learner_options=dict(config.get("learner_options") or {}),
            label_methods={k: tuple(v) for k, v in (label_methods or {}).items()},
        )

    @classmethod
    def defaults(cls) -> AuditSetting:
        """The setting of a config that sets nothing (every block's schema defaults), Base Dataset runs."""
        dpsgd = {k: v for k, v in _defaults("dpsgd").items() if k != "chosen_with_private_data"}
        return cls(
            dpsgd=dpsgd,
            film_dpsgd=dpsgd | {"epochs": FILM_EPOCHS},
            blocks={b: _defaults(b) for b in _learner_blocks()},
        )

    def at_rate_one(self) -> AuditSetting:
        """This setting with every DP-SGD rate 1 (:data:`RATE_ONE_DPSGD`, :data:`RATE_ONE_AGEM`): the
        canary audit's, where every release is a Gaussian mechanism."""
        blocks = dict(self.blocks)
        if "agem" in blocks:
            blocks["agem"] = {**blocks["agem"], **RATE_ONE_AGEM}
        return AuditSetting(
            dpsgd=dict(RATE_ONE_DPSGD),
            film_dpsgd=dict(RATE_ONE_DPSGD),
            blocks=blocks,
            learner_options=self.learner_options,
            label_methods=self.label_methods,
        )

    def methods(self, learner: str) -> tuple[str, ...]:
        """The label methods the audit runs ``learner`` with: those its jobs run, but the Label Oracle,
        whose label spaces are no DP release (its ledger says so); Base Dataset if none is given."""
        methods = tuple(m for m in self.label_methods.get(learner, (METHOD,)) if not m.startswith("oracle"))
        return methods or (METHOD,)

    def to_dict(self) -> dict:
        """For a rule's params (plain values)."""
        return {
            "dpsgd": self.dpsgd,
            "film_dpsgd": self.film_dpsgd,
            "blocks": self.blocks,
            "learner_options": self.learner_options,
            "label_methods": {k: list(v) for k, v in self.label_methods.items()},
        }

    @classmethod
    def from_dict(cls, d: dict | None) -> AuditSetting:
        if not d:
            return cls.defaults()
        return cls(
            dpsgd=dict(d["dpsgd"]),
            film_dpsgd=dict(d["film_dpsgd"]),
            blocks={k: dict(v) for k, v in d["blocks"].items()},
            learner_options={k: dict(v or {}) for k, v in d.get("learner_options", {}).items()},
            label_methods={k: tuple(v) for k, v in d.get("label_methods", {}).items()},
        )


def _learner_blocks() -> list[str]:
    """Every config block a registered learner declares (LearnerSpec.config_blocks)."""
    from ..learners import registry

    return sorted({b for spec in registry.specs() for b in spec.config_blocks})


@dataclass(frozen=True)
class AuditData:
    """The audit's data: cached-feature arrays as the jobs read them, the scenario, the labels and the
    public split the projected job fits its PCA on; ``variant`` names it (:data:`VARIANTS`)."""

    train: tuple[np.ndarray, np.ndarray, np.ndarray]  #: features, labels, sample ids (ascending)
    test: tuple[np.ndarray, np.ndarray]
    public: np.ndarray
    scenario: Scenario
    variant: str = "D"
    canaries: int = 0  #: the canaries the features have a coordinate for (:func:`canary_rows`), 0: none
    n_classes: int = N_TASKS * CLASSES_PER_TASK  #: the classes of the universe (the canaries' own included)

    def labels(self, epsilon: float, delta: float, *, method: str = METHOD, stream: str = "audit") -> dict:
        """The label file of a ``method`` run at (ε, δ), as the labels stage writes it (a label release is
        made, and reported to an audit, by its primitive); ``stream`` names the data in the runs' noise
        streams (independent runs of one data set take distinct ones; the variants of one data set share
        them, as neighbouring data sets do in the pipeline)."""
        budget = Budget(epsilon, delta) if math.isfinite(epsilon) else Budget(math.inf, 0.0)
        task_labels = [
            self.train[1][np.searchsorted(self.train[2], ids)] for ids in self.scenario.train_indices
        ]
        res = output_label_spaces(
            parse_label_method(method),
            task_labels,
            self.n_classes,
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


def audit_data(
    seed: int, coins: np.ndarray | None = None, *, variant: str = "D", own_classes: bool = False
) -> AuditData:
    """The audit's records: class means on a sphere of radius 2 plus unit Gaussian noise, float32; with
    ``coins`` (one bool per canary) the features gain a coordinate per canary and task 0 the canaries
    whose coin is set (:func:`canary_rows`: ids after the base records', task 0's classes in turn; with
    ``own_classes``, a class of its own each, :func:`canary_labels`, which task 0 and the universe gain).

    ``variant`` (:data:`VARIANTS`): "D"; "other", a D′ with the same public inputs (the records' ids and
    tasks, so every size; the test set, the public split, the seeds) and other private values (every
    feature row drawn afresh, the labels dealt again within each task's classes with other class counts);
    "plus_one", D with one more record in every task (ids after D's, a class of its task)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown audit data variant {variant!r}; known: {VARIANTS}")
    gen = rng(seed, "audit", "exposure", "data")
    n_classes = N_TASKS * CLASSES_PER_TASK
    means = gen.normal(0.0, 1.0, (n_classes, DIM))
    means *= 2.0 / np.linalg.norm(means, axis=1, keepdims=True)

    def draw(per: int, g=gen) -> tuple[np.ndarray, np.ndarray]:
        y = np.repeat(np.arange(n_classes), per)
        return (means[y] + g.normal(0.0, 1.0, (len(y), DIM))).astype(np.float32), y

    x, y = draw(PER_CLASS)
    xt, yt = draw(TEST_PER_CLASS)
    public, _ = draw(PER_CLASS)
    ids = np.arange(len(y))
    classes = [list(range(t * CLASSES_PER_TASK, (t + 1) * CLASSES_PER_TASK)) for t in range(N_TASKS)]
    if variant == "other":  # the same records (ids, tasks), other private values
        g = rng(seed, "audit", "exposure", "data", "other")
        counts = PER_CLASS + 3 * np.array([1, -1])  # every task's classes with counts of their own
        for c in classes:
            rows = np.flatnonzero(np.isin(y, c))
            y[rows] = g.permutation(np.repeat(c, counts))
        x = (means[y] + g.normal(0.0, 1.0, (len(y), DIM))).astype(np.float32)
    elif variant == "plus_one":  # one record more in every task
        g = rng(seed, "audit", "exposure", "data", "plus_one")
        extra_y = np.array([c[0] for c in classes])
        x = np.vstack([x, (means[extra_y] + g.normal(0.0, 1.0, (N_TASKS, DIM))).astype(np.float32)])
        y = np.concatenate([y, extra_y])
        ids = np.arange(len(y))
    if coins is not None:  # canaries: a coordinate each, in task 0, ids after the base records'
        k = len(coins)
        pad = lambda a: np.hstack([a, np.zeros((len(a), k), dtype=np.float32)])  # noqa: E731
        cx, cy = canary_rows(k)
        if own_classes:
            cy = canary_labels(k, own_classes=True)
            classes[0] = classes[0] + cy.tolist()
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
    return AuditData(
        train=(x, y, ids),
        test=(xt, yt),
        public=public,
        scenario=scenario,
        variant=variant,
        canaries=0 if coins is None else len(coins),
        n_classes=n_classes + (len(coins) if coins is not None and own_classes else 0),
    )


@functools.cache
def _block_defaults(block: str) -> str:
    return json.dumps(block_defaults(block))  # (the schema is parsed once per process, not once per run)


def _defaults(block: str) -> dict:
    """Config block ``block``'s defaults (a fresh copy each call)."""
    return json.loads(_block_defaults(block))


@dataclass(frozen=True, kw_only=True)
class JobInputs:
    """What a learner's job gives its run: its ``options`` (:attr:`dpcl.learners.api.RunInputs.options`)
    and the job's context (:attr:`dpcl.learners.api.RunInputs.job`)."""

    options: dict
    job: object = None


def job_inputs(spec, data: AuditData, setting: AuditSetting) -> JobInputs:
    """The job inputs of ``spec``'s registry job in ``setting``, as the pipeline's job builds them: the
    heads' and memory-buffer learners' DP-SGD block, the ``agem`` block as options, a projected learner's
    block as options with the public split's PCA, the FiLM learners' backbone and DP-SGD block, and a
    user's learner's ``learner_options``. Tuning is not run: the blocks are used as they are."""
    if spec.job == "heads":
        from .heads import HeadJob

        return JobInputs(options={}, job=HeadJob(dpsgd_cfg=dict(setting.dpsgd)))
    if spec.job == "agem":
        from .agem import MemoryJob

        agem = dict(setting.blocks.get("agem") or _defaults("agem"))
        return JobInputs(options=agem, job=MemoryJob(dpsgd_cfg=dict(setting.dpsgd), agem_cfg=agem))
    if spec.job == "projected":
        from .projected import ProjectedJob

        (block,) = spec.config_blocks
        return JobInputs(
            options=dict(setting.blocks.get(block) or _defaults(block)),
            job=ProjectedJob(tune_x=data.public, seed=data.scenario.seed),
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
                dpsgd_cfg=dict(setting.film_dpsgd),
                agem_cfg=dict(setting.blocks.get("agem") or _defaults("agem")) if agem else {},
                # the audit's tiny backbone holds a canary run's ~500 images and its 1,000 canaries in one
                # chunk: a chunk of 64 cost the canary part 60 % more time (chunking changes no release)
                physical_batch=1024,
                device="cpu",
            ),
        )
    if spec.job == "features":  # a user's learner: its learner_options, as the features job passes them
        return JobInputs(options=dict(setting.learner_options.get(spec.name) or {}))
    return JobInputs(options={})  # prototypes: its run needs no job


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
    which others are present; D's records, then any record after them from a stream of their own, the
    canaries' being :func:`canary_images`), and one per test record (public: the same in every variant);
    (train images, test images), in the rows' order. The variant "other" draws every training image
    afresh."""
    gen = rng(data.scenario.seed, "audit", "exposure", "images")
    shape = (IMAGE_SIZE, IMAGE_SIZE, 3)
    ids = data.train[2]
    n = N_TASKS * CLASSES_PER_TASK * PER_CLASS  # D's records: ids 0..n-1
    train = gen.integers(0, 256, (n, *shape), dtype=np.uint8)
    test = gen.integers(0, 256, (len(data.test[1]), *shape), dtype=np.uint8)
    if data.variant == "other":
        train = rng(data.scenario.seed, "audit", "exposure", "images", "other").integers(
            0, 256, (n, *shape), dtype=np.uint8
        )
    if int(ids.max()) >= n:
        extra = rng(data.scenario.seed, "audit", "exposure", "images", "extra")
        more = (
            canary_images(data.canaries, seed=data.scenario.seed)
            if data.canaries
            else extra.integers(0, 256, (int(ids.max()) + 1 - n, *shape), dtype=np.uint8)
        )
        train = np.concatenate([train, more])
    return train[ids], test


def canary_images(k: int, *, seed: int) -> np.ndarray:
    """The ``k`` canaries' images (:func:`audit_images`; their labels are :func:`canary_rows`'): seeded
    random uint8 images of their own stream (the audit's ``seed``), the same in every run (what tells a canary from another
    is its coin and its position in this array)."""
    return rng(seed, "audit", "canaries", "images").integers(
        0, 256, (k, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8
    )


@dataclass(frozen=True, kw_only=True)
class AuditedRun:
    """One run of a learner in an audit: what its job would write (metrics, the verified privacy ledger)
    and the learner's :class:`~dpcl.learners.api.RunResult` (predictions, model, members)."""

    metrics: dict
    privacy: dict
    result: object


def run_audited(
    learner: str, data: AuditData, labels: dict, target: Budget, setting: AuditSetting | None = None
) -> AuditedRun:
    """One run of a registered learner on the audit's data through its ``run`` function (the learner
    contract, :func:`dpcl.stages.learner.run_contract`), as its job would make it in ``setting``
    (default: :meth:`AuditSetting.defaults`). A learner on images (FiLM) gets the records as images
    (:func:`audit_images`) and the audit's backbone (:data:`FILM_BACKBONE`)."""
    from ..learners import registry
    from .learner import run_contract, run_inputs

    spec = registry.get(learner)
    given = job_inputs(spec, data, setting or AuditSetting.defaults())
    train, test = data.train, data.test
    if on_images(spec):
        images, test_images = audit_images(data)
        train, test = (images, *data.train[1:]), (test_images, data.test[1])
    inputs = run_inputs(
        learner,
        train=train,
        test=test,
        scenario=data.scenario,
        labels=labels,
        options=given.options,
        job=given.job,
    )
    metrics, privacy, _diag, result = run_contract(inputs, labels=labels, target=target)
    return AuditedRun(metrics=metrics, privacy=privacy, result=result)


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
    return x, canary_labels(k)


def canary_labels(k: int, *, own_classes: bool = False) -> np.ndarray:
    """The ``k`` canaries' labels: task 0's classes in turn, or (``own_classes``) a class of its own each,
    after the base classes (a canary "Dirac" in the output space: its own row of the head)."""
    if own_classes:
        return N_TASKS * CLASSES_PER_TASK + np.arange(k)
    return np.arange(k) % CLASSES_PER_TASK


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
