"""Continual learners on a frozen pre-trained backbone: ``cosine`` (Alg. 1), ``peft`` (the PEFT
ensemble, Alg. 2, head-only and FiLM, with the Naive / Non-CL baselines, Alg. A1-A2), ``agem`` and
``agem_film`` (the enhanced DP-A-GEM baseline, App. D.4) and ``aggregation`` (Eq. 11, App. D.2).

May import: training/, privacy/, data/ (label spaces), seeding. Never stages/ (no workflow, no files)
or report/ (no presentation).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..privacy.verify import LedgerSpec

#: the module that declares each learner's ledger (``LEDGER_SPEC``, or ``LEDGER_SPECS[name]``)
_LEDGER_MODULES = {
    "cosine": "cosine",
    "peft_head": "peft",
    "naive_head": "peft",
    "noncl_head": "peft",
    "peft_film": "peft",
    "naive_film": "peft",
    "noncl_film": "peft",
    "agem_head": "agem",
    "agem_film": "agem",
    "desai_head": "desai",
    "l2dpml": "l2dpml",
    "fm_agem": "fm_agem",
}


def ledger_spec(learner: str) -> LedgerSpec:
    """The ledger ``learner`` declares it writes (what :mod:`dpcl.privacy.verify` checks a file against)."""
    if learner not in _LEDGER_MODULES:
        raise ValueError(f"unknown learner {learner!r}; known: {sorted(_LEDGER_MODULES)}")
    module = importlib.import_module(f".{_LEDGER_MODULES[learner]}", __name__)
    specs = getattr(module, "LEDGER_SPECS", None)
    return specs[learner] if specs and learner in specs else module.LEDGER_SPEC
