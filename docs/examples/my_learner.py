"""A complete minimal learner for dpcl: noisy class sums of unit-norm features, scored by dot product.

Put this file where your config names it (``learner_modules: [my_learner.py]``), add ``my_sums`` to
``learners``, and ``snakemake --cores all`` trains it on every benchmark, seed, ε and label method,
verifies its ledger, and puts it in the tables and figures (``tests/learners/test_own_learner.py`` runs this very
file through the workflow).

Privacy: each task releases, for every label of its released label space O_t, the sum of the unit-norm
features of that label's records plus N(0, σ² I). One record changes one sum by a unit vector
(add/remove adjacency: L2 sensitivity 1), so the Gaussian mechanism with the analytic σ for the task's
training budget (ε, δ) is (ε, δ)-DP; every record is in one task, so tasks compose in parallel.

The release is made by the library's primitive (:func:`dpcl.privacy.class_sums.noisy_class_sums`), which
reports it to the privacy audit: the audit counts every record's reads against this learner's ledger
with no audit code here. A learner that draws its own noise instead is marked "not auditable".
"""

from __future__ import annotations

import math

import numpy as np

from dpcl.learners.api import RunInputs, RunResult
from dpcl.learners.registry import LearnerSpec
from dpcl.privacy.class_sums import noisy_class_sums
from dpcl.privacy.gaussian import gaussian_sigma
from dpcl.privacy.verify import EntrySpec, LedgerSpec

#: the ledger every run writes, per task (checked against the plan before a run's files are written)
LEDGER_SPEC = LedgerSpec(training=(EntrySpec("gaussian", query="class_sums_of_unit_norm_features"),))


def run(inputs: RunInputs) -> RunResult:
    """Train through the tasks; after each, predict every test set seen so far."""
    private = math.isfinite(inputs.epsilon)
    sigma = gaussian_sigma(inputs.epsilon, inputs.delta) if private else 0.0
    dim = inputs.tasks[0].x.shape[1]
    sums = np.zeros((inputs.n_universe, dim))
    seen = np.zeros(inputs.n_universe, dtype=bool)
    predictions, records = [], []
    for t, task in enumerate(inputs.tasks):
        # every label of O_t gets noise, whether or not it has records
        labels, released = noisy_class_sums(
            task.x, task.y, task.label_space, sigma, inputs.rng_for(t, "gaussian"), dim=dim
        )
        sums[labels] += released
        seen[labels] = True
        records.append(
            {
                "mechanism": "gaussian" if private else "nonprivate",
                "sigma": sigma,
                "query": "class_sums_of_unit_norm_features",
                "sensitivity": 1.0,
                "epsilon": inputs.epsilon,
                "delta": inputs.delta if private else 0.0,
                "data": f"features of R_task(D_{t})",
                "samples": int(len(task.y)),  # a count: moved to the non-private diagnostics
            }
        )
        ids = np.flatnonzero(seen)  # no label released yet: every prediction is -1 (always wrong)
        predictions.append(
            [
                ids[np.argmax(x @ sums[ids].T, axis=1)] if ids.size else np.full(len(x), -1)
                for x, _ in inputs.test_sets[: t + 1]
            ]
        )
    return RunResult(predictions=predictions, records=records, extra={"sigma": sigma})


#: the learner's entry in the registry: how the workflow, the tables and the verifier see it
SPECS = (
    LearnerSpec(
        name="my_sums",
        display="Noisy class sums (example)",
        adapter="prototypes",
        job="features",  # one job per seed on cached features, calling run()
        methods="label_methods",  # runs every label method of the config
        module="my_learner",  # this file's name
        run=run,
        resources={"mem_mb": 1000, "runtime": 10},
    ),
)
