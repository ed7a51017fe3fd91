"""The error of a privacy ledger whose claim does not hold, in a module of its own.

Both ledgers raise it: the per-run task ledger (:mod:`dpcl.privacy.ledger`, which re-exports it
as ``dpcl.privacy.ledger.LedgerError``) and the DP active-learning group ledger
(:mod:`dpcl.privacy.group_ledger`). Kept apart so that the group ledger needs nothing from the
task ledger: only ``verify.verify_privacy`` dispatches to ``group_ledger``, one way.
"""

from __future__ import annotations


class LedgerError(ValueError):
    """A ledger entry or a whole ledger whose claim does not hold or cannot be checked."""
