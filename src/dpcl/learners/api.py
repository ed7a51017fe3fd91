"""What a learner on cached features receives and returns (the ``features`` job of the registry).

A learner declared with ``job="features"`` gives its :class:`~dpcl.learners.registry.LearnerSpec`
a ``run`` function: ``run(inputs: RunInputs) -> RunResult``. The stage (:mod:`dpcl.stages.learner`)
reads the files, builds :class:`RunInputs` for one (ε, label method, seed), calls ``run``, and turns the
result into the run's metrics, its privacy ledger (verified against the learner's ``LEDGER_SPEC``
before it is written) and its non-private diagnostics.

The release boundary is the learner's responsibility in one place only: ``RunResult.records``. Each
task's record names its mechanism and the mechanism's public parameters (``mechanism``, ``epsilon``,
``delta``, ``sigma`` …, see :mod:`dpcl.privacy.ledger`); counts, sizes and other data-dependent numbers
may sit beside them and are moved to the non-private diagnostics by
:func:`dpcl.privacy.ledger.split_public`. ``RunResult.extra`` goes into metrics.json and must hold
public values only (hyperparameters, σ).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, kw_only=True)
class TaskData:
    """One task's training data as the learner may see it: R_t^task(D_t) (records whose label is in the
    released label space O_t, remapped to it) and O_t itself."""

    x: np.ndarray  #: features, one row per record
    y: np.ndarray  #: labels in the label universe's numbering
    ids: np.ndarray  #: the records' sample ids (stable across neighbouring data sets)
    label_space: tuple[int, ...]  #: the released O_t


@dataclass(frozen=True, kw_only=True)
class RunInputs:
    """Everything one run of a learner on cached features gets."""

    tasks: tuple[TaskData, ...]
    test_sets: tuple[tuple[np.ndarray, np.ndarray], ...]  #: per task (features, labels), public
    n_universe: int  #: size of the label universe (outputs a head over every label would have)
    epsilon: float  #: the training budget per task (what label release left); inf: non-private
    delta: float
    seed: int
    rng_for: Callable[[int, str], np.random.Generator]  #: noise stream of (task, mechanism name)
    options: dict = field(default_factory=dict)  #: the learner's own config block (learner_options)


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
