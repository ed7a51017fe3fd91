"""The learner contract: what every learner in the registry receives and returns.

Every learner's :class:`~dpcl.learners.registry.LearnerSpec` names a ``run`` function (a callable, or
"module:function" imported on first use): ``run(inputs: RunInputs) -> RunResult``. The built-in learners
implement it in their own modules and a user's learner (config ``learner_modules``) implements the same
function; the pipeline's jobs, the privacy audits (:mod:`dpcl.stages.audit_runs`) and library users call
it the same way. A job's stage (:func:`dpcl.stages.learner.run_learner`) reads the files, builds
:class:`RunInputs` for one (ε, label method, seed), calls ``run``, and turns the result into the run's
metrics, its privacy ledger (verified against the learner's ``LEDGER_SPEC`` before it is written) and its
non-private diagnostics. The FiLM learners implement the same function on images: their tasks' ``x`` are
the images as the data set stores them, and their job context (``RunInputs.job``) carries the backbone
(:class:`dpcl.stages.film.FilmJob`).

The release boundary is the learner's responsibility in one place only: ``RunResult.records``. Each
task's record names its mechanism and the mechanism's public parameters (``mechanism``, ``epsilon``,
``delta``, ``sigma`` …, see :mod:`dpcl.privacy.ledger`); counts, sizes and other data-dependent numbers
may sit beside them and are moved to the non-private diagnostics by
:func:`dpcl.privacy.ledger.split_public`. ``RunResult.extra`` goes into metrics.json and must hold
public values only (hyperparameters, σ). Every release of private data should be made by the library's
mechanism primitives (:mod:`dpcl.privacy.releases`), which report it to the privacy audit: then the
audit checks the learner with no audit code of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, kw_only=True)
class TaskData:
    """One task's training data as the learner may see it: R_t^task(D_t) (records whose label is in the
    released label space O_t, remapped to it) and O_t itself."""

    x: np.ndarray  #: one row per record: cached features, or images for a learner on images (FiLM)
    y: np.ndarray  #: labels in the label universe's numbering
    ids: np.ndarray  #: the records' sample ids (stable across neighbouring data sets)
    label_space: tuple[int, ...]  #: the released O_t
    #: NOT PRIVATE: how many of the task's records fall outside O_t (a count, for the diagnostics only)
    dropped: int = 0


@dataclass(frozen=True, kw_only=True)
class RunInputs:
    """Everything one run of a learner gets."""

    learner: str = ""  #: the registered name being run (a module may declare several learners)
    tasks: tuple[TaskData, ...]
    test_sets: tuple[tuple[np.ndarray, np.ndarray], ...]  #: per task (features or images, labels), public
    n_universe: int  #: size of the label universe (outputs a head over every label would have)
    epsilon: float  #: the training budget per task (what label release left); inf: non-private
    delta: float
    seed: int
    rng_for: Callable[[int, str], np.random.Generator]  #: noise stream of (task, mechanism name)
    options: dict = field(default_factory=dict)  #: the learner's own config block (learner_options)
    label_method: str = "base"  #: the run's label method (public: the plan's)
    label_epsilon: float = 0.0  #: the ε the label release spent per task (public: the plan's split)
    #: False when each task's features pass through a public transform of their own (a domain-incremental
    #: scenario's permutations): test sets of different tasks then live in different input spaces
    shared_inputs: bool = True
    #: what a built-in job adds for its learners (documented by each job's stage module: the public PCA
    #: of the projected job, the tuned DP-SGD config of the heads and memory-buffer jobs, the backbone of
    #: the FiLM jobs); None otherwise
    job: Any = None


@dataclass(kw_only=True)
class RunResult:
    """What a run returns: predictions after each task on every test set seen so far, and per task the
    raw training record(s) of its mechanism(s)."""

    predictions: list[
        list[np.ndarray]
    ]  #: predictions[t][i]: labels predicted for test set i ≤ t after task t
    records: list[dict | list[dict]]  #: per task: the mechanism's record (or a list, one per part)
    extra: dict = field(default_factory=dict)  #: public values for metrics.json
    diagnostics: dict = field(default_factory=dict)  #: NON-private extras for diagnostics.json
    #: privacy.json's account of how the hyperparameters were chosen
    #: (:func:`dpcl.stages.common.hyperparameters_note`); None: the run's ``options``, fixed in the config
    hyperparameters: dict | None = None
    #: a published method's own privacy claim, written beside the accounted composition
    claim: dict | None = None
    #: ``summary(privacy, ledger_tasks) -> dict``: a block privacy.json gets under the learner's name from
    #: public values (DP-A-GEM's parts and per-individual total)
    summary: Callable | None = None
    #: public values privacy.json gets after its verified ledger (e.g. the cosine classifier's σ)
    privacy_extra: dict = field(default_factory=dict)
    model: dict | None = None  #: arrays the job may save beside the metrics (model.npz)
    #: an ensemble's members, one dict of arrays per task (the FiLM ensemble's job saves each as
    #: members/task{t}.npz, beside its raw training record ``records[t]``, marked non-private)
    members: list[dict] = field(default_factory=list)
