"""Continual learners on a frozen pre-trained backbone: ``cosine`` (Alg. 1), ``peft`` (the PEFT
ensemble, Alg. 2, head-only and FiLM, with the Naive / Non-CL baselines, Alg. A1-A2), ``agem`` and
``agem_film`` (the enhanced DP-A-GEM baseline, App. D.4) and ``aggregation`` (Eq. 11, App. D.2).
Each learner's module declares its :class:`~dpcl.learners.registry.LearnerSpec` (``SPECS``).

May import: training/, privacy/, data/ (label spaces), public_pca, seeding, io (log lines); audits/ only
inside a learner's own canary audit function. Never stages/ (no workflow, no files: a learner's run
function gets the stage's helpers on the run object it is handed) or report/ (no presentation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..privacy.verify import LedgerSpec


def ledger_spec(learner: str) -> LedgerSpec:
    """The ledger ``learner`` declares it writes (what :mod:`dpcl.privacy.verify` checks a file against);
    see :mod:`dpcl.learners.registry`."""
    from .registry import ledger_spec as spec

    return spec(learner)
