"""Continual learners on a frozen pre-trained backbone: ``cosine`` (Alg. 1), ``peft`` (the PEFT
ensemble, Alg. 2, head-only and FiLM, with the Naive / Non-CL baselines, Alg. A1-A2), ``agem`` and
``agem_film`` (the enhanced DP-A-GEM baseline, App. D.4) and ``aggregation`` (Eq. 11, App. D.2).
Each learner's module declares its :class:`~dpcl.learners.registry.LearnerSpec` (``SPECS``).

May import what :data:`MAY_IMPORT` names: training/, privacy/, data/ (label spaces), the top-level
public_pca, backbones (a preprocessing's type), metrics, sorted_ints, seeding and io (log lines). Never
stages/ (no workflow, no files: a learner's run function gets the job's context in its inputs) or report/
(no presentation). The white-box and canary audits that still live beside their learners import audits/
(listed, with that reason, in tests/test_layers.py, until they move to audits/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..privacy.verify import LedgerSpec


#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = (
    "training",
    "privacy",
    "data",
    "public_pca",
    "backbones",
    "metrics",
    "sorted_ints",
    "seeding",
    "io",
)


def ledger_spec(learner: str) -> LedgerSpec:
    """The ledger ``learner`` declares it writes (what :mod:`dpcl.privacy.verify` checks a file against);
    see :mod:`dpcl.learners.registry`."""
    from .registry import ledger_spec as spec

    return spec(learner)
